import Foundation
import GRDB
import IMCore
@testable import IMLib
import IMServerTesting
import Testing

/// An app's typing indicator: online only, never stored or counted.
struct AppTypingContent: MessageContent, Codable, Equatable {
    static let objectName = "app:typing"
    static let persistentFlag = PersistentFlag.status
    var typing: Bool
}

/// An app's card message, stored and counted, found by its title.
struct CardMessage: MessageContent, Codable, Equatable {
    static let objectName = "app:card"
    static let persistentFlag = PersistentFlag.persistedAndCounted
    var title: String
    var conversationDigest: String { "[card] \(title)" }
    var searchableWords: [String]? { [title] }
}

/// An app's command that only its sender's app knows: received, never stored.
struct PingCommand: MessageContent, Codable, Equatable {
    static let objectName = "app:ping"
    static let persistentFlag = PersistentFlag.none
    var n: Int
}

/// A type no client registers.
struct NeverRegistered: MessageContent, Codable {
    static let objectName = "app:never"
    static let persistentFlag = PersistentFlag.persistedAndCounted
    var x: Int
}

/// A custom type that wrongly takes a reserved name.
struct ReservedName: MessageContent, Codable {
    static let objectName = "RC:MyMsg"
    static let persistentFlag = PersistentFlag.persistedAndCounted
}

@Suite("IMLib local features: unread counts, drafts, inserts, deletes, search, custom types")
struct LocalFeaturesTests {
    static func text(_ message: Message) -> String? { message.content(as: TextMessage.self)?.content }

    /// A server whose send rate limit does not get in the way of a test's burst of messages.
    static func startServer() async throws -> TestServer {
        try await TestServer.start { $0.session.clientSendsPerSecond = 1_000 }
    }

    /// Sends texts from `sender` and waits until `inbox` has `total` messages.
    @discardableResult
    static func send(_ sender: IMClient, _ type: ConversationType = .private, to target: String, _ texts: [String],
                     inbox: EventRecorder<ReceivedMessage>, total: Int) async throws -> [Message] {
        var sent: [Message] = []
        for text in texts { sent.append(try await sender.sendMessage(type, targetId: target, content: TextMessage(content: text))) }
        #expect(await inbox.wait(for: total).count == total)
        return sent
    }

