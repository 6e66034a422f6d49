import Foundation
import IMCore
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("Server API: groups and group mutes")
struct ServerAPIGroupTests {
    @Test("create, join, quit, refresh, query, user's groups and dismiss")
    func membership() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            let (created, _) = try await api.post("/group/create.json", rawForm: "userId=ann&userId=bob&groupId=g1&groupName=Friends")
            #expect(created == 200)
            _ = try await api.post("/group/join.json", rawForm: "userId=carol,dave&groupId=g1&group_name=ignored")
            _ = try await api.post("/group/quit.json", form: ["userId": "dave", "groupId": "g1"])
            let (_, query) = try await api.post("/group/user/query.json", form: ["groupId": "g1"])
            #expect(query["id"] as? String == "g1")
            #expect((query["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["ann", "bob", "carol"])

            _ = try await api.post("/group/refresh.json", form: ["groupId": "g1", "groupName": "Best friends"])
            let (_, groups) = try await api.post("/user/group/query.json", form: ["userId": "carol"])
            #expect((groups["groups"] as? [[String: Any]])?.map { "\($0["id"]!)=\($0["name"]!)" } == ["g1=Best friends"])

            let (dismissed, _) = try await api.post("/group/dismiss.json", form: ["userId": "ann", "groupId": "g1"])
            #expect(dismissed == 200)
            let (_, empty) = try await api.post("/group/user/query.json", form: ["groupId": "g1"])
            #expect((empty["users"] as? [Any])?.isEmpty == true)
            let (_, none) = try await api.post("/user/group/query.json", form: ["userId": "carol"])
            #expect((none["groups"] as? [Any])?.isEmpty == true)

