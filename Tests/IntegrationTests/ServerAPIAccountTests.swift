import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

@Suite("Server API: hosted profiles, deactivation, listing and deleting users, the one-to-one chat mute")
struct ServerAPIAccountTests {
    @Test("profile set merges the keys given and raises the version; batch query, paged query by registration time, clean")
    func hostedProfiles() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            for user in ["ann", "ben", "cat"] {
                _ = try await server.token(user)
                clock.advance(milliseconds: 1000)
            }
            let (set, _) = try await server.api.post("/user/profile/set.json", form: [
                "userId": "ann", "userProfile": #"{"name":"Ann","gender":2,"level":10}"#, "userExtProfile": #"{"ext_Team":"red"}"#])
            #expect(set == 200)
            let first = try await Self.profiles(server, ["ann"])
            clock.advance(milliseconds: 1)
            let (again, _) = try await server.api.post("/user/profile/set.json", form: ["userId": "ann", "userProfile": #"{"email":"ann@example.com","level":11}"#])
            #expect(again == 200)
            _ = try await server.api.post("/user/profile/set.json", form: ["userId": "cat", "userProfile": #"{"name":"Cat"}"#])
            let ann = try #require(try await Self.profiles(server, ["ann", "ben"]).first)
            #expect(try await Self.profiles(server, ["ann", "ben"]).count == 1, "ben has no hosted profile")
            #expect(Self.object(ann["userProfile"]) as NSDictionary == ["name": "Ann", "gender": 2, "level": 11, "email": "ann@example.com"] as NSDictionary)
            #expect(Self.object(ann["userExtProfile"]) as NSDictionary == ["ext_Team": "red"] as NSDictionary)
            let firstVersion = try #require(first.first?["version"] as? Int64)
            #expect(try #require(ann["version"] as? Int64) > firstVersion)

            let (_, ascending) = try await server.api.post("/user/profile/query.json", form: ["page": "1", "size": "1"])
            #expect((ascending["userList"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["ann"])
            let (_, descending) = try await server.api.post("/user/profile/query.json", form: ["order": "1"])
            #expect((descending["userList"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["cat", "ann"])
            let (_, second) = try await server.api.post("/user/profile/query.json", form: ["page": "2", "size": "1"])
            #expect((second["userList"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["cat"])

            // Another app sees none of it.
            let other = try await server.core.apps.upsert(appKey: "otherapp", appSecret: "othersecret", name: "other", now: 0)
            _ = try await server.token("ann", app: other)
            let (_, foreign) = try await ServerAPIClient(baseURL: server.baseURL, app: other).post("/user/profile/batch/query.json", form: ["userId": "ann"])
            #expect((foreign["userList"] as? [Any])?.isEmpty == true)

            let (clean, _) = try await server.api.post("/user/profile/clean.json", form: ["userId": "ann"])
            #expect(clean == 200)
            #expect(try await Self.profiles(server, ["ann", "cat"]).map { $0["userId"] as? String } == ["cat"])
        }
    }

    @Test("profile set refuses, storing nothing: unknown or mistyped keys, ext keys without ext_, too many ext keys, unregistered users", arguments: [
        ["userId": "ann", "userProfile": #"{"nickname":"A"}"#],
        ["userId": "ann", "userProfile": #"{"gender":3}"#],
        ["userId": "ann", "userProfile": #"{"gender":"2"}"#],
        ["userId": "ann", "userProfile": #"{"level":true}"#],
        ["userId": "ann", "userProfile": "{\"name\":\"\(String(repeating: "n", count: 65))\"}"],
        ["userId": "ann", "userProfile": "[1]"],
        ["userId": "ann", "userExtProfile": #"{"team":"red"}"#],
        ["userId": "ann", "userExtProfile": #"{"ext_team":1}"#],
        ["userId": "ann", "userExtProfile": "{" + (0...20).map { "\"ext_k\($0)\":\"v\"" }.joined(separator: ",") + "}"],
        ["userId": "ann"],
        ["userId": "nobody", "userProfile": #"{"name":"N"}"#],
    ])
    func refusedProfiles(form: [String: String]) async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.token("ann")
            let (status, body) = try await server.api.post("/user/profile/set.json", form: form)
            #expect(status == 400 && body["code"] as? Int == 1002, "\(body)")
            #expect(!((body["errorMessage"] as? String) ?? "").isEmpty)
            #expect(try await Self.profiles(server, ["ann", "nobody"]).isEmpty)
        }
    }

    @Test("deactivate: the user is disconnected with 31029, cannot connect or get a token, their personal data is gone; reactivate: they come back with an empty history and their groups")
    func deactivation() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            _ = try await server.api.post("/group/create.json", form: ["userId": "alice,bob", "groupId": "g1", "groupName": "G"])
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "before"))
            _ = try await server.api.post("/user/blacklist/add.json", form: ["userId": "bob", "blackUserId": "carol"])
            _ = try await server.api.post("/user/tag/set.json", json: ["userId": "bob", "tags": ["vip"]])
            _ = try await server.api.post("/user/profile/set.json", form: ["userId": "bob", "userProfile": #"{"name":"Bob"}"#])
            _ = try await server.api.post("/conversation/type/notification/set.json", form: ["conversationType": "1", "requestId": "bob", "unpushLevel": "5"])

            let statuses = EventRecorder(bob.connectionStatusUpdates())
            let (status, body) = try await server.api.post("/user/deactivate.json", form: ["userId": "bob"])
            #expect(status == 200 && !((body["operateId"] as? String) ?? "").isEmpty)
            #expect(await statuses.first { $0 == .userAbandon } != nil, "the live connection was closed")
            #expect(await bob.lastKick?.code == .userDeactivated)
            let (tokenStatus, tokenBody) = try await server.api.post("/user/getToken.json", form: ["userId": "bob"])
            #expect(tokenStatus == 400 && tokenBody["code"] as? Int == 31029)

            let (_, deactivated) = try await server.api.post("/user/deactivate/query.json", form: ["pageNo": "1", "pageSize": "10"])
            #expect(deactivated["users"] as? [String] == ["bob"])
            let (_, blacklist) = try await server.api.post("/user/blacklist/query.json", form: ["userId": "bob"])
            #expect((blacklist["users"] as? [String])?.isEmpty == true)
            let (_, tags) = try await server.api.post("/user/tags/get.json", form: ["userIds": "bob"])
            #expect((tags["result"] as? [String: [String]])?["bob"]?.isEmpty != false)
            #expect(try await Self.profiles(server, ["bob"]).isEmpty)
            let (_, info) = try await server.api.post("/user/info.json", form: ["userId": "bob"])
            #expect(info["userName"] as? String == "")
            let (_, level) = try await server.api.post("/conversation/type/notification/get.json", form: ["conversationType": "1", "requestId": "bob"])
            #expect(level["unpushLevel"] as? Int == 0)

            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "while away"))
            let (reactivated, reactivatedBody) = try await server.api.post("/user/reactivate.json", form: ["userId": "bob"])
            #expect(reactivated == 200 && reactivatedBody["operateId"] is String)
            let (_, none) = try await server.api.post("/user/deactivate/query.json", form: [:])
            #expect((none["users"] as? [String])?.isEmpty == true)

            let (back, inbox) = try await server.syncedDevice("bob")
            #expect(inbox.items.isEmpty, "what came before the reactivation is gone for bob")
            #expect(try await back.getRemoteHistoryMessages(.private, targetId: "alice", count: 10).messages.isEmpty)
            #expect(try await alice.getRemoteHistoryMessages(.private, targetId: "bob", count: 10).messages.count == 2, "alice keeps hers")
            let (_, group) = try await server.api.post("/message/group/publish.json", form: [
                "fromUserId": "alice", "toGroupId": "g1", "objectName": "RC:TxtMsg", "content": #"{"content":"still in g1"}"#])
            #expect(group["code"] as? Int == 200)
            let after = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after"))
            let live = await inbox.wait(for: 2).map { $0.message.content(as: TextMessage.self)?.content }
            #expect(Set(live) == ["still in g1", "after"])
            #expect(try await back.getRemoteHistoryMessages(.private, targetId: "alice", count: 10).messages.map(\.messageUId) == [after.messageUId])
            await back.disconnect(); await alice.disconnect(); await bob.disconnect()
        }
    }

    @Test("user query pages registered users by registration time; delusers deletes them: unknown afterwards, tokens refused, a new getToken registers again")
    func queryAndDelete() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            for user in ["u1", "u2", "u3"] {
                _ = try await server.api.post("/user/getToken.json", form: ["userId": user, "name": user.uppercased()])
                clock.advance(milliseconds: 1000)
            }
            let (_, page) = try await server.api.post("/user/query.json", form: ["page": "1", "pageSize": "2", "order": "1"])
            #expect(page["total"] as? Int == 3)
            let users = try #require(page["users"] as? [[String: Any]])
            #expect(users.map { $0["userId"] as? String } == ["u3", "u2"])
            #expect(users.first?["userName"] as? String == "U3" && (users.first?["regTime"] as? String)?.count == 19)

            let oldToken = try await server.token("u2")
            let u2 = try await server.connectedClient("u2")
            let statuses = EventRecorder(u2.connectionStatusUpdates())
            let (deleted, _) = try await server.api.post("/user/delusers.json", form: ["userId": "u2"])
            #expect(deleted == 200)
            #expect(await statuses.first { $0 == .tokenIncorrect } != nil)
            let (_, info) = try await server.api.post("/user/info.json", form: ["userId": "u2"])
            #expect(info["code"] as? Int == 1002)
            let (_, rest) = try await server.api.post("/user/query.json", form: [:])
            #expect((rest["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["u1", "u3"] && rest["total"] as? Int == 2)
            await #expect { try await server.client().connect(token: oldToken) } throws: { ($0 as? IMError)?.code == .tokenIncorrect }

            clock.advance(milliseconds: 1)
            #expect(try await server.client().connect(token: try await server.token("u2")) == "u2", "registered again")
            let (single, _) = try await server.api.post("/user/del.json", form: ["userId": "u1"])
            #expect(single == 200)
            let (_, last) = try await server.api.post("/user/query.json", form: [:])
            #expect((last["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["u3", "u2"])
            let (tooMany, tooManyBody) = try await server.api.post("/user/delusers.json", form: ["userId": (0...100).map { "x\($0)" }.joined(separator: ",")])
            #expect(tooMany == 400 && tooManyBody["code"] as? Int == 1005)
        }
    }

    @Test("the one-to-one chat mute: the muted user's clients get 20106 for private messages only; the Server API still sends for them; lifting it restores sending")
    func privateChatMute() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let (bob, inbox) = try await server.syncedDevice("bob")
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])
            let (set, _) = try await server.api.post("/user/chat/fb/set.json", form: ["userId": "ann,zed", "state": "1", "type": "PERSON"])
            #expect(set == 200)
            await #expect { _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "no")) } throws: {
                ($0 as? SendMessageError)?.code == .mutedInPrivateChat
            }
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "group is fine"))
            let (published, _) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"via the app server"}"#])
            #expect(published == 200)
            #expect(await inbox.wait(for: 2).map { $0.message.content(as: TextMessage.self)?.content } == ["group is fine", "via the app server"])

            let (_, list) = try await server.api.post("/user/chat/fb/querylist.json", form: ["type": "PERSON", "num": "1", "offset": "1"])
            #expect(list["total"] as? Int == 2 && list["users"] as? [String] == ["zed"])
            let (badType, badBody) = try await server.api.post("/user/chat/fb/set.json", form: ["userId": "ann", "state": "0", "type": "GROUP"])
            #expect(badType == 400 && badBody["code"] as? Int == 1002)

            _ = try await server.api.post("/user/chat/fb/set.json", form: ["userId": "ann", "state": "0", "type": "PERSON"])
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "yes"))
            #expect(await inbox.wait(for: 3).last?.message.content(as: TextMessage.self)?.content == "yes")
            await ann.disconnect(); await bob.disconnect()
        }
    }

    static func profiles(_ server: TestServer, _ userIds: [String]) async throws -> [[String: Any]] {
        let (status, body) = try await server.api.post("/user/profile/batch/query.json", form: ["userId": userIds.joined(separator: ",")])
        #expect(status == 200)
        return try #require(body["userList"] as? [[String: Any]])
    }

    static func object(_ text: Any?) -> [String: Any] {
        (text as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:]
    }
}
