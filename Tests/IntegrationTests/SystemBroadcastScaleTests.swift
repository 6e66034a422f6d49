import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("A stored broadcast to 1,000 users with 150 online")
struct SystemBroadcastScaleTests {
    /// Runs `body` for every element, `width` at a time; the results in element order.
    static func batched<T: Sendable, R: Sendable>(_ items: [T], width: Int = 50, _ body: @escaping @Sendable (T) async throws -> R) async throws -> [R] {
        var results: [R] = []
        for start in stride(from: 0, to: items.count, by: width) {
            let slice = Array(items[start..<min(start + width, items.count)])
            results += try await withThrowingTaskGroup(of: (Int, R).self) { group in
                for (index, item) in slice.enumerated() { group.addTask { (index, try await body(item)) } }
                var batch: [(Int, R)] = []
                for try await result in group { batch.append(result) }
                return batch.sorted { $0.0 < $1.0 }.map(\.1)
            }
        }
        return results
    }

    @Test("online users get each broadcast live exactly once, offline users at their next connect, another app's users nothing")
    func thousandUsers() async throws {
        try await withTestServer(try await TestServer.start { config in config.serverAPI.callsPerSecond = 0 }) { server in
            let users = (0..<1000).map { "user\($0)" }
            let online = Array(users.prefix(150)), offline = Array(users.dropFirst(150))
            // Every user is registered through the Server API, as an app server does; 150 connect.
            _ = try await Self.batched(offline) { try await server.token($0) }
            let clients = try await Self.batched(online) { try await server.connectedClient($0) }
            let inboxes = clients.map { EventRecorder($0.receivedMessages()) }
            // Users of another app on the same server, one of them online.
            let otherApp = try await server.core.apps.upsert(appKey: "otherapp", appSecret: "othersecret", name: "other", now: 0)
            let stranger = server.client(app: otherApp)
            let strangerInbox = EventRecorder(stranger.receivedMessages())
            let strangerSynced = EventRecorder(stranger.offlineMessageSyncCompleted())
            try await stranger.connect(token: try await server.token("user0", app: otherApp))
            #expect(await strangerSynced.wait(for: 1).count == 1)

            var uids: [String] = []
            for text in ["maintenance tonight", "maintenance done"] {
                let (status, body) = try await server.api.post("/message/broadcast.json", form: [
                    "fromUserId": "ops", "objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#, "pushContent": text,
                ])
                #expect(status == 200, "\(body)")
                uids.append(try #require(body["messageUID"] as? String))
            }
            // Online: both broadcasts live, once each, in order (a second copy of the first would come
            // before the second).
            for (index, inbox) in inboxes.enumerated() {
                let received = await inbox.wait(for: 2)
                #expect(received.map(\.message.messageUId) == uids, "\(online[index])")
                #expect(received.allSatisfy { !$0.offline && $0.message.conversationType == .system && $0.message.targetId == "ops" })
            }
            #expect(inboxes.allSatisfy { $0.items.count == 2 })
            // Reconnecting does not deliver them again.
            for (index, client) in clients.enumerated().prefix(5) {
                await client.disconnect()
                let synced = EventRecorder(client.offlineMessageSyncCompleted())
                try await client.connect(token: try await server.token(online[index]))
                #expect(await synced.wait(for: 1).count == 1)
                // The inbox's stream is read by a task of its own: the sync's event can come first.
                #expect(await inboxes[index].wait(for: 2).count == 2, "\(online[index]) got nothing twice")
            }
            #expect(try await clients[0].getUnreadCount(.system, targetId: "ops") == 2)

            // Offline: a sample of 30 spread over the 850, each at its next connect.
            let sample = stride(from: 0, to: offline.count, by: 29).map { offline[$0] }
            #expect(sample.count == 30)
            for user in sample {
                let (device, inbox) = try await server.syncedDevice(user)
                // The inbox's recorder runs apart from the sync event's: wait for it to have them all.
                #expect(await inbox.wait(for: uids.count).map(\.message.messageUId) == uids, "\(user)")
                #expect(inbox.items.allSatisfy { $0.offline })
                #expect(try await device.getConversationList(types: [.system]).map(\.targetId) == ["ops"])
                await device.disconnect()
            }

            // The other app: nothing live, nothing at a later connect; its own system message arrives.
            let otherAPI = ServerAPIClient(baseURL: server.baseURL, app: otherApp)
            let (status, _) = try await otherAPI.post("/message/system/publish.json", form: [
                "fromUserId": "ops", "toUserId": "user0", "objectName": "RC:TxtMsg", "content": #"{"content":"own app"}"#,
            ])
            #expect(status == 200)
            #expect(await strangerInbox.wait(for: 1).map { $0.message.content(as: TextMessage.self)?.content } == ["own app"])
            let late = server.client(app: otherApp)
            let lateInbox = EventRecorder(late.receivedMessages())
            let lateSynced = EventRecorder(late.offlineMessageSyncCompleted())
            try await late.connect(token: try await server.token("user500", app: otherApp))
            #expect(await lateSynced.wait(for: 1).count == 1)
            #expect(lateInbox.items.isEmpty)

            await stranger.disconnect(); await late.disconnect()
            for client in clients { await client.disconnect() }
        }
    }
}
