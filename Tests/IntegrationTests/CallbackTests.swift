import Foundation
import IMCallbacksHTTP
import IMCore
import IMLib
import IMServer
import IMServerTesting
import IMStore
import IMStoreSQLite
import Testing

/// Callbacks to the app's server end to end: a real server sends them over async-http-client to a
/// Hummingbird application the test starts (`TestCallbackReceiver`), which checks RongCloud's
/// signature, records each call and answers as the test says; clients are real IMLib clients and
/// settings go through the Server API.
@Suite("Callbacks", .serialized)
struct CallbackTests {
    /// The sender polls every 20 ms here and retries after 50 ms, doubling to 200 ms.
    static var options: CallbackService.Options {
        var options = CallbackService.Options()
        options.pollMilliseconds = 20
        options.retryDelayMilliseconds = 50
        options.maxRetryDelayMilliseconds = 200
        options.requestTimeoutMilliseconds = 2_000
        return options
    }

    /// A server with a callback transport, a receiver for its app, and the app's callback settings.
    static func withCallbacks(clock: any WallClock = SystemClock(), store: (any IMStore)? = nil, settings: [String: String],
                              answer: @escaping @Sendable (TestCallbackReceiver.Call) -> TestCallbackReceiver.Answer = { _ in .status(200) },
                              _ body: (TestServer, TestCallbackReceiver) async throws -> Void) async throws {
        let server = try await TestServer.start(store: store, clock: clock, callbackTransport: HTTPCallbackTransport(),
                                                callbackOptions: options) { config in
            config.session.clientSendsPerSecond = 1_000
        }
        let receiver = try await TestCallbackReceiver(appKey: server.app.appKey, secret: server.app.appSecret, answer: answer)
        do {
            try await withTestServer(server) { server in
                let urls = settings.mapValues { $0.replacingOccurrences(of: "{receiver}", with: receiver.baseURL) }
                let (status, reply) = try await server.api.post("/callback/settings/set.json", form: urls)
                try #require(status == 200, "callback settings: \(reply)")
                try await body(server, receiver)
            }
            await receiver.stop()
        } catch {
            await receiver.stop()
            throw error
        }
    }

    // MARK: routing

    @Test("Full message routing posts each message in RongCloud's form, signed; Server API messages only when set")
    func routing() async throws {
        try await Self.withCallbacks(settings: ["routingUrl": "{receiver}/route"]) { server, receiver in
            let alice = try await server.connectedClient("alice", platform: .iOS)
            let (bob, inbox) = try await server.syncedDevice("bob")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hello & 你好 bob"))
            let calls = await receiver.wait(for: 1)
            let call = try #require(calls.first)
            #expect(call.path == "/route")
            #expect(call.signatureValid, "signed with the app's secret: \(call.query)")
            #expect(call.header("content-type") == "application/x-www-form-urlencoded")
            #expect(call.header("x-callback-id") == sent.messageUId)
            let form = call.form
            #expect(form["fromUserId"] == "alice")
            #expect(form["toUserId"] == "bob")
            #expect(form["objectName"] == "RC:TxtMsg")
            let content = try #require(form["content"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? [String: Any])
            #expect(content["content"] as? String == "hello & 你好 bob")
            #expect(form["channelType"] == "PERSON")
            #expect(form["msgTimestamp"] == String(sent.sentTime))
            #expect(form["msgUID"] == sent.messageUId)
            #expect(form["sensitiveType"] == "0")
            #expect(form["source"] == "iOS")
            #expect(form["busChannel"] == "")
            #expect(await inbox.wait(for: 1).count == 1)

            // A group message: GROUP, from a desktop client: PC.
            let (status, _) = try await server.api.post("/group/create.json", form: ["userId": "alice,bob", "groupId": "g1", "groupName": "g1"])
            #expect(status == 200)
            _ = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "to the group"))
            let group = try #require(await receiver.wait(for: 2).last?.form)
            #expect(group["channelType"] == "GROUP")
            #expect(group["toUserId"] == "g1")
            #expect(group["source"] == "PC")

