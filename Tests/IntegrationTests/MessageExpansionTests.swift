import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

/// App-defined contents with each persistent flag, for `persistentFlags`.
struct NoneFlagContent: MessageContent, Codable, Equatable {
    static let objectName = "App:None"
    static let persistentFlag = PersistentFlag.none
    var value: String
}

struct PersistedContent: MessageContent, Codable, Equatable {
    static let objectName = "App:Persisted"
    static let persistentFlag = PersistentFlag.isPersisted
    var value: String
}

struct CountedContent: MessageContent, Codable, Equatable {
    static let objectName = "App:Counted"
    static let persistentFlag = PersistentFlag.persistedAndCounted
    var value: String
}

struct StatusContent: MessageContent, Codable, Equatable {
    static let objectName = "App:Status"
    static let persistentFlag = PersistentFlag.status
    var value: String
}

@Suite("Message extensions and persistent flags")
struct MessageExpansionTests {
    static func server() async throws -> TestServer {
        try await TestServer.start { config in
            config.session.heartbeatIntervalSeconds = 3600
            config.session.clientSendsPerSecond = 1000
        }
    }

    /// The message's extension keys as the Server API reports them (all pages).
    static func storedKeys(_ server: TestServer, _ uid: String) async throws -> [String: String] {
        var keys: [String: String] = [:]
        for page in 1... {
            let (status, body) = try await server.api.post("/message/expansion/query.json", form: ["msgUID": uid, "pageNo": "\(page)"])
            #expect(status == 200, "\(body)")
            let content = body["extraContent"] as? [String: Any] ?? [:]
            if content.isEmpty { break }
            for (key, entry) in content { keys[key] = (entry as? [String: Any])?["v"] as? String }
        }
        return keys
    }

