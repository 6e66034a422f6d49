import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import Logging
import IMServerTesting
import Testing

@Suite("Group chat end to end")
struct GroupChatTests {
    /// Creates (or extends) a group through the Server API.
    static func createGroup(_ server: TestServer, _ groupId: String, _ members: [String]) async throws {
        let form = (members.map { "userId=\($0)" } + ["groupId=\(groupId)", "groupName=\(groupId)"]).joined(separator: "&")
        let (status, body) = try await server.api.post("/group/create.json", rawForm: form)
        #expect(status == 200 && body["code"] as? Int == 200, "create \(groupId): \(body)")
    }

    /// Creates group g1 with these members and connects each of them, in order.
    static func connectedGroup(_ server: TestServer, _ members: [String]) async throws -> [IMClient] {
        try await createGroup(server, "g1", members)
        var clients: [IMClient] = []
        for member in members { clients.append(try await server.connectedClient(member)) }
        return clients
    }

    static func text(_ message: Message) -> String? { message.content(as: TextMessage.self)?.content }

    /// A raw protocol session of a user (web platform) that records every MESSAGE frame it is
    /// pushed, duplicates included (IMLib's local store would hide them). It syncs once, so the
    /// server releases live messages to it.
    static func rawListener(_ server: TestServer, _ user: String) async throws -> (WireConnection, EventRecorder<Im_Message>) {
        let (stream, continuation) = AsyncStream<Im_Message>.makeStream()
        let connection = WireConnection(url: server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws",
                                        logger: Logger(label: "raw"),
                                        onPush: { _, frame in
                                            if frame.op == .message, let message = try? frame.body(Im_Message.self) { continuation.yield(message) }
                                        },
                                        onClose: { _, _ in continuation.finish() })
        let recorder = EventRecorder(stream)
        // The token first: the server closes a socket that sends no CONNECT within its handshake timeout.
        let token = try await server.token(user)
        try await connection.open()
        var connect = Im_ConnectRequest()
        connect.appKey = server.app.appKey
        connect.token = token
        connect.platform = .web
        _ = try await connection.request(.connect, connect, timeout: .seconds(10))
        var more = true
        var since: UInt64 = 0
        while more {
            var sync = Im_SyncRequest()
            sync.since = since
            let reply = try await connection.request(.sync, sync, timeout: .seconds(10)).body(Im_SyncReply.self)
            more = reply.morePackages
            since = reply.watermark
        }
        return (connection, recorder)
    }

    /// Sends and returns the error code the send failed with (nil on success).
    static func sendCode(_ client: IMClient, _ groupId: String, _ text: String) async -> Int? {
        do {
            _ = try await client.sendMessage(.group, targetId: groupId, content: TextMessage(content: text))
            return nil
        } catch let error as SendMessageError {
            return error.code.rawValue
        } catch {
            return -1
        }
    }

    static func historyTexts(_ client: IMClient, _ groupId: String) async throws -> [String] {
        try await client.getRemoteHistoryMessages(.group, targetId: groupId, count: 100).messages.compactMap(text)
    }

    @Test("a member's message reaches every other member once, and the sender's other device; a non-member gets 22406")
    func fanOutAndMembership() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob", "carol"])
            let ann = try await server.connectedClient("ann")
            let annPhone = try await server.connectedClient("ann", platform: .iOS)
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let dave = try await server.connectedClient("dave")
            let inboxes = [ann, annPhone, bob, carol, dave].map { EventRecorder($0.receivedMessages()) }
            let (carolWeb, carolFrames) = try await Self.rawListener(server, "carol")

