import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// RongCloud's cloud history is a service with a retention (6 months by default): off, remote
/// history and the `/v3` queries answer 25102; on, they serve the retention's days only.
@Suite("Cloud history: the switch and the retention")
struct CloudHistoryTests {
    static func texts(_ messages: [Message]) -> [String?] { messages.map { $0.content(as: TextMessage.self)?.content } }

    @Test("messages older than cloudHistoryRetentionDays are left out of remote history and /v3 queries")
    func retention() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { $0.messaging.cloudHistoryRetentionDays = 2 }) { server in
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "old"))
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "old group"))
            clock.advance(milliseconds: 2 * 86_400_000 + 1)
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "new"))
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "new group"))
            #expect(Self.texts(try await ann.getRemoteHistoryMessages(.private, targetId: "bob", count: 10).messages) == ["new"])
            #expect(Self.texts(try await ann.getRemoteHistoryMessages(.group, targetId: "g1", count: 10).messages) == ["new group"])
            for (kind, target) in [("private", "bob"), ("group", "g1")] {
                let (_, answer) = try await server.api.post("/v3/message/\(kind)/query.json", json: [
                    "userId": "ann", "targetId": target, "startTime": 0, "endTime": clock.nowMilliseconds() + 1, "pageSize": 10])
                #expect((answer["data"] as? [[String: Any]])?.count == 1, "\(kind): \(answer)")
            }
            await ann.disconnect()
        }
    }

    @Test("cloud history off: remote history and the /v3 queries answer 25102; sync still delivers")
    func switchedOff() async throws {
        try await withTestServer(try await TestServer.start { $0.messaging.cloudHistoryEnabled = false }) { server in
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi"))
            await #expect { _ = try await ann.getRemoteHistoryMessages(.private, targetId: "bob", count: 10) } throws: {
                ($0 as? IMError)?.code == .cloudHistoryDisabled
            }
            let (status, answer) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "ann", "targetId": "bob", "startTime": 0, "endTime": 4_000_000_000_000, "pageSize": 10])
            #expect(status == 400 && answer["code"] as? Int == 25102)
            let (bob, inbox) = try await server.syncedDevice("bob")
            #expect(Self.texts(inbox.items.map(\.message)) == ["hi"])
            await bob.disconnect(); await ann.disconnect()
        }
    }
}