    @Test("extensions travel with the message, change for every member and device, and stay in history")
    func expansionLifecycle() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice", platform: .iOS)
            let aliceDesk = try await server.connectedClient("alice", platform: .macOS)
            let aliceEvents = EventRecorder(alice.messageExpansionUpdates())
            let deskEvents = EventRecorder(aliceDesk.messageExpansionUpdates())
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobEvents = EventRecorder(bob.messageExpansionUpdates())

            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "order #1"),
                                                   canIncludeExpansion: true, expansion: ["status": "new"])
            let received = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(received.canIncludeExpansion && received.expansion == ["status": "new"])

            try await bob.updateMessageExpansion(["status": "paid", "note": "thanks"], messageUId: sent.messageUId)
            guard case .updated(let changes, let message) = try #require(await aliceEvents.wait(for: 1).first) else {
                Issue.record("expected an update")
                return
            }
            #expect(changes == ["status": "paid", "note": "thanks"])
            #expect(message.messageId == sent.messageId && message.expansion == ["status": "paid", "note": "thanks"])
            #expect(try await alice.getMessage(messageId: sent.messageId)?.expansion == ["status": "paid", "note": "thanks"])
            #expect(await deskEvents.wait(for: 1).count == 1, "the sender's other device gets it too")
            #expect(bobEvents.items.isEmpty, "the one who changed it hears nothing back")
            #expect(try await bob.getMessage(messageId: received.messageId)?.expansion == ["status": "paid", "note": "thanks"])

            // Bob is offline while Alice removes a key: he learns it at his next connect.
            await bob.disconnect()
            try await alice.removeMessageExpansionForKey(["note"], messageUId: sent.messageUId)
            let bobAgain = EventRecorder(bob.messageExpansionUpdates())
            let synced = EventRecorder(bob.offlineMessageSyncCompleted())
            try await bob.connect(token: try await server.token("bob"))
            _ = await synced.wait(for: 1)
            guard case .removed(let keys, let updated) = try #require(await bobAgain.wait(for: 1).first) else {
                Issue.record("expected a removal")
                return
            }
            #expect(keys == ["note"] && updated.expansion == ["status": "paid"])
            let remote = try await bob.getRemoteHistoryMessages(.private, targetId: "alice")
            #expect(remote.messages.map(\.expansion) == [["status": "paid"]], "history carries the current extensions")
            #expect(remote.messages.count == 1, "extension notices are not history")
            #expect(try await Self.storedKeys(server, sent.messageUId) == ["status": "paid"])
        }
    }

    @Test("extension limits: 34008 without canIncludeExpansion, 34010 for 21 keys, bad keys and long values")
    func expansionLimits() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice")
            let plain = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "plain"))
            let open = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "open"), canIncludeExpansion: true)

            #expect(await failureCode { try await alice.updateMessageExpansion(["k": "v"], messageUId: plain.messageUId) } == ErrorCode.messageNotExpandable.rawValue)
            let twentyOne = Dictionary(uniqueKeysWithValues: (1...21).map { ("k\($0)", "v") })
            #expect(await failureCode { try await alice.updateMessageExpansion(twentyOne, messageUId: open.messageUId) } == ErrorCode.expansionLimitExceeded.rawValue)
            let longKey = String(repeating: "k", count: 33)
            #expect(await failureCode { try await alice.updateMessageExpansion([longKey: "v"], messageUId: open.messageUId) } == ErrorCode.expansionLimitExceeded.rawValue)
            #expect(await failureCode { try await alice.updateMessageExpansion(["订单": "v"], messageUId: open.messageUId) } == ErrorCode.expansionLimitExceeded.rawValue)
            #expect(await failureCode { try await alice.updateMessageExpansion(["a@b": "v"], messageUId: open.messageUId) } == ErrorCode.expansionLimitExceeded.rawValue)
            let longValue = String(repeating: "v", count: 4097)
            #expect(await failureCode { try await alice.updateMessageExpansion(["k": longValue], messageUId: open.messageUId) } == ErrorCode.expansionLimitExceeded.rawValue)
            #expect(await failureCode {
                try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "x"), expansion: ["k": "v"])
            } == ErrorCode.messageNotExpandable.rawValue)
            #expect(try await Self.storedKeys(server, open.messageUId).isEmpty, "nothing refused was stored")

            let twenty = Dictionary(uniqueKeysWithValues: (1...20).map { ("k\($0)", "v") })
            try await alice.updateMessageExpansion(twenty, messageUId: open.messageUId)
            try await alice.updateMessageExpansion([String(repeating: "a", count: 28) + "+=-_": String(repeating: "v", count: 4096)],
                                                   messageUId: open.messageUId)
            try await alice.updateMessageExpansion(["a+b=c-d_e": "v"], messageUId: open.messageUId)
            #expect(try await Self.storedKeys(server, open.messageUId).count == 22)

            // The Server API refuses conversation types without extensions.
            let (_, body) = try await server.api.post("/message/expansion/set.json", form: [
                "msgUID": open.messageUId, "userId": "alice", "conversationType": "6", "targetId": "bob", "extraKeyVal": #"{"k":"v"}"#,
            ])
            #expect(body["code"] as? Int == ErrorCode.apiBadParameter.rawValue)
        }
    }

    @Test("concurrent writers never take a message past 300 extension keys")
    func expansionCap() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "popular"), canIncludeExpansion: true)
            // 290 keys through the Server API (100 per call).
            for batch in 0..<3 {
                let count = batch < 2 ? 100 : 90
                let keys = (0..<count).map { "s\(batch)_\($0)" }
                let json = "{" + keys.map { "\"\($0)\":\"v\"" }.joined(separator: ",") + "}"
                let (status, body) = try await server.api.post("/message/expansion/set.json", form: [
                    "msgUID": sent.messageUId, "userId": "alice", "conversationType": "1", "targetId": "bob", "extraKeyVal": json,
                ])
                #expect(status == 200 && body["code"] as? Int == 200, "\(body)")
            }
            #expect(try await Self.storedKeys(server, sent.messageUId).count == 290)
            // Two writers add 10 new keys each at once: 310 would pass the limit, so one is refused.
            let aliceKeys = Dictionary(uniqueKeysWithValues: (0..<10).map { ("a\($0)", "v") })
            let bobKeys = Dictionary(uniqueKeysWithValues: (0..<10).map { ("b\($0)", "v") })
            async let first = failureCode { try await alice.updateMessageExpansion(aliceKeys, messageUId: sent.messageUId) }
            async let second = failureCode { try await bob.updateMessageExpansion(bobKeys, messageUId: sent.messageUId) }
            let outcomes = await [first, second]
            #expect(outcomes.filter { $0 == nil }.count == 1 && outcomes.contains(ErrorCode.expansionLimitExceeded.rawValue), "\(outcomes)")
            let keys = try await Self.storedKeys(server, sent.messageUId)
            #expect(keys.count == 300)
            // Replacing existing keys still works at the limit.
            try await alice.updateMessageExpansion(["s0_0": "changed"], messageUId: sent.messageUId)
            #expect(try await Self.storedKeys(server, sent.messageUId)["s0_0"] == "changed")
        }
    }

    @Test("group extensions reach the members, and only members may change them")
    func groupExpansion() async throws {
        try await withTestServer(try await Self.server()) { server in
            let clients = try await GroupChatTests.connectedGroup(server, ["alice", "bob", "carol"])
            let (alice, bob, carol) = (clients[0], clients[1], clients[2])
            let carolEvents = EventRecorder(carol.messageExpansionUpdates())
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())
            let poll = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "lunch?"), canIncludeExpansion: true)
            _ = await bobInbox.wait(for: 1)
            _ = await carolInbox.wait(for: 1)
            try await bob.updateMessageExpansion(["bob": "yes"], messageUId: poll.messageUId)
            guard case .updated(let changes, let message) = try #require(await carolEvents.wait(for: 1).first) else {
                Issue.record("expected an update")
                return
            }
            #expect(changes == ["bob": "yes"] && message.messageUId == poll.messageUId)
            let dave = try await server.connectedClient("dave")
            #expect(await failureCode { try await dave.updateMessageExpansion(["dave": "me too"], messageUId: poll.messageUId) } == ErrorCode.notInGroup.rawValue)
            #expect(try await Self.storedKeys(server, poll.messageUId) == ["bob": "yes"])
        }
    }

    @Test("each persistent flag is honoured: STATUS online only, NONE offline but not history, ISPERSISTED not counted, ISCOUNTED counted")
    func persistentFlags() async throws {
        try await withTestServer(try await Self.server()) { server in
            let types: [any MessageContent.Type] = [NoneFlagContent.self, PersistedContent.self, CountedContent.self, StatusContent.self]
            let alice = try await server.connectedClient("alice")
            for type in types { try await alice.registerMessageType(type) }
            let bob = server.client()
            for type in types { try await bob.registerMessageType(type) }
            let inbox = EventRecorder(bob.receivedMessages())

            // Bob is offline for all four.
            try await alice.sendMessage(.private, targetId: "bob", content: StatusContent(value: "status"))
            try await alice.sendMessage(.private, targetId: "bob", content: NoneFlagContent(value: "none"))
            try await alice.sendMessage(.private, targetId: "bob", content: PersistedContent(value: "persisted"))
            try await alice.sendMessage(.private, targetId: "bob", content: CountedContent(value: "counted"))
            let synced = EventRecorder(bob.offlineMessageSyncCompleted())
            try await bob.connect(token: try await server.token("bob"))
            _ = await synced.wait(for: 1)
            let arrived = await inbox.wait(for: 3)
            #expect(arrived.map(\.message.objectName) == ["App:None", "App:Persisted", "App:Counted"], "STATUS never reaches an offline user")
            #expect(arrived.allSatisfy { $0.offline })
            #expect(arrived.first?.message.content(as: NoneFlagContent.self)?.value == "none")
            #expect(arrived.first?.message.messageId == 0, "a NONE message is not stored locally")
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").map(\.objectName) == ["App:Counted", "App:Persisted"])
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 1, "only ISCOUNTED counts")
            let remote = try await bob.getRemoteHistoryMessages(.private, targetId: "alice", order: .ascending)
            #expect(remote.messages.map(\.objectName) == ["App:Persisted", "App:Counted"], "cloud history keeps persisted messages only")

            // Online, STATUS arrives, and is neither stored nor counted.
            try await alice.sendMessage(.private, targetId: "bob", content: StatusContent(value: "live"))
            let live = await inbox.wait(for: 4)
            #expect(live.last?.message.objectName == "App:Status" && live.last?.offline == false)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").count == 2)
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 1)
        }
    }
}
