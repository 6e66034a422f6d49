import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// Statistics per app per day: messages by conversation type, active users, peak connections,
/// kept in the store and read through the admin API.
@Suite("Statistics per app per day")
struct StatisticsTests {
    @Test("a day's messages by type, its active users (each once) and its peak of connections; the next day starts afresh; another app's are its own")
    func daily() async throws {
        // 2027-01-15 08:00 UTC.
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let server = try await TestServer.start(clock: clock) { config in
            config.serverAPI.adminKey = AdminAPITests.key
            config.messaging.dayTimeZone = "UTC"
        }
        try await withTestServer(server) { server in
            let (_, created) = try await AdminAPITests.call(server, "POST", "/admin/apps", json: ["name": "other"])
            let otherKey = try #require((created["app"] as? [String: Any])?["appKey"] as? String)
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            // A second device is the same active user.
            let annAgain = try await server.connectedClient("ann", platform: .iOS)
            await carol.disconnect()
            for text in ["1", "2", "3"] { _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: text)) }
            _ = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "group"))
            let (published, answer) = try await server.api.post("/message/system/publish.json", form: [
                "fromUserId": "notice", "toUserId": "ann,bob", "objectName": "RC:TxtMsg", "content": #"{"content":"hi"}"#])
            #expect(published == 200, "\(answer)")
            try await ann.joinChatRoom("r1", messageCount: -1)
            _ = try await ann.sendMessage(.chatroom, targetId: "r1", content: TextMessage(content: "room"))
            // A refused message is not counted.
            #expect(await failureCode { _ = try await bob.sendMessage(.group, targetId: "nogroup", content: TextMessage(content: "refused")) } == 22406)

            let (status, stats) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(server.app.appKey)/statistics?days=7")
            #expect(status == 200)
            let days = try #require(stats["days"] as? [[String: Any]])
            #expect(days.count == 1)
            let today = try #require(days.first)
            #expect(today["day"] as? String == "2027-01-15")
            #expect(today["messages"] as? [String: Int] == ["1": 3, "3": 1, "6": 2, "4": 1], "\(today)")
            #expect(today["activeUsers"] as? Int == 3, "ann, bob and carol")
            #expect(today["peakConnections"] as? Int == 4, "ann on two devices, bob and carol at once: \(today)")

            // The next day.
            clock.advance(milliseconds: 86_400_000)
            await annAgain.disconnect()
            let dave = try await server.connectedClient("dave")
            _ = try await dave.sendMessage(.private, targetId: "ann", content: TextMessage(content: "tomorrow"))
            // ann, active yesterday, connects again today: she counts today too.
            let annToday = try await server.connectedClient("ann", platform: .android)
            await annToday.disconnect()
            let (_, later) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(server.app.appKey)/statistics?days=2")
            let both = try #require(later["days"] as? [[String: Any]])
            #expect(both.map { $0["day"] as? String } == ["2027-01-15", "2027-01-16"])
            #expect(both.last?["messages"] as? [String: Int] == ["1": 1])
            #expect(both.last?["activeUsers"] as? Int == 2, "dave and ann")
            #expect(both.last?["peakConnections"] as? Int == 4, "ann, bob, dave and ann's Android were open on the new day: \(both)")
            #expect(both.first?["messages"] as? [String: Int] == ["1": 3, "3": 1, "6": 2, "4": 1], "the first day is unchanged")

            let (_, otherStats) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(otherKey)/statistics?days=7")
            #expect((otherStats["days"] as? [[String: Any]])?.isEmpty == true, "another app has none of these")
            let (bad, badAnswer) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(otherKey)/statistics?days=0")
            #expect(bad == 400 && badAnswer["code"] as? Int == 1002)
            await ann.disconnect(); await bob.disconnect(); await dave.disconnect()
        }
    }

    @Test("an app's day time zone changed in the middle of a day: the next user active counts on the new zone's day at once")
    func timeZoneChangedMidDay() async throws {
        // 2027-01-15 20:00 UTC, which is 2027-01-16 04:00 in Shanghai.
        let clock = ManualClock(milliseconds: 1_800_000_000_000 + 12 * 3_600_000)
        let server = try await TestServer.start(clock: clock) { config in
            config.serverAPI.adminKey = AdminAPITests.key
            config.messaging.dayTimeZone = "UTC"
        }
        try await withTestServer(server) { server in
            let ann = try await server.connectedClient("ann")
            let (changed, answer) = try await AdminAPITests.call(server, "POST", "/admin/apps/\(server.app.appKey)/settings",
                                                                 json: ["set": ["dayTimeZone": "Asia/Shanghai"], "reset": [String]()])
            #expect(changed == 200, "\(answer)")
            let bob = try await server.connectedClient("bob")
            let (_, stats) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(server.app.appKey)/statistics?days=7")
            let days = try #require(stats["days"] as? [[String: Any]])
            #expect(days.map { $0["day"] as? String } == ["2027-01-15", "2027-01-16"], "\(days)")
            #expect(days.map { $0["activeUsers"] as? Int } == [1, 1], "ann on the UTC day, bob on Shanghai's: \(days)")
            await ann.disconnect(); await bob.disconnect()
        }
    }
}
