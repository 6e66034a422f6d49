import Foundation
import IMCore
import IMKit
import IMLib
import IMServerTesting
import Synchronization
import Testing

/// IMKit's rules on an injected clock, against a real server and real IMLib clients.
@Suite("IMKit models")
struct IMKitModelTests {
    /// A kit over a connected client of `user`, both on `clock`.
    static func kit(_ server: TestServer, _ user: String, clock: ManualClock, config: KitConfig = KitConfig(),
                    providers: InfoProviders = InfoProviders(), dataDirectory: URL? = nil) async throws -> IMKit {
        let client = server.client { $0.clock = clock }
        let kit = IMKit(client: client, config: config, providers: providers,
                        dataDirectory: dataDirectory ?? server.dataDir.appendingPathComponent("kit-\(user)-\(UUID().uuidString)"), clock: clock)
        try await kit.connect(token: try await server.token(user))
        return kit
    }

    @Test("recall: allowed for 120 s after sending, not at 121 s; re-edit for 300 s after the recall, kept in the kit's database")
    func recallWindowAndReedit() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let directory = server.dataDir.appendingPathComponent("kit-alice")
            let alice = try await Self.kit(server, "alice", clock: clock, dataDirectory: directory)
            let chat = alice.conversation(.private, targetId: "bob")
            try await chat.open()
            let sent = try #require(try await chat.send(text: "first"))
            #expect(sent.sentTime > 0)
            var screen = await chat.screen()
            let item = try #require(screen.items.last)
            clock.set(milliseconds: sent.sentTime + 120_000)
            #expect(await chat.canRecall(item), "at 120 s the message can be recalled")
            #expect(await chat.actions(for: item).contains(.recall))
            clock.set(milliseconds: sent.sentTime + 121_000)
            #expect(await !chat.canRecall(item), "at 121 s it cannot")
            #expect(await !chat.actions(for: item).contains(.recall))
            await #expect(throws: IMError.self) { try await chat.recall(item) }

