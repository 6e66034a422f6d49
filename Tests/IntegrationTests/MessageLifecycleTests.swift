import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

/// Recall, remote delete, read receipts and read status, typing, extensions and persistent flags,
/// between real IMLib clients and a real server; several tests use a second device of a user.
@Suite("Message lifecycle")
struct MessageLifecycleTests {
    static func text(_ message: Message?) -> String? { message?.content(as: TextMessage.self)?.content }

    /// Starts a server whose clock the test moves (heartbeats never expire under it).
    static func server(clock: ManualClock? = nil, configure: (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        try await TestServer.start(clock: clock ?? SystemClock()) { config in
            config.session.heartbeatIntervalSeconds = 3600
            config.session.clientSendsPerSecond = 1000
            configure(&config)
        }
    }

    @Test("recall replaces the message for every device, online or offline at the time, and in history")
    func recall() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice", platform: .iOS)
            let aliceDesk = try await server.connectedClient("alice", platform: .macOS)
            let bob = try await server.connectedClient("bob", platform: .iOS)
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobDesk = try await server.connectedClient("bob", platform: .macOS)
            let bobDeskInbox = EventRecorder(bobDesk.receivedMessages())

            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "oops"))
            let kept = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "kept"))
            #expect(await bobInbox.wait(for: 2).count == 2)
            #expect(await bobDeskInbox.wait(for: 2).count == 2)
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 2)
            await bobDesk.disconnect()

            let bobRecalls = EventRecorder(bob.recalledMessages())
            let aliceDeskRecalls = EventRecorder(aliceDesk.recalledMessages())
            let recalled = try await alice.recallMessage(sent)
            let notification = try #require(recalled.content(as: RecallNotificationMessage.self))
            #expect(notification.operatorId == "alice" && notification.originalObjectName == TextMessage.objectName)
            #expect(recalled.messageId == sent.messageId && recalled.messageUId == sent.messageUId)
            #expect(try await alice.getMessage(messageId: sent.messageId)?.objectName == RecallNotificationMessage.objectName)

            let bobSide = try #require(await bobRecalls.wait(for: 1).first)
            #expect(bobSide.messageUId == sent.messageUId && bobSide.objectName == RecallNotificationMessage.objectName)
            #expect(bobSide.content(as: RecallNotificationMessage.self)?.originalObjectName == TextMessage.objectName)
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 1, "a recalled unread message no longer counts")
            #expect(await aliceDeskRecalls.wait(for: 1).first?.messageUId == sent.messageUId, "the sender's other device too")

            // Bob's desktop was offline: at its next connect the message is a recall notification.
            let bobDeskRecalls = EventRecorder(bobDesk.recalledMessages())
            let synced = EventRecorder(bobDesk.offlineMessageSyncCompleted())
            try await bobDesk.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            #expect(await bobDeskRecalls.wait(for: 1).first?.messageUId == sent.messageUId)
            let deskHistory = try await bobDesk.getHistoryMessages(.private, targetId: "alice")
            #expect(deskHistory.map(\.objectName) == [TextMessage.objectName, RecallNotificationMessage.objectName])
            #expect(Self.text(deskHistory.first) == "kept")

            // A new device never sees the original, and cloud history holds the notification.
            let (_, fresh) = try await server.syncedDevice("bob", platform: .web)
            #expect(fresh.items.map(\.message.objectName) == [RecallNotificationMessage.objectName, TextMessage.objectName])
            let remote = try await bob.getRemoteHistoryMessages(.private, targetId: "alice", order: .ascending)
            #expect(remote.messages.map(\.objectName) == [RecallNotificationMessage.objectName, TextMessage.objectName])
            #expect(remote.messages.last?.messageUId == kept.messageUId)
        }
    }

    @Test("recalling a group message reaches the members it was sent to, and a directional one only its members")
    func groupRecall() async throws {
        try await withTestServer(try await Self.server()) { server in
            let clients = try await GroupChatTests.connectedGroup(server, ["alice", "bob", "carol"])
            let (alice, bob, carol) = (clients[0], clients[1], clients[2])
            let bobRecalls = EventRecorder(bob.recalledMessages())
            let carolRecalls = EventRecorder(carol.recalledMessages())
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())
            let everyone = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "to all"))
            let toBob = try await alice.sendDirectionalMessage(.group, targetId: "g1", toUserIds: ["bob"], content: TextMessage(content: "to bob"))
            _ = await bobInbox.wait(for: 2)
            _ = await carolInbox.wait(for: 1)
            try await alice.recallMessage(toBob)
            try await alice.recallMessage(everyone)
            #expect(await bobRecalls.wait(for: 2).map(\.messageUId) == [toBob.messageUId, everyone.messageUId])
            #expect(await carolRecalls.wait(for: 1).map(\.messageUId) == [everyone.messageUId])
            let marker = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "marker"))
            #expect(await carolInbox.wait(for: 2).last?.message.messageUId == marker.messageUId)
            #expect(carolRecalls.items.count == 1, "carol never hears of the directional message")
            // Bob's copy of the marker is stored before the count is read (carol's arriving says
            // nothing of bob's).
            #expect(await bobInbox.wait(for: 3).last?.message.messageUId == marker.messageUId)
            #expect(try await bob.getConversation(.group, targetId: "g1")?.unreadMessageCount == 1)
            // A member cannot recall someone else's group message.
            var forged = try #require(bobInbox.items.first?.message)
            forged.direction = .send
            do {
                try await bob.recallMessage(forged)
                Issue.record("bob recalled alice's group message")
            } catch let error as IMError {
                #expect(error.code == .recallParameterInvalid)
            }
        }
    }

    @Test("recall is refused after the window, by anyone but the sender, and for forged commands")
    func recallRefused() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.server(clock: clock)) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobRecalls = EventRecorder(bob.recalledMessages())
            let first = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "one"))
            let second = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "two"))
            let received = await bobInbox.wait(for: 2)

            // Bob cannot recall Alice's message, even by presenting it as his own.
            var forged = try #require(received.first?.message)
            forged.direction = .send
            do {
                try await bob.recallMessage(forged)
                Issue.record("bob recalled alice's message")
            } catch let error as IMError {
                #expect(error.code == .recallParameterInvalid)
            }
            // Nor can a client send the server's recall command itself.
            let command = RecallCommandMessage(messageUId: first.messageUId, conversationType: 1, targetId: "bob", sentTime: first.sentTime)
            await #expect(throws: SendMessageError.self) { try await bob.sendMessage(.private, targetId: "alice", content: command) }

            // Exactly at the window's end the recall works; a millisecond later it does not.
            clock.advance(milliseconds: 120_000 - (clock.nowMilliseconds() - first.sentTime))
            try await alice.recallMessage(first)
            clock.advance(milliseconds: 120_001 - (clock.nowMilliseconds() - second.sentTime))
            do {
                try await alice.recallMessage(second)
                Issue.record("a recall 120.001 s after sending succeeded")
            } catch let error as IMError {
                #expect(error.code == .recallParameterInvalid)
                #expect(error.message.contains("120 s"))
            }
            #expect(await bobRecalls.wait(for: 1).map(\.messageUId) == [first.messageUId])
            let history = try await bob.getRemoteHistoryMessages(.private, targetId: "alice", order: .ascending)
            #expect(history.messages.map(\.objectName) == [RecallNotificationMessage.objectName, TextMessage.objectName])
            #expect(try await alice.getMessage(messageId: second.messageId)?.objectName == TextMessage.objectName)
        }
    }

    @Test("the recall window is configurable")
    func recallWindowConfigured() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.server(clock: clock) { $0.messaging.recallWindowSeconds = 600 }) { server in
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "late"))
            clock.advance(milliseconds: 599_000)
            let recalled = try await alice.recallMessage(sent)
            #expect(recalled.objectName == RecallNotificationMessage.objectName)
        }
    }

    @Test("remote delete and clear remove messages from the user's own history and sync only")
    func remoteDeleteAndClear() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            var sent: [Message] = []
            for index in 1...5 {
                sent.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "m\(index)")))
            }
            let received = await bobInbox.wait(for: 5).map(\.message)
            #expect(received.count == 5)

            try await bob.deleteRemoteMessages(.private, targetId: "alice", messages: [received[1]])
            func remoteTexts(_ client: IMClient, _ peer: String) async throws -> [String?] {
                try await client.getRemoteHistoryMessages(.private, targetId: peer, order: .ascending).messages.map { Self.text($0) }
            }
            #expect(try await remoteTexts(bob, "alice") == ["m1", "m3", "m4", "m5"])
            #expect(try await remoteTexts(alice, "bob") == ["m1", "m2", "m3", "m4", "m5"], "the other side keeps its history")
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").count == 5, "local copies stay")

            // Refused: a message of another conversation, a time in the future. Nothing changes.
            let other = try await alice.sendMessage(.private, targetId: "carol", content: TextMessage(content: "for carol"))
            var foreign = other
            foreign.targetId = "alice"
            do {
                try await bob.deleteRemoteMessages(.private, targetId: "alice", messages: [received[2], foreign])
                Issue.record("deleting another conversation's message succeeded")
            } catch let error as IMError {
                #expect(error.code == .invalidParameter)
            }
            do {
                try await bob.clearRemoteHistoryMessages(.private, targetId: "alice", recordTime: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)
                Issue.record("clearing with a future time succeeded")
            } catch let error as IMError {
                #expect(error.code == .clearHistoryTimeInvalid)
            }
            #expect(try await remoteTexts(bob, "alice") == ["m1", "m3", "m4", "m5"])

            try await bob.clearRemoteHistoryMessages(.private, targetId: "alice", recordTime: received[3].sentTime)
            #expect(try await remoteTexts(bob, "alice") == ["m5"], "messages sent at or before the time are gone")
            let (_, newDevice) = try await server.syncedDevice("bob", platform: .web)
            #expect(newDevice.items.map { Self.text($0.message) } == ["m5"], "a new device does not sync them either")
            #expect(try await remoteTexts(alice, "bob").count == 5)

            // clearHistoryMessages removes local copies too; without clearRemote only those.
            let aliceLocal = try await alice.getHistoryMessages(.private, targetId: "bob")
            try await alice.clearHistoryMessages(.private, targetId: "bob", recordTime: sent[0].sentTime, clearRemote: false)
            #expect(try await alice.getHistoryMessages(.private, targetId: "bob").count == aliceLocal.count - 1)
            #expect(try await remoteTexts(alice, "bob").count == 5)
            try await bob.clearHistoryMessages(.private, targetId: "alice", recordTime: 0, clearRemote: true)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").isEmpty)
            #expect(try await remoteTexts(bob, "alice").isEmpty)
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 0)

            // The Server API clears a user's whole history of a conversation (msgTimestamp absent: all).
            let (status, body) = try await server.api.post("/conversation/message/history/clean.json",
                                                           form: ["conversationType": "1", "fromUserId": "alice", "targetId": "bob"])
            #expect(status == 200 && body["code"] as? Int == 200, "\(body)")
            #expect(try await remoteTexts(alice, "bob").isEmpty)
        }
    }

    @Test("one-to-one read receipts mark the sender's messages read; the reader's devices agree on unread counts")
    func privateReadReceipts() async throws {
        try await withTestServer(try await Self.server()) { server in
            let alice = try await server.connectedClient("alice")
            let aliceReceipts = EventRecorder(alice.conversationReadReceipts())
            let bob = try await server.connectedClient("bob", platform: .iOS)
            let bobDesk = try await server.connectedClient("bob", platform: .macOS)
            let bobInbox = EventRecorder(bob.receivedMessages())
            let deskInbox = EventRecorder(bobDesk.receivedMessages())
            let deskStatus = EventRecorder(bobDesk.readStatusUpdates())
            var sent: [Message] = []
            for index in 1...3 {
                sent.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "m\(index)")))
            }
            _ = await bobInbox.wait(for: 3)
            _ = await deskInbox.wait(for: 3)
            #expect(try await bobDesk.getConversation(.private, targetId: "alice")?.unreadMessageCount == 3)

            try await bob.sendReadReceiptMessage(.private, targetId: "alice", time: sent[1].sentTime)
            let receipt = try #require(await aliceReceipts.wait(for: 1).first)
            #expect(receipt == ConversationReadReceipt(conversationType: .private, targetId: "bob", readerId: "bob", lastReadTime: sent[1].sentTime))
            let statuses = try await alice.getHistoryMessages(.private, targetId: "bob").reversed().map(\.sentStatus)
            #expect(statuses == [.read, .read, .sent])
            #expect(try await bob.getConversation(.private, targetId: "alice")?.unreadMessageCount == 1)
            #expect(await deskStatus.wait(for: 1).first?.lastReadTime == sent[1].sentTime)
            #expect(try await bobDesk.getConversation(.private, targetId: "alice")?.unreadMessageCount == 1, "the other device agrees")

            // Alice is offline when Bob reads the rest: she learns it at her next connect.
            await alice.disconnect()
            try await bob.sendReadReceiptMessage(.private, targetId: "alice", time: sent[2].sentTime)
            let aliceAgain = EventRecorder(alice.conversationReadReceipts())
            let synced = EventRecorder(alice.offlineMessageSyncCompleted())
            try await alice.connect(token: try await server.token("alice"))
            _ = await synced.wait(for: 1)
            #expect(await aliceAgain.wait(for: 1).first?.lastReadTime == sent[2].sentTime)
            #expect(try await alice.getHistoryMessages(.private, targetId: "bob").allSatisfy { $0.sentStatus == .read })
            #expect(try await bobDesk.getConversation(.private, targetId: "alice")?.unreadMessageCount == 0)
            // The receipt itself is never a message anyone sees.
            #expect(bobInbox.items.count == 3 && deskInbox.items.count == 3)
            #expect(try await alice.getHistoryMessages(.private, targetId: "bob").count == 3)
        }
    }

    @Test("a group's read status reaches the reader's other devices and nobody else")
    func groupReadStatusSync() async throws {
        try await withTestServer(try await Self.server()) { server in
            let clients = try await GroupChatTests.connectedGroup(server, ["alice", "bob", "carol"])
            let (alice, bob, carol) = (clients[0], clients[1], clients[2])
            // The group's clients are desktop (Linux) sessions; Bob's second device is his phone.
            let bobDesk = try await server.connectedClient("bob", platform: .iOS)
            let deskStatus = EventRecorder(bobDesk.readStatusUpdates())
            let deskInbox = EventRecorder(bobDesk.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())
            let carolStatus = EventRecorder(carol.readStatusUpdates())
            let bobInbox = EventRecorder(bob.receivedMessages())
            var sent: [Message] = []
            for index in 1...3 {
                sent.append(try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "g\(index)")))
            }
            _ = await deskInbox.wait(for: 3)
            _ = await bobInbox.wait(for: 3)
            _ = await carolInbox.wait(for: 3)
            try await bob.syncConversationReadStatus(.group, targetId: "g1", time: sent[2].sentTime)
            #expect(try await bob.getConversation(.group, targetId: "g1")?.unreadMessageCount == 0)
            #expect(await deskStatus.wait(for: 1).first == ConversationReadStatus(conversationType: .group, targetId: "g1", lastReadTime: sent[2].sentTime))
            #expect(try await bobDesk.getConversation(.group, targetId: "g1")?.unreadMessageCount == 0)
            // Carol hears nothing of it: one more group message arrives as her 4th and only new event.
            let marker = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "marker"))
            #expect(await carolInbox.wait(for: 4).last?.message.messageUId == marker.messageUId)
            #expect(carolInbox.items.count == 4 && carolStatus.items.isEmpty)
            #expect(try await carol.getConversation(.group, targetId: "g1")?.unreadMessageCount == 4)
        }
    }

    @Test("a system conversation's read status reaches the user's other device")
    func systemReadStatusSync() async throws {
        try await withTestServer(try await Self.server()) { server in
            let phone = try await server.connectedClient("bob", platform: .iOS)
            let desk = try await server.connectedClient("bob", platform: .macOS)
            let phoneInbox = EventRecorder(phone.receivedMessages())
            let deskInbox = EventRecorder(desk.receivedMessages())
            let deskStatus = EventRecorder(desk.readStatusUpdates())
            let (status, body) = try await server.api.post("/message/system/publish.json", form: [
                "fromUserId": "notice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"welcome"}"#])
            #expect(status == 200, "\(body)")
            let notice = try #require(await phoneInbox.wait(for: 1).first?.message)
            _ = await deskInbox.wait(for: 1)
            #expect(try await desk.getConversation(.system, targetId: "notice")?.unreadMessageCount == 1)
            try await phone.syncConversationReadStatus(.system, targetId: "notice", time: notice.sentTime)
            #expect(await deskStatus.wait(for: 1).first == ConversationReadStatus(conversationType: .system, targetId: "notice", lastReadTime: notice.sentTime))
            #expect(try await desk.getConversation(.system, targetId: "notice")?.unreadMessageCount == 0)
            #expect(try await phone.getConversation(.system, targetId: "notice")?.unreadMessageCount == 0)
        }
    }

    @Test("typing status: online only, one per 6 s per conversation from the sender")
    func typingStatus() async throws {
        try await withTestServer(try await Self.server()) { server in
            let clock = ManualClock(milliseconds: 1_800_000_000_000)
            let alice = try await server.connectedClient("alice") { $0.clock = clock }
            let bob = try await server.connectedClient("bob")
            let bobTyping = EventRecorder(bob.typingStatusUpdates())
            let bobInbox = EventRecorder(bob.receivedMessages())

            #expect(try await alice.sendTypingStatus(.private, targetId: "bob", typingContentType: TextMessage.objectName))
            let typing = try #require(await bobTyping.wait(for: 1).first)
            #expect(typing.userId == "alice" && typing.targetId == "alice" && typing.typingContentType == TextMessage.objectName)
            clock.advance(milliseconds: 5_999)
            #expect(try await alice.sendTypingStatus(.private, targetId: "bob", typingContentType: TextMessage.objectName) == false)
            #expect(try await alice.sendTypingStatus(.private, targetId: "carol", typingContentType: TextMessage.objectName),
                    "the throttle is per conversation")
            clock.advance(milliseconds: 1)
            #expect(try await alice.sendTypingStatus(.private, targetId: "bob", typingContentType: TextMessage.objectName))
            #expect(await bobTyping.wait(for: 2).count == 2)

            // Offline recipients never get a typing status, and it is stored nowhere.
            await bob.disconnect()
            clock.advance(milliseconds: 6_000)
            #expect(try await alice.sendTypingStatus(.private, targetId: "bob", typingContentType: TextMessage.objectName))
            let marker = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after typing"))
            let bobTypingAgain = EventRecorder(bob.typingStatusUpdates())
            let synced = EventRecorder(bob.offlineMessageSyncCompleted())
            try await bob.connect(token: try await server.token("bob"))
            _ = await synced.wait(for: 1)
            #expect(await bobInbox.wait(for: 1).map(\.message.messageUId) == [marker.messageUId])
            #expect(bobTypingAgain.items.isEmpty)
            #expect(try await bob.getHistoryMessages(.private, targetId: "alice").map(\.objectName) == [TextMessage.objectName])
            let remote = try await bob.getRemoteHistoryMessages(.private, targetId: "alice")
            #expect(remote.messages.map(\.messageUId) == [marker.messageUId])
        }
    }
}
