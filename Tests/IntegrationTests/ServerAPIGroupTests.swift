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
}
