import Foundation
import GRDB
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMStoreSQLite
import IMWire
import IMServerTesting
import Testing

/// User ids may contain `|` (RongCloud's older documents allow `+ | = - _`), the character that
/// joins the parts of a conversation key. Keys escape their parts, so no id can name another
/// conversation, and stores written before are migrated.
@Suite("Conversation keys cannot collide")
struct ConversationKeyTests {
    static func texts(_ messages: [Message]) -> [String] {
        messages.compactMap { $0.content(as: TextMessage.self)?.content }.sorted()
    }

    @Test("a user reads and writes only their own one-to-one conversations, whatever `|` the ids hold")
    func privateConversations() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let zbob = try await server.connectedClient("zbob")
            let acmeZed = try await server.connectedClient("acme|zed")
            _ = try await zbob.sendMessage(.private, targetId: "acme|zed", content: TextMessage(content: "secret"))

            // acme asks for the history of a conversation whose old key was the same string.
            let acme = try await server.connectedClient("acme")
            #expect(Self.texts(try await acme.getRemoteHistoryMessages(.private, targetId: "zed|zbob").messages).isEmpty,
                    "acme reads nothing of acme|zed and zbob")
            _ = try await acme.sendMessage(.private, targetId: "zed|zbob", content: TextMessage(content: "hello zed|zbob"))
            #expect(Self.texts(try await zbob.getRemoteHistoryMessages(.private, targetId: "acme|zed").messages) == ["secret"],
                    "acme's message did not land in zbob's conversation with acme|zed")
            #expect(Self.texts(try await acmeZed.getRemoteHistoryMessages(.private, targetId: "zbob").messages) == ["secret"])
            let (zedZbob, inbox) = try await server.syncedDevice("zed|zbob")
            #expect(await inbox.wait(for: 1).compactMap { $0.message.content(as: TextMessage.self)?.content } == ["hello zed|zbob"])
            #expect(Self.texts(try await zedZbob.getRemoteHistoryMessages(.private, targetId: "acme").messages) == ["hello zed|zbob"])

            // Clearing one's history with one peer leaves the conversation with the other alone. User
            // a|b|a talks with b|a and with a|b: the two keys were one string before.
            let aba = try await server.connectedClient("a|b|a")
            let ba = try await server.connectedClient("b|a")
            let ab = try await server.connectedClient("a|b")
            _ = try await ba.sendMessage(.private, targetId: "a|b|a", content: TextMessage(content: "from b|a"))
            let last = try await ab.sendMessage(.private, targetId: "a|b|a", content: TextMessage(content: "from a|b"))
            try await aba.clearRemoteHistoryMessages(.private, targetId: "b|a", recordTime: last.sentTime)
            #expect(Self.texts(try await aba.getRemoteHistoryMessages(.private, targetId: "b|a").messages).isEmpty)
            #expect(Self.texts(try await aba.getRemoteHistoryMessages(.private, targetId: "a|b").messages) == ["from a|b"])
        }
    }

    @Test("system conversations are told apart when the account and the user hold `|`")
    func systemConversations() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            for (from, to, text) in [("sys|news", "bob", "for bob"), ("sys", "news|bob", "for news|bob")] {
                let (_, body) = try await server.api.post("/message/system/publish.json", form: [
                    "fromUserId": from, "toUserId": to, "objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#])
                #expect(body["code"] as? Int == 200, "\(body)")
            }
            let newsBob = try await server.connectedClient("news|bob")
            #expect(Self.texts(try await newsBob.getRemoteHistoryMessages(.system, targetId: "sys").messages) == ["for news|bob"])
            let bob = try await server.connectedClient("bob")
            #expect(Self.texts(try await bob.getRemoteHistoryMessages(.system, targetId: "sys|news").messages) == ["for bob"])
            #expect(Self.texts(try await bob.getRemoteHistoryMessages(.system, targetId: "sys").messages).isEmpty)
        }
    }

    @Test("every key kind escapes `|` and `%`, and keys of different conversations differ")
    func keyFunctions() {
        let ids = ["a", "b", "a|b", "b|a", "a|b|a", "|", "||", "a|", "|a", "%", "%7C", "a%7Cb", "%25", "a%|b", "*"]
        var keys: [String: String] = [:]
        func record(_ key: String, _ name: String) {
            if let other = keys.updateValue(name, forKey: key) { Issue.record("\(name) and \(other) share the key \(key)") }
        }
        for (i, x) in ids.enumerated() {
            record(groupConversationKey(x), "group \(x)")
            record(chatroomConversationKey(x), "chatroom \(x)")
            for (j, y) in ids.enumerated() {
                record(ultraGroupConversationKey(x, y), "ultra \(x) / \(y)")
                record(systemConversationKey(sender: x, recipient: y), "system \(x) -> \(y)")
                if i <= j { record(privateConversationKey(x, y), "private \(x) & \(y)") }
                #expect(privateConversationKey(x, y) == privateConversationKey(y, x))
            }
        }
        #expect(privateConversationKey("alice", "bob") == "p|alice|bob", "ids without | or % keep the plain form")
    }

    @Test("a store written with the old keys is migrated: messages and cleared conversations move to their own keys")
    func migration() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-keys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let appId: Int64 = 1
        do {
            let store = try SQLiteStore(directory: directory)
            _ = try await store.upsertApp(appKey: "k", appSecret: "s", name: "app", now: 0)
            func message(_ type: ConversationType, _ oldKey: String, from: String, to: String, channel: String = "", _ text: String, at time: Int64) -> StoredMessage {
                StoredMessage(appId: appId, conversationType: type, conversationKey: oldKey, targetId: to, senderId: from,
                              objectName: TextMessage.objectName, content: Data(#"{"content":"\#(text)"}"#.utf8), uid: "u\(time)",
                              sentTime: time, flags: .persistedAndCounted, clientMessageId: "c\(time)", channelId: channel)
            }
            _ = try await store.commit([
                message(.private, "p|acme|zed|zbob", from: "zbob", to: "acme|zed", "secret", at: 1),
                message(.private, "p|acme|zed|zbob", from: "acme", to: "zed|zbob", "hello", at: 2),
                message(.private, "p|alice|bob", from: "alice", to: "bob", "plain", at: 3),
                message(.system, "s|sys|news|bob", from: "sys|news", to: "bob", "news", at: 4),
                message(.group, "g|a|b", from: "alice", to: "a|b", "group", at: 5),
                message(.ultraGroup, "u|u|1|RCDefault", from: "alice", to: "u|1", channel: "RCDefault", "ultra", at: 6),
            ])
            for (user, key) in [("acme", "p|acme|zed|zbob"), ("a|b|a", "p|a|b|a|b|a"), ("bob", "s|sys|news|bob"), ("alice", "p|alice|bob")] {
                try await store.clearConversation(appId: appId, userId: user, conversationKey: key, through: 10)
            }
        }
        // Back to the store as the previous version left it: its migration not yet run.
        let queue = try DatabaseQueue(path: (directory as NSString).appendingPathComponent("imserver.sqlite"))
        try await queue.write { db in
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v10-unambiguous-conversation-keys'")
        }
        try queue.close()

        let store = try SQLiteStore(directory: directory)
        func texts(_ key: String) async throws -> [String] {
            try await store.history(appId: appId, conversationKey: key, recordTime: 0, count: 10, ascending: true, viewer: nil)
                .messages.map { String(decoding: $0.content, as: UTF8.self) }
        }
        #expect(try await texts(privateConversationKey("acme|zed", "zbob")) == [#"{"content":"secret"}"#])
        #expect(try await texts(privateConversationKey("acme", "zed|zbob")) == [#"{"content":"hello"}"#])
        #expect(try await texts("p|alice|bob") == [#"{"content":"plain"}"#])
        #expect(try await texts(systemConversationKey(sender: "sys|news", recipient: "bob")) == [#"{"content":"news"}"#])
        #expect(try await texts(groupConversationKey("a|b")) == [#"{"content":"group"}"#])
        #expect(try await texts(ultraGroupConversationKey("u|1", "RCDefault")) == [#"{"content":"ultra"}"#])
        #expect(try await texts("p|acme|zed|zbob").isEmpty, "no message keeps an old key")

        let reader = try DatabaseQueue(path: store.path)
        defer { try? reader.close() }
        let cleared = try await reader.read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, conv_key FROM cleared_conversations ORDER BY user_id, conv_key").map {
                "\($0["user_id"] as String) \($0["conv_key"] as String)"
            }
        }
        #expect(cleared == [
            "a|b|a \(privateConversationKey("a|b|a", "a|b"))",
            "a|b|a \(privateConversationKey("a|b|a", "b|a"))",
            "acme \(privateConversationKey("acme", "zed|zbob"))",
            "alice p|alice|bob",
            "bob \(systemConversationKey(sender: "sys|news", recipient: "bob"))",
        ].sorted())
    }
}
