import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("System conversations: tag pushes, no replies, their own offline retention, history and conversation management")
struct SystemConversationTests {
    /// Publishes a system text message from `sender` to users through the Server API; its uids.
    @discardableResult
    static func publish(_ server: TestServer, from sender: String = "notice", to users: [String], _ text: String) async throws -> [String] {
        let (status, body) = try await server.api.post("/message/system/publish.json", form: [
            "fromUserId": sender, "toUserId": users.joined(separator: ","), "objectName": "RC:TxtMsg",
            "content": #"{"content":"\#(text)"}"#,
        ])
        #expect(status == 200, "\(body)")
        return (body["messageUIDs"] as? [[String: Any]] ?? []).compactMap { $0["messageUID"] as? String }
    }

    /// A `/push.json` body carrying a text message from "notice".
    static func push(_ audience: [String: Any], _ text: String, from sender: String = "notice") -> [String: Any] {
        ["platform": ["ios", "android"], "fromuserid": sender, "audience": audience,
         "message": ["objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#, "disableUpdateLastMsg": false],
         "notification": ["alert": text]]
    }

    @Test("a client cannot send into a system conversation: 20109, nothing stored or delivered, the connection keeps working")
    func usersCannotReply() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let bob = try await server.connectedClient("bob", platform: .iOS)
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobDesk = try await server.connectedClient("bob", platform: .macOS)
            let deskInbox = EventRecorder(bobDesk.receivedMessages())
            // A user whose id is the system account's, to show nothing reaches it either.
            let notice = try await server.connectedClient("notice")
            let noticeInbox = EventRecorder(notice.receivedMessages())
            try await Self.publish(server, to: ["bob"], "welcome")
            #expect(await bobInbox.wait(for: 1).first?.message.conversationType == .system)

            do {
                try await bob.sendMessage(.system, targetId: "notice", content: TextMessage(content: "a reply"))
                Issue.record("the reply was accepted")
            } catch let error as SendMessageError {
                #expect(error.code == .systemConversationNotWritable)
                #expect(error.code.rawValue == 20109)
                #expect(error.error.message.contains("cannot be replied to"))
                #expect(error.message.sentStatus == .failed)
            }
            // The server stored nothing: the system log and the private log of the pair hold no reply.
            let system = try await server.core.store.history(appId: server.app.id, conversationKey: "s|notice|bob", recordTime: 0,
                                                              count: 10, ascending: false, viewer: nil)
            #expect(system.messages.map(\.senderId) == ["notice"])
            let privateLog = try await server.core.store.history(appId: server.app.id, conversationKey: "p|bob|notice", recordTime: 0,
                                                                  count: 10, ascending: false, viewer: nil)
            #expect(privateLog.messages.isEmpty)

            // The connection still works and the next messages are the only ones anyone receives.
            let carol = try await server.connectedClient("carol")
            let carolInbox = EventRecorder(carol.receivedMessages())
            let hello = try await bob.sendMessage(.private, targetId: "carol", content: TextMessage(content: "still here"))
            #expect(await carolInbox.wait(for: 1).map(\.message.messageUId) == [hello.messageUId])
            try await Self.publish(server, to: ["bob", "notice"], "marker")
            #expect(await noticeInbox.wait(for: 1).map { $0.message.content(as: TextMessage.self)?.content } == ["marker"])
            #expect(await deskInbox.wait(for: 3).map { $0.message.content(as: TextMessage.self)?.content } == ["welcome", "still here", "marker"],
                    "bob's other device saw no reply")
            await bob.disconnect(); await bobDesk.disconnect(); await notice.disconnect(); await carol.disconnect()
        }
    }

    @Test("/push.json sends a system message to exactly the users carrying the tags (AND, OR, both), or to the listed user ids")
    func tagTargeted() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let tags: [String: [String]] = ["u1": ["a", "b"], "u2": ["a"], "u3": ["b", "c"], "u4": [], "u5": ["a", "b"]]
            for (user, list) in tags where !list.isEmpty {
                let (status, _) = try await server.api.post("/user/tag/set.json", json: ["userId": user, "tags": list])
                #expect(status == 200)
            }
            let online = ["u1", "u2", "u3", "u4"]
            var inboxes: [String: EventRecorder<ReceivedMessage>] = [:]
            var clients: [IMClient] = []
            for user in online {
                let client = try await server.connectedClient(user)
                inboxes[user] = EventRecorder(client.receivedMessages())
                clients.append(client)
            }
            // u5 carries a and b but is offline.
            let sends: [([String: Any], String)] = [
                (["tag": ["a", "b"]], "and"),                          // u1, u5
                (["tag_or": ["b", "c"]], "or"),                        // u1, u3, u5
                (["tag": ["b"], "tag_or": ["c", "z"]], "both"),        // u3
                (["tag": ["a"], "userid": ["u2", "u4"]], "ids"),       // the user ids win: u2, u4
                (["tag": ["nobody-has-this"]], "none"),                // nobody
            ]
            for (audience, text) in sends {
                let (status, body) = try await server.api.post("/push.json", json: Self.push(audience, text))
                #expect(status == 200, "\(text): \(body)")
                #expect((body["id"] as? String)?.isEmpty == false)
            }
            let (_, noneBody) = try await server.api.post("/push.json", json: Self.push(["tag": ["nobody-has-this"]], "none"))
            #expect((noneBody["messageUIDs"] as? [Any])?.isEmpty == true)
            // A marker to everyone online ends each inbox, so what arrived before it is everything.
            try await Self.publish(server, to: online, "marker")
            let expected: [String: [String]] = [
                "u1": ["and", "or", "marker"], "u2": ["ids", "marker"], "u3": ["or", "both", "marker"], "u4": ["ids", "marker"],
            ]
            for user in online {
                let received = await inboxes[user]!.wait(for: expected[user]!.count)
                #expect(received.map { $0.message.content(as: TextMessage.self)?.content } == expected[user]!, "\(user)")
                #expect(received.allSatisfy { $0.message.conversationType == .system && $0.message.targetId == "notice" })
            }
            // The offline tagged user gets its two at the next connect.
            let (u5, u5Inbox) = try await server.syncedDevice("u5")
            #expect(u5Inbox.items.map { $0.message.content(as: TextMessage.self)?.content } == ["and", "or"])
            #expect(u5Inbox.items.allSatisfy { $0.offline })
            #expect(u5Inbox.items.first?.message.pushContent == "and", "the notification's alert is kept as the push text")
            await u5.disconnect()
            for client in clients { await client.disconnect() }
        }
    }

    @Test("/push.json refuses push-only notifications on a server without push (1009), bad audiences and bad messages; nothing is sent")
    func pushErrors() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/user/tag/set.json", json: ["userId": "bob", "tags": ["a"]])
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())

            let (pushOnly, pushOnlyBody) = try await server.api.post("/push.json", json: [
                "platform": ["ios"], "audience": ["tag": ["a"]], "notification": ["alert": "hi"],
            ])
            // This server was started without a push transport (PushDeliveryTests covers push-only calls that push).
            #expect(pushOnly == 400 && pushOnlyBody["code"] as? Int == 1009)
            #expect((pushOnlyBody["errorMessage"] as? String)?.contains("makes no push notifications") == true)
            let (toAll, toAllBody) = try await server.api.post("/push.json", json: ["audience": ["is_to_all": true], "notification": ["alert": "hi"]])
            #expect(toAll == 400 && toAllBody["code"] as? Int == 1009)

            let cases: [([String: Any], Int, Int)] = [
                (["fromuserid": "notice", "message": ["objectName": "RC:TxtMsg", "content": "{}"]], 400, 1002),   // no audience
                (Self.push([:], "nobody"), 400, 1002),
                (Self.push(["is_to_all": false], "nobody"), 400, 1002),
                (Self.push(["tag": "a"], "not a list"), 400, 1002),
                (Self.push(["tag": (0...20).map { "t\($0)" }], "21 tags"), 400, 1005),
                (Self.push(["userid": ["bad id"]], "bad id"), 400, 1002),
                (["audience": ["tag": ["a"]], "message": ["objectName": "RC:TxtMsg", "content": "{}"]], 400, 1002),   // no fromuserid
                (["fromuserid": "notice", "audience": ["tag": ["a"]], "message": ["content": "{}"]], 400, 1002),
                (["fromuserid": "notice", "audience": ["tag": ["a"]], "message": ["objectName": "RC:TxtMsg", "content": "not json"]], 400, 1002),
                (["fromuserid": "notice", "audience": ["tag": ["a"]], "message": ["objectName": "RC:RcCmd", "content": "{}"]], 400, 1002),
                (["fromuserid": "notice", "audience": ["tag": ["a"]],
                  "message": ["objectName": "RC:TxtMsg", "content": String(repeating: "x", count: 130_000)]], 400, 1002),
            ]
            for (body, status, code) in cases {
                let (got, reply) = try await server.api.post("/push.json", json: body)
                #expect(got == status && reply["code"] as? Int == code, "\(body): \(reply)")
            }
            // Over the system-message rate: refused whole.
            try await withTestServer(try await TestServer.start { $0.serverAPI.systemPublishPerSecond = 1 }) { limited in
                for user in ["x1", "x2"] { _ = try await limited.api.post("/user/tag/set.json", json: ["userId": user, "tags": ["t"]]) }
                let (over, overBody) = try await limited.api.post("/push.json", json: Self.push(["tag": ["t"]], "too many"))
                #expect(over == 429 && overBody["code"] as? Int == 1008 && (overBody["errorMessage"] as? String)?.contains("2 users") == true)
                #expect(try await limited.core.store.history(appId: limited.app.id, conversationKey: "s|notice|x1", recordTime: 0, count: 1,
                                                             ascending: false, viewer: nil).messages.isEmpty)

                // The message object may also come as JSON text.
                let (asText, asTextBody) = try await server.api.post("/push.json", json: [
                    "fromuserid": "notice", "audience": ["tag": ["a"]],
                    "message": #"{"objectName":"RC:TxtMsg","content":"{\"content\":\"as text\"}"}"#,
                ])
                #expect(asText == 200, "\(asTextBody)")
                try await Self.publish(server, to: ["bob"], "marker")
                #expect(await bobInbox.wait(for: 2).map { $0.message.content(as: TextMessage.self)?.content } == ["as text", "marker"],
                        "nothing else reached bob")
                await bob.disconnect()
            }
        }
    }

    @Test("/push.json to everyone is a stored broadcast that shares /message/broadcast.json's 2 per hour")
    func pushToAll() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let (status, body) = try await server.api.post("/push.json", json: Self.push(["is_to_all": true, "tag": ["ignored"]], "all"))
            #expect(status == 200, "\(body)")
            let uid = try #require(body["messageUID"] as? String)
            #expect(body["id"] as? String == uid)
            #expect(await bobInbox.wait(for: 1).map(\.message.messageUId) == [uid])
            let (carol, carolInbox) = try await server.syncedDevice("carol")
            #expect(carolInbox.items.map(\.message.messageUId) == [uid])
            #expect(carolInbox.items.first?.message.targetId == "notice")

            let (second, _) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"b"}"#])
            #expect(second == 200)
            let (third, thirdBody) = try await server.api.post("/push.json", json: Self.push(["is_to_all": true], "third"))
            #expect(third == 429 && thirdBody["code"] as? Int == 1008, "the hour's two broadcasts are used")
            #expect(await bobInbox.wait(for: 2).count == 2)
            clock.advance(milliseconds: 3_600_000)
            let (fourth, _) = try await server.api.post("/push.json", json: Self.push(["is_to_all": true], "fourth"))
            #expect(fourth == 200, "a new hour")
            #expect(await bobInbox.wait(for: 3).map { $0.message.content(as: TextMessage.self)?.content } == ["all", "b", "fourth"])
            await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("the official Python SDK's Push.broadcastPush sends a tag-targeted system message; its push-only form gets 1009 from a server without push")
    func pythonBroadcastPush() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await PythonSDKTests.call(server, "Push.setUserPushTag", ["userTag": ["userId": "bob", "tags": ["vip"]]])
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let (status, result) = try await PythonSDKTests.call(server, "Push.broadcastPush", ["pushMessage": Self.push(["tag": ["vip"]], "from python")])
            #expect(status == 200 && result["code"] as? Int == 200, "\(result)")
            let received = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(received.conversationType == .system && received.content(as: TextMessage.self)?.content == "from python")
            let (pushOnly, refused) = try await PythonSDKTests.call(server, "Push.broadcastPush", ["pushMessage": [
                "platform": ["ios", "android"], "audience": ["is_to_all": true], "notification": ["alert": "hi"]]])
            #expect(pushOnly == 400 && refused["code"] as? Int == 1009, "a server started without a push transport")
            await bob.disconnect()
        }
    }

    @Test("system messages keep their own offline retention (1-7 days), apart from private messages")
    func offlineRetention() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.messaging.systemOfflineRetentionDays = 1
            config.messaging.offlineRetentionDays = 7
            config.messaging.compensationDays = 7   // the devices below are new ones
        }) { server in
            let alice = try await server.connectedClient("alice")
            try await Self.publish(server, to: ["carol"], "expires")
            let (_, old) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"old broadcast"}"#])
            #expect(old["code"] as? Int == 200)
            let privateMessage = try await alice.sendMessage(.private, targetId: "carol", content: TextMessage(content: "private, kept 7 days"))
            clock.advance(milliseconds: 86_400_000 - 60_000)
            try await Self.publish(server, to: ["carol"], "inside the day")
            clock.advance(milliseconds: 120_000)   // the first system message is now a day and a minute old
            let (carol, inbox) = try await server.syncedDevice("carol")
            #expect(await inbox.wait(for: 2).map { $0.message.content(as: TextMessage.self)?.content } == ["private, kept 7 days", "inside the day"])
            #expect(inbox.items.first?.message.messageUId == privateMessage.messageUId)
            // Offline retention is not history: cloud history still has every system message.
            let history = try await carol.getRemoteHistoryMessages(.system, targetId: "notice", count: 10)
            #expect(history.messages.map { $0.content(as: TextMessage.self)?.content } == ["inside the day", "old broadcast", "expires"])
            await carol.disconnect()

            // And the other way round: system messages kept longer than private ones.
            let clock2 = ManualClock(milliseconds: 1_800_000_000_000)
            try await withTestServer(try await TestServer.start(clock: clock2) { config in
                config.messaging.systemOfflineRetentionDays = 7
                config.messaging.offlineRetentionDays = 1
                config.messaging.compensationDays = 7
            }) { other in
                let ann = try await other.connectedClient("ann")
                _ = try await ann.sendMessage(.private, targetId: "dan", content: TextMessage(content: "private, expires"))
                try await Self.publish(other, to: ["dan"], "system, kept")
                clock2.advance(milliseconds: 3 * 86_400_000)
                let (dan, danInbox) = try await other.syncedDevice("dan")
                #expect(danInbox.items.map { $0.message.content(as: TextMessage.self)?.content } == ["system, kept"])
                await dan.disconnect(); await ann.disconnect(); await alice.disconnect()
            }
        }
    }

    @Test("systemOfflineRetentionDays comes from the environment and the config file, and 0 or 8 days are refused")
    func retentionSetting() throws {
        var config = ServerConfig()
        #expect(config.messaging.systemOfflineRetentionDays == 7)
        try config.apply(environment: ["IMSERVER_SYSTEM_OFFLINE_RETENTION_DAYS": "2"])
        #expect(config.messaging.systemOfflineRetentionDays == 2 && config.messaging.offlineRetentionDays == 7)
        try config.validate()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"systemOfflineRetentionDays": 3}"#.utf8).write(to: file)
        #expect(try ServerConfig.load(file: file.path).messaging.systemOfflineRetentionDays == 3)
        for days in [0, 8] {
            config.messaging.systemOfflineRetentionDays = days
            #expect {
                try config.validate()
            } throws: { error in
                (error as? IMError)?.code == .invalidParameter && (error as? IMError)?.message.contains("systemOfflineRetentionDays must be 1...7") == true
            }
        }
    }

    @Test("remote history of a system conversation reads its messages and broadcasts by time, either direction")
    func remoteHistory() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            // notice → bob: m0 m1 (broadcast b0) m2 m3 (broadcast b1) m4; promo → bob: p0; notice → carol: c0.
            var expected: [String] = []
            for index in 0..<5 {
                clock.advance(milliseconds: 1000)
                try await Self.publish(server, to: ["bob"], "m\(index)")
                expected.append("m\(index)")
                if index == 1 || index == 3 {
                    clock.advance(milliseconds: 1000)
                    let text = "b\(index / 2)"
                    let (status, _) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#])
                    #expect(status == 200)
                    expected.append(text)
                }
            }
            try await Self.publish(server, from: "promo", to: ["bob"], "p0")
            try await Self.publish(server, to: ["carol"], "c0")
            let bob = try await server.connectedClient("bob")
            func texts(_ messages: [Message]) -> [String?] { messages.map { $0.content(as: TextMessage.self)?.content } }

            let newest = try await bob.getRemoteHistoryMessages(.system, targetId: "notice", count: 3)
            #expect(texts(newest.messages) == ["m4", "b1", "m3"])
            #expect(newest.isRemaining)
            #expect(newest.messages.allSatisfy { $0.conversationType == .system && $0.targetId == "notice" && $0.direction == .receive })
            let older = try await bob.getRemoteHistoryMessages(.system, targetId: "notice", recordTime: newest.messages.last!.sentTime, count: 10)
            #expect(texts(older.messages) == ["m2", "b0", "m1", "m0"])
            #expect(!older.isRemaining)
            let forward = try await bob.getRemoteHistoryMessages(.system, targetId: "notice", recordTime: older.messages[1].sentTime, count: 3, order: .ascending)
            #expect(texts(forward.messages) == ["m2", "m3", "b1"])
            #expect(forward.isRemaining)
            let all = try await bob.getRemoteHistoryMessages(.system, targetId: "notice", count: 100)
            #expect(texts(all.messages) == expected.reversed().map(Optional.some))
            #expect(texts(try await bob.getRemoteHistoryMessages(.system, targetId: "promo").messages) == ["p0"])

            // Clearing the conversation's remote history hides both logs from this user only.
            try await bob.clearHistoryMessages(.system, targetId: "notice", recordTime: all.messages[2].sentTime, clearRemote: true)
            #expect(texts(try await bob.getRemoteHistoryMessages(.system, targetId: "notice", count: 100).messages) == ["m4", "b1"])
            let (carol, _) = try await server.syncedDevice("carol")
            #expect(texts(try await carol.getRemoteHistoryMessages(.system, targetId: "notice", count: 100).messages) == ["c0", "b1", "b0"])
            await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("IMLib manages system conversations: list (pinned first, newest first), unread, do-not-disturb, pins, drafts, removal, local history")
    func conversationManagement() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let (phone, phoneInbox) = try await server.syncedDevice("bob", platform: .iOS)
            let desk = try await server.connectedClient("bob", platform: .macOS)
            let deskChanges = EventRecorder(desk.conversationStateChanges())
            // Three system accounts; "alerts" writes last, "notice" first.
            for (account, count) in [("notice", 2), ("promo", 3), ("alerts", 1)] {
                clock.advance(milliseconds: 1000)
                for index in 0..<count { try await Self.publish(server, from: account, to: ["bob"], "\(account) \(index)") }
            }
            #expect(await phoneInbox.wait(for: 6).count == 6)
            #expect(try await phone.getConversationList(types: [.system]).map(\.targetId) == ["alerts", "promo", "notice"])
            #expect(try await phone.getConversationList(types: [.private]).isEmpty)
            #expect(try await phone.getUnreadCount(.system, targetId: "promo") == 3)
            #expect(try await phone.getTotalUnreadCount() == 6)
            let paged = try await phone.getConversationList(types: [.system], count: 100,
                                                             startTime: try #require(try await phone.getConversation(.system, targetId: "promo")).sentTime)
            #expect(paged.map(\.targetId) == ["notice"], "startTime pages to older conversations")

            // Pin: first in the list, on this device and the other.
            #expect(try await phone.setConversationToTop(.system, targetId: "notice", isTop: true))
            #expect(try await phone.getConversationList(types: [.system]).map(\.targetId) == ["notice", "alerts", "promo"])
            #expect(try await phone.getTopConversationList(types: [.system]).map(\.targetId) == ["notice"])
            let notice = ConversationIdentifier(.system, targetId: "notice")
            #expect(await deskChanges.first { $0 == .top(notice, isTop: true) } != nil)
            #expect(try await desk.getConversationList(types: [.system]).first?.targetId == "notice")

            // Do-not-disturb: still counted in the total, left out when blocked ones are excluded.
            #expect(try await phone.setConversationNotificationStatus(.system, targetId: "promo", isBlocked: true) == .doNotDisturb)
            #expect(try await phone.getConversationNotificationStatus(.system, targetId: "promo") == .doNotDisturb)
            #expect(try await phone.getBlockedConversationList(types: [.system]).map(\.targetId) == ["promo"])
            #expect(try await phone.getUnreadCount(types: [.system], containBlocked: true) == 6)
            #expect(try await phone.getUnreadCount(types: [.system], containBlocked: false) == 3)
            let promo = ConversationIdentifier(.system, targetId: "promo")
            #expect(await deskChanges.first { if case .notificationLevel(promo, _) = $0 { return true } else { return false } } != nil)
            #expect(try await desk.getConversationNotificationStatus(.system, targetId: "promo") == .doNotDisturb)

            // Reading a conversation clears its unread count.
            #expect(try await phone.clearMessagesUnreadStatus(.system, targetId: "promo"))
            #expect(try await phone.getUnreadCount(.system, targetId: "promo") == 0)
            #expect(try await phone.getTotalUnreadCount() == 3)

            // Drafts are local; an empty one reads as nil.
            #expect(try await phone.saveTextMessageDraft(.system, targetId: "alerts", content: "note to self"))
            #expect(try await phone.getTextMessageDraft(.system, targetId: "alerts") == "note to self")
            #expect(try await phone.getConversation(.system, targetId: "alerts")?.draft == "note to self")
            #expect(try await phone.clearTextMessageDraft(.system, targetId: "alerts"))
            #expect(try await phone.getTextMessageDraft(.system, targetId: "alerts") == nil)

            // Local history: newest first, at most 20 a call, paged by message id.
            for index in 2..<25 { try await Self.publish(server, from: "notice", to: ["bob"], "notice \(index)") }
            #expect(await phoneInbox.wait(for: 29).count == 29)
            let first = try await phone.getHistoryMessages(.system, targetId: "notice", oldestMessageId: -1, count: 50)
            #expect(first.count == 20, "capped at 20")
            #expect(first.first?.content(as: TextMessage.self)?.content == "notice 24")
            let rest = try await phone.getHistoryMessages(.system, targetId: "notice", oldestMessageId: first.last!.messageId, count: 20)
            #expect(rest.map { $0.content(as: TextMessage.self)?.content } == ["notice 4", "notice 3", "notice 2", "notice 1", "notice 0"])

            // Removing a conversation drops it from the list; the next message brings it back.
            #expect(try await phone.removeConversation(.system, targetId: "alerts"))
            #expect(try await phone.getConversationList(types: [.system]).map(\.targetId) == ["notice", "promo"])
            #expect(try await phone.getHistoryMessages(.system, targetId: "alerts").count == 1, "its messages stay")
            try await Self.publish(server, from: "alerts", to: ["bob"], "alerts again")
            #expect(await phoneInbox.wait(for: 30).count == 30)
            #expect(try await phone.getConversationList(types: [.system]).map(\.targetId) == ["notice", "alerts", "promo"])
            #expect(try await phone.clearConversations(types: [.system]))
            #expect(try await phone.getConversationList(types: [.system]).isEmpty)
            await phone.disconnect(); await desk.disconnect()
        }
    }
}