    @Test("counted messages raise the unread count, persisted-only ones are stored uncounted, NONE and STATUS neither")
    func unreadByFlags() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            for client in [alice, bob] { try await client.registerMessageType(AppTypingContent.self) }
            let inbox = EventRecorder(bob.receivedMessages())

            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "counted"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: CommandNotificationMessage(name: "n", data: "stored, not counted"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: CommandMessage(name: "c", data: "neither"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: AppTypingContent(typing: true))
            _ = try await alice.sendMessage(.private, targetId: "bob",
                                            content: ImageMessage(thumbnailBase64: "/9j/", imageUri: "http://i/1.jpg"))
            let received = await inbox.wait(for: 5)
            #expect(received.map(\.message.objectName) == ["RC:TxtMsg", "RC:CmdNtf", "RC:CmdMsg", "app:typing", "RC:ImgMsg"])
            #expect(received[3].message.content(as: AppTypingContent.self) == AppTypingContent(typing: true))

            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 2)
            #expect(try await bob.getTotalUnreadCount() == 2)
            let history = try await bob.getHistoryMessages(.private, targetId: "alice")
            #expect(history.map(\.objectName) == ["RC:ImgMsg", "RC:CmdNtf", "RC:TxtMsg"], "NONE and STATUS messages are not stored")
            #expect(history.first?.content(as: ImageMessage.self)?.imageUri == "http://i/1.jpg")
            #expect(try await alice.getUnreadCount(.private, targetId: "bob") == 0, "one's own messages do not count")
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("totals add up the conversations; do-not-disturb conversations count only with containBlocked")
    func unreadTotalsAndDoNotDisturb() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["alice", "bob"])
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            try await Self.send(alice, to: "bob", ["p1", "p2"], inbox: inbox, total: 2)
            try await Self.send(alice, .group, to: "g1", ["g1", "g2", "g3"], inbox: inbox, total: 5)

            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 2)
            #expect(try await bob.getUnreadCount(.group, targetId: "g1") == 3)
            #expect(try await bob.getUnreadCount(.group, targetId: "nobody") == 0)
            let list = try await bob.getConversationList(types: [.private, .group])
            #expect(try await bob.getTotalUnreadCount() == list.map(\.unreadMessageCount).reduce(0, +))
            #expect(try await bob.getTotalUnreadCount() == 5)

            // The group is do-not-disturb (the level the conversation-state sync writes).
            try await bob.openStore().pool.write { db in
                try db.execute(sql: "UPDATE conversations SET notification_level = 1 WHERE conv_type = 3 AND target_id = 'g1'")
            }
            #expect(try await bob.getUnreadCount(types: [.private, .group], containBlocked: true) == 5)
            #expect(try await bob.getUnreadCount(types: [.private, .group], containBlocked: false) == 2)
            #expect(try await bob.getUnreadCount(types: [.group], containBlocked: false) == 0)
            #expect(try await bob.getUnreadCount(types: [.system], containBlocked: true) == 0)
            #expect(try await bob.getUnreadCount(types: [], containBlocked: true) == 0)
            #expect(try await bob.getTotalUnreadCount() == 5, "the total includes do-not-disturb conversations")
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("clearing unread up to a time reads the messages sent until then and recounts unread and mentions")
    func clearUnreadUpToTime() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["alice", "bob"])
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let sent = try await Self.send(alice, to: "bob", ["one", "two", "three"], inbox: inbox, total: 3)

            #expect(try await bob.clearMessagesUnreadStatus(.private, targetId: "alice", time: sent[1].sentTime))
            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 1)
            let history = try await bob.getHistoryMessages(.private, targetId: "alice")
            #expect(history.map(\.isRead) == [false, true, true], "newest first: only 'three' is still unread")
            #expect(try await bob.clearMessagesUnreadStatus(.private, targetId: "alice", time: 0))
            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 0)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").allSatisfy(\.isRead))

            // Mentions are recounted from what stays unread.
            let mention = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "@bob", mentionedInfo: MentionedInfo(type: .users, userIdList: ["bob"])))
            _ = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "plain"))
            let later = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "@all", mentionedInfo: MentionedInfo(type: .all)))
            #expect(await inbox.wait(for: 6).count == 6)
            #expect(try await bob.getConversation(.group, targetId: "g1")?.mentionedCount == 2)
            try await bob.clearMessagesUnreadStatus(.group, targetId: "g1", time: mention.sentTime)
            let group = try #require(try await bob.getConversation(.group, targetId: "g1"))
            #expect(group.unreadMessageCount == 2 && group.mentionedCount == 1 && group.hasUnreadMentioned)
            try await bob.clearMessagesUnreadStatus(.group, targetId: "g1", time: later.sentTime)
            let read = try #require(try await bob.getConversation(.group, targetId: "g1"))
            #expect(read.unreadMessageCount == 0 && !read.hasUnreadMentioned)

            #expect(try await bob.clearMessagesUnreadStatus(.private, targetId: "stranger", time: 0) == false)
            #expect(await failureCode { try await bob.clearMessagesUnreadStatus(.private, targetId: "alice", time: -1) } == 33003)
            #expect(await failureCode { try await bob.clearMessagesUnreadStatus(.private, targetId: "bad id", time: 0) } == 33003)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("drafts are saved, read and cleared on this device; a draft puts a new conversation in the list")
    func drafts() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            #expect(try await alice.getTextMessageDraft(.private, targetId: "bob") == nil)
            #expect(try await alice.saveTextMessageDraft(.private, targetId: "bob", content: "半句话 half"))
            #expect(try await alice.getTextMessageDraft(.private, targetId: "bob") == "半句话 half")
            let conversation = try #require(try await alice.getConversation(.private, targetId: "bob"))
            #expect(conversation.draft == "半句话 half" && conversation.latestMessageId == 0)
            #expect(try await alice.getConversationList(types: [.private]).map(\.targetId) == ["bob"])

            // Sending keeps the draft (the app clears it); saving again replaces it.
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "sent"))
            #expect(try await alice.getTextMessageDraft(.private, targetId: "bob") == "半句话 half")
            try await alice.saveTextMessageDraft(.private, targetId: "bob", content: "second")
            #expect(try await alice.getTextMessageDraft(.private, targetId: "bob") == "second")
            #expect(try await alice.clearTextMessageDraft(.private, targetId: "bob"))
            #expect(try await alice.getTextMessageDraft(.private, targetId: "bob") == nil)
            #expect(try await alice.clearTextMessageDraft(.private, targetId: "nobody") == false)
            #expect(await failureCode { try await alice.saveTextMessageDraft(.private, targetId: "", content: "x") } == 33003)

            // The draft never reached bob.
            let (bob, inbox) = try await server.syncedDevice("bob")
            #expect(await inbox.wait(for: 1).map { Self.text($0.message) } == ["sent"])
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("inserted messages are local, ordered by sentTime in history and the list, and counted when unread")
    func insertedMessages() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = server.client { $0.clock = clock }
            let synced = EventRecorder(bob.offlineMessageSyncCompleted())
            try await bob.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            let aliceInbox = EventRecorder(alice.receivedMessages())

            let out = try await bob.insertOutgoingMessage(.private, targetId: "alice", content: TextMessage(content: "out"), sentTime: 1_000)
            #expect(out.messageId > 0 && out.messageUId.isEmpty && out.sentStatus == .sent && out.direction == .send)
            let now = try await bob.insertIncomingMessage(.private, targetId: "alice", senderUserId: "alice", content: TextMessage(content: "now"))
            #expect(now.sentTime == 1_800_000_000_000, "sentTime 0 takes the client's clock")
            let old = try await bob.insertIncomingMessage(.private, targetId: "alice", senderUserId: "alice", isRead: true,
                                                          content: TextMessage(content: "old"), sentTime: 500)
            #expect(old.direction == .receive && old.sentStatus == .received && old.messageUId.isEmpty)
            let failed = try await bob.insertOutgoingMessage(.private, targetId: "carol", sentStatus: .failed,
                                                             content: FileMessage(name: "a.txt", size: 3, type: "txt", fileUrl: "f"), sentTime: 2_000)
            #expect(failed.sentStatus == .failed)

            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").compactMap(Self.text) == ["now", "out", "old"])
            let conversation = try #require(try await bob.getConversation(.private, targetId: "alice"))
            #expect(conversation.latestMessageId == now.messageId && conversation.sentTime == now.sentTime)
            #expect(conversation.unreadMessageCount == 1, "the unread inserted message counts, the read one does not")
            #expect(try await bob.getConversationList(types: [.private]).map(\.targetId) == ["alice", "carol"])
            #expect(try await bob.getMessage(messageId: failed.messageId)?.content(as: FileMessage.self)?.name == "a.txt")

            // Nothing went to the server: alice's next message is the first she hears of, and bob's
            // remote history holds only the real one.
            clock.advance(milliseconds: 1)
            let real = try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "real"))
            #expect(await aliceInbox.wait(for: 1).map { Self.text($0.message) } == ["real"])
            #expect(try await bob.getRemoteHistoryMessages(.private, targetId: "alice").messages.map(\.messageUId) == [real.messageUId])

            #expect(await failureCode { try await bob.insertOutgoingMessage(.private, targetId: "no such id", content: TextMessage(content: "x")) } == 33003)
            #expect(await failureCode { try await bob.insertIncomingMessage(.private, targetId: "alice", senderUserId: "", content: TextMessage(content: "x")) } == 33003)
            #expect(await failureCode { try await bob.insertOutgoingMessage(.private, targetId: "alice", content: TextMessage(content: "x"), sentTime: -5) } == 33003)
            #expect(await failureCode { try await bob.insertOutgoingMessage(.private, targetId: "alice", content: CommandMessage(name: "n", data: "d")) } == 33003,
                    "a type that is never stored cannot be inserted")
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("an inserted message keeps its extensions and local extra, and sendMessage(messageId:) sends it as the same local message; extra never leaves the device")
    func sendingInsertedMessages() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let (alice, aliceInbox) = try await server.syncedDevice("alice")
            let bob = try await server.connectedClient("bob")
            let draft = try await bob.insertOutgoingMessage(.private, targetId: "alice", content: TextMessage(content: "queued"),
                                                            canIncludeExpansion: true, expansion: ["votes": "0"], extra: "draft #1")
            #expect(draft.canIncludeExpansion && draft.expansion == ["votes": "0"] && draft.extra == "draft #1")
            #expect(await failureCode {
                try await bob.insertOutgoingMessage(.private, targetId: "alice", content: TextMessage(content: "x"), expansion: ["k": "v"])
            } == 34008, "extensions need canIncludeExpansion")
            #expect(try await bob.setMessageExtra(messageId: draft.messageId, value: "edited locally"))
            #expect(try await !bob.setMessageExtra(messageId: 999_999, value: "x"))

            let sent = try await bob.sendMessage(messageId: draft.messageId)
            #expect(sent.messageId == draft.messageId && !sent.messageUId.isEmpty && sent.sentStatus == .sent)
            let local = try #require(try await bob.getMessage(messageId: draft.messageId))
            #expect(local.messageUId == sent.messageUId && local.extra == "edited locally" && local.expansion == ["votes": "0"])
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").count == 1, "the inserted message became the sent one, not a copy")
            let received = try #require(await aliceInbox.wait(for: 1).first?.message)
            #expect(received.messageUId == sent.messageUId && received.expansion == ["votes": "0"] && received.canIncludeExpansion)
            #expect(received.extra.isEmpty, "extra stays on the device that set it")
            let again = try await bob.sendMessage(messageId: draft.messageId)
            #expect(again.messageUId == sent.messageUId, "a sent message is not sent twice")
            #expect(await failureCode { try await bob.sendMessage(messageId: 999_999) } == 33003)
            await alice.disconnect(); await bob.disconnect()
        }
    }

    @Test("unregistered types cannot be sent or inserted (34021); RC: names cannot be registered")
    func registration() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            #expect(await failureCode { _ = try await alice.sendMessage(.private, targetId: "bob", content: NeverRegistered(x: 1)) } == 34021)
            #expect(await failureCode { try await alice.insertOutgoingMessage(.private, targetId: "bob", content: NeverRegistered(x: 1)) } == 34021)
            #expect(await failureCode { try await alice.insertIncomingMessage(.private, targetId: "bob", senderUserId: "bob", content: NeverRegistered(x: 1)) } == 34021)
            #expect(try await alice.getConversation(.private, targetId: "bob") == nil, "nothing was stored")
            #expect(try await alice.getRemoteHistoryMessages(.private, targetId: "bob").messages.isEmpty, "nothing was sent")

            #expect(await failureCode { try await alice.registerMessageType(ReservedName.self) } == 33003)
            try await alice.registerMessageType(TextMessage.self)
            try await alice.registerMessageType(CardMessage.self)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: CardMessage(title: "ok"))
            await alice.disconnect()
        }
    }

    @Test("a type this client does not know is kept as received: stored and counted as its flags say, readable raw")
    func unknownTypeReceived() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            try await alice.registerMessageType(CardMessage.self)
            try await alice.registerMessageType(PingCommand.self)
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())

            _ = try await alice.sendMessage(.private, targetId: "bob", content: CardMessage(title: "卡片 card"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: PingCommand(n: 7))
            let received = await inbox.wait(for: 2)
            let card = try #require(received.first?.message)
            #expect(card.content == nil)
            let unknown = try #require(card.unknownContent)
            #expect(unknown.objectName == "app:card" && unknown.persistentFlag == .persistedAndCounted)
            #expect(try JSONDecoder().decode(CardMessage.self, from: unknown.data) == CardMessage(title: "卡片 card"))
            #expect(received.last?.message.unknownContent?.objectName == "app:ping")

            let history = try await bob.getHistoryMessages(.private, targetId: "alice")
            #expect(history.map(\.objectName) == ["app:card"], "the persisted unknown message is stored, the NONE one is not")
            #expect(history.first?.unknownContent?.data == unknown.data)
            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 1)
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "卡片").isEmpty, "unknown types are not indexed")
            #expect(try await alice.getHistoryMessages(.private, targetId: "bob").first?.unknownContent == nil, "alice knows her type")
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("search: Chinese inside words, English by prefix, by sender, across conversations, and paging by startTime")
    func search() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let alice = try await server.connectedClient("alice")
            let carol = try await server.connectedClient("carol")
            let bob = try await server.connectedClient("bob")
            try await bob.registerMessageType(CardMessage.self)
            try await alice.registerMessageType(CardMessage.self)
            let inbox = EventRecorder(bob.receivedMessages())
            try await Self.send(alice, to: "bob", ["今天天气很好", "Hello World", "say hello to the wormhole", "天很气人"], inbox: inbox, total: 4)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: FileMessage(name: "季度报告.pdf", size: 1, type: "pdf", fileUrl: "f"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: CardMessage(title: "天气预报"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: ImageMessage(thumbnailBase64: "", imageUri: "天气.jpg"))
            #expect(await inbox.wait(for: 7).count == 7)
            let mine = try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "明天天气呢"))
            try await Self.send(carol, to: "bob", ["天气不错", "WORLD cup"], inbox: inbox, total: 9)

            func search(_ keyword: String, in target: String = "alice") async throws -> [String] {
                try await bob.searchMessages(.private, targetId: target, keyword: keyword).map { message in
                    Self.text(message) ?? message.content(as: FileMessage.self)?.name ?? message.content(as: CardMessage.self)?.title ?? "?"
                }
            }
            #expect(try await search("天气") == ["明天天气呢", "天气预报", "今天天气很好"], "newest first; the image is not searchable")
            #expect(try await search("气很") == ["今天天气很好"])
            #expect(try await search("天好").isEmpty, "characters must stand side by side")
            #expect(try await search("报告") == ["季度报告.pdf"], "file names are searchable")
            #expect(try await search("wor") == ["say hello to the wormhole", "Hello World"], "prefix of a word")
            #expect(try await search("HELLO") == ["say hello to the wormhole", "Hello World"], "case-insensitive")
            #expect(try await search("orld").isEmpty, "Latin words match from their start")
            #expect(try await search("hello wor") == ["Hello World"], "a phrase: its words side by side")
            #expect(try await search("to the") == ["say hello to the wormhole"])
            #expect(try await search("!!!").isEmpty)
            #expect(try await search("天气", in: "carol") == ["天气不错"])

            let byAlice = try await bob.searchMessages(.private, targetId: "alice", userId: "alice")
            #expect(byAlice.count == 7 && byAlice.allSatisfy { $0.senderUserId == "alice" })
            #expect(try await bob.searchMessages(.private, targetId: "alice", userId: "bob").map(\.messageUId) == [mine.messageUId])
            #expect(try await bob.searchMessages(.private, targetId: "alice", userId: "carol").isEmpty)

            let across = try await bob.searchConversations(types: [.private], keyword: "天气")
            #expect(across.map(\.conversation.targetId) == ["carol", "alice"], "newest conversation first")
            #expect(across.map(\.matchCount) == [1, 3])
            #expect(across.last?.conversation.latestSenderUserId == "bob")
            let worlds = try await bob.searchConversations(types: [.private], keyword: "world")
            #expect(Set(worlds.map(\.conversation.targetId)) == ["alice", "carol"])
            let files = try await bob.searchConversations(types: [.private], objectNames: [FileMessage.objectName, "app:card"], keyword: "报告")
            #expect(files.map(\.conversation.targetId) == ["alice"] && files.first?.matchCount == 1)
            #expect(try await bob.searchConversations(types: [.private], objectNames: ["RC:TxtMsg"], keyword: "报告").isEmpty)
            #expect(try await bob.searchConversations(types: [.group], keyword: "天气").isEmpty)

            // Paging: each page continues before the last result's sentTime.
            let page1 = try await bob.searchMessages(.private, targetId: "alice", keyword: "天", count: 3)
            let page2 = try await bob.searchMessages(.private, targetId: "alice", keyword: "天", count: 3, startTime: page1[2].sentTime)
            #expect((page1 + page2).compactMap { Self.text($0) ?? $0.content(as: CardMessage.self)?.title }
                    == ["明天天气呢", "天气预报", "天很气人", "今天天气很好"])
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "天", count: 3, startTime: page2[0].sentTime).isEmpty)

            // Bad input.
            for count in [0, 101] {
                #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "alice", keyword: "天", count: count) } == 33003)
                #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "alice", userId: "alice", count: count) } == 33003)
            }
            #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "a b", keyword: "天") } == 33003)
            #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "alice", keyword: "  ") } == 33003)
            #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "alice", keyword: "天", startTime: -1) } == 33003)
            #expect(await failureCode { _ = try await bob.searchMessages(.private, targetId: "alice", userId: "not valid") } == 33003)
            #expect(await failureCode { _ = try await bob.searchConversations(types: [.private], keyword: "") } == 33003)
            for client in [alice, bob, carol] { await client.disconnect() }
        }
    }

    @Test("the search index follows inserts, deletes, clears and content replaced in place")
    func searchIndexInStep() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let bob = try await server.connectedClient("bob")
            let first = try await bob.insertIncomingMessage(.private, targetId: "alice", senderUserId: "alice", content: TextMessage(content: "撤回的消息"))
            let second = try await bob.insertIncomingMessage(.private, targetId: "alice", senderUserId: "alice", content: TextMessage(content: "留下的消息"))
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "消息").map(\.messageId) == [second.messageId, first.messageId])

            // Replaced in place, as a recall does: the old words are gone, the new ones found.
            let store = try await bob.openStore()
            #expect(try await store.replaceContent(messageId: first.messageId, objectName: CardMessage.objectName,
                                             data: try CardMessage(title: "替换").encode(), flags: .isPersisted))
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "撤回").isEmpty)
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "替换").isEmpty, "card is not registered on bob")
            try await bob.registerMessageType(CardMessage.self)
            #expect(try await store.replaceContent(messageId: first.messageId, objectName: CardMessage.objectName, data: try CardMessage(title: "替换").encode()))
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "替换").map(\.messageId) == [first.messageId])
            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 1, "the replaced message no longer counts")
            #expect(try await store.replaceContent(messageId: 999_999, objectName: "RC:TxtMsg", data: Data("{}".utf8)) == false)

            #expect(try await bob.deleteMessages(ids: [second.messageId]))
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "消息").isEmpty)
            #expect(try await bob.clearMessages(.private, targetId: "alice"))
            #expect(try await bob.searchMessages(.private, targetId: "alice", keyword: "替换").isEmpty)
            let rows = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message_search") }
            #expect(rows == 0, "nothing is left in the index")
            await bob.disconnect()
        }
    }

    @Test("local deletes keep the conversation's latest message and counts right; the server keeps its copy")
    func localDeletes() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["alice", "bob"])
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            try await Self.send(alice, to: "bob", ["one", "two", "three"], inbox: inbox, total: 3)
            var history = try await bob.getHistoryMessages(.private, targetId: "alice")

            #expect(try await bob.deleteMessages(ids: [history[0].messageId]))
            var conversation = try #require(try await bob.getConversation(.private, targetId: "alice"))
            #expect(conversation.latestMessageId == history[1].messageId && conversation.sentTime == history[1].sentTime)
            #expect(conversation.unreadMessageCount == 2)
            #expect(try await bob.getTotalUnreadCount() == 2)
            #expect(try await bob.deleteMessages(ids: [history[0].messageId]) == false, "already gone")
            #expect(await failureCode { try await bob.deleteMessages(ids: []) } == 33003)

            // Deleting up to a time (the local part of clearHistoryMessages) keeps later messages.
            history = try await bob.getHistoryMessages(.private, targetId: "alice")
            let store = try await bob.openStore()
            #expect(try await store.deleteMessages(type: .private, targetId: "alice", channelId: "", sentAtOrBefore: history[1].sentTime) == 1)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").compactMap(Self.text) == ["two"])
            #expect(try await bob.getUnreadCount(.private, targetId: "alice") == 1)

            #expect(try await bob.clearMessages(.private, targetId: "alice"))
            conversation = try #require(try await bob.getConversation(.private, targetId: "alice"), "the conversation stays in the list")
            #expect(conversation.latestMessageId == 0 && conversation.unreadMessageCount == 0)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").isEmpty)
            #expect(try await bob.getRemoteHistoryMessages(.private, targetId: "alice").messages.count == 3, "the server keeps them")
            #expect(try await bob.clearMessages(.private, targetId: "nobody") == false)

            // A deleted mention no longer marks the group.
            let mention = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "@bob", mentionedInfo: MentionedInfo(type: .users, userIdList: ["bob"])))
            _ = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "after"))
            #expect(await inbox.wait(for: 5).count == 5)
            let local = try #require(try await bob.getHistoryMessages(.group, targetId: "g1").first { $0.messageUId == mention.messageUId })
            #expect(try await bob.getConversation(.group, targetId: "g1")?.mentionedCount == 1)
            try await bob.deleteMessages(ids: [local.messageId])
            let group = try #require(try await bob.getConversation(.group, targetId: "g1"))
            #expect(group.mentionedCount == 0 && group.unreadMessageCount == 1)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("a database from before search existed is indexed when it is opened")
    func indexBuiltOnUpgrade() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imlib-upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        do {
            let old = try DatabasePool(path: directory.appendingPathComponent("imlib.sqlite").path)
            try LocalStore.migrator.migrate(old, upTo: "v3-conversation-state")
            try await old.write { db in
                try db.execute(sql: """
                    INSERT INTO messages (conv_type, target_id, sender_id, direction, object_name, content, flags, client_msg_id,
                        sent_time, received_time, sent_status, is_read)
                    VALUES (1, 'alice', 'alice', 2, 'RC:TxtMsg', ?, 3, 'c1', 1000, 1000, 40, 0)
                    """, arguments: [try TextMessage(content: "升级以前的消息").encode()])
            }
        }
        let store = try LocalStore(directory: directory, userId: "bob", registry: MessageTypeRegistry())
        let found = try await store.searchMessages(type: .private, targetId: "alice", channelId: "", keyword: "以前", count: 10, before: 0)
        #expect(found.compactMap(Self.text) == ["升级以前的消息"])
    }

    @Test("local calls before connect fail with 33001")
    func beforeConnect() async throws {
        try await withTestServer(try await Self.startServer()) { server in
            let client = server.client()
            #expect(await failureCode { _ = try await client.getTotalUnreadCount() } == 33001)
            #expect(await failureCode { _ = try await client.searchMessages(.private, targetId: "a", keyword: "x") } == 33001)
            #expect(await failureCode { try await client.insertOutgoingMessage(.private, targetId: "a", content: TextMessage(content: "x")) } == 33001)
        }
    }
}
