import Foundation
import GRDB
import Logging
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMLib
import IMPush
@testable import IMServer
import IMServerTesting
import IMStore
import IMStoreSQLite
import Testing

/// Push notifications end to end: a real server decides, records and sends pushes through the
/// provider transport to local APNs (HTTP/2 + TLS, JWT checked), FCM (OAuth2 + HTTP v1) and webhook
/// servers; clients are real IMLib clients; settings and troubleshooting go through the Server API.
@Suite("Push delivery", .serialized)
struct PushDeliveryTests {
    /// The push service polls for due retries every 20 ms in these tests, and retries after 1 s of
    /// the (manual) clock.
    static var options: PushService.Options {
        var options = PushService.Options()
        options.pollMilliseconds = 20
        options.retryDelayMilliseconds = 1_000
        options.maxAttempts = 4
        return options
    }

    /// A server with push credentials for the local providers (and `settings` on top).
    static func withPushServer(clock: any WallClock = SystemClock(), store: (any IMStore)? = nil, settings: [String: Any] = [:],
                               providers given: TestPushProviders? = nil, options: PushService.Options = Self.options,
                               _ body: (TestServer, TestPushProviders) async throws -> Void) async throws {
        let providers: TestPushProviders
        if let given { providers = given } else { providers = try await TestPushProviders.start() }
        do {
            let server = try await TestServer.start(push: try providers.transport(timeoutSeconds: 5), pushOptions: options, store: store, clock: clock)
            try await withTestServer(server) { server in
                let change = providers.credentialSettings.merging(settings) { $1 }
                let (status, reply) = try await server.api.post("/push/settings/set.json", json: change)
                try #require(status == 200, "push settings: \(reply)")
                try await body(server, providers)
            }
            if given == nil { await providers.stop() }
        } catch {
            if given == nil { await providers.stop() }
            throw error
        }
    }

    /// A device of `user` that registered `token` and then went offline (receiving pushes).
    @discardableResult
    static func offlineDevice(_ server: TestServer, _ user: String, token: String, kind: PushTokenKind = .apns,
                              platform: Platform = .iOS) async throws -> IMClient {
        let client = try await server.connectedClient(user, platform: platform)
        try await client.setPushToken(token, kind: kind, environment: "production")
        await client.disconnect()
        try await waitOffline(server, user)
        return client
    }

    static func waitOffline(_ server: TestServer, _ user: String) async throws {
        try await waitUntil("\(user) is offline") {
            let (_, body) = try await server.api.post("/user/checkOnline.json", form: ["userId": user])
            return body["status"] as? String == "0"
        }
    }

    /// The push records of a message (or a user), oldest first.
    static func records(_ server: TestServer, messageUID: String? = nil, userId: String? = nil) async throws -> [[String: Any]] {
        var form: [String: String] = [:]
        if let messageUID { form["messageUID"] = messageUID }
        if let userId { form["userId"] = userId }
        let (status, body) = try await server.api.post("/push/records/query.json", form: form)
        #expect(status == 200, "records: \(body)")
        return ((body["records"] as? [[String: Any]]) ?? []).sorted { ($0["createdAt"] as? Int ?? 0) < ($1["createdAt"] as? Int ?? 0) }
    }

    /// Waits until the message's records are all settled (none pending) and returns them.
    static func settledRecords(_ server: TestServer, messageUID: String, count: Int = 1) async throws -> [[String: Any]] {
        try await waitUntil("\(count) settled push records of \(messageUID)") {
            let records = try await records(server, messageUID: messageUID)
            return records.count == count && records.allSatisfy { $0["status"] as? String != "pending" }
        }
        return try await records(server, messageUID: messageUID)
    }

    static func aps(_ request: TestAPNsServer.Request) -> [String: Any] { request.json?["aps"] as? [String: Any] ?? [:] }
    static func alert(_ request: TestAPNsServer.Request) -> [String: Any] { aps(request)["alert"] as? [String: Any] ?? [:] }
    static func requests(_ providers: TestPushProviders, to token: String) -> [TestAPNsServer.Request] {
        providers.apns.requests.filter { $0.deviceToken == token }
    }

