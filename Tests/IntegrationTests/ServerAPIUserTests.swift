import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("Server API: users, blocks, blacklists, whitelists, tags")
struct ServerAPIUserTests {
    @Test("refresh and info: the profile is stored and reported; an unknown user gets 1002")
    func profile() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/user/getToken.json", form: ["userId": "ann", "name": "Ann", "portraitUri": "http://x/a.png"])
            let (refreshed, _) = try await server.api.post("/user/refresh.json", form: ["userId": "ann", "name": "Ann B", "portraitUri": ""])
            #expect(refreshed == 200)
            let (status, info) = try await server.api.post("/user/info.json", form: ["userId": "ann"])
            #expect(status == 200)
            #expect(info["userName"] as? String == "Ann B")
            #expect(info["userPortrait"] as? String == "http://x/a.png", "an empty portraitUri leaves it unchanged")
            #expect((info["createTime"] as? String)?.count == 19)
            let (missing, missingBody) = try await server.api.post("/user/info.json", form: ["userId": "nobody"])
            #expect(missing == 400)
            #expect(missingBody["code"] as? Int == 1002)
            let (noUser, noUserBody) = try await server.api.post("/user/refresh.json", form: ["name": "x"])
            #expect(noUser == 400 && noUserBody["code"] as? Int == 1002)
        }
    }

    @Test("token expire: tokens issued before the time get 31004, newer ones connect")
    func tokenExpire() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let old = try await server.token("ann")
            clock.advance(milliseconds: 1000)
            let (status, _) = try await server.api.post("/user/token/expire.json", form: ["userId": "ann", "time": "\(clock.nowMilliseconds())"])
            #expect(status == 200)
            await #expect { try await server.client().connect(token: old) } throws: { ($0 as? IMError)?.code == .tokenIncorrect }
            clock.advance(milliseconds: 1)
            let fresh = try await server.token("ann")
            #expect(try await server.client().connect(token: fresh) == "ann")
            let (bad, badBody) = try await server.api.post("/user/token/expire.json", form: ["userId": "ann"])
            #expect(bad == 400 && badBody["code"] as? Int == 1002, "time is required")
        }
    }

    @Test("block: the online user is disconnected with 31011 (banned while online), connects are refused with 31009 until unblock; query lists the block")
    func block() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let statuses = EventRecorder(ann.connectionStatusUpdates())
            let (status, _) = try await server.api.post("/user/block.json", form: ["userId": "ann", "minute": "10"])
            #expect(status == 200)
            #expect(await statuses.first { $0 == .disconnectException } != nil, "the live connection was closed")
            let kick = await ann.lastKick
            #expect(kick?.code == .bannedWhileOnline, "kicked with \(String(describing: kick))")
            await #expect { try await server.client().connect(token: try await server.token("ann")) } throws: { ($0 as? IMError)?.code == .userBlocked }

            let (_, query) = try await server.api.post("/user/block/query.json", form: [:])
            let users = try #require(query["users"] as? [[String: Any]])
            #expect(users.map { $0["userId"] as? String } == ["ann"])
            #expect((users.first?["blockEndTime"] as? String)?.count == 19)

            for minute in ["0", "43201", "x"] {
                let (bad, body) = try await server.api.post("/user/block.json", form: ["userId": "bob", "minute": minute])
                #expect(bad == 400 && body["code"] as? Int == 1002, "minute \(minute)")
            }
            let (_, unblocked) = try await server.api.post("/user/unblock.json", form: ["userId": "ann"])
            #expect(unblocked["code"] as? Int == 200)
            #expect(try await server.client().connect(token: try await server.token("ann")) == "ann")
            let (_, after) = try await server.api.post("/user/block/query.json", form: [:])
            #expect((after["users"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("blacklist: a blacklisted sender gets 405 and the owner receives nothing; removal restores delivery")
    func blacklist() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let bobInbox = EventRecorder(bob.receivedMessages())

            let (added, _) = try await server.api.post("/user/blacklist/add.json", rawForm: "userId=bob&blackUserId=ann&blackUserId=dave")
            #expect(added == 200)
            let (_, listed) = try await server.api.post("/user/blacklist/query.json", form: ["userId": "bob"])
            #expect(listed["users"] as? [String] == ["ann", "dave"])

            await #expect { try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "blocked")) } throws: {
                ($0 as? SendMessageError)?.code == .rejectedByBlacklist
            }
            _ = try await carol.sendMessage(.private, targetId: "bob", content: TextMessage(content: "from carol"))
            #expect(await bobInbox.wait(for: 1).first?.message.senderUserId == "carol", "ann's message never reached bob")
            // Bob can still write to ann: a blacklist only stops messages to its owner.
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "bob to ann"))

            _ = try await server.api.post("/user/blacklist/remove.json", form: ["userId": "bob", "blackUserId": "ann"])
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "allowed again"))
            #expect(await bobInbox.wait(for: 2).last?.message.content(as: TextMessage.self)?.content == "allowed again")

            let (bad, badBody) = try await server.api.post("/user/blacklist/add.json", form: ["userId": "bob"])
            #expect(bad == 400 && badBody["code"] as? Int == 1002, "blackUserId is required")
            let tooMany = (0..<21).map { "blackUserId=u\($0)" }.joined(separator: "&")
            let (long, longBody) = try await server.api.post("/user/blacklist/add.json", rawForm: "userId=bob&" + tooMany)
            #expect(long == 400 && longBody["code"] as? Int == 1005, "at most 20 per call")
            await ann.disconnect(); await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("whitelist mode: only whitelisted senders reach the owner, others get 407; blacklists do not apply")
    func whitelistMode() async throws {
        try await withTestServer(try await TestServer.start { $0.moderation.userWhitelistMode = true }) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let bobInbox = EventRecorder(bob.receivedMessages())
            _ = try await server.api.post("/user/whitelist/add.json", form: ["userId": "bob", "whiteUserId": "carol"])
            let (_, listed) = try await server.api.post("/user/whitelist/query.json", form: ["userId": "bob"])
            #expect(listed["users"] as? [String] == ["carol"])

            await #expect { try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "not listed")) } throws: {
                ($0 as? SendMessageError)?.code == .notInWhitelist
            }
            _ = try await carol.sendMessage(.private, targetId: "bob", content: TextMessage(content: "listed"))
            #expect(await bobInbox.wait(for: 1).first?.message.senderUserId == "carol")

            _ = try await server.api.post("/user/whitelist/remove.json", form: ["userId": "bob", "whiteUserId": "carol"])
            await #expect { try await carol.sendMessage(.private, targetId: "bob", content: TextMessage(content: "removed")) } throws: {
                ($0 as? SendMessageError)?.code == .notInWhitelist
            }
            await ann.disconnect(); await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("conversation do-not-disturb: isMuted and unpushLevel, as the Go SDK sends them")
    func doNotDisturb() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let query = ["conversationType": "1", "requestId": "ann", "targetId": "bob"]
            #expect(try await server.api.post("/conversation/notification/get.json", form: query).1["isMuted"] as? Int == 0)
            // Go always sends unpushLevel, 0 when only isMuted is meant.
            let (set, _) = try await server.api.post("/conversation/notification/set.json", form: query.merging(["isMuted": "1", "unpushLevel": "0"]) { $1 })
            #expect(set == 200)
            #expect(try await server.api.post("/conversation/notification/get.json", form: query).1["isMuted"] as? Int == 1)
            _ = try await server.api.post("/conversation/notification/set.json", form: query.merging(["unpushLevel": "-1"]) { $1 })
            let (_, all) = try await server.api.post("/conversation/notification/get.json", form: query)
            #expect(all["isMuted"] as? Int == 0 && all["unpushLevel"] as? Int == -1, "-1 pushes everything")
            let (bad, body) = try await server.api.post("/conversation/notification/set.json", form: query.merging(["unpushLevel": "3"]) { $1 })
            #expect(bad == 400 && body["code"] as? Int == 1002)
            let (other, _) = try await server.api.post("/conversation/notification/get.json", form: ["conversationType": "1", "requestId": "bob", "targetId": "ann"])
            #expect(other == 200)
        }
    }

    @Test("tags: set (JSON), batch set (JSON), get; too long a tag gets 1005")
    func tags() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (set, _) = try await server.api.post("/user/tag/set.json", json: ["userId": "ann", "tags": ["vip", "beijing"]])
            let (commas, _) = try await server.api.post("/user/tag/set.json", json: ["userId": "eve", "tags": ["a,b"]])
            #expect(commas == 200)
            #expect(set == 200)
            let (batch, _) = try await server.api.post("/user/tag/batch/set.json", json: ["userIds": ["bob", "carol"], "tags": ["new"]])
            #expect(batch == 200)
            let (_, got) = try await server.api.post("/user/tags/get.json", rawForm: "userIds=ann&userIds=bob,carol,eve")
            let result = try #require(got["result"] as? [String: [String]])
            #expect(result == ["ann": ["beijing", "vip"], "bob": ["new"], "carol": ["new"], "eve": ["a,b"]], "a JSON array element is not split at its comma")
            let (long, body) = try await server.api.post("/user/tag/set.json", json: ["userId": "ann", "tags": [String(repeating: "t", count: 41)]])
            #expect(long == 400 && body["code"] as? Int == 1005)
            let (_, unchanged) = try await server.api.post("/user/tags/get.json", form: ["userIds": "ann"])
            #expect((unchanged["result"] as? [String: [String]])?["ann"] == ["beijing", "vip"], "a refused call changes nothing")
        }
    }
}