            // Server API messages are not routed by default...
            let (published, _) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "system", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"from the app"}"#])
            #expect(published == 200)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after the publish"))
            let third = try #require(await receiver.wait(for: 3).last?.form)
            #expect(third["fromUserId"] == "alice", "the Server API message was skipped: \(third)")
            // ...and are with routingServerApi, with source Server.
            let (changed, _) = try await server.api.post("/callback/settings/set.json", form: ["routingServerApi": "true"])
            #expect(changed == 200)
            _ = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "system", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"routed"}"#])
            let fourth = try #require(await receiver.wait(for: 4).last?.form)
            #expect(fourth["fromUserId"] == "system")
            #expect(fourth["source"] == "Server")
            #expect(receiver.received.count == 4)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("Routing and sensitive words: a replaced word is routed replaced; a blocked message only when set")
    func routingSensitiveWords() async throws {
        try await Self.withCallbacks(settings: ["routingUrl": "{receiver}/route"]) { server, receiver in
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "darn", "replaceWord": "***"])
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "forbidden"])
            let alice = try await server.connectedClient("alice")
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "darn it"))
            let replaced = try #require(await receiver.wait(for: 1).first?.form)
            #expect(replaced["content"]?.contains("*** it") == true)
            #expect(replaced["sensitiveType"] == "2")

            let blocked = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "forbidden words"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "fine"))
            let next = try #require(await receiver.wait(for: 2).last?.form)
            #expect(next["content"]?.contains("fine") == true, "the blocked message is not routed by default")

            _ = try await server.api.post("/callback/settings/set.json", form: ["routingBlocked": "true"])
            let second = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "forbidden again"))
            let routed = try #require(await receiver.wait(for: 3).last?.form)
            #expect(routed["sensitiveType"] == "1")
            #expect(routed["msgUID"] == second.messageUId)
            #expect(receiver.received.allSatisfy { $0.form["msgUID"] != blocked.messageUId })
            await alice.disconnect()
        }
    }

    // MARK: online status

    @Test("Deactivation results: one form-encoded callback per user with the call's operateId, type 0 for a deactivation and 1 for a reactivation")
    func deactivationResults() async throws {
        try await Self.withCallbacks(settings: ["deactivationUrl": "{receiver}/accounts"]) { server, receiver in
            let (_, deactivated) = try await server.api.post("/user/deactivate.json", form: ["userId": "ann,bob"])
            let operateId = try #require(deactivated["operateId"] as? String)
            let (_, reactivated) = try await server.api.post("/user/reactivate.json", form: ["userId": "ann"])
            let calls = await receiver.wait(for: 3)
            try #require(calls.count == 3)
            #expect(calls.allSatisfy { $0.signatureValid && $0.path == "/accounts" && $0.header("content-type") == "application/x-www-form-urlencoded" })
            let forms = calls.map(\.form)
            #expect(Set(forms.prefix(2).map { $0["userId"] ?? "" }) == ["ann", "bob"])
            #expect(forms.prefix(2).allSatisfy { $0["operateId"] == operateId && $0["type"] == "0" && $0["code"] == "0" && Int64($0["time"] ?? "") != nil })
            #expect(forms[2]["userId"] == "ann" && forms[2]["type"] == "1" && forms[2]["operateId"] == reactivated["operateId"] as? String)
            let (_, settings) = try await server.api.post("/callback/settings/get.json", form: [:])
            #expect((settings["settings"] as? [String: Any])?["deactivationUrl"] as? String == receiver.baseURL + "/accounts")
        }
    }

    @Test("Online status: each device's online, offline and logout, in order, in RongCloud's JSON")
    func onlineStatus() async throws {
        try await Self.withCallbacks(settings: ["statusUrl": "{receiver}/status"]) { server, receiver in
            let phone = try await server.connectedClient("alice", platform: .iOS)
            await phone.disconnect()
            let desktop = try await server.connectedClient("alice", platform: .macOS)
            await desktop.logout()
            let calls = await receiver.wait(for: 4)
            try #require(calls.count == 4)
            let events = try calls.map { call -> [String: Any] in
                #expect(call.signatureValid)
                #expect(call.header("content-type") == "application/json")
                let array = try #require(call.json as? [[String: Any]])
                try #require(array.count == 1)
                return array[0]
            }
            #expect(events.map { $0["status"] as? String } == ["0", "1", "0", "2"])
            #expect(events.map { $0["os"] as? String } == ["iOS", "iOS", "PC", "PC"])
            #expect(events.allSatisfy { $0["userid"] as? String == "alice" })
            #expect((events[0]["clientIp"] as? String)?.hasPrefix("127.0.0.1:") == true)
            #expect(events[0]["sessionId"] as? String == events[1]["sessionId"] as? String)
            #expect(events[1]["sessionId"] as? String != events[2]["sessionId"] as? String)
            let times = events.compactMap { ($0["time"] as? NSNumber)?.int64Value }
            #expect(times.count == 4 && times == times.sorted())
        }
    }

    // MARK: chatrooms

    @Test("Chatroom status and attribute callbacks: created, joined, attributes set, left, destroyed")
    func chatroomCallbacks() async throws {
        try await Self.withCallbacks(settings: ["chatroomStatusUrl": "{receiver}/room", "chatroomAttributeUrl": "{receiver}/kv"]) { server, receiver in
            let alice = try await server.connectedClient("alice")
            try await alice.joinChatRoom("room1", messageCount: -1)
            try await alice.setChatRoomEntry("room1", key: "topic", value: "cats")
            try await alice.quitChatRoom("room1")
            let (status, _) = try await server.api.post("/chatroom/destroy.json", form: ["chatroomId": "room1"])
            #expect(status == 200)
            let calls = await receiver.wait(for: 5)
            try #require(calls.count == 5)
            #expect(calls.allSatisfy { $0.signatureValid })
            let rooms = calls.filter { $0.path == "/room" }.compactMap { ($0.json as? [[String: Any]])?.first }
            #expect(rooms.map { $0["type"] as? Int } == [0, 1, 2, 3])
            #expect(rooms.map { $0["status"] as? Int } == [0, 0, 0, 0])
            #expect(rooms.allSatisfy { $0["chatRoomId"] as? String == "room1" })
            #expect(rooms[1]["userIds"] as? [String] == ["alice"])
            #expect(rooms[0]["userIds"] as? [String] == [])
            let kv = try #require(calls.first { $0.path == "/kv" }?.json as? [String: Any])
            #expect(kv["chatroomId"] as? String == "room1")
            #expect(kv["key"] as? String == "topic")
            #expect(kv["value"] as? String == "cats")
            #expect(kv["optType"] as? Int == 1)
            #expect(kv["userId"] as? String == "alice")
            await alice.disconnect()
        }
    }

    // MARK: the message callback

    /// The app's server of these tests: holds back "block", replaces "replace", holds "slow".
    static let moderator: @Sendable (TestCallbackReceiver.Call) -> TestCallbackReceiver.Answer = { call in
        let content = call.form["content"] ?? ""
        if content.contains("block") { return .status(200, body: #"{"pass":0,"extra":"not here"}"#) }
        if content.contains("replace") {
            return .status(200, body: #"{"pass":1,"replaceContent":"{\"content\":\"replaced by the app\"}","replacePushContent":"new push"}"#)
        }
        if content.contains("slow") { return .held(body: #"{"pass":1}"#) }
        if content.contains("garbage") { return .status(200, body: "not json") }
        return .status(200, body: #"{"pass":1}"#)
    }

    @Test("The message callback passes, blocks (the sender told, as RongCloud's messageDidBlock) and replaces")
    func messageCallback() async throws {
        try await Self.withCallbacks(settings: ["messageCallbackUrl": "{receiver}/moderate", "blockNotice": "true"],
                                     answer: Self.moderator) { server, receiver in
            let alice = try await server.connectedClient("alice", platform: .android)
            let blockedEvents = EventRecorder(alice.messageBlockedEvents())
            let (bob, inbox) = try await server.syncedDevice("bob")

            let passed = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi"))
            let call = try #require(await receiver.wait(for: 1).first)
            #expect(call.signatureValid)
            let form = call.form
            #expect(form["appKey"] == server.app.appKey)
            #expect(form["fromUserId"] == "alice")
            #expect(form["targetId"] == "bob")
            #expect(form["msgType"] == "RC:TxtMsg")
            #expect(form["channelType"] == "PERSON")
            #expect(form["os"] == "Android")
            #expect(form["messageId"] == passed.messageUId, "the uid asked about is the one delivered")
            #expect((form["clientIp"] ?? "").hasPrefix("127.0.0.1:"))
            #expect(form["msgTimeStamp"].flatMap(Int64.init) != nil)

            let blocked = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "block this"))
            let notice = try #require(await blockedEvents.wait(for: 1).first)
            #expect(notice.blockType == .thirdPartyModeration)
            #expect(notice.extra == "not here")
            #expect(notice.blockedMessageUId == blocked.messageUId)
            #expect(notice.targetId == "bob" && notice.conversationType == .private)

            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "please replace"))
            let received = await inbox.wait(for: 2)
            try #require(received.count == 2)
            #expect((received[0].message.content as? TextMessage)?.content == "hi")
            #expect((received[1].message.content as? TextMessage)?.content == "replaced by the app")

            // An unusable answer delivers the message (fail-open, RongCloud's rule).
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "garbage answer"))
            #expect(await inbox.wait(for: 3).count == 3)
            #expect(blockedEvents.items.count == 1)
            let (_, settings) = try await server.api.post("/callback/settings/get.json", form: [:])
            let stats = try #require(settings["stats"] as? [String: Any])
            #expect(stats["messagesBlocked"] as? Int == 1)
            #expect(stats["messageCallbackFailures"] as? Int == 1)
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("The message callback's timeout on the server's clock: fail-open delivers, fail-closed holds back; other conversations never wait")
    func messageCallbackTimeout() async throws {
        let clock = ManualClock(milliseconds: SystemClock().nowMilliseconds())
        try await Self.withCallbacks(clock: clock, settings: ["messageCallbackUrl": "{receiver}/moderate", "messageCallbackTimeout": "3000",
                                                              "blockNotice": "true"],
                                     answer: Self.moderator) { server, receiver in
            let alice = try await server.connectedClient("alice")
            let blockedEvents = EventRecorder(alice.messageBlockedEvents())
            let (bob, bobInbox) = try await server.syncedDevice("bob")
            let (carol, carolInbox) = try await server.syncedDevice("carol")

            // A slow answer holds that message only.
            let slow = Task { try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "slow one")) }
            _ = await receiver.wait(for: 1)
            _ = try await alice.sendMessage(.private, targetId: "carol", content: TextMessage(content: "meanwhile"))
            #expect(await carolInbox.wait(for: 1).count == 1, "another conversation of the same sender did not wait")
            #expect(bobInbox.items.isEmpty)
            // The app's timeout passes on the server's clock: delivered as sent (fail-open).
            try await waitUntil("the review is waiting on the clock") { clock.sleeping > 0 }
            clock.advance(milliseconds: 3_001)
            let sent = try await slow.value
            let got = await bobInbox.wait(for: 1)
            #expect(got.first?.message.messageUId == sent.messageUId)

            // Fail-closed: a late answer holds the message back, and the sender is told.
            let (status, _) = try await server.api.post("/callback/settings/set.json", form: ["messageCallbackFailClosed": "true"])
            #expect(status == 200)
            let closed = Task { try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "slow two")) }
            _ = await receiver.wait(for: 3)
            try await waitUntil("the review is waiting on the clock") { clock.sleeping > 0 }
            clock.advance(milliseconds: 3_001)
            let held = try await closed.value
            let notice = try #require(await blockedEvents.wait(for: 1).first)
            #expect(notice.blockedMessageUId == held.messageUId)
            #expect(notice.blockType == .thirdPartyModeration)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after"))
            let after = await bobInbox.wait(for: 2)
            #expect(after.count == 2)
            #expect((after.last?.message.content as? TextMessage)?.content == "after", "the held message never reached bob")
            receiver.release()
            await alice.disconnect()
            await bob.disconnect()
            await carol.disconnect()
        }
    }

    // MARK: delivery guarantee

    @Test("A receiver down for a while: messages are delivered meanwhile, and every callback arrives once it is back, in order")
    func receiverDownThenBack() async throws {
        let down = Locked(true)
        try await Self.withCallbacks(settings: ["routingUrl": "{receiver}/route"], answer: { _ in down.value ? .status(503) : .status(200) }) { server, receiver in
            let alice = try await server.connectedClient("alice")
            let (bob, inbox) = try await server.syncedDevice("bob")
            var uids: [String] = []
            for index in 0..<20 {
                uids.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "m\(index)")).messageUId)
            }
            #expect(await inbox.wait(for: 20).count == 20, "delivery does not wait for the app's server")
            _ = await receiver.wait(for: 3)
            down.withLock { $0 = false }
            let expected = Set(uids)
            try await waitUntil("every message routed") {
                Set(receiver.received.suffix(20).compactMap { $0.form["msgUID"] }) == expected
            }
            // One conversation's callbacks go one at a time, the first again until taken: once the
            // receiver is back it gets the twenty in send order, each once.
            let accepted = receiver.received.compactMap { $0.form["msgUID"] }
            #expect(Array(accepted.suffix(20)) == uids, "delivered in order once back")
            try await waitUntil("backlog empty") {
                let (_, now) = try await server.api.post("/callback/settings/get.json", form: [:])
                return now["backlog"] as? Int == 0
            }
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("Callbacks taken on survive a restart of the server and are delivered by the next start")
    func restart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("callbacks-restart-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        defer {
            try? store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let accepting = Locked(false)
        let receiver = try await TestCallbackReceiver(appKey: "testappkey", secret: "testsecret") { _ in
            accepting.value ? .status(200) : .status(500)
        }
        var uids: [String] = []
        let first = try await TestServer.start(store: store, callbackTransport: HTTPCallbackTransport(), callbackOptions: Self.options)
        try await withTestServer(first) { server in
            _ = try await server.api.post("/callback/settings/set.json", form: ["routingUrl": receiver.baseURL + "/route"])
            let alice = try await server.connectedClient("alice")
            for index in 0..<5 {
                uids.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "r\(index)")).messageUId)
            }
            _ = await receiver.wait(for: 1)
            await alice.disconnect()
        }
        let waiting = try await store.callbackBacklog().values.reduce(0, +)
        #expect(waiting == 5, "all five wait in the outbox")
        accepting.withLock { $0 = true }
        let second = try await TestServer.start(store: store, callbackTransport: HTTPCallbackTransport(), callbackOptions: Self.options)
        try await withTestServer(second) { _ in
            try await waitUntil("the five delivered after the restart") {
                try await store.callbackBacklog().isEmpty
            }
        }
        let delivered = receiver.received.suffix(5).compactMap { $0.form["msgUID"] }
        #expect(delivered == uids)
        await receiver.stop()
    }

    @Test("Messages committed after the routing cursor (a crash came before their rows) are routed at the next start, as they would have been")
    func routingRecoveredFromTheLog() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("callbacks-recover-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        defer {
            try? store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let receiver = try await TestCallbackReceiver(appKey: "testappkey", secret: "testsecret")
        // A server whose routing never ran: the messages are in the log, no row was taken on.
        var uids: [String] = []
        let first = try await TestServer.start(store: store)
        let appId = first.app.id
        try await withTestServer(first) { server in
            let alice = try await server.connectedClient("alice", platform: .android)
            for index in 0..<3 {
                uids.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "c\(index)")).messageUId)
            }
            _ = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "system", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"api"}"#])
            await alice.disconnect()
        }
        // As a crash leaves it: the cursor before those messages, routing configured.
        try await store.enqueueCallbacks([], node: "single", cursor: 0)
        let settings = #"{"blockNotice":false,"routing":{"includeBlocked":false,"includeServerAPI":false,"url":"\#(receiver.baseURL)/route"}}"#
        try await store.setCallbackSettings(appId: appId, settings: Data(settings.utf8))
        let second = try await TestServer.start(store: store, callbackTransport: HTTPCallbackTransport(), callbackOptions: Self.options)
        try await withTestServer(second) { _ in
            let calls = await receiver.wait(for: 3)
            #expect(calls.compactMap { $0.form["msgUID"] } == uids, "the client's three, in order; the Server API message is not routed")
            #expect(calls.allSatisfy { $0.form["source"] == "Android" }, "the sender's platform kept with the message")
            try await waitUntil("backlog empty") { try await store.callbackBacklog().isEmpty }
            #expect(receiver.received.count == 3)
        }
        await receiver.stop()
    }

    @Test("An app's backlog past its bound gives up its oldest callbacks, counted as dropped")
    func backlogBound() async throws {
        var options = Self.options
        options.maxBacklogPerApp = 5
        let down = Locked(true)
        let server = try await TestServer.start(store: nil, callbackTransport: HTTPCallbackTransport(), callbackOptions: options) { config in
            config.session.clientSendsPerSecond = 1_000
        }
        let receiver = try await TestCallbackReceiver(appKey: server.app.appKey, secret: server.app.appSecret) { _ in
            down.value ? .status(500) : .status(200)
        }
        try await withTestServer(server) { server in
            _ = try await server.api.post("/callback/settings/set.json", form: ["routingUrl": receiver.baseURL + "/route"])
            let alice = try await server.connectedClient("alice")
            var uids: [String] = []
            for index in 0..<8 {
                uids.append(try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "b\(index)")).messageUId)
            }
            try await waitUntil("the oldest given up") {
                let (_, now) = try await server.api.post("/callback/settings/get.json", form: [:])
                return (now["stats"] as? [String: Any])?["dropped"] as? Int == 3 && now["backlog"] as? Int == 5
            }
            down.withLock { $0 = false }
            let expected = Array(uids.suffix(5))
            try await waitUntil("the newest five delivered") {
                Array(receiver.received.suffix(5).compactMap { $0.form["msgUID"] }) == expected
            }
            await alice.disconnect()
        }
        await receiver.stop()
    }

    // MARK: configuration

    @Test("Bad configuration is refused with 1002 and changes nothing")
    func badConfiguration() async throws {
        try await Self.withCallbacks(settings: [:]) { server, _ in
            for (form, words) in [
                (["routingUrl": "not a url"], "routingUrl"),
                (["statusUrl": "ftp://example.com/status"], "http:// or https://"),
                (["messageCallbackUrl": "http://user:secret@example.com/"], "user name"),
                (["routingServerApi": "true"], "routingUrl"),
                (["messageCallbackFailClosed": "true"], "messageCallbackUrl"),
                (["messageCallbackUrl": "http://127.0.0.1:1/x", "messageCallbackTypes": "2"], "messageCallbackTypes"),
                (["messageCallbackUrl": "http://127.0.0.1:1/x", "messageCallbackTimeout": "10"], "messageCallbackTimeout"),
            ] as [([String: String], String)] {
                let (status, body) = try await server.api.post("/callback/settings/set.json", form: form)
                #expect(status == 400, "\(form)")
                #expect(body["code"] as? Int == 1002, "\(form): \(body)")
                #expect((body["errorMessage"] as? String ?? "").contains(words), "\(form): \(body)")
            }
            let (_, now) = try await server.api.post("/callback/settings/get.json", form: [:])
            let settings = try #require(now["settings"] as? [String: Any])
            #expect(settings["routing"] == nil && settings["statusUrl"] == nil && settings["messageCallback"] == nil)
        }
    }
}