    @Test("a private message to an offline iPhone: RongCloud's APNs payload with the push config, a sent record, badges counting up and reset by a connect; no push while online")
    func privateMessageToOfflineIPhone() async throws {
        try await Self.withPushServer { server, providers in
            let token = TestPushProviders.apnsToken("bob")
            let phone = try await Self.offlineDevice(server, "bob", token: token)
            let alice = try await server.connectedClient("alice")
            var config = MessagePushConfig(pushTitle: "Alice S.", pushData: #"{"order":7}"#)
            config.iOSConfig = MessagePushConfig.IOSPushConfig(threadId: "orders", apnsCollapseId: "order-7", interruptionLevel: "time-sensitive")
            let first = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hello bob"), pushConfig: config)
            #expect(try await Self.settledRecords(server, messageUID: first.messageUId).first?["status"] as? String == "sent")
            let request = try #require(Self.requests(providers, to: token).first)
            #expect(request.header("apns-topic") == TestPushProviders.bundleId)
            #expect(request.header("apns-push-type") == "alert")
            #expect(request.header("apns-collapse-id") == "order-7")
            #expect(request.httpVersion.contains("2"), "APNs is spoken over HTTP/2")
            #expect(Self.alert(request)["title"] as? String == "Alice S." && Self.alert(request)["body"] as? String == "hello bob")
            let aps = Self.aps(request)
            #expect(aps["badge"] as? Int == 1 && aps["sound"] as? String == "default")
            #expect(aps["thread-id"] as? String == "orders" && aps["interruption-level"] as? String == "time-sensitive")
            let rc = request.json?["rc"] as? [String: String] ?? [:]
            #expect(rc["id"] == first.messageUId && rc["cType"] == "PR" && rc["fId"] == "alice" && rc["oName"] == "RC:TxtMsg" && rc["tId"] == "bob")
            #expect(rc["rId"] == "bob", "the recipient, which the record keeps apart from the part its message's pushes share")
            #expect(request.json?["appData"] as? String == #"{"order":7}"#)
            // The local copy keeps the push config, for a resend.
            #expect(try await alice.getMessage(messageId: first.messageId)?.pushConfig == config)

            // Without a push config: the sender's name as the title; the badge counts up.
            let second = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "are you there?"))
            _ = try await Self.settledRecords(server, messageUID: second.messageUId)
            let again = try #require(Self.requests(providers, to: token).last)
            #expect(Self.alert(again)["title"] as? String == "alice" && Self.alert(again)["body"] as? String == "are you there?")
            #expect(Self.aps(again)["badge"] as? Int == 2)
            // The metrics count the decisions and the provider's answers.
            let (metrics, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/metrics")!)
            let lines = String(decoding: metrics, as: UTF8.self).split(separator: "\n")
            #expect(lines.contains(#"imserver_push_attempts_total{status="sent"} 2"#), "\(lines.filter { $0.contains("push") })")
            #expect(lines.contains { $0.hasPrefix(#"imserver_push_decisions_total{status="pending"} "#) && !$0.hasSuffix(" 0") })

            // Bob's phone comes online: no push while it is, and its badge starts again afterwards.
            let synced = EventRecorder(phone.offlineMessageSyncCompleted())
            try await phone.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            let online = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "online now"))
            await phone.disconnect()
            try await Self.waitOffline(server, "bob")
            let third = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "gone again"))
            _ = try await Self.settledRecords(server, messageUID: third.messageUId)
            #expect(try await Self.records(server, messageUID: online.messageUId).isEmpty, "no push, and no record, for an online user")
            #expect(Self.requests(providers, to: token).count == 3)
            #expect(Self.aps(try #require(Self.requests(providers, to: token).last))["badge"] as? Int == 1, "the connect reset the badge")
        }
    }

    @Test("FCM devices get an FCM v1 message through an OAuth2 token; webhook devices a signed POST")
    func fcmAndWebhook() async throws {
        try await Self.withPushServer { server, providers in
            try await Self.offlineDevice(server, "carol", token: "fcm-token-carol", kind: .fcm, platform: .android)
            let hook = providers.webhook.url("/devices/dave")
            try await Self.offlineDevice(server, "dave", token: hook, kind: .webhook, platform: .android)
            let alice = try await server.connectedClient("alice")
            let toCarol = try await alice.sendMessage(.private, targetId: "carol", content: TextMessage(content: "hi carol"), pushData: "carol-data")
            let toDave = try await alice.sendMessage(.private, targetId: "dave", content: TextMessage(content: "hi dave"))
            #expect(try await Self.settledRecords(server, messageUID: toCarol.messageUId).first?["status"] as? String == "sent")
            #expect(try await Self.settledRecords(server, messageUID: toDave.messageUId).first?["status"] as? String == "sent")

            let message = try #require(providers.fcm.messages.first { $0.token == "fcm-token-carol" })
            let fcmNotification = message.message?["notification"] as? [String: Any]
            #expect(fcmNotification?["title"] as? String == "alice" && fcmNotification?["body"] as? String == "hi carol")
            let data = message.message?["data"] as? [String: String] ?? [:]
            #expect(data["appData"] == "carol-data")
            let fcmRC = data["rc"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
            #expect(fcmRC?["id"] == toCarol.messageUId && fcmRC?["rId"] == "carol")
            #expect(!providers.fcm.tokenExchanges.isEmpty && providers.fcm.tokenExchanges.allSatisfy { $0.error == nil })

            let delivery = try #require(providers.webhook.deliveries.first { $0.path == "/devices/dave" })
            #expect(delivery.signatureValid, "the webhook request is signed with the app's secret")
            let hooked = delivery.json?["notification"] as? [String: Any]
            #expect(hooked?["body"] as? String == "hi dave")
            let hookedRC = hooked?["rc"] as? [String: String]
            #expect(hookedRC?["id"] == toDave.messageUId && hookedRC?["rId"] == "dave")
        }
    }

    @Test("each rule that holds a push back leaves its code: SILENT, P19, P17 (and @ through it), P16, P23, WEB_ONLINE")
    func suppressionCodes() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000) // 2027-01-15T08:00:00Z
        try await Self.withPushServer(clock: clock) { server, providers in
            let token = TestPushProviders.apnsToken("bob")
            try await Self.offlineDevice(server, "bob", token: token)
            let alice = try await server.connectedClient("alice")

            let silent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "psst"), disableNotification: true)
            #expect(try await Self.settledRecords(server, messageUID: silent.messageUId).first?["code"] as? String == PushCode.silent)

            // Do-not-disturb on the conversation with alice.
            _ = try await server.api.post("/conversation/notification/set.json",
                                          form: ["conversationType": "1", "requestId": "bob", "targetId": "alice", "isMuted": "1"])
            let muted = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "muted"))
            #expect(try await Self.settledRecords(server, messageUID: muted.messageUId).first?["code"] as? String == PushCode.doNotDisturb)
            _ = try await server.api.post("/conversation/notification/set.json",
                                          form: ["conversationType": "1", "requestId": "bob", "targetId": "alice", "isMuted": "0"])

            // Quiet hours 07:00 UTC for two hours cover 08:00; level 5: nothing, not even @ ... but @ passes all DND.
            let (status, reply) = try await server.api.post("/user/blockPushPeriod/set.json",
                                                            form: ["userId": "bob", "startTime": "07:00:00", "period": "120", "level": "5"])
            #expect(status == 200, "\(reply)")
            let (_, period) = try await server.api.post("/user/blockPushPeriod/get.json", form: ["userId": "bob"])
            #expect((period["data"] as? [String: Any])?["period"] as? Int == 120)
            let quiet = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "at 8"))
            #expect(try await Self.settledRecords(server, messageUID: quiet.messageUId).first?["code"] as? String == PushCode.quietHours)
            _ = try await server.api.post("/group/create.json", rawForm: "userId=alice&userId=bob&groupId=g1&groupName=Team")
            let mention = TextMessage(content: "@bob look", mentionedInfo: MentionedInfo(type: .users, userIdList: ["bob"], mentionedContent: "Alice mentioned you"))
            let mentioned = try await alice.sendMessage(.group, targetId: "g1", content: mention)
            let pushed = try await Self.settledRecords(server, messageUID: mentioned.messageUId)
            #expect(pushed.first?["status"] as? String == "sent" && pushed.first?["body"] as? String == "Alice mentioned you",
                    "an @ passes quiet hours, even at level 5, with its mentionedContent")
            #expect(Self.alert(try #require(Self.requests(providers, to: token).last))["title"] as? String == "Team", "a group push is titled with the group")
            // Two hours later the quiet hours are over.
            clock.advance(milliseconds: 2 * 3_600_000)
            let later = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "at 10"))
            #expect(try await Self.settledRecords(server, messageUID: later.messageUId).first?["status"] as? String == "sent")
            _ = try await server.api.post("/user/blockPushPeriod/delete.json", form: ["userId": "bob"])

            // A custom type without push content: nothing to show.
            let (_, published) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "alice", "toUserId": "bob", "objectName": "App:Order", "content": #"{"id":1}"#])
            let customUID = try #require((published["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String)
            #expect(try await Self.settledRecords(server, messageUID: customUID).first?["code"] as? String == PushCode.noContent)

            // A user whose only token is a VoIP token gets no alert push: P23.
            try await Self.offlineDevice(server, "erin", token: TestPushProviders.apnsToken("erin-voip"), kind: .apnsVoIP)
            let toErin = try await alice.sendMessage(.private, targetId: "erin", content: TextMessage(content: "hi"))
            #expect(try await Self.settledRecords(server, messageUID: toErin.messageUId).first?["code"] as? String == PushCode.noDevice)
            // A user with no device at all: no record, and the view says P23.
            let (_, nobody) = try await server.api.post("/push/records/query.json", form: ["userId": "frank"])
            #expect(nobody["reason"] as? String == PushCode.noDevice && (nobody["devices"] as? [Any])?.isEmpty == true)

            // Online on the web: the phone is not pushed unless the app allows it.
            let web = try await server.connectedClient("bob", platform: .web)
            let whileWeb = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "on the web"))
            #expect(try await Self.settledRecords(server, messageUID: whileWeb.messageUId).first?["code"] as? String == PushCode.webOnline)
            _ = try await server.api.post("/push/settings/set.json", json: ["webOnlinePushEnabled": true])
            let allowed = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "allowed"))
            #expect(try await Self.settledRecords(server, messageUID: allowed.messageUId).first?["status"] as? String == "sent")
            await web.disconnect()
        }
    }

    @Test("templates: the entry in the recipient's profile language, else the app's default; an unknown template is refused with 26001 and nothing is sent")
    func templatesByLanguage() async throws {
        try await Self.withPushServer(settings: ["userSettingsEnabled": true]) { server, providers in
            let (status, reply) = try await server.api.post("/push/template/set.json", json: [
                "templateId": "order", "name": "Orders",
                "languages": ["zh_CN": ["title": "新订单", "content": "您有一个新订单"], "en_US": ["title": "New order", "content": "You have a new order"]],
            ])
            #expect(status == 200, "\(reply)")
            let (_, listed) = try await server.api.post("/push/template/query.json", form: [:])
            #expect((listed["templates"] as? [[String: Any]])?.first?["templateId"] as? String == "order")

            let bob = try await server.connectedClient("bob", platform: .iOS)
            #expect(try await bob.setPushProfile(language: "en_US").language == "en_US")
            try await bob.setPushToken(TestPushProviders.apnsToken("bob"), kind: .apns)
            await bob.disconnect()
            try await Self.waitOffline(server, "bob")
            try await Self.offlineDevice(server, "carol", token: TestPushProviders.apnsToken("carol"))
            _ = try await server.api.post("/group/create.json", rawForm: "userId=alice&userId=bob&userId=carol&groupId=shop&groupName=Shop")

            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.group, targetId: "shop", content: TextMessage(content: "order #7"),
                                                   pushConfig: MessagePushConfig(templateId: "order"))
            let records = try await Self.settledRecords(server, messageUID: sent.messageUId, count: 2)
            let byUser = Dictionary(uniqueKeysWithValues: records.map { ($0["userId"] as? String ?? "", $0) })
            #expect(byUser["bob"]?["title"] as? String == "New order" && byUser["bob"]?["body"] as? String == "You have a new order")
            #expect(byUser["carol"]?["title"] as? String == "新订单" && byUser["carol"]?["body"] as? String == "您有一个新订单")

            let before = providers.apns.requests.count
            await #expect {
                try await alice.sendMessage(.group, targetId: "shop", content: TextMessage(content: "x"),
                                            pushConfig: MessagePushConfig(templateId: "no-such-template"))
            } throws: { error in
                (error as? SendMessageError)?.error.code == .invalidPushParameter
            }
            var oversized = MessagePushConfig()
            oversized.iOSConfig = MessagePushConfig.IOSPushConfig(apnsCollapseId: String(repeating: "c", count: 65))
            await #expect {
                try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "x"), pushConfig: oversized)
            } throws: { error in
                (error as? IMError)?.code == .invalidPushParameter
            }
            #expect(try await alice.getHistoryMessages(.private, targetId: "bob").isEmpty, "the refused message was never stored")
            #expect(providers.apns.requests.count == before)

            let (removed, _) = try await server.api.post("/push/template/del.json", form: ["templateId": "order"])
            #expect(removed == 200)
        }
    }

    @Test("dead tokens are deleted: APNs 410 Unregistered and 400 BadDeviceToken, FCM UNREGISTERED")
    func tokenInvalidation() async throws {
        try await Self.withPushServer { server, providers in
            let gone = TestPushProviders.apnsToken("gone"), bad = TestPushProviders.apnsToken("bad")
            providers.apns.answer(.unregistered, forToken: gone)
            providers.apns.answer(.badDeviceToken, forToken: bad)
            providers.fcm.answer(.unregistered, forToken: "fcm-dead")
            try await Self.offlineDevice(server, "u1", token: gone)
            try await Self.offlineDevice(server, "u2", token: bad)
            try await Self.offlineDevice(server, "u3", token: "fcm-dead", kind: .fcm, platform: .android)
            let alice = try await server.connectedClient("alice")
            for user in ["u1", "u2", "u3"] {
                let sent = try await alice.sendMessage(.private, targetId: user, content: TextMessage(content: "hi"))
                let record = try #require(try await Self.settledRecords(server, messageUID: sent.messageUId).first)
                #expect(record["status"] as? String == "invalidToken", "\(user): \(record)")
                let (_, view) = try await server.api.post("/push/records/query.json", form: ["userId": user])
                #expect((view["devices"] as? [Any])?.isEmpty == true, "\(user)'s token was deleted")
                #expect(view["reason"] as? String == PushCode.noDevice)
            }
            // The next message to them makes no push at all. Decisions are made in commit order, so
            // once a later message to a user with a device is recorded, this one was decided.
            let after = try await alice.sendMessage(.private, targetId: "u1", content: TextMessage(content: "again"))
            try await Self.offlineDevice(server, "probe", token: TestPushProviders.apnsToken("probe"))
            let probe = try await alice.sendMessage(.private, targetId: "probe", content: TextMessage(content: "probe"))
            _ = try await Self.settledRecords(server, messageUID: probe.messageUId)
            #expect(try await Self.records(server, messageUID: after.messageUId).isEmpty)
        }
    }

    @Test("a provider that does not answer holds up no delivery: an online member gets the next message while the push still waits")
    func slowProviderDoesNotSlowDelivery() async throws {
        try await Self.withPushServer { server, providers in
            let token = TestPushProviders.apnsToken("bob")
            providers.apns.answer(.hang, forToken: token)
            try await Self.offlineDevice(server, "bob", token: token)
            let (carol, inbox) = try await server.syncedDevice("carol")
            let alice = try await server.connectedClient("alice")
            let stuck = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "to the phone"))
            try await waitUntil("the push is with APNs") { Self.requests(providers, to: token).count == 1 }
            _ = try await alice.sendMessage(.private, targetId: "carol", content: TextMessage(content: "to carol"))
            #expect(await inbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.content == "to carol")
            let waiting = try #require(try await Self.records(server, messageUID: stuck.messageUId).first)
            #expect(waiting["status"] as? String == "pending" && waiting["attempts"] as? Int == 0,
                    "carol's message arrived while bob's push was still unanswered")
            await carol.disconnect()
        }
    }

    @Test("a 503 is tried again after the backoff on the manual clock, with the same apns-id; a 429's Retry-After is honoured")
    func retryAfterServiceUnavailable() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await Self.withPushServer(clock: clock) { server, providers in
            let token = TestPushProviders.apnsToken("bob")
            providers.apns.answer(.serviceUnavailable(retryAfter: nil), forToken: token)
            try await Self.offlineDevice(server, "bob", token: token)
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "retry me"))
            try await waitUntil("the first attempt") {
                try await Self.records(server, messageUID: sent.messageUId).first?["attempts"] as? Int == 1
            }
            let pending = try #require(try await Self.records(server, messageUID: sent.messageUId).first)
            #expect(pending["status"] as? String == "pending" && (pending["code"] as? String ?? "").contains("503"))
            #expect(pending["nextAttemptAt"] as? Int == Int(clock.nowMilliseconds()) + 1_000, "the first retry 1 s later")
            providers.apns.answer(.success, forToken: token)
            clock.advance(milliseconds: 1_000)
            #expect(try await Self.settledRecords(server, messageUID: sent.messageUId).first?["status"] as? String == "sent")
            let attempts = Self.requests(providers, to: token)
            #expect(attempts.count == 2)
            #expect(attempts[0].header("apns-id") != nil && attempts[0].header("apns-id") == attempts[1].header("apns-id"),
                    "the same apns-id on every attempt: APNs and devices can drop a duplicate")

            // 429 with Retry-After: 30 waits 30 s, not the 2 s backoff of a second attempt.
            providers.apns.answer(.tooManyRequests(retryAfter: 30), forToken: token)
            let throttled = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "throttled"))
            try await waitUntil("the throttled attempt") {
                try await Self.records(server, messageUID: throttled.messageUId).first?["attempts"] as? Int == 1
            }
            let waiting = try #require(try await Self.records(server, messageUID: throttled.messageUId).first)
            #expect(waiting["nextAttemptAt"] as? Int == Int(clock.nowMilliseconds()) + 30_000)
            providers.apns.answer(.success, forToken: token)
            clock.advance(milliseconds: 30_000)
            #expect(try await Self.settledRecords(server, messageUID: throttled.messageUId).first?["status"] as? String == "sent")
            #expect(Self.requests(providers, to: token).count == 4)
        }
    }

    @Test("pushes of several messages due at the same instant (all retried together, so sent side by side): each device gets its own message's title, body, badge, rc and apns-id")
    func batchOfSeveralMessages() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await Self.withPushServer(clock: clock) { server, providers in
            let bob = TestPushProviders.apnsToken("bob"), carol = TestPushProviders.apnsToken("carol")
            for (user, token) in [("bob", bob), ("carol", carol)] {
                providers.apns.answer(.serviceUnavailable(retryAfter: nil), forToken: token)
                try await Self.offlineDevice(server, user, token: token)
            }
            _ = try await server.api.post("/group/create.json", rawForm: "userId=alice&userId=bob&userId=carol&groupId=team&groupName=Team")
            _ = try await server.api.post("/user/remarks/set.json", form: ["userId": "carol", "remarks": #"[{"id": "alice", "remark": "Boss"}]"#])
            let alice = try await server.connectedClient("alice")
            let standup = try await alice.sendMessage(.group, targetId: "team", content: TextMessage(content: "standup"))
            let direct = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "just you"))
            let retro = try await alice.sendMessage(.group, targetId: "team", content: TextMessage(content: "retro"))
            let messages = [(standup.messageUId, 2), (direct.messageUId, 1), (retro.messageUId, 2)]
            try await waitUntil("every push tried once and refused") {
                for (uid, count) in messages {
                    let records = try await Self.records(server, messageUID: uid)
                    guard records.count == count, records.allSatisfy({ $0["attempts"] as? Int == 1 && $0["status"] as? String == "pending" }) else { return false }
                }
                return true
            }
            let firstRound = providers.apns.requests
            #expect(firstRound.count == 5)
            providers.apns.answer(.success, forToken: bob)
            providers.apns.answer(.success, forToken: carol)
            // Every record comes due at the same instant: the sender reads them as one batch.
            clock.advance(milliseconds: 1_000)
            for (uid, count) in messages {
                #expect(try await Self.settledRecords(server, messageUID: uid, count: count).allSatisfy { $0["status"] as? String == "sent" })
            }
            let secondRound = Array(providers.apns.requests.dropFirst(firstRound.count))
            #expect(secondRound.count == 5)
            struct Seen: Hashable { var token: String, uid: String, title: String, body: String, badge: Int }
            let seen = Set(secondRound.map { request in
                let rc = request.json?["rc"] as? [String: String] ?? [:]
                return Seen(token: request.deviceToken, uid: rc["id"] ?? "", title: Self.alert(request)["title"] as? String ?? "",
                            body: Self.alert(request)["body"] as? String ?? "", badge: Self.aps(request)["badge"] as? Int ?? -1)
            })
            #expect(seen == [
                Seen(token: bob, uid: standup.messageUId, title: "Team", body: "alice: standup", badge: 1),
                Seen(token: carol, uid: standup.messageUId, title: "Team", body: "Boss: standup", badge: 1),
                Seen(token: bob, uid: direct.messageUId, title: "alice", body: "just you", badge: 2),
                Seen(token: bob, uid: retro.messageUId, title: "Team", body: "alice: retro", badge: 3),
                Seen(token: carol, uid: retro.messageUId, title: "Team", body: "Boss: retro", badge: 2),
            ])
            // Each push keeps its apns-id across the attempts, and no two pushes share one.
            let firstIds = Dictionary(uniqueKeysWithValues: firstRound.map { ("\($0.deviceToken) \(($0.json?["rc"] as? [String: String])?["id"] ?? "")", $0.header("apns-id") ?? "") })
            for request in secondRound {
                let key = "\(request.deviceToken) \((request.json?["rc"] as? [String: String])?["id"] ?? "")"
                #expect(firstIds[key] == request.header("apns-id") && request.header("apns-id") != nil, "\(key)")
            }
            #expect(Set(secondRound.compactMap { $0.header("apns-id") }).count == 5)
            await alice.disconnect()
        }
    }

    @Test("a restart with a push pending sends it once: the record survives in the store and the new server takes it up")
    func restartWithPendingPush() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-push-restart-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        let providers = try await TestPushProviders.start()
        defer { try? FileManager.default.removeItem(at: directory) }
        let token = TestPushProviders.apnsToken("bob")
        providers.apns.answer(.serviceUnavailable(retryAfter: nil), forToken: token)
        var uid = ""
        try await Self.withPushServer(clock: clock, store: store, providers: providers) { server, _ in
            try await Self.offlineDevice(server, "bob", token: token)
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "survive")).messageUId
            uid = sent
            try await waitUntil("the first attempt") {
                try await Self.records(server, messageUID: sent).first?["attempts"] as? Int == 1
            }
        }
        providers.apns.answer(.success, forToken: token)
        clock.advance(milliseconds: 1_000)
        let pendingUID = uid
        try await Self.withPushServer(clock: clock, store: store, providers: providers) { server, _ in
            let records = try await Self.settledRecords(server, messageUID: pendingUID)
            #expect(records.count == 1 && records[0]["status"] as? String == "sent" && records[0]["attempts"] as? Int == 2)
        }
        #expect(Self.requests(providers, to: token).count == 2, "one failed attempt before the restart, one after: none lost, none doubled")
        try store.close()
        await providers.stop()
    }

    /// The decisions a restart catches up on: bob's and carol's phones register and go offline on
    /// a server with push (its node's cursor is set); `commit` runs on a server without push, whose
    /// messages no node decides (it returns their uids); `decide` runs on the next server with
    /// push, which decides them from its cursor in one go. The providers have every push sent.
    static func catchUp(options: PushService.Options = Self.options, commit: (TestServer) async throws -> [String],
                        decide: (TestServer, [String]) async throws -> Void) async throws -> TestPushProviders {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-push-catch-up-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        defer {
            try? store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let providers = try await TestPushProviders.start()
        do {
            try await Self.withPushServer(clock: clock, store: store, providers: providers) { server, _ in
                try await Self.offlineDevice(server, "bob", token: TestPushProviders.apnsToken("bob"))
                try await Self.offlineDevice(server, "carol", token: TestPushProviders.apnsToken("carol"))
            }
            var uids: [String] = []
            try await withTestServer(try await TestServer.start(store: store, clock: clock)) { server in uids = try await commit(server) }
            let committed = uids
            try await Self.withPushServer(clock: clock, store: store, providers: providers, options: options) { server, _ in
                try await decide(server, committed)
            }
        } catch {
            await providers.stop()
            throw error
        }
        return providers
    }

    /// The badges of the pushes `user`'s phone got.
    static func badges(_ providers: TestPushProviders, of user: String) -> [Int] {
        Self.requests(providers, to: TestPushProviders.apnsToken(user)).compactMap { Self.aps($0)["badge"] as? Int }
    }

    @Test("messages decided together (the decisions a restart catches up on) count a device's badge up one by one, also across messages to other users")
    func badgesOfMessagesDecidedTogether() async throws {
        // To bob, to carol (whose devices are read between bob's), and to bob twice more.
        let providers = try await Self.catchUp(commit: { server in
            let alice = try await server.connectedClient("alice")
            var uids: [String] = []
            for (n, target) in ["bob", "carol", "bob", "bob"].enumerated() {
                uids.append(try await alice.sendMessage(.private, targetId: target, content: TextMessage(content: "while down \(n)")).messageUId)
            }
            return uids
        }, decide: { server, uids in
            for uid in uids { _ = try await Self.settledRecords(server, messageUID: uid) }
        })
        let bobBadges = Self.badges(providers, of: "bob")
        #expect(bobBadges.sorted() == [1, 2, 3], "each message counts on from the one before it, a message to carol between them: \(bobBadges)")
        #expect(Self.badges(providers, of: "carol") == [1])
        await providers.stop()
    }

    @Test("a broadcast decided with earlier messages is written after them, whatever the transaction size: a device's badge never goes back")
    func broadcastDecidedWithEarlierMessages() async throws {
        // Decided in transactions of two records: the broadcast's page is written as soon as it
        // is decided, and the message to bob before it first.
        var options = Self.options
        options.writeChunk = 2
        let providers = try await Self.catchUp(options: options, commit: { server in
            let alice = try await server.connectedClient("alice")
            let first = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "first")).messageUId
            let (_, broadcast) = try await server.api.post("/message/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"maintenance tonight"}"#])
            return [first, try #require((broadcast["messageUID"] ?? broadcast["id"]) as? String, "\(broadcast)")]
        }, decide: { server, uids in
            _ = try await Self.settledRecords(server, messageUID: uids[0])
            _ = try await Self.settledRecords(server, messageUID: uids[1], count: 2)
            // The next message to bob counts on from the broadcast's badge.
            let alice = try await server.connectedClient("alice")
            let next = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after"))
            _ = try await Self.settledRecords(server, messageUID: next.messageUId)
        })
        let bobBadges = Self.badges(providers, of: "bob")
        #expect(bobBadges.sorted() == [1, 2, 3], "the message, the broadcast, the message after: \(bobBadges)")
        #expect(Self.badges(providers, of: "carol") == [1])
        await providers.stop()
    }

    @Test("events taken together keep their order: a message before a phone comes online is pushed, one while it is online is not, one after it left is")
    func presenceKeepsItsPlaceAmongMessages() async throws {
        try await Self.withDirectPushService(clock: SystemClock()) { push, store, _ in
            func message(_ seq: UInt64) -> ServerEvent {
                .messageCommitted(CommittedMessageEvent(message: Self.messageToBob(seq, sentTime: Int64(Date().timeIntervalSince1970 * 1000)),
                                                        origin: .system))
            }
            let phone = SessionPresence(appId: 1, userId: "bob", sessionId: "s1", platform: "iOS", deviceId: "phone")
            // Every event is queued before the service reads any: the decider takes them in one go.
            let (events, input) = AsyncStream.makeStream(of: ServerEvent.self)
            for event in [message(1), .sessionOnline(phone), message(2), .sessionOffline(phone), message(3)] { input.yield(event) }
            let running = Task { await push.run(events: events) }
            try await waitUntil("the message after bob left is decided") {
                try await !store.pushRecords(appId: 1, messageUid: "m3", userId: nil, limit: 10).isEmpty
            }
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 10).count == 1, "bob was away")
            #expect(try await store.pushRecords(appId: 1, messageUid: "m2", userId: nil, limit: 10).isEmpty, "bob's phone was online")
            input.finish()
            running.cancel()
            await running.value
        }
    }

    /// A `PushService` of its own (not in a server) on a SQLite store in a new directory, with the
    /// local providers: bob has an iPhone, app 1 APNs credentials.
    static func withDirectPushService(clock: any WallClock, options: PushService.Options = Self.options,
                                      logger: Logger = Logger(label: "imserver-test"), deliveryFirst: DeliveryFirst? = nil,
                                      _ body: (PushService, SQLiteStore, TestPushProviders) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-push-direct-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        let providers = try await TestPushProviders.start()
        defer {
            try? store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        try await store.setPushDevice(PushDeviceRecord(appId: 1, userId: "bob", deviceId: "phone", platform: "iOS", kind: .apns,
                                                       token: TestPushProviders.apnsToken("bob"), environment: "production", updatedAt: 1))
        let registry = SessionRegistry()
        let fanOut = FanOutOrder()
        let push = PushService(store: store, transport: try providers.transport(timeoutSeconds: 5), registry: registry, cluster: nil,
                               groups: GroupRosters(store: store, registry: registry, peers: ClusterPeers(transport: nil), fanOut: fanOut),
                               ultraGroups: UltraGroupRosters(store: store, registry: registry, peers: ClusterPeers(transport: nil), fanOut: fanOut),
                               clock: clock, logger: logger, node: "node0", options: options, deliveryFirst: deliveryFirst)
        _ = try await push.updateSettings(appId: 1) { settings in
            settings.credentials = PushCredentials(apns: APNsCredentials(
                bundleId: TestPushProviders.bundleId,
                authentication: .token(p8: providers.p8, keyId: TestPushProviders.keyId, teamId: TestPushProviders.teamId)))
        }
        do {
            try await body(push, store, providers)
        } catch {
            await push.transport.shutdown()
            await providers.stop()
            throw error
        }
        await push.transport.shutdown()
        await providers.stop()
    }

    /// Message `seq` ("m<seq>") from alice to bob.
    static func messageToBob(_ seq: UInt64, sentTime: Int64) -> StoredMessage {
        StoredMessage(seq: seq, appId: 1, conversationType: .private, conversationKey: privateConversationKey("alice", "bob"), targetId: "bob",
                      senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"m\#(seq)"}"#.utf8), uid: "m\(seq)",
                      sentTime: sentTime, flags: .isPersisted)
    }

    /// Runs `push` until the records of `uids` are sent and its hand-off is empty, then stops it
    /// (every batch it took sent and answered); the message uids APNs got, in order.
    static func sendUntilSent(_ push: PushService, _ store: SQLiteStore, _ providers: TestPushProviders, uids: [String],
                              firstEvents: [ServerEvent] = []) async throws -> [String] {
        let (events, input) = AsyncStream.makeStream(of: ServerEvent.self)
        let running = Task { await push.run(events: events) }
        for event in firstEvents { input.yield(event) }
        try await waitUntil("\(uids) sent and the hand-off taken") {
            var statuses: [PushStatus?] = []
            for uid in uids { statuses.append(try await store.pushRecords(appId: 1, messageUid: uid, userId: nil, limit: 1).first?.status) }
            return statuses.allSatisfy { $0 == .sent } && push.handOff.withLock { $0.isEmpty }
        }
        input.finish()
        running.cancel()
        await running.value
        return providers.apns.requests.compactMap { $0.json?["rc"] as? [String: Any] }.compactMap { $0["id"] as? String }
    }

    @Test("a push handed to the sender in memory is still claimed: one another node claimed first is not sent again; the next is sent from the hand-off")
    func handedOffPushesAreClaimed() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await Self.withDirectPushService(clock: clock) { push, store, providers in
            func message(_ seq: UInt64) -> StoredMessage { Self.messageToBob(seq, sentTime: clock.nowMilliseconds()) }
            // m1 decided (and handed over) before the sender runs; another node claims it meanwhile.
            try await push.decide([message(1)], cursor: 1)
            let m1 = try #require(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first)
            #expect(push.handOff.withLock { $0.ids } == [m1.id], "handed over with its id")
            let now = clock.nowMilliseconds()
            #expect(try await store.claimPushes(ids: [m1.id], now: now, leaseUntil: now + 600_000) == [m1.id])
            let sent = try await Self.sendUntilSent(push, store, providers, uids: ["m2"],
                                                    firstEvents: [.messageCommitted(CommittedMessageEvent(message: message(2), origin: .system))])
            #expect(sent == ["m2"], "m1 is the other node's to send, not sent again from the hand-off: \(sent)")
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first?.status == .pending)
        }
    }

    @Test("a batch spanning several decisions' hand-offs, one of them claimed by another node first: the others are sent in order, that one is not")
    func partlyClaimedHandOffBatch() async throws {
        // An early clock: the sender's first look is at the hand-off (its first store read is due
        // only `pollMilliseconds` after time 0), so the batch is the hand-off's three parts.
        let clock = ManualClock(milliseconds: 10)
        try await Self.withDirectPushService(clock: clock) { push, store, providers in
            func message(_ seq: UInt64) -> StoredMessage { Self.messageToBob(seq, sentTime: clock.nowMilliseconds()) }
            // Three decisions, three parts of the hand-off; the sender will take them as one batch.
            for seq in UInt64(1)...3 { try await push.decide([message(seq)], cursor: seq) }
            var ids: [Int64] = []
            for uid in ["m1", "m2", "m3"] {
                ids.append(try #require(try await store.pushRecords(appId: 1, messageUid: uid, userId: nil, limit: 1).first).id)
            }
            #expect(push.handOff.withLock { $0.ids } == ids)
            let now = clock.nowMilliseconds()
            #expect(try await store.claimPushes(ids: [ids[1]], now: now, leaseUntil: now + 600_000) == [ids[1]], "another node takes m2")
            let sent = try await Self.sendUntilSent(push, store, providers, uids: ["m1", "m3"])
            #expect(sent == ["m1", "m3"], "m2 is the other node's: \(sent)")
            #expect(try await store.pushRecords(appId: 1, messageUid: "m2", userId: nil, limit: 1).first?.status == .pending)
        }
    }

    @Test("a push whose app's settings cannot be read when it is sent waits (SETTINGS_UNREADABLE, no attempt counted) and goes once they can be")
    func unreadableSettingsHoldPushes() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await Self.withDirectPushService(clock: clock) { push, store, providers in
            let good = try #require(try await store.pushSettings(appId: 1))
            try await push.decide([Self.messageToBob(1, sentTime: clock.nowMilliseconds())], cursor: 1)
            // The settings become unreadable after the decision, and the cached copy expires.
            try await store.setPushSettings(appId: 1, settings: Data("{\"credentials\":".utf8))
            clock.advance(milliseconds: 5_000)
            let (events, input) = AsyncStream.makeStream(of: ServerEvent.self)
            let running = Task { await push.run(events: events) }
            @Sendable func m1() async throws -> PushRecord? {
                try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first
            }
            try await waitUntil("m1 held for its app's settings") { try await m1()?.code == "SETTINGS_UNREADABLE" }
            let held = try #require(try await m1())
            #expect(held.status == .pending)
            #expect(held.attempts == 0, "nothing was tried")
            #expect(held.nextAttemptAt == clock.nowMilliseconds() + 1_000, "looked at again after the retry delay")
            #expect(providers.apns.requests.isEmpty)

            // Readable again: at the next look m1 is sent, once.
            try await store.setPushSettings(appId: 1, settings: good)
            clock.advance(milliseconds: 1_000)
            try await waitUntil("m1 sent") { try await m1()?.status == .sent }
            input.finish()
            running.cancel()
            await running.value
            #expect(providers.apns.requests.count == 1)
            #expect(try await m1()?.attempts == 1)
        }
    }

    @Test("a decision is written only once the message on its way when it was made is through (push work steps aside for delivery)")
    func decisionStepsAsideForDelivery() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let first = DeliveryFirst()
        try await Self.withDirectPushService(clock: clock, deliveryFirst: first) { push, store, _ in
            first.appended(1)   // a message on its way
            let deciding = Task { try await push.decide([Self.messageToBob(1, sentTime: clock.nowMilliseconds())], cursor: 1) }
            try await waitUntil("the decision's write waits") { first.waitingCount == 1 }
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).isEmpty, "nothing written yet")
            first.finished(1)
            try await waitUntil("the decision went on") { first.waitingCount == 0 }
            _ = try await deciding.value
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first?.status == .pending)
        }
    }

    @Test("the sender steps aside for a message on its way: a push already decided is neither claimed nor sent until the message is through")
    func senderStepsAsideForDelivery() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        let first = DeliveryFirst()
        try await Self.withDirectPushService(clock: clock, deliveryFirst: first) { push, store, providers in
            try await push.decide([Self.messageToBob(1, sentTime: clock.nowMilliseconds())], cursor: 1)   // decided and handed over
            first.appended(1)   // then a message is on its way
            let (events, input) = AsyncStream.makeStream(of: ServerEvent.self)
            let running = Task { await push.run(events: events) }
            defer { running.cancel() }   // on a failure below
            try await waitUntil("the sender waits") { first.waitingCount == 1 }
            let held = try #require(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first)
            #expect(held.status == .pending && held.attempts == 0, "not sent: \(held.status), \(held.attempts) attempts")
            #expect(held.nextAttemptAt <= clock.nowMilliseconds(), "not claimed: a claim moves its next attempt to the lease's end")
            #expect(providers.apns.requests.isEmpty)
            first.finished(1)
            try await waitUntil("m1 sent once the message is through") {
                try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first?.status == .sent
            }
            #expect(providers.apns.requests.count == 1)
            #expect(first.waitingCount == 0)
            input.finish()
            running.cancel()
            await running.value
        }
    }

    @Test("pushes decided past the hand-off's limit wait in the store and are sent from it; each push is sent once")
    func pushesPastTheHandOffLimitAreSentFromTheStore() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        var options = Self.options
        options.handOffLimit = 1
        try await Self.withDirectPushService(clock: clock, options: options) { push, store, providers in
            func message(_ seq: UInt64) -> StoredMessage { Self.messageToBob(seq, sentTime: clock.nowMilliseconds()) }
            try await push.decide([message(1)], cursor: 1)
            try await push.decide([message(2)], cursor: 2)
            let m1 = try #require(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 1).first)
            let m2 = try #require(try await store.pushRecords(appId: 1, messageUid: "m2", userId: nil, limit: 1).first)
            #expect(push.handOff.withLock { $0.ids } == [m1.id], "m2 is past the limit: not handed over")
            #expect(m2.status == .pending, "m2 waits in the store")
            let sent = try await Self.sendUntilSent(push, store, providers, uids: ["m1", "m2"])
            #expect(sent.sorted() == ["m1", "m2"], "each sent once, m1 read from the store or taken from the hand-off, not both: \(sent)")
        }
    }

    @Test("a decision whose write fails (another writer holds the push file, so it fails at its start) is tried again until it is written: the push is sent once, with badge 1")
    func failedDecisionWriteIsTriedAgain() async throws {
        let lines = StructuredLogTests.Lines()
        let logger = Logger(label: "imserver-test", factory: { label in JSONLogHandler(label: label) { line in lines.lines.withLock { $0.append(line) } } })
        try await Self.withDirectPushService(clock: SystemClock(), logger: logger) { push, store, providers in
            // Another connection takes the push file's write lock and keeps it until told.
            let locked = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let blocker = try DatabaseQueue(path: store.pushPath)
            let holder = Thread {
                do {
                    try blocker.inDatabase { db in
                        try db.execute(sql: "BEGIN IMMEDIATE")
                        locked.signal()
                        release.wait()
                        try db.execute(sql: "COMMIT")
                    }
                } catch {
                    locked.signal()   // not locked: the write below succeeds and the wait for its failure times out
                }
            }
            holder.start()
            locked.wait()
            var released = false
            defer { if !released { release.signal() } }
            let (events, input) = AsyncStream.makeStream(of: ServerEvent.self)
            let running = Task { await push.run(events: events) }
            input.yield(.messageCommitted(CommittedMessageEvent(message: Self.messageToBob(1, sentTime: Int64(Date().timeIntervalSince1970 * 1000)),
                                                                origin: .system)))
            try await waitUntil("the decision's write failed and is to be tried again") {
                lines.all.contains { $0.contains("a decision could not be recorded") && $0.contains("m1") }
            }
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 10).isEmpty, "nothing written while the file is locked")
            release.signal()
            released = true
            try await waitUntil("m1 is sent") {
                try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 10).first?.status == .sent
            }
            input.finish()
            running.cancel()
            await running.value
            #expect(try await store.pushRecords(appId: 1, messageUid: "m1", userId: nil, limit: 10).count == 1)
            #expect(Self.badges(providers, of: "bob") == [1], "sent once, with badge 1")
            try blocker.close()
        }
    }

    @Test("a decision whose write fails partway (its first transaction committed, the second refused by the push file) goes on from the first message not written: each push is written and sent once, the badges counting 1, 2, 3")
    func decisionWriteFailingPartwayGoesOnFromTheFirstMessageNotWritten() async throws {
        let lines = StructuredLogTests.Lines()
        let logger = Logger(label: "imserver-test", factory: { label in JSONLogHandler(label: label) { line in lines.lines.withLock { $0.append(line) } } })
        var options = Self.options
        options.writeChunk = 1   // a message's one record a transaction
        let first = DeliveryFirst()
        try await Self.withDirectPushService(clock: SystemClock(), options: options, logger: logger, deliveryFirst: first) { push, store, providers in
            // The push file refuses m3's records (a trigger on another connection) until the trigger goes.
            let file = try DatabaseQueue(path: store.pushPath)
            try await file.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refuse_m3 BEFORE INSERT ON push_batches WHEN NEW.message_uid = 'm3'
                    BEGIN SELECT RAISE(ABORT, 'the push file refused m3'); END
                    """)
            }
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            // Events go to the decisions' reader one at a time: an event is taken into the stream
            // once the reader has taken the one before it.
            let (events, input) = AsyncStream.makeStream(of: ServerEvent.self, bufferingPolicy: .bufferingOldest(1))
            @Sendable func hand(_ event: ServerEvent) async throws {
                try await waitUntil("the decisions' reader took the event before") {
                    if case .enqueued = input.yield(event) { true } else { false }
                }
            }
            func committed(_ seq: UInt64) -> ServerEvent {
                .messageCommitted(CommittedMessageEvent(message: Self.messageToBob(seq, sentTime: now), origin: .system))
            }
            // m1's decision waits for a message on its way (as does the sender); m2 and m3 gather
            // meanwhile, so they are decided in one call, written m2 then m3.
            first.appended(1)
            let running = Task { await push.run(events: events) }
            defer { running.cancel() }   // on a failure below
            try await hand(committed(1))
            try await waitUntil("m1's decision and the sender wait") { first.waitingCount == 2 }
            try await hand(committed(2))
            try await hand(committed(3))
            try await hand(.sessionOffline(SessionPresence(appId: 1, userId: "carol", sessionId: "carol-1", platform: "iOS", deviceId: "phone")))
            first.finished(1)
            try await waitUntil("m2 and m3's write failed, then was tried again for m3 alone") {
                let failures = lines.all.filter { $0.contains("a decision could not be recorded") }
                return failures.contains { $0.contains("m2,m3") } && failures.contains { $0.contains("m3") && !$0.contains("m2") }
            }
            #expect(try await store.pushRecords(appId: 1, messageUid: "m2", userId: nil, limit: 10).count == 1)
            #expect(try await store.pushRecords(appId: 1, messageUid: "m3", userId: nil, limit: 10).isEmpty, "m3's transaction rolled back whole")
            try await file.write { db in try db.execute(sql: "DROP TRIGGER refuse_m3") }
            try await waitUntil("m1, m2 and m3 are sent") {
                var statuses: [PushStatus?] = []
                for uid in ["m1", "m2", "m3"] { statuses.append(try await store.pushRecords(appId: 1, messageUid: uid, userId: nil, limit: 10).first?.status) }
                return statuses == [.sent, .sent, .sent]
            }
            input.finish()
            running.cancel()
            await running.value
            for uid in ["m1", "m2", "m3"] {
                #expect(try await store.pushRecords(appId: 1, messageUid: uid, userId: nil, limit: 10).count == 1, "\(uid) written once")
            }
            // m2 decided once: had the retry decided it again, or kept the badge of the refused
            // transaction, m3's badge would be 4.
            #expect(Self.badges(providers, of: "bob").sorted() == [1, 2, 3], "each sent once, the badges counting 1, 2, 3")
            try file.close()
        }
    }

    @Test("ultra group push frequency: at most the limit per user in each window, the rest ULTRA_GROUP_FREQUENCY; the next window pushes again")
    func ultraGroupFrequency() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await Self.withPushServer(clock: clock, settings: ["ultraGroupPushLimit": 2, "ultraGroupPushWindowSeconds": 60]) { server, _ in
            _ = try await server.api.post("/ultragroup/create.json", form: ["userId": "alice", "groupId": "ug1", "groupName": "Fans"])
            _ = try await server.api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "ug1"])
            try await Self.offlineDevice(server, "bob", token: TestPushProviders.apnsToken("bob"))
            let alice = try await server.connectedClient("alice")
            var outcomes: [String] = []
            for n in 1...3 {
                let sent = try await alice.sendMessage(.ultraGroup, targetId: "ug1", content: TextMessage(content: "post \(n)"))
                let record = try #require(try await Self.settledRecords(server, messageUID: sent.messageUId).first)
                outcomes.append(record["status"] as? String == "sent" ? "sent" : record["code"] as? String ?? "?")
            }
            #expect(outcomes == ["sent", "sent", PushCode.frequency])
            clock.advance(milliseconds: 60_000)
            let next = try await alice.sendMessage(.ultraGroup, targetId: "ug1", content: TextMessage(content: "post 4"))
            #expect(try await Self.settledRecords(server, messageUID: next.messageUId).first?["status"] as? String == "sent")
        }
    }

    @Test("system messages and broadcasts are pushed like any message: a system publish to its target, a broadcast to every user with a device")
    func systemAndBroadcast() async throws {
        try await Self.withPushServer { server, providers in
            let bobToken = TestPushProviders.apnsToken("bob")
            try await Self.offlineDevice(server, "bob", token: bobToken)
            try await Self.offlineDevice(server, "carol", token: "fcm-carol", kind: .fcm, platform: .android)
            let (status, published) = try await server.api.post("/message/system/publish.json", form: [
                "fromUserId": "notice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"your order shipped"}"#])
            #expect(status == 200, "\(published)")
            let systemUID = try #require((published["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String)
            let system = try #require(try await Self.settledRecords(server, messageUID: systemUID).first)
            #expect(system["status"] as? String == "sent" && system["body"] as? String == "your order shipped")
            #expect((Self.requests(providers, to: bobToken).last?.json?["rc"] as? [String: String])?["cType"] == "SYS")

            let (_, broadcast) = try await server.api.post("/message/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"maintenance tonight"}"#])
            let broadcastUID = try #require((broadcast["messageUID"] ?? broadcast["id"]) as? String, "\(broadcast)")
            let records = try await Self.settledRecords(server, messageUID: broadcastUID, count: 2)
            #expect(Set(records.compactMap { $0["userId"] as? String }) == ["bob", "carol"])
            #expect(records.allSatisfy { $0["status"] as? String == "sent" && $0["body"] as? String == "maintenance tonight" })
        }
    }

    @Test("a recall is pushed with rc-dlt-identifier naming the recalled message, so the device can take its notification down")
    func recallPush() async throws {
        try await Self.withPushServer { server, providers in
            let token = TestPushProviders.apnsToken("bob")
            try await Self.offlineDevice(server, "bob", token: token)
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "oops"))
            _ = try await Self.settledRecords(server, messageUID: sent.messageUId)
            _ = try await alice.recallMessage(sent)
            try await waitUntil("the recall push") { Self.requests(providers, to: token).count == 2 }
            let recall = try #require(Self.requests(providers, to: token).last)
            let rc = recall.json?["rc"] as? [String: String] ?? [:]
            #expect(rc["rc-dlt-identifier"] == sent.messageUId && rc["oName"] == RecallCommandMessage.objectName)
        }
    }

    @Test("push-only calls: /push/user.json, /push.json without a message and /push/custom.json reach devices online or not, store no message; bad input is refused")
    func pushOnlyServerAPI() async throws {
        try await Self.withPushServer { server, providers in
            let bobToken = TestPushProviders.apnsToken("bob")
            try await Self.offlineDevice(server, "bob", token: bobToken)
            try await Self.offlineDevice(server, "carol", token: "fcm-carol", kind: .fcm, platform: .android)
            _ = try await server.api.post("/user/tag/set.json", json: ["userId": "carol", "tags": ["vip"]])

            let (status, reply) = try await server.api.post("/push/user.json", json: [
                "userIds": ["bob", "carol"],
                "notification": ["title": "Maintenance", "pushContent": "Tonight 2-3 am", "ios": ["thread-id": "ops", "extras": ["k": "v"]]],
            ])
            #expect(status == 200, "\(reply)")
            let id = try #require(reply["id"] as? String)
            let records = try await Self.settledRecords(server, messageUID: id, count: 2)
            #expect(records.allSatisfy { $0["status"] as? String == "sent" })
            let request = try #require(Self.requests(providers, to: bobToken).last)
            #expect(Self.alert(request)["title"] as? String == "Maintenance" && Self.alert(request)["body"] as? String == "Tonight 2-3 am")
            #expect(Self.aps(request)["thread-id"] as? String == "ops" && request.json?["appData"] as? String == #"{"k":"v"}"#)
            #expect(providers.fcm.messages.contains { $0.token == "fcm-carol" })

            // /push.json without a message, to ios only: bob, not carol.
            let fcmBefore = providers.fcm.messages.count
            let (_, broadcast) = try await server.api.post("/push.json", json: [
                "platform": ["ios"], "audience": ["is_to_all": true], "notification": ["alert": "Hello everyone"],
            ])
            let broadcastId = try #require(broadcast["id"] as? String)
            #expect(try await Self.settledRecords(server, messageUID: broadcastId).first?["userId"] as? String == "bob")
            #expect(providers.fcm.messages.count == fcmBefore)

            // /push/custom.json by tag.
            let (_, custom) = try await server.api.post("/push/custom.json", json: [
                "audience": ["tag": ["vip"]], "notification": ["title": "VIP", "alert": "A gift for you"],
            ])
            let customId = try #require(custom["id"] as? String)
            #expect(try await Self.settledRecords(server, messageUID: customId).first?["userId"] as? String == "carol")

            // Nothing was stored as a message.
            let bob = try await server.connectedClient("bob", platform: .iOS)
            #expect(try await bob.getConversationList(types: [.private, .group, .system]).isEmpty)
            await bob.disconnect()

            // Bad input: the documented code, and no push.
            let before = providers.apns.requests.count
            let (longStatus, long) = try await server.api.post("/push/user.json", json: [
                "userIds": ["bob"], "notification": ["pushContent": "x", "ios": ["apns-collapse-id": String(repeating: "c", count: 65)]],
            ])
            #expect(longStatus == 400 && long["code"] as? Int == ErrorCode.invalidPushParameter.rawValue)
            let (emptyStatus, empty) = try await server.api.post("/push/user.json", json: ["userIds": ["bob"], "notification": ["title": "no text"]])
            #expect(emptyStatus == 400 && empty["code"] as? Int == ErrorCode.apiBadParameter.rawValue)
            let (manyStatus, _) = try await server.api.post("/push/user.json", json: [
                "userIds": (0...100).map { "u\($0)" }, "notification": ["pushContent": "x"],
            ])
            #expect(manyStatus == 400)
            #expect(providers.apns.requests.count == before)
        }
    }

    @Test("settings: malformed credentials are refused and change nothing; no answer carries key material; profiles need userSettingsEnabled (34016); remarks title private pushes")
    func settingsProfilesAndRemarks() async throws {
        try await Self.withPushServer { server, providers in
            let (_, before) = try await server.api.post("/push/settings/get.json", form: [:])
            let shown = String(decoding: try JSONSerialization.data(withJSONObject: before), as: UTF8.self)
            #expect(!shown.contains("PRIVATE KEY") && shown.contains(TestPushProviders.keyId))

            for bad: [String: Any] in [
                ["apns": ["bundleId": "com.example.app", "keyId": "KEY1234567", "teamId": "TEAM123456", "p8": "not a key"]],
                ["apns": ["bundleId": "com.example.*", "keyId": "KEY1234567", "teamId": "TEAM123456", "p8": providers.p8]],
                ["fcm": ["serviceAccount": #"{"type": "authorized_user"}"#]],
                ["webhook": ["secret": "short"]],
                ["ultraGroupPushLimit": -1],
            ] {
                let (status, reply) = try await server.api.post("/push/settings/set.json", json: bad)
                #expect(status == 400 && reply["code"] as? Int == ErrorCode.apiBadParameter.rawValue, "\(bad.keys): \(reply)")
            }
            let (_, after) = try await server.api.post("/push/settings/get.json", form: [:])
            #expect(NSDictionary(dictionary: after) == NSDictionary(dictionary: before), "a refused change changed nothing")

            // User-level settings are off: 34016 from IMLib and from the Server API.
            let bob = try await server.connectedClient("bob", platform: .iOS)
            await #expect { try await bob.pushProfile() } throws: { ($0 as? IMError)?.code == .userSettingsNotEnabled }
            let (_, off) = try await server.api.post("/user/push/profile/get.json", form: ["userId": "bob"])
            #expect(off["code"] as? Int == ErrorCode.userSettingsNotEnabled.rawValue)
            _ = try await server.api.post("/push/settings/set.json", json: ["userSettingsEnabled": true])
            let (_, set) = try await server.api.post("/user/push/profile/set.json", form: ["userId": "bob", "showContent": "false"])
            #expect(set["showContent"] as? Bool == false)
            #expect(try await bob.pushProfile().showContent == false)

            // Bob names alice "Mum": private pushes from alice are titled so; he hides content.
            let token = TestPushProviders.apnsToken("bob")
            try await bob.setPushToken(token, kind: .apns)
            await bob.disconnect()
            try await Self.waitOffline(server, "bob")
            let (remarkStatus, remarkReply) = try await server.api.post("/user/remarks/set.json", form: [
                "userId": "bob", "remarks": #"[{"id": "alice", "remark": "Mum"}, {"id": "carol", "remark": "C"}]"#])
            #expect(remarkStatus == 200, "\(remarkReply)")
            let (_, listed) = try await server.api.post("/user/remarks/get.json", form: ["userId": "bob", "size": "1"])
            #expect(listed["total"] as? Int == 2 && (listed["users"] as? [[String: Any]])?.first?["remark"] as? String == "Mum")
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "dinner?"))
            _ = try await Self.settledRecords(server, messageUID: sent.messageUId)
            let request = try #require(Self.requests(providers, to: token).last)
            #expect(Self.alert(request)["title"] as? String == "Mum")
            #expect(Self.alert(request)["body"] as? String == PushLanguage.hiddenDetail(PushLanguage.chinese), "show content off hides the text")
            _ = try await server.api.post("/user/remarks/del.json", form: ["userId": "bob", "targetId": "alice"])
            let (_, remaining) = try await server.api.post("/user/remarks/get.json", form: ["userId": "bob"])
            #expect(remaining["total"] as? Int == 1)
        }
    }

    @Test("group member push aliases: a group push names its sender with the alias, the recipient's own remark for the sender winning; set, get and del")
    func groupRemarks() async throws {
        try await Self.withPushServer(settings: [:]) { server, providers in
            try await Self.offlineDevice(server, "bob", token: TestPushProviders.apnsToken("bob"))
            try await Self.offlineDevice(server, "carol", token: TestPushProviders.apnsToken("carol"))
            _ = try await server.api.post("/group/create.json", rawForm: "userId=alice&userId=bob&userId=carol&groupId=team&groupName=Team")
            let (set, setBody) = try await server.api.post("/group/remarks/set.json", form: ["userId": "alice", "groupId": "team", "remark": "Captain"])
            #expect(set == 200, "\(setBody)")
            let (_, got) = try await server.api.post("/group/remarks/get.json", form: ["userId": "alice", "groupId": "team"])
            #expect(got["remark"] as? String == "Captain")
            _ = try await server.api.post("/user/remarks/set.json", form: ["userId": "carol", "remarks": #"[{"id": "alice", "remark": "Boss"}]"#])

            let alice = try await server.connectedClient("alice")
            _ = try await server.api.post("/user/refresh.json", form: ["userId": "alice", "name": "Alice"])
            let sent = try await alice.sendMessage(.group, targetId: "team", content: TextMessage(content: "standup"))
            let records = try await Self.settledRecords(server, messageUID: sent.messageUId, count: 2)
            let bodies = Dictionary(uniqueKeysWithValues: records.map { ($0["userId"] as? String ?? "", $0["body"] as? String ?? "") })
            #expect(bodies == ["bob": "Captain: standup", "carol": "Boss: standup"])
            #expect(Self.alert(try #require(Self.requests(providers, to: TestPushProviders.apnsToken("bob")).last))["title"] as? String == "Team")

            let (deleted, _) = try await server.api.post("/group/remarks/del.json", form: ["userId": "alice", "groupId": "team"])
            #expect(deleted == 200)
            let (_, none) = try await server.api.post("/group/remarks/get.json", form: ["userId": "alice", "groupId": "team"])
            #expect(none["remark"] as? String == "")
            let next = try await alice.sendMessage(.group, targetId: "team", content: TextMessage(content: "retro"))
            let after = try await Self.settledRecords(server, messageUID: next.messageUId, count: 2)
            #expect(after.first { $0["userId"] as? String == "bob" }?["body"] as? String == "Alice: retro", "the sender's name without an alias")
            let (tooLong, tooLongBody) = try await server.api.post("/group/remarks/set.json", form: [
                "userId": "alice", "groupId": "team", "remark": String(repeating: "x", count: 65)])
            #expect(tooLong == 400 && tooLongBody["code"] as? Int == 1005)
            await alice.disconnect()
        }
    }
}