            let second = try #require(try await chat.send(text: "second thoughts"))
            clock.set(milliseconds: second.sentTime)
            screen = await chat.screen()
            let recallable = try #require(screen.items.last { $0.message.messageId == second.messageId })
            try await chat.recall(recallable)
            let recalledAt = clock.nowMilliseconds()
            screen = await chat.screen()
            let notice = try #require(screen.items.first { $0.message.messageId == second.messageId })
            #expect(notice.text == "You recalled a message")
            #expect(notice.canReedit)
            clock.set(milliseconds: recalledAt + 300_000)
            #expect(await chat.reeditText(notice) == "second thoughts")
            // A new screen still offers it: the text is kept in the kit's database, not the screen.
            let again = alice.conversation(.private, targetId: "bob")
            try await again.open()
            let reopened = try #require(await again.screen().items.first { $0.message.messageId == second.messageId })
            #expect(reopened.canReedit)
            clock.set(milliseconds: recalledAt + 301_000)
            #expect(await again.reeditText(reopened) == nil)
            #expect(await !again.screen().items.first { $0.message.messageId == second.messageId }!.canReedit)
        }
    }

    @Test("typing: one status per 6 s while the input changes; the peer's typing… ends 6 s after the last status")
    func typingThrottleAndTimeout() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let alice = try await Self.kit(server, "alice", clock: clock)
            let bob = try await Self.kit(server, "bob", clock: clock)
            let aliceChat = alice.conversation(.private, targetId: "bob")
            let bobChat = bob.conversation(.private, targetId: "alice")
            try await aliceChat.open()
            try await bobChat.open()
            let screens = EventRecorder(await bobChat.screens())
            #expect(await aliceChat.inputChanged("h"))
            #expect(await !aliceChat.inputChanged("he"), "within 6 s: no second status")
            _ = await screens.first { $0.typingUserId == "alice" }
            clock.advance(milliseconds: 5_999)
            #expect(await !aliceChat.inputChanged("hel"))
            #expect(await bobChat.screen().typingUserId == "alice", "still typing 5.999 s after the status")
            // Bob's "typing…" ends 6 s after the last status on his clock.
            clock.advance(milliseconds: 2)
            #expect(await bobChat.screen().typingUserId == nil)
            #expect(await aliceChat.inputChanged("hell"), "6 s after the first: a new status")
            // Switched off, nothing is sent.
            alice.updateConfig { $0.enableTypingStatus = false }
            clock.advance(milliseconds: 10_000)
            #expect(await !aliceChat.inputChanged("hello"))
        }
    }

    @Test("notifications: the global switch, then the silent flag, then do-not-disturb (an @ of the user passes), then the app's hook")
    func notificationPolicyOrder() {
        func message(silent: Bool = false, mention: MentionedInfo? = nil, type: ConversationType = .group) -> Message {
            var message = Message(unsaved: TextMessage(content: "hi", mentionedInfo: mention), conversationType: type, targetId: "g1",
                                  senderUserId: "bob", direction: .receive, time: 1)
            message.disableNotification = silent
            return message
        }
        let notice = LocalNotification(conversationType: .group, targetId: "g1", channelId: "", senderUserId: "bob", objectName: "RC:TxtMsg",
                                       title: "bob", body: "hi", messageId: 1)
        var config = KitConfig()
        let quiet = NotificationPolicy.Context(currentUserId: "alice", conversationLevel: .blocked, now: 0)
        let plain = NotificationPolicy.Context(currentUserId: "alice", now: 0)
        let policy = NotificationPolicy()
        #expect(policy.decide(message(), offline: false, config: config, context: plain, notification: notice) == .success(notice))
        #expect(policy.decide(message(silent: true), offline: false, config: config, context: plain, notification: notice) == .failure(.silentMessage))
        #expect(policy.decide(message(), offline: false, config: config, context: quiet, notification: notice) == .failure(.doNotDisturb))
        #expect(policy.decide(message(mention: MentionedInfo(type: .users, userIdList: ["alice"])), offline: false, config: config,
                              context: quiet, notification: notice) == .success(notice), "an @ of the user passes do-not-disturb")
        #expect(policy.decide(message(mention: MentionedInfo(type: .all)), offline: false, config: config, context: quiet,
                              notification: notice) == .failure(.doNotDisturb), "@all does not pass 'nothing'")
        let mentionsOnly = NotificationPolicy.Context(currentUserId: "alice", typeLevel: .mention, now: 0)
        #expect(policy.decide(message(mention: MentionedInfo(type: .all)), offline: false, config: config, context: mentionsOnly,
                              notification: notice) == .success(notice), "@all passes the mentions-only level")
        let open = NotificationPolicy.Context(currentUserId: "alice", openConversation: ConversationIdentifier(.group, targetId: "g1"), now: 0)
        #expect(policy.decide(message(), offline: false, config: config, context: open, notification: notice) == .failure(.conversationOpen))
        var unfocused = open
        unfocused.focused = false
        #expect(policy.decide(message(), offline: false, config: config, context: unfocused, notification: notice) == .success(notice))
        #expect(policy.decide(message(), offline: true, config: config, context: plain, notification: notice) == .failure(.offline))
        let hooked = NotificationPolicy(customHook: { _ in true })
        #expect(hooked.decide(message(), offline: false, config: config, context: plain, notification: notice) == .failure(.handledByApp))
        #expect(hooked.decide(message(silent: true), offline: false, config: config, context: plain, notification: notice) == .failure(.silentMessage),
                "the hook runs last")
        #expect(hooked.decide(message(), offline: false, config: config, context: quiet, notification: notice) == .failure(.doNotDisturb),
                "do-not-disturb comes before the hook")
        config.disableMessageNotification = true
        #expect(policy.decide(message(mention: MentionedInfo(type: .users, userIdList: ["alice"])), offline: false, config: config,
                              context: plain, notification: notice) == .failure(.disabledGlobally), "the global switch comes first")
        #expect(notice.rc == ["cType": "GRP", "fId": "bob", "oName": "RC:TxtMsg", "tId": "g1"])
    }

    @Test("user info: cached after one provider call, refreshed names show at the next load only, persisted when enabled")
    func infoCacheAndDeferredRefresh() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let calls = Mutex(0)
            let providers = InfoProviders(user: { id in
                calls.withLock { $0 += 1 }
                return UserInfo(userId: id, name: id == "bob" ? "Bob" : id)
            })
            var config = KitConfig()
            config.enablePersistentUserInfoCache = true
            let directory = server.dataDir.appendingPathComponent("kit-info")
            let alice = try await Self.kit(server, "alice", clock: clock, config: config, providers: providers, dataDirectory: directory)
            let bob = try await server.connectedClient("bob")
            try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "hello"))
            let list = alice.conversationList()
            let loaded = await waitForRow(list, "Bob")
            #expect(loaded.rows.first?.digest == "hello")
            #expect(loaded.totalUnread == 1)
            let before = calls.withLock { $0 }
            // The screen keeping the old name until it loads again is S13's terminal test; here the
            // cache: the next load shows the new name, with no provider call.
            await alice.info.refreshUser(UserInfo(userId: "bob", name: "Bob2"))
            #expect(await list.load().rows.first?.title == "Bob2", "the next load shows the new one")
            #expect(calls.withLock { $0 } == before, "no provider call for a cached user")
            // A new kit on the same folder with persistence reads the cache back: no provider call.
            let again = IMKit(client: server.client(), config: config, providers: providers, dataDirectory: directory, clock: clock)
            try await again.connect(token: try await server.token("alice"))
            #expect(await again.info.user("bob")?.name == "Bob2")
            #expect(calls.withLock { $0 } == before)
            // Without persistence the provider is asked again.
            config.enablePersistentUserInfoCache = false
            let memoryOnly = IMKit(client: server.client(), config: config, providers: providers,
                                   dataDirectory: server.dataDir.appendingPathComponent("kit-info-2"), clock: clock)
            try await memoryOnly.connect(token: try await server.token("alice"))
            #expect(await memoryOnly.info.user("bob")?.name == "Bob")
            #expect(calls.withLock { $0 } == before + 1)
        }
    }

    func waitForRow(_ list: ConversationListModel, _ title: String) async -> ConversationListSnapshot {
        for _ in 0..<200 {
            let snapshot = await list.load()
            if snapshot.rows.contains(where: { $0.title == title }) { return snapshot }
            try? await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no row titled \(title)")
        return await list.snapshot
    }

    @Test("paging while messages arrive leaves no gap and no duplicate")
    func gapFreePaging() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let alice = try await Self.kit(server, "alice", clock: clock)
            for index in 1...45 {
                let (_, body) = try await server.api.post("/message/private/publish.json", form: [
                    "fromUserId": "bob", "toUserId": "alice", "objectName": "RC:TxtMsg", "content": #"{"content":"m\#(index)"}"#])
                #expect(body["code"] as? Int == 200)
            }
            let list = alice.conversationList()
            _ = await waitForRow(list, "bob")
            for _ in 0..<200 where (try? await alice.client.getConversation(.private, targetId: "bob"))??.unreadMessageCount ?? 0 < 45 {
                try await Task.sleep(for: .milliseconds(50))
            }
            let chat = alice.conversation(.private, targetId: "bob")
            let opened = try await chat.open(visibleLines: 10)
            #expect(opened.unreadAbove?.count == 45 && opened.unreadAbove?.showsCount == true)
            let arriving = Task {
                for index in 46...55 {
                    _ = try await server.api.post("/message/private/publish.json", form: [
                        "fromUserId": "bob", "toUserId": "alice", "objectName": "RC:TxtMsg", "content": #"{"content":"m\#(index)"}"#])
                }
            }
            while try await chat.loadOlder() > 0 {}
            try await arriving.value
            let screens = EventRecorder(await chat.screens())
            _ = await screens.first { $0.items.count >= 55 }
            let texts = await chat.screen().items.map(\.text)
            #expect(texts == (1...55).map { "m\($0)" })
        }
    }

    @Test("settings: RongCloud's defaults, changed by name, unknown names and bad values refused with 33003")
    func configDefaultsAndChanges() throws {
        var config = KitConfig()
        #expect(config.maxRecallDuration == 120 && config.reeditDuration == 300 && config.enableMessageRecall)
        #expect(config.enabledReadReceiptConversationTypes.isEmpty && config.enableSyncReadStatus && config.enableMessageMentioned)
        #expect(config.enableMessageReference && !config.enableSendCombineMessage && !config.enablePersistentUserInfoCache)
        #expect(!config.disableMessageNotification && !config.isMediaSelectorContainVideo && config.isShowNetworkIndicatorView)
        #expect(config.gifAutoDownloadBytes == 1_048_576 && config.gifMaxBytes == 2_097_152 && config.voiceMaxSeconds == 60)
        #expect(config.sightRecordMaxSeconds == 10 && config.sightLocalMaxSeconds == 120 && config.maxMessageBytes == 131_072)
        #expect(config.commonPhrases.count == 5 && config.collectionConversationTypes == [.system])
        try config.set("maxRecallDuration", to: "60")
        try config.set("enabledReadReceiptConversationTypes", to: "private,group")
        #expect(config.maxRecallDuration == 60)
        #expect(config.value(of: "enabledReadReceiptConversationTypes") == "group,private")
        for (name, value) in [("noSuchFlag", "1"), ("maxRecallDuration", "-5"), ("enableTypingStatus", "maybe"), ("language", "fr")] {
            #expect { try config.set(name, to: value) } throws: { ($0 as? IMError)?.code == .invalidParameter }
        }
        #expect(config.maxRecallDuration == 60, "a refused value changes nothing")
        for name in KitConfig.flagNames { #expect(config.value(of: name) != nil, "\(name) can be read") }
    }
}
