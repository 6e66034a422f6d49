import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import IMStoreSQLite
import Testing

/// Per-app settings: changed through the admin API while clients are connected, seen at once by
/// the app's clients and Server API calls, never by another app's, and kept across a restart.
@Suite("Per-app settings at runtime")
struct AppSettingsTests {
    static let key = AdminAPITests.key

    static func start(clock: any WallClock = SystemClock(), configure: @escaping (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        try await TestServer.start(clock: clock) { config in
            config.serverAPI.adminKey = Self.key
            configure(&config)
        }
    }

    static func set(_ server: TestServer, _ values: [String: Any] = [:], reset: [String] = [], appKey: String? = nil) async throws -> (Int, [String: Any]) {
        try await AdminAPITests.call(server, "POST", "/admin/apps/\(appKey ?? server.app.appKey)/settings", json: ["set": values, "reset": reset])
    }

    static func setting(_ answer: [String: Any], _ key: String) -> [String: Any]? {
        (answer["settings"] as? [[String: Any]])?.first { $0["key"] as? String == key }
    }

    @Test("cloud history off for one app: its next history call and /v3 query answer 25102, another app's still work; on again, they serve")
    func cloudHistory() async throws {
        try await withTestServer(try await Self.start()) { server in
            let (_, created) = try await AdminAPITests.call(server, "POST", "/admin/apps", json: ["name": "other"])
            let otherKey = try #require((created["app"] as? [String: Any])?["appKey"] as? String)
            let other = try #require(server.core.apps.app(key: otherKey))
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi"))
            let otherAnn = server.client(app: other)
            try await otherAnn.connect(token: try await server.token("ann", app: other))
            _ = try await otherAnn.sendMessage(.private, targetId: "bob", content: TextMessage(content: "elsewhere"))

            let (status, answer) = try await Self.set(server, ["cloudHistoryEnabled": false])
            #expect(status == 200)
            let shown = try #require(Self.setting(answer, "cloudHistoryEnabled"))
            #expect(shown["value"] as? Bool == false && shown["default"] as? Bool == true && shown["own"] as? Bool == true)

            await #expect { _ = try await ann.getRemoteHistoryMessages(.private, targetId: "bob", count: 10) } throws: {
                ($0 as? IMError)?.code == .cloudHistoryDisabled
            }
            let (v3, v3Answer) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "ann", "targetId": "bob", "startTime": 0, "endTime": 4_000_000_000_000, "pageSize": 10])
            #expect(v3 == 400 && v3Answer["code"] as? Int == 25102)
            #expect(try await otherAnn.getRemoteHistoryMessages(.private, targetId: "bob", count: 10).messages.count == 1,
                    "another app keeps the server's setting")

            let (back, _) = try await Self.set(server, reset: ["cloudHistoryEnabled"])
            #expect(back == 200)
            #expect(try await ann.getRemoteHistoryMessages(.private, targetId: "bob", count: 10).messages.count == 1)
            await ann.disconnect(); await otherAnn.disconnect()
        }
    }

    @Test("whitelist mode on at runtime: a stranger's message is refused with 407 while a listed user's passes; off again, the stranger's passes")
    func whitelistMode() async throws {
        try await withTestServer(try await Self.start()) { server in
            _ = try await server.api.post("/user/whitelist/add.json", form: ["userId": "bob", "whiteUserId": "ann"])
            let ann = try await server.connectedClient("ann")
            let eve = try await server.connectedClient("eve")
            _ = try await eve.sendMessage(.private, targetId: "bob", content: TextMessage(content: "before"))
            #expect(try await Self.set(server, ["userWhitelistMode": true]).0 == 200)
            #expect(await failureCode { _ = try await eve.sendMessage(.private, targetId: "bob", content: TextMessage(content: "stranger")) } == 407)
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "listed"))
            // null returns the setting to the server's.
            #expect(try await Self.set(server, ["userWhitelistMode": NSNull()]).0 == 200)
            #expect(server.core.apps.app(key: server.app.appKey)?.settings.isEmpty == true)
            _ = try await eve.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after"))
            await ann.disconnect(); await eve.disconnect()
        }
    }

    @Test("a client rate limit of the app's own: the second send in a second gets 20604")
    func clientRate() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.start(clock: clock)) { server in
            let ann = try await server.connectedClient("ann")
            #expect(try await Self.set(server, ["clientSendsPerSecond": 1]).0 == 200)
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "one"))
            #expect(await failureCode { _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "two")) } == 20604)
            clock.advance(milliseconds: 1_001)
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "three"))
            await ann.disconnect()
        }
    }

    @Test("multi-device sync: on (the default) two Web sessions of a user stay online and a sent message reaches the other device; off, a second Web session displaces the first (31010) and sent messages stay on their device")
    func multiDevice() async throws {
        try await withTestServer(try await Self.start()) { server in
            let token = try await server.token("ann")
            let tab1 = server.client(platform: .web), tab2 = server.client(platform: .web)
            let tab1Inbox = EventRecorder(tab1.receivedMessages())
            try await tab1.connect(token: token)
            try await tab2.connect(token: token)
            _ = try await tab2.sendMessage(.private, targetId: "bob", content: TextMessage(content: "mirrored"))
            #expect(await tab1Inbox.first { $0.message.content(as: TextMessage.self)?.content == "mirrored" } != nil)
            #expect(await tab1.connectionStatus == .connected && server.core.registry.sessions(appId: server.app.id, userId: "ann").count == 2)
            await tab1.disconnect(); await tab2.disconnect()

            #expect(try await Self.set(server, ["multiDeviceSyncEnabled": false]).0 == 200)
            let web = server.client(platform: .web), phone = server.client(platform: .iOS)
            let webStatuses = EventRecorder(web.connectionStatusUpdates())
            let phoneInbox = EventRecorder(phone.receivedMessages())
            try await web.connect(token: token)
            try await phone.connect(token: token)
            _ = try await web.sendMessage(.private, targetId: "bob", content: TextMessage(content: "stays"))
            // A message to the user from someone else still reaches every device: it is the mark
            // that whatever was sent before it has been delivered, or not, by now.
            let bob = try await server.connectedClient("bob")
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "marker"))
            let received = await phoneInbox.first { $0.message.content(as: TextMessage.self)?.content == "marker" }
            #expect(received != nil)
            #expect(phoneInbox.items.allSatisfy { $0.message.content(as: TextMessage.self)?.content != "stays" },
                    "without multi-device sync the phone does not get what the web session sent")
            let (fresh, freshInbox) = try await server.syncedDevice("ann", platform: .android)
            #expect(freshInbox.items.allSatisfy { $0.message.content(as: TextMessage.self)?.content != "stays" }, "nor does a sync")
            let web2 = server.client(platform: .web)
            try await web2.connect(token: token)
            #expect(await webStatuses.first { $0 == .kickedOfflineByOtherClient } != nil, "one Web session at a time")
            await web2.disconnect(); await phone.disconnect(); await bob.disconnect(); await fresh.disconnect(); await web.disconnect()

            // Tabs opened while it was on are displaced by the first Web session after it is off.
            #expect(try await Self.set(server, reset: ["multiDeviceSyncEnabled"]).0 == 200)
            let tabA = server.client(platform: .web), tabB = server.client(platform: .web)
            let tabAStatuses = EventRecorder(tabA.connectionStatusUpdates()), tabBStatuses = EventRecorder(tabB.connectionStatusUpdates())
            try await tabA.connect(token: token)
            try await tabB.connect(token: token)
            #expect(try await Self.set(server, ["multiDeviceSyncEnabled": false]).0 == 200)
            let single = server.client(platform: .web)
            try await single.connect(token: token)
            #expect(await tabAStatuses.first { $0 == .kickedOfflineByOtherClient } != nil)
            #expect(await tabBStatuses.first { $0 == .kickedOfflineByOtherClient } != nil)
            #expect(server.core.registry.sessions(appId: server.app.id, userId: "ann").count == 1)
            await single.disconnect(); await tabA.disconnect(); await tabB.disconnect()
        }
    }

    @Test("a Server API rate and the chatroom history switch of the app's own apply to its next calls")
    func serverAPISettings() async throws {
        try await withTestServer(try await Self.start()) { server in
            #expect(try await Self.set(server, ["onlineBroadcastEnabled": false, "chatroomHistoryEnabled": true]).0 == 200)
            let (off, offAnswer) = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "sys", "objectName": "RC:TxtMsg", "content": #"{"content":"hi"}"#])
            #expect(off == 400 && offAnswer["code"] as? Int == 1009)
            _ = try await server.api.post("/chatroom/create.json", form: ["chatroom[r1]": "R"])
            let (history, historyAnswer) = try await server.api.post("/v3/message/chatroom/query.json", json: [
                "userId": "ann", "targetId": "r1", "startTime": 0, "endTime": 4_000_000_000_000, "pageSize": 10])
            #expect(history == 200, "chatroom history is on for this app: \(historyAnswer)")
        }
    }

    @Test("more of the app's own settings apply to its next calls: group size, sensitive words, Server API rates, the recall window, chatroom attributes and size, offline retention")
    func moreSettings() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.start(clock: clock)) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            // carol's device has synced before: at its next connect it reads what arrived since,
            // within the offline retention.
            let carol = server.client()
            let carolToken = try await server.token("carol")
            let firstSync = EventRecorder(carol.offlineMessageSyncCompleted())
            try await carol.connect(token: carolToken)
            #expect(await firstSync.wait(for: 1).count == 1)
            await carol.disconnect()
            let old = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "two days old"))
            clock.advance(milliseconds: 2 * 86_400_000)
            let recent = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "recent"))
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g"])
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "first"])
            try await ann.joinChatRoom("r1", messageCount: -1)
            #expect(try await Self.set(server, [
                "maxGroupMembers": 2, "maxSensitiveWords": 1, "privatePublishPerMinute": 1, "recallWindowSeconds": 1,
                "chatroomEntriesEnabled": false, "chatroomMaxMembers": 1, "offlineRetentionDays": 1,
            ]).0 == 200)

            let (join, joinAnswer) = try await server.api.post("/group/join.json", form: ["userId": "carol", "groupId": "g"])
            #expect(join == 400 && joinAnswer["code"] as? Int == 1002, "the group holds 2 for this app: \(joinAnswer)")
            let (word, _) = try await server.api.post("/sensitiveword/add.json", form: ["word": "second"])
            #expect(word == 400, "one sensitive word for this app")
            let publish = ["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"x"}"#]
            #expect(try await server.api.post("/message/private/publish.json", form: publish).0 == 200)
            let (limited, limitedAnswer) = try await server.api.post("/message/private/publish.json", form: publish)
            #expect(limited == 429 && limitedAnswer["code"] as? Int == 1008, "one private publish a minute for this app")
            clock.advance(milliseconds: 2_000)
            #expect(await failureCode { _ = try await ann.recallMessage(recent) } == 25101, "the recall window is a second for this app")
            #expect(await failureCode { try await ann.setChatRoomEntry("r1", key: "k", value: "v") } == 23426)
            #expect(await failureCode { try await bob.joinChatRoom("r1", messageCount: -1) } == 23411)
            let inbox = EventRecorder(carol.receivedMessages())
            let synced = EventRecorder(carol.offlineMessageSyncCompleted())
            try await carol.connect(token: carolToken)
            #expect(await synced.wait(for: 1).count == 1)
            // The inbox's stream is read by a task of its own: the sync's event can come first.
            let uids = await inbox.wait(for: 1).map(\.message.messageUId)
            #expect(uids.contains(recent.messageUId) && !uids.contains(old.messageUId), "past this app's offline retention (a day): \(uids)")
            await carol.disconnect(); await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("bad changes are refused with 1002 and change nothing: an unknown key, a server-wide one, a value out of range, a reset of no setting")
    func badInput() async throws {
        try await withTestServer(try await Self.start()) { server in
            for (values, reset, words) in [
                (["cloudHistoryEnabld": false] as [String: Any], [String](), "cloudHistoryEnabld is not a setting"),
                (["port": 9000], [], "server-wide"),
                (["offlineRetentionDays": 0, "userWhitelistMode": true], [], "offlineRetentionDays of app"),
                (["cloudHistoryEnabled": "no"], [], "cloudHistoryEnabled of app"),
                ([:], ["port"], "port is not a per-app setting"),
            ] {
                let (status, answer) = try await Self.set(server, values, reset: reset)
                #expect(status == 400 && answer["code"] as? Int == 1002, "\(values) \(reset): \(answer)")
                #expect((answer["errorMessage"] as? String)?.contains(words) == true, "\(answer)")
            }
            #expect(server.core.apps.app(key: server.app.appKey)?.settings.isEmpty == true, "nothing was stored")
            #expect(server.core.apps.settings(appId: server.app.id).moderation.userWhitelistMode == false)
            let (missing, _) = try await Self.set(server, ["userWhitelistMode": true], appKey: "nosuchapp")
            #expect(missing == 404)
            // An app's signature is not the operator's key.
            let (signed, _) = try await server.api.send("POST", "/admin/apps/\(server.app.appKey)/settings", json: ["set": ["userWhitelistMode": true]])
            #expect(signed == 401)
            let ann = try await server.connectedClient("ann")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "still fine"))
            await ann.disconnect()
        }
    }

    @Test("an app's settings are stored: a restarted server applies them, and the admin API lists them with the server's defaults")
    func persisted() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-appsettings-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStore(directory: directory)
        defer { try? store.close() }
        let first = try await TestServer.start(sharing: store) { $0.serverAPI.adminKey = Self.key }
        #expect(try await Self.set(first, ["cloudHistoryRetentionDays": 30, "groupPreJoinHistory": 5]).0 == 200)
        await first.stop()
        try await withTestServer(try await TestServer.start(sharing: store) { $0.serverAPI.adminKey = Self.key }) { server in
            let settings = server.core.apps.settings(appId: server.app.id)
            #expect(settings.messaging.cloudHistoryRetentionDays == 30 && settings.groups.preJoinHistory == 5)
            #expect(settings.messaging.offlineRetentionDays == ServerConfig().messaging.offlineRetentionDays)
            let (status, answer) = try await AdminAPITests.call(server, "GET", "/admin/apps/\(server.app.appKey)/settings")
            #expect(status == 200)
            let listed = try #require(answer["settings"] as? [[String: Any]])
            #expect(listed.count == ServerConfig.table.perAppSettings.count)
            #expect(Self.setting(answer, "cloudHistoryRetentionDays")?["value"] as? Int == 30)
            #expect(Self.setting(answer, "offlineRetentionDays")?["own"] as? Bool == false)
            #expect(listed.allSatisfy { ServerConfig.table.setting(key: $0["key"] as? String ?? "")?.isPerApp == true })
        }
    }
}