            let (bad, body) = try await api.post("/group/create.json", form: ["userId": "ann", "groupId": "bad id"])
            #expect(bad == 400 && body["code"] as? Int == 1002)
        }
    }

    @Test("the member limit: a join that would pass it adds nobody and gets 1002")
    func memberLimit() async throws {
        try await withTestServer(try await TestServer.start { $0.groups.maxMembers = 3 }) { server in
            _ = try await server.api.post("/group/create.json", form: ["userId": "a,b", "groupId": "g"])
            let (status, body) = try await server.api.post("/group/join.json", form: ["userId": "c,d", "groupId": "g"])
            #expect(status == 400 && body["code"] as? Int == 1002)
            let (_, query) = try await server.api.post("/group/user/query.json", form: ["groupId": "g"])
            #expect((query["users"] as? [[String: Any]])?.count == 2, "all or none")
            let (ok, _) = try await server.api.post("/group/join.json", form: ["userId": "c", "groupId": "g"])
            #expect(ok == 200)
        }
    }

    @Test("sync with group[<id>]=<name> bracket keys, raw and percent-encoded")
    func sync() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann", "groupId": "old"])
            // Python 3.x sends the brackets raw; the other SDKs percent-encode them.
            let (status, _) = try await server.api.post("/group/sync.json", rawForm: "userId=ann&group[g1]=Group One&group%5Bg2%5D=Group%20Two")
            #expect(status == 200)
            let (_, groups) = try await server.api.post("/user/group/query.json", form: ["userId": "ann"])
            let list = try #require(groups["groups"] as? [[String: Any]])
            #expect(Set(list.map { "\($0["id"]!)=\($0["name"]!)" }) == ["g1=Group One", "g2=Group Two"], "ann left 'old'")
        }
    }

    @Test("member mutes with durations, the all-groups mute, whole-group mute and its whitelist")
    func mutes() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            _ = try await api.post("/group/create.json", form: ["userId": "ann,bob,carol", "groupId": "g1"])
            let (muted, _) = try await api.post("/group/user/gag/add.json", form: ["userId": "bob", "groupId": "g1", "minute": "1"])
            #expect(muted == 200)
            _ = try await api.post("/group/user/gag/add.json", form: ["userId": "carol", "groupId": "g1", "minute": "0"])
            let (_, list) = try await api.post("/group/user/gag/list.json", form: ["groupId": "g1"])
            let users = try #require(list["users"] as? [[String: Any]])
            #expect(users.map { $0["userId"] as? String } == ["bob", "carol"])
            #expect(users.first?["time"] as? String == "2027-01-15 08:01:00")
            clock.advance(milliseconds: 60_000)
            let (_, later) = try await api.post("/group/user/gag/list.json", form: ["groupId": "g1"])
            #expect((later["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["carol"], "bob's minute is over; carol's mute has no end")
            _ = try await api.post("/group/user/gag/rollback.json", form: ["userId": "carol", "groupId": "g1"])
            let (_, cleared) = try await api.post("/group/user/gag/list.json", form: ["groupId": "g1"])
            #expect((cleared["users"] as? [Any])?.isEmpty == true)

            _ = try await api.post("/group/user/gag/add.json", form: ["userId": "dave", "minute": "5"])
            let (_, global) = try await api.post("/group/user/gag/list.json", form: [:])
            #expect((global["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["dave"], "without groupId: the all-groups mute")
            let (bad, badBody) = try await api.post("/group/user/gag/add.json", form: ["userId": "dave", "groupId": "g1", "minute": "43201"])
            #expect(bad == 400 && badBody["code"] as? Int == 1002)

            _ = try await api.post("/group/ban/add.json", rawForm: "groupId=g1&groupId=g2")
            let (_, banned) = try await api.post("/group/ban/query.json", rawForm: "groupId=g1,g3")
            let info = try #require(banned["groupinfo"] as? [[String: Any]])
            #expect(info.map { $0["groupId"] as? String } == ["g1", "g3"] && info.map { $0["id"] as? String } == ["g1", "g3"])
            #expect(info.map { $0["stat"] as? String } == ["1", "0"], "stat is a string: the Go SDK decodes it into one")
            _ = try await api.post("/group/ban/rollback.json", form: ["groupId": "g2"])
            let (_, all) = try await api.post("/group/ban/query.json", form: [:])
            #expect((all["groupinfo"] as? [[String: Any]])?.map { $0["groupId"] as? String } == ["g1"])

            _ = try await api.post("/group/user/ban/whitelist/add.json", form: ["groupId": "g1", "userId": "ann,bob"])
            _ = try await api.post("/group/user/ban/whitelist/rollback.json", form: ["groupId": "g1", "userId": "bob"])
            let (_, whitelist) = try await api.post("/group/user/ban/whitelist/query.json", form: ["groupId": "g1"])
            #expect(whitelist["userIds"] as? [String] == ["ann"])
        }
    }

    @Test("bindNotifyMsg sends the message given with create, join, quit and dismiss; maxMember caps one call; a bind without its message changes nothing")
    func boundNotifications() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (bob, inbox) = try await server.syncedDevice("bob")
            func notice(_ text: String) -> [String: String] {
                ["bindNotifyMsg": "true", "fromUserId": "ann", "objectName": "RC:TxtMsg", "content": "{\"content\":\"\(text)\"}"]
            }
            let (missing, missingBody) = try await server.api.post("/group/create.json", form: [
                "userId": "ann,bob", "groupId": "g1", "groupName": "G", "bindNotifyMsg": "true", "fromUserId": "ann"])
            #expect(missing == 400 && missingBody["code"] as? Int == 1002)
            let (_, none) = try await server.api.post("/user/group/query.json", form: ["userId": "bob"])
            #expect((none["groups"] as? [Any])?.isEmpty == true, "nothing was created")

            let (created, body) = try await server.api.post("/group/create.json", form: [
                "userId": "ann,bob", "groupId": "g1", "groupName": "G"].merging(notice("welcome")) { $1 })
            #expect(created == 200 && body["memberCount"] as? Int == 2)
            let uid = try #require(body["messageUID"] as? String)
            let welcome = try #require(await inbox.wait(for: 1).first?.message)
            #expect(welcome.messageUId == uid && welcome.conversationType == .group && welcome.targetId == "g1" && welcome.senderUserId == "ann")

            let (capped, cappedBody) = try await server.api.post("/group/join.json", form: ["userId": "carol", "groupId": "g1", "maxMember": "2"])
            #expect(capped == 400 && cappedBody["code"] as? Int == 1002)
            let (joined, joinedBody) = try await server.api.post("/group/join.json", form: [
                "userId": "carol", "groupId": "g1", "maxMember": "3"].merging(notice("carol joined")) { $1 })
            #expect(joined == 200 && joinedBody["memberCount"] as? Int == 3)
            let (carol, carolInbox) = try await server.syncedDevice("carol")
            #expect(carolInbox.items.map { $0.message.content(as: TextMessage.self)?.content } == ["carol joined"], "carol syncs from her joining")

            let (quit, _) = try await server.api.post("/group/quit.json", form: ["userId": "carol", "groupId": "g1"].merging(notice("carol left")) { $1 })
            #expect(quit == 200)
            let (dismissed, _) = try await server.api.post("/group/dismiss.json", form: ["userId": "ann", "groupId": "g1"].merging(notice("goodbye")) { $1 })
            #expect(dismissed == 200)
            let texts = await inbox.wait(for: 5).map { $0.message.content(as: TextMessage.self)?.content ?? $0.message.objectName }
            #expect(texts == ["welcome", "carol joined", "carol left", "goodbye", "RC:GrpNtf"])
            #expect(carolInbox.items.count == 1, "carol left before her notice")
            await bob.disconnect(); await carol.disconnect()
        }
    }
}
