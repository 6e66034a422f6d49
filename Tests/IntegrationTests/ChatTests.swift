import Foundation
import IMCore
import IMLib
import Synchronization
import IMServerTesting
import Testing

@Suite("One-to-one chat end to end")
struct ChatTests {
    @Test("two online users chat: live delivery with server uid and time, conversations on both sides")
    func twoUsersChatOnline() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())

            let attached = Locked<Message?>(nil)
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi bob")) { message in
                attached.withLock { $0 = message }
            }
            #expect(attached.withLock { $0?.sentStatus } == .sending)
            #expect(attached.withLock { $0?.messageId } == sent.messageId)
            #expect(sent.sentStatus == .sent)
            #expect(!sent.messageUId.isEmpty)

            let received = try #require(await bobInbox.wait(for: 1).first)
            #expect(received.offline == false)
            #expect(received.left == 0 && received.hasPackage == false)
            #expect(received.message.messageUId == sent.messageUId)
            #expect(received.message.sentTime == sent.sentTime)
            #expect(received.message.senderUserId == "alice")
            #expect(received.message.targetId == "alice")
            #expect(received.message.direction == .receive)
            #expect(received.message.content(as: TextMessage.self)?.content == "hi bob")

            let aliceInbox = EventRecorder(alice.receivedMessages())
            let reply = try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "hello alice"))
            #expect(reply.sentTime > sent.sentTime, "sentTime strictly increases inside the conversation")
            #expect(await aliceInbox.wait(for: 1).first?.message.messageUId == reply.messageUId)

            let bobList = try await bob.getConversationList(types: [.private])
            #expect(bobList.map(\.targetId) == ["alice"])
            #expect(bobList.first?.unreadMessageCount == 1)
            let aliceConversation = try #require(try await alice.getConversation(.private, targetId: "bob"))
            #expect(aliceConversation.unreadMessageCount == 1, "her own message does not count, bob's reply does")
            let bobHistory = try await bob.getHistoryMessages(.private, targetId: "alice")
            #expect(bobHistory.map { $0.content(as: TextMessage.self)?.content } == ["hello alice", "hi bob"])
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("messages sent while the recipient is offline arrive on connect, in order, paged, once")
    func offlineDeliveryInOrder() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.session.clientSendsPerSecond = 10_000
            config.messaging.syncPageSize = 40
        }) { server in
            let alice = try await server.connectedClient("alice")
            let bobToken = try await server.token("bob")
            let bobDevice = server.client()
            let firstSession = EventRecorder(bobDevice.receivedMessages())
            try await bobDevice.connect(token: bobToken)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "before"))
            #expect(await firstSession.wait(for: 1).count == 1)
            await bobDevice.disconnect()

            var sent: [String] = []
            for index in 0..<100 {
                sent.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "m\(index)")).messageUId)
            }
            let inbox = EventRecorder(bobDevice.receivedMessages())
            try await bobDevice.connect(token: bobToken)
            let events = await inbox.wait(for: 100)
            #expect(events.map(\.message.messageUId) == sent, "every offline message once, in send order")
            #expect(events.allSatisfy { $0.offline })
            #expect(events.dropLast().contains { $0.hasPackage }, "100 messages in pages of 40 come in several packages")
            #expect(events.last?.left == 0 && events.last?.hasPackage == false)
            let conversation = try #require(try await bobDevice.getConversation(.private, targetId: "alice"))
            #expect(conversation.unreadMessageCount == 101)

            // A reconnect delivers nothing twice; a new message after it arrives live.
            await bobDevice.disconnect()
            let synced = EventRecorder(bobDevice.offlineMessageSyncCompleted())
            try await bobDevice.connect(token: bobToken)
            #expect(await synced.wait(for: 1).count == 1)
            // The inbox's stream is read by a task of its own: the sync's event can come first.
            #expect(await inbox.wait(for: 100).count == 100)
            let after = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "live"))
            let next = await inbox.wait(for: 101)
            #expect(next.count == 101)
            #expect(next.last?.message.messageUId == after.messageUId)
            #expect(next.last?.offline == false)
            await alice.disconnect()
            await bobDevice.disconnect()
        }
    }

    @Test("offline messages older than the retention are not delivered")
    func offlineRetention() async throws {
        let clock = ManualClock()
        // Bob's device is new: the compensation window is raised to the retention's 2 days.
        try await withTestServer(try await TestServer.start(clock: clock) {
            $0.messaging.offlineRetentionDays = 2
            $0.messaging.compensationDays = 2
        }) { server in
            let alice = try await server.connectedClient("alice")
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "expires"))
            clock.advance(milliseconds: 86_400_000)
            let kept = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "kept"))
            clock.advance(milliseconds: 86_400_000 + 1)
            let bob = server.client()
            let inbox = EventRecorder(bob.receivedMessages())
            let synced = EventRecorder(bob.offlineMessageSyncCompleted())
            try await bob.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            #expect(await inbox.wait(for: 1).map(\.message.messageUId) == [kept.messageUId])
            // Cloud history still has both.
            #expect(try await bob.getRemoteHistoryMessages(.private, targetId: "alice").messages.count == 2)
        }
    }

    @Test("a user's other devices receive what the user sends, as outgoing messages")
    func multiDeviceSync() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let phone = try await server.connectedClient("carol", platform: .iOS)
            let desktop = try await server.connectedClient("carol", platform: .macOS)
            _ = try await server.connectedClient("dave")
            let desktopInbox = EventRecorder(desktop.receivedMessages())
            let sent = try await phone.sendMessage(.private, targetId: "dave", content: TextMessage(content: "from phone"))
            let echo = try #require(await desktopInbox.wait(for: 1).first)
            #expect(echo.message.messageUId == sent.messageUId)
            #expect(echo.message.direction == .send)
            #expect(echo.message.targetId == "dave")
            #expect(try await desktop.getConversation(.private, targetId: "dave")?.unreadMessageCount == 0)
            #expect(await phone.connectionStatus == .connected, "one mobile and one desktop session coexist")
        }
    }

    @Test("remote history pages backwards and forwards with isRemaining")
    func remoteHistory() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 10_000 }) { server in
            let alice = try await server.connectedClient("alice")
            var times: [Int64] = []
            for index in 0..<25 {
                times.append(try await alice.sendMessage(.private, targetId: "erin", content: TextMessage(content: "h\(index)")).sentTime)
            }
            let newest = try await alice.getRemoteHistoryMessages(.private, targetId: "erin", recordTime: 0, count: 10)
            #expect(newest.messages.map(\.sentTime) == Array(times.suffix(10).reversed()))
            #expect(newest.isRemaining)
            let older = try await alice.getRemoteHistoryMessages(.private, targetId: "erin", recordTime: newest.messages.last!.sentTime, count: 100)
            #expect(older.messages.map(\.sentTime) == Array(times.prefix(15).reversed()))
            #expect(!older.isRemaining)
            let forward = try await alice.getRemoteHistoryMessages(.private, targetId: "erin", recordTime: times[19], count: 10, order: .ascending)
            #expect(forward.messages.map(\.sentTime) == Array(times.suffix(5)))
            #expect(!forward.isRemaining)
            await #expect(throws: IMError.self) {
                _ = try await alice.getRemoteHistoryMessages(.private, targetId: "erin", count: 101)
            }
        }
    }

    @Test("local history pages without overlap, and the conversation list puts pinned first")
    func localHistoryAndConversationList() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 10_000 }) { server in
            let alice = try await server.connectedClient("alice")
            for index in 0..<30 {
                _ = try await alice.sendMessage(.private, targetId: "frank", content: TextMessage(content: "\(index)"))
            }
            _ = try await alice.sendMessage(.private, targetId: "gina", content: TextMessage(content: "x"))
            _ = try await alice.sendMessage(.private, targetId: "hank", content: TextMessage(content: "y"))

            var pages: [[String]] = []
            var oldest: Int64 = -1
            while true {
                let page = try await alice.getHistoryMessages(.private, targetId: "frank", oldestMessageId: oldest, count: 50)
                if page.isEmpty { break }
                pages.append(page.compactMap { $0.content(as: TextMessage.self)?.content })
                oldest = page.last!.messageId
            }
            #expect(pages.map(\.count) == [20, 10], "at most 20 per call")
            let expectedOrder: [String] = (0..<30).reversed().map { String($0) }
            let paged: [String] = pages.flatMap { $0 }
            #expect(paged == expectedOrder)

            #expect(try await alice.getConversationList(types: [.private]).map(\.targetId) == ["hank", "gina", "frank"])
            try await alice.setConversationToTop(.private, targetId: "frank", isTop: true)
            #expect(try await alice.getConversationList(types: [.private]).map(\.targetId) == ["frank", "hank", "gina"])
            #expect(try await alice.getConversationList(types: [.private], count: 2).count == 2)
            #expect(try await alice.getConversationList(types: [.group]).isEmpty)
            #expect(try await alice.removeConversation(.private, targetId: "gina"))
            #expect(try await alice.getConversation(.private, targetId: "gina") == nil)
            try await alice.clearConversations(types: [.private])
            #expect(try await alice.getConversationList(types: [.private]).isEmpty)
            #expect(try await alice.getHistoryMessages(.private, targetId: "frank").count == 20, "removing conversations keeps messages")
        }
    }
}
