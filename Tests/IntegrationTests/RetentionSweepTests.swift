import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// The retention sweep deletes what no window serves any more: private, group and system messages
/// past the longest of the offline retention, the compensation window and cloud history; ultra
/// group messages past their own history retention.
@Suite("Retention sweep")
struct RetentionSweepTests {
    @Test("messages past every window are deleted, in batches; younger ones and the other windows' messages stay")
    func sweep() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.messaging.offlineRetentionDays = 1
            config.messaging.systemOfflineRetentionDays = 1
            config.messaging.cloudHistoryRetentionDays = 3
            config.ultraGroups.historyRetentionDays = 1
            config.session.clientSendsPerSecond = 10_000
        }) { server in
            let appId = server.app.id
            try await server.core.ultraGroups.create(appId: appId, groupId: "ug", name: "ug", ownerId: "ann")
            let ann = try await server.connectedClient("ann")
            // More old messages than one batch, so the sweep has to go round.
            var old: [Message] = []
            for index in 0..<(ServerCore.retentionBatch + 20) {
                old.append(try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "old \(index)")))
            }
            let oldUltra = try await ann.sendMessage(.ultraGroup, targetId: "ug", content: TextMessage(content: "old ultra"))
            clock.advance(milliseconds: 2 * 86_400_000)
            let middle = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "two days old"))
            let middleUltra = try await ann.sendMessage(.ultraGroup, targetId: "ug", content: TextMessage(content: "two days old ultra"))
            // A burst's sent times run a millisecond apart ahead of the clock: a second covers them.
            clock.advance(milliseconds: 86_400_000 + 1_000)
            let fresh = try await ann.sendMessage(.ultraGroup, targetId: "ug", content: TextMessage(content: "new ultra"))

            // Three days and a second after the first messages: past cloud history (3 days);
            // the middle ones are within it, but the middle ultra group message is past its day.
            let deleted = try await server.core.sweepRetention(now: clock.nowMilliseconds())
            #expect(deleted == old.count + 2)
            for message in old + [oldUltra, middleUltra] {
                #expect(try await server.core.store.message(appId: appId, uid: message.messageUId) == nil)
            }
            for message in [middle, fresh] {
                #expect(try await server.core.store.message(appId: appId, uid: message.messageUId) != nil)
            }
            #expect(try await ann.getRemoteHistoryMessages(.private, targetId: "bob", count: 100).messages.map(\.messageUId) == [middle.messageUId])
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 0, "nothing left to delete")
            await ann.disconnect()
        }
    }

    @Test("each app by its own settings: an app with a shorter cloud history loses its old messages, another app keeps its own")
    func perApp() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.serverAPI.adminKey = AdminAPITests.key
            config.messaging.offlineRetentionDays = 1
            config.messaging.systemOfflineRetentionDays = 1
            config.messaging.cloudHistoryRetentionDays = 30
        }) { server in
            let (_, created) = try await AdminAPITests.call(server, "POST", "/admin/apps", json: ["name": "short"])
            let shortKey = try #require((created["app"] as? [String: Any])?["appKey"] as? String)
            let (status, _) = try await AdminAPITests.call(server, "POST", "/admin/apps/\(shortKey)/settings",
                                                          json: ["set": ["cloudHistoryRetentionDays": 2]])
            #expect(status == 200)
            let short = try #require(server.core.apps.app(key: shortKey))
            let ann = try await server.connectedClient("ann")
            let shortAnn = server.client(app: short)
            try await shortAnn.connect(token: try await server.token("ann", app: short))
            let kept = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "long-lived"))
            let gone = try await shortAnn.sendMessage(.private, targetId: "bob", content: TextMessage(content: "short-lived"))
            clock.advance(milliseconds: 3 * 86_400_000)
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 1)
            #expect(try await server.core.store.message(appId: short.id, uid: gone.messageUId) == nil)
            #expect(try await server.core.store.message(appId: server.app.id, uid: kept.messageUId) != nil)
            await ann.disconnect(); await shortAnn.disconnect()
        }
    }

    @Test("with cloud history off, messages go once the offline windows have passed")
    func cloudHistoryOff() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.messaging.cloudHistoryEnabled = false
            config.messaging.offlineRetentionDays = 2
            config.messaging.systemOfflineRetentionDays = 1
        }) { server in
            let ann = try await server.connectedClient("ann")
            let sent = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi"))
            clock.advance(milliseconds: 2 * 86_400_000 - 1)
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 0, "bob may still sync it")
            clock.advance(milliseconds: 2)
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 1)
            #expect(try await server.core.store.message(appId: server.app.id, uid: sent.messageUId) == nil)
            await ann.disconnect()
        }
    }

    @Test("ultra group messages keep their own retention when it is longer than the others': the general sweep leaves them")
    func longerUltraGroupRetention() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.messaging.cloudHistoryEnabled = false
            config.messaging.offlineRetentionDays = 1
            config.messaging.systemOfflineRetentionDays = 1
            config.ultraGroups.historyRetentionDays = 5
        }) { server in
            try await server.core.ultraGroups.create(appId: server.app.id, groupId: "ug", name: "ug", ownerId: "ann")
            let ann = try await server.connectedClient("ann")
            let direct = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "two days"))
            let ultra = try await ann.sendMessage(.ultraGroup, targetId: "ug", content: TextMessage(content: "two days"))
            clock.advance(milliseconds: 2 * 86_400_000)
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 1)
            #expect(try await server.core.store.message(appId: server.app.id, uid: direct.messageUId) == nil)
            #expect(try await server.core.store.message(appId: server.app.id, uid: ultra.messageUId) != nil, "within its 5 days")
            clock.advance(milliseconds: 3 * 86_400_000 + 1_000)
            #expect(try await server.core.sweepRetention(now: clock.nowMilliseconds()) == 1)
            #expect(try await server.core.store.message(appId: server.app.id, uid: ultra.messageUId) == nil)
            await ann.disconnect()
        }
    }
}