            let sent = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "hello group"))
            #expect(sent.conversationType == .group && sent.targetId == "g1" && !sent.messageUId.isEmpty)
            for (index, name) in [(1, "ann's phone"), (2, "bob"), (3, "carol")] {
                let event = try #require(await inboxes[index].wait(for: 1).first, "\(name) got it")
                #expect(event.message.messageUId == sent.messageUId)
                #expect(event.message.conversationType == .group && event.message.targetId == "g1")
                #expect(event.message.senderUserId == "ann")
            }
            #expect(inboxes[1].items.first?.message.direction == .send, "the phone sees its user's own message as sent")

            #expect(await Self.sendCode(dave, "g1", "let me in") == ErrorCode.notInGroup.rawValue)
            #expect(await Self.sendCode(dave, "no-such-group", "anyone?") == ErrorCode.notInGroup.rawValue)
            // A later message reaches bob second: nothing from dave came in between, and ann's own
            // sending device never hears its own messages.
            let second = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "second"))
            #expect(await inboxes[2].wait(for: 1).count == 1)
            #expect(await inboxes[3].wait(for: 2).map(\.message.messageUId) == [sent.messageUId, second.messageUId])
            #expect(await inboxes[0].wait(for: 1).map(\.message.messageUId) == [second.messageUId])
            #expect(inboxes[4].items.isEmpty, "dave, not a member, received nothing")
            // Frames on the wire, before any client-side deduplication: each message exactly once.
            #expect(await carolFrames.first { $0.messageUid == second.messageUId } != nil)
            #expect(carolFrames.items.map(\.messageUid) == [sent.messageUId, second.messageUId])
            await carolWeb.close()
            #expect(try await Self.historyTexts(carol, "g1") == ["second", "hello group"])

            let conversation = try #require(try await carol.getConversation(.group, targetId: "g1"))
            #expect(conversation.unreadMessageCount == 2)
            #expect(try await carol.getConversationList(types: [.group]).map(\.targetId) == ["g1"])
            for client in [ann, annPhone, bob, carol, dave] { await client.disconnect() }
        }
    }

    @Test("member mutes with a duration, mutes in every group, and a muted group with its whitelist give 22408")
    func mutes() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let members = try await Self.connectedGroup(server, ["ann", "bob", "carol"])
            let ann = members[0], bob = members[1], carol = members[2]
            let bobInbox = EventRecorder(bob.receivedMessages())

            #expect(try await server.api.post("/group/user/gag/add.json", form: ["userId": "bob", "groupId": "g1", "minute": "5"]).0 == 200)
            #expect(await Self.sendCode(bob, "g1", "muted?") == ErrorCode.mutedInGroup.rawValue)
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "bob still hears"))
            #expect(await bobInbox.wait(for: 1).compactMap { Self.text($0.message) } == ["bob still hears"])
            clock.advance(milliseconds: 5 * 60_000 + 1)
            #expect(await Self.sendCode(bob, "g1", "free again") == nil, "the mute ended after 5 minutes")

            #expect(try await server.api.post("/group/user/gag/add.json", form: ["userId": "carol", "minute": "0"]).0 == 200)
            #expect(await Self.sendCode(carol, "g1", "muted everywhere") == ErrorCode.mutedInGroup.rawValue)
            #expect(try await server.api.post("/group/user/gag/rollback.json", form: ["userId": "carol"]).0 == 200)
            #expect(await Self.sendCode(carol, "g1", "unmuted") == nil)

            #expect(try await server.api.post("/group/ban/add.json", form: ["groupId": "g1"]).0 == 200)
            #expect(try await server.api.post("/group/user/ban/whitelist/add.json", form: ["groupId": "g1", "userId": "ann"]).0 == 200)
            #expect(await Self.sendCode(bob, "g1", "group muted") == ErrorCode.mutedInGroup.rawValue)
            let carolInbox = EventRecorder(carol.receivedMessages())
            #expect(await Self.sendCode(ann, "g1", "whitelisted speaks") == nil)
            #expect(await carolInbox.wait(for: 1).compactMap { Self.text($0.message) } == ["whitelisted speaks"])
            // The whitelist opens a muted group, not a member's own mute.
            #expect(try await server.api.post("/group/user/gag/add.json", form: ["userId": "ann", "groupId": "g1", "minute": "1"]).0 == 200)
            #expect(await Self.sendCode(ann, "g1", "own mute") == ErrorCode.mutedInGroup.rawValue)
            #expect(try await server.api.post("/group/ban/rollback.json", form: ["groupId": "g1"]).0 == 200)
            #expect(await Self.sendCode(bob, "g1", "group open") == nil)
            let stored = try await server.core.store.history(appId: server.app.id, conversationKey: groupConversationKey("g1"), recordTime: 0,
                                                             count: 100, ascending: true, viewer: nil)
            let refused: Set = ["muted?", "muted everywhere", "group muted", "own mute"]
            let texts = stored.messages.compactMap { try? TextMessage(data: $0.content).content }
            #expect(texts == ["bob still hears", "free again", "unmuted", "whitelisted speaks", "group open"])
            #expect(refused.isDisjoint(with: texts), "refused sends stored nothing")
            for client in [ann, bob, carol] { await client.disconnect() }
        }
    }

    @Test("offline members catch up in order; new members see only later messages; leavers stop receiving")
    func offlineCatchUpAndJoinTime() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.session.clientSendsPerSecond = 1000
            config.messaging.syncPageSize = 4
        }) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob"])
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "before carol"))
            try await Self.createGroup(server, "g1", ["carol"])
            var sent: [String] = []
            for index in 0..<10 {
                sent.append(try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "m\(index)")).messageUId)
            }
            // bob was offline for all eleven, carol joined after the first.
            let bob = server.client()
            let bobInbox = EventRecorder(bob.receivedMessages())
            try await bob.connect(token: try await server.token("bob"))
            let bobEvents = await bobInbox.wait(for: 11)
            #expect(bobEvents.count == 11)
            #expect(bobEvents.compactMap { Self.text($0.message) } == ["before carol"] + (0..<10).map { "m\($0)" })
            #expect(bobEvents.allSatisfy { $0.offline })
            #expect(bobEvents.last?.left == 0 && bobEvents.last?.hasPackage == false)
            #expect(bobEvents.dropLast().contains { $0.hasPackage }, "pages of 4")

            let (carol, carolInbox) = try await server.syncedDevice("carol")
            #expect(carolInbox.items.map(\.message.messageUId) == sent, "only the messages sent after carol joined")
            #expect(try await Self.historyTexts(carol, "g1") == (0..<10).reversed().map { "m\($0)" })

            #expect(try await server.api.post("/group/quit.json", form: ["userId": "carol", "groupId": "g1"]).0 == 200)
            #expect(await Self.sendCode(carol, "g1", "still here?") == ErrorCode.notInGroup.rawValue)
            let bobLive = EventRecorder(bob.receivedMessages())
            let carolLive = EventRecorder(carol.receivedMessages())
            let afterQuit = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "after carol left"))
            #expect(await bobLive.wait(for: 1).first?.message.messageUId == afterQuit.messageUId)
            // A private message sent afterwards reaches carol after anything of the group would have.
            let marker = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "marker"))
            #expect(await carolLive.wait(for: 1).map(\.message.messageUId) == [marker.messageUId], "carol got nothing of the group live")
            await carol.disconnect()
            let (carolPhone, carolAgain) = try await server.syncedDevice("carol", platform: .iOS)
            #expect(!carolAgain.items.contains { $0.message.messageUId == afterQuit.messageUId }, "a member who left gets nothing sent afterwards by sync either")
            await carolPhone.disconnect()
            for client in [ann, bob, carol] { await client.disconnect() }
        }
    }

    @Test("group messages older than the offline retention are not synced; younger ones are")
    func offlineRetention() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in config.messaging.offlineRetentionDays = 1 }) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob"])
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "expires"))
            clock.advance(milliseconds: 86_400_000 + 1)
            let fresh = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "fresh"))
            let (bob, inbox) = try await server.syncedDevice("bob")
            #expect(await inbox.wait(for: 1).map(\.message.messageUId) == [fresh.messageUId], "the day-old message was not synced")
            #expect(try await Self.historyTexts(bob, "g1") == ["fresh", "expires"], "cloud history keeps both")
            await ann.disconnect()
            await bob.disconnect()
        }
    }

    @Test("with pre-join history on, a new member reads the last N earlier messages in cloud history")
    func preJoinHistory() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.session.clientSendsPerSecond = 1000
            config.groups.preJoinHistory = 2
        }) { server in
            let members = try await Self.connectedGroup(server, ["ann"])
            let ann = members[0]
            for index in 0..<4 {
                _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "old\(index)"))
            }
            try await Self.createGroup(server, "g1", ["bob"])
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "new"))
            let bob = try await server.connectedClient("bob")
            #expect(try await Self.historyTexts(bob, "g1") == ["new", "old3", "old2"])
            let local = try await bob.getHistoryMessages(.group, targetId: "g1")
            #expect(local.compactMap(Self.text) == ["new"], "offline sync still starts at joining")
            await ann.disconnect()
            await bob.disconnect()
        }
    }

    @Test("a directional message reaches only the listed members, live, after reconnecting and in history")
    func directionalMessages() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let members = try await Self.connectedGroup(server, ["ann", "bob", "carol"])
            let ann = members[0], bob = members[1], carol = members[2]
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())

            let secret = try await ann.sendDirectionalMessage(.group, targetId: "g1", toUserIds: ["bob"], content: TextMessage(content: "just bob"))
            let open = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "everyone"))
            #expect(await bobInbox.wait(for: 2).map(\.message.messageUId) == [secret.messageUId, open.messageUId])
            #expect(await carolInbox.wait(for: 1).map(\.message.messageUId) == [open.messageUId], "carol got only the open message")

            #expect(try await Self.historyTexts(bob, "g1") == ["everyone", "just bob"])
            #expect(try await Self.historyTexts(carol, "g1") == ["everyone"])
            #expect(try await Self.historyTexts(ann, "g1") == ["everyone", "just bob"], "the sender sees her own")

            // A new device of carol syncs from scratch: still nothing meant for bob.
            let (carolPhone, phoneInbox) = try await server.syncedDevice("carol", platform: .iOS)
            #expect(phoneInbox.items.map(\.message.messageUId) == [open.messageUId])

            do {
                _ = try await ann.sendDirectionalMessage(.group, targetId: "g1", toUserIds: ["zed"], content: TextMessage(content: "outsider"))
                Issue.record("a directional message to a non-member was accepted")
            } catch let error as SendMessageError {
                #expect(error.code == .invalidParameter)
            }

            // The Server API sends directional messages with toUserId.
            let (status, body) = try await server.api.post("/message/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=g1&toUserId=carol&objectName=RC%3ATxtMsg&content=%7B%22content%22%3A%22api%20to%20carol%22%7D")
            #expect(status == 200, "\(body)")
            #expect(await phoneInbox.wait(for: 2).last.map { Self.text($0.message) } == "api to carol")
            let after = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "after"))
            #expect(await bobInbox.wait(for: 3).map(\.message.messageUId) == [secret.messageUId, open.messageUId, after.messageUId],
                    "bob did not get the message for carol")
            for client in [ann, bob, carol, carolPhone] { await client.disconnect() }
        }
    }

    @Test("mentions mark the mentioned members' conversations, live and after offline sync, until read")
    func mentions() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob", "carol", "dave"])
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())

            let mention = MentionedInfo(type: .users, userIdList: ["bob", "dave"], mentionedContent: "ann mentioned you")
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "@bob @dave look", mentionedInfo: mention))
            #expect(await bobInbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.mentionedInfo == mention)
            #expect(await carolInbox.wait(for: 1).count == 1)
            let bobConversation = try #require(try await bob.getConversation(.group, targetId: "g1"))
            #expect(bobConversation.hasUnreadMentioned && bobConversation.mentionedCount == 1)
            #expect(try await carol.getConversation(.group, targetId: "g1")?.hasUnreadMentioned == false)

            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "@all", mentionedInfo: MentionedInfo(type: .all)))
            #expect(await carolInbox.wait(for: 2).count == 2)
            #expect(try await carol.getConversation(.group, targetId: "g1")?.mentionedCount == 1)
            #expect(await bobInbox.wait(for: 2).count == 2)
            #expect(try await bob.getConversation(.group, targetId: "g1")?.mentionedCount == 2)
            #expect(try await ann.getConversation(.group, targetId: "g1")?.hasUnreadMentioned == false, "the sender is not mentioned by her own @all")

            // dave was offline for both: the mentions survive offline sync.
            let dave = try await server.connectedClient("dave")
            let daveConversation = try #require(try await dave.getConversation(.group, targetId: "g1"))
            #expect(daveConversation.mentionedCount == 2 && daveConversation.unreadMessageCount == 2)

            #expect(try await bob.clearMessagesUnreadStatus(.group, targetId: "g1"))
            let cleared = try #require(try await bob.getConversation(.group, targetId: "g1"))
            #expect(!cleared.hasUnreadMentioned && cleared.unreadMessageCount == 0)

            // The Server API checks that an @ message carries its mention.
            let (status, body) = try await server.api.post("/message/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=g1&isMentioned=1&objectName=RC%3ATxtMsg&content=%7B%22content%22%3A%22no%20mention%22%7D")
            #expect(status == 400 && body["code"] as? Int == 1002)
            for client in [ann, bob, carol, dave] { await client.disconnect() }
        }
    }

    @Test("read receipts: the sender asks, members answer in batches, the sender learns who read, live, offline and in pages")
    func readReceipts() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let members = try await Self.connectedGroup(server, ["ann", "bob", "carol"])
            let ann = members[0], bob = members[1], carol = members[2]
            let annReceipts = EventRecorder(ann.readReceiptEvents())
            let bobReceipts = EventRecorder(bob.readReceiptEvents())
            let carolReceipts = EventRecorder(carol.readReceiptEvents())
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())

            let first = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "please read"))
            let second = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "this too"))
            try await ann.sendReadReceiptRequest(first)
            try await ann.sendReadReceiptRequest(second)
            let expected: [ReadReceiptEvent] = [first, second].map { .request(conversationType: .group, targetId: "g1", messageUId: $0.messageUId) }
            #expect(await bobReceipts.wait(for: 2) == expected)
            #expect(await carolReceipts.wait(for: 2) == expected)
            let marker = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "marker"))
            let bobEvents = await bobInbox.wait(for: 3).map(\.message)
            #expect(bobEvents.map(\.messageUId) == [first.messageUId, second.messageUId, marker.messageUId],
                    "the requests are not delivered as messages")
            let bobMessages = Array(bobEvents.prefix(2))
            let bobLocal = try #require(try await bob.getMessage(messageId: bobMessages[0].messageId))
            #expect(bobLocal.readReceiptInfo.isReceiptRequestMessage)

            // Only the sender may ask, and only in groups.
            await #expect(throws: IMError.self) { try await bob.sendReadReceiptRequest(bobMessages[0]) }
            let privateMessage = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "dm"))
            await #expect(throws: IMError.self) { try await ann.sendReadReceiptRequest(privateMessage) }

            try await bob.sendReadReceiptResponse(.group, targetId: "g1", messages: bobMessages)
            let bobRead = await annReceipts.wait(for: 2)
            #expect(Set(bobRead.compactMap { event -> String? in
                guard case .response(_, "g1", let uid, let readers) = event, readers.keys.sorted() == ["bob"] else { return nil }
                return uid
            }) == [first.messageUId, second.messageUId])
            #expect(try await bob.getMessage(messageId: bobMessages[0].messageId)?.readReceiptInfo.hasRespond == true)

            // ann is away while carol reads: the read reaches her after she reconnects.
            await ann.disconnect()
            let carolMessages = Array(await carolInbox.wait(for: 3).map(\.message).prefix(2))
            try await carol.sendReadReceiptResponse(.group, targetId: "g1", messages: [carolMessages[0]])
            try await carol.sendReadReceiptResponse(.group, targetId: "g1", messages: [carolMessages[0]])  // again: no new read
            let annAgain = EventRecorder(ann.readReceiptEvents())
            try await ann.connect(token: try await server.token("ann"))
            let missed = try #require(await annAgain.wait(for: 1).first)
            guard case .response(.group, "g1", let missedUid, let missedReaders) = missed else {
                Issue.record("expected carol's read, got \(missed)")
                return
            }
            #expect(missedUid == first.messageUId && missedReaders.keys.sorted() == ["carol"])
            #expect(try await ann.getReadReceiptReaders(messageUId: first.messageUId).keys.sorted() == ["bob", "carol"])
            #expect(try await ann.getMessage(messageId: first.messageId)?.readReceiptInfo.readerCount == 2)

            // The full reader list, in pages.
            let page1 = try await ann.getMessageReadUsers(messageUId: first.messageUId, count: 1)
            #expect(page1.total == 2 && page1.users.map(\.userId) == ["bob"] && page1.nextPageToken != nil)
            let page2 = try await ann.getMessageReadUsers(messageUId: first.messageUId, count: 1, pageToken: page1.nextPageToken)
            #expect(page2.users.map(\.userId) == ["carol"] && page2.nextPageToken == nil)
            await #expect(throws: IMError.self) { try await bob.getMessageReadUsers(messageUId: first.messageUId) }
            for client in [ann, bob, carol] { await client.disconnect() }
        }
    }

    @Test("dismissing a group tells its members, online and offline, stops sending, and keeps its history readable")
    func dismiss() async throws {
        try await withTestServer(try await TestServer.start { config in config.groups.preJoinHistory = 10 }) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob"])
            let ann = try await server.connectedClient("ann")
            let annInbox = EventRecorder(ann.receivedMessages())
            _ = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "last words"))
            #expect(try await server.api.post("/group/dismiss.json", form: ["userId": "admin", "groupId": "g1"]).0 == 200)
            let notice = try #require(await annInbox.wait(for: 1).first?.message)
            #expect(notice.objectName == GroupService.notificationObjectName && notice.targetId == "g1")
            #expect(String(data: notice.contentData, encoding: .utf8)?.contains("\"operation\":\"Dismiss\"") == true)
            #expect(await Self.sendCode(ann, "g1", "anyone?") == ErrorCode.notInGroup.rawValue)

            let bob = server.client()
            let bobInbox = EventRecorder(bob.receivedMessages())
            try await bob.connect(token: try await server.token("bob"))
            #expect(await bobInbox.wait(for: 2).map(\.message.objectName) == [TextMessage.objectName, GroupService.notificationObjectName])
            #expect(try await Self.historyTexts(bob, "g1") == ["last words"])
            let (_, members) = try await server.api.post("/group/user/query.json", form: ["groupId": "g1"])
            #expect((members["users"] as? [Any])?.isEmpty == true, "the dismissed group has no members for the Server API")
            let (refused, refusedBody) = try await server.api.post("/message/group/publish.json", form: [
                "fromUserId": "admin", "toGroupId": "g1", "objectName": "RC:TxtMsg", "content": #"{"content":"to nobody"}"#])
            #expect(refused == 400 && refusedBody["code"] as? Int == 1002, "publishing to a dismissed group is refused")
            #expect(try await server.api.post("/group/refresh.json", form: ["groupId": "g1", "groupName": "renamed"]).0 == 200)
            #expect(try await Self.historyTexts(bob, "g1") == ["last words"], "renaming did not bring the group back")
            // Creating it again starts a new group: the old members are not in it, and its history,
            // even with pre-join history on, does not reach into the old group.
            try await Self.createGroup(server, "g1", ["carol"])
            #expect(await Self.sendCode(bob, "g1", "back?") == ErrorCode.notInGroup.rawValue)
            let carol = try await server.connectedClient("carol")
            #expect(try await Self.historyTexts(carol, "g1").isEmpty)
            await carol.disconnect()
            await ann.disconnect()
            await bob.disconnect()
        }
    }

    @Test("Server API group publish: several groups, include-sender, status messages, the 20/s limit and recall")
    func serverAPIPublish() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            try await Self.createGroup(server, "g1", ["ann", "bob"])
            try await Self.createGroup(server, "g2", ["bob"])
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let annInbox = EventRecorder(ann.receivedMessages())
            let bobInbox = EventRecorder(bob.receivedMessages())

            let (status, body) = try await server.api.post("/message/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=g1&toGroupId=g2&objectName=RC%3ATxtMsg&content=%7B%22content%22%3A%22from%20the%20server%22%7D&isIncludeSender=1")
            #expect(status == 200, "\(body)")
            let uids = (body["messageUIDs"] as? [[String: Any]] ?? []).compactMap { $0["groupId"] as? String }
            #expect(uids == ["g1", "g2"])
            #expect(await bobInbox.wait(for: 2).map(\.message.targetId) == ["g1", "g2"])
            #expect(await annInbox.wait(for: 1).first?.message.direction == .send, "isIncludeSender=1 reaches the sender's devices")

            // Status messages: online members only, never stored.
            #expect(try await server.api.post("/statusmessage/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=g1&objectName=App%3ATyping&content=%7B%7D").0 == 200)
            #expect(await bobInbox.wait(for: 3).last?.message.objectName == "App:Typing")
            try await Self.createGroup(server, "g1", ["carol"])
            let (carol, carolInbox) = try await server.syncedDevice("carol")
            let carolRecalls = EventRecorder(carol.recalledMessages())
            #expect(carolInbox.items.isEmpty)

            // 20 group messages per second per app; each group counts.
            var accepted = 2
            while accepted < 20 {
                #expect(try await server.api.post("/message/group/publish.json", form: [
                    "fromUserId": "ann", "toGroupId": "g2", "objectName": "RC:TxtMsg", "content": #"{"content":"n"}"#]).0 == 200)
                accepted += 1
            }
            let (limited, limitBody) = try await server.api.post("/message/group/publish.json", form: [
                "fromUserId": "ann", "toGroupId": "g2", "objectName": "RC:TxtMsg", "content": #"{"content":"over"}"#])
            #expect(limited == 429 && limitBody["code"] as? Int == 1008)
            clock.advance(milliseconds: 1000)
            let (_, ok) = try await server.api.post("/message/group/publish.json", form: [
                "fromUserId": "ann", "toGroupId": "g1", "objectName": "RC:TxtMsg", "content": #"{"content":"recall me"}"#])
            let uid = try #require((ok["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String)
            #expect(await carolInbox.wait(for: 1).first?.message.messageUId == uid)

            let (recalled, recallBody) = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "ann", "conversationType": "3", "targetId": "g1", "messageUID": uid])
            #expect(recalled == 200, "\(recallBody)")
            #expect(await carolRecalls.wait(for: 1).first?.messageUId == uid)
            #expect(try await server.core.store.message(appId: server.app.id, uid: uid)?.objectName == RecallNotificationMessage.objectName)
            let g1Before = try await server.core.store.history(appId: server.app.id, conversationKey: groupConversationKey("g1"), recordTime: 0,
                                                               count: 100, ascending: true, viewer: nil).messages.count
            let (outsider, _) = try await server.api.post("/message/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=g1&toGroupId=g2&toUserId=carol&objectName=RC%3ATxtMsg&content=%7B%22content%22%3A%22x%22%7D")
            #expect(outsider == 400, "carol is not in g2")
            #expect(try await server.core.store.history(appId: server.app.id, conversationKey: groupConversationKey("g1"), recordTime: 0,
                                                        count: 100, ascending: true, viewer: nil).messages.count == g1Before,
                    "nothing was sent to g1 either")
            let (tooMany, _) = try await server.api.post("/message/group/publish.json", rawForm:
                "fromUserId=ann&toGroupId=a&toGroupId=b&toGroupId=c&toGroupId=d&objectName=RC%3ATxtMsg&content=%7B%7D")
            #expect(tooMany == 400)
            for client in [ann, bob, carol] { await client.disconnect() }
        }
    }
}
