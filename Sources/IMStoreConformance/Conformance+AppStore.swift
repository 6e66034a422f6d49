import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `AppStore`: apps are created and updated by key, keep their id and creation time, and
    /// `loadApps` returns every one.
    public func appStore() async throws {
        let area = "AppStore"

        await check(area, "upsertApp creates an app that loadApps returns") { f in
            let key = "app-\(UUID().uuidString)"
            let app = try await f.store.upsertApp(appKey: key, appSecret: "s1", name: "First", now: f.now)
            #expect(app.appKey == key && app.appSecret == "s1" && app.name == "First" && app.createdAt == f.now)
            #expect(app.id != f.appId, "a new key is a new app")
            let loaded = try await f.store.loadApps()
            #expect(loaded.filter { $0.appKey == key } == [app])
            #expect(loaded.contains { $0.id == f.appId }, "the check's own app is loaded too")
        }

        await check(area, "upsertApp of an existing key updates the secret and name, keeping id and creation time") { f in
            let key = "app-\(UUID().uuidString)"
            let first = try await f.store.upsertApp(appKey: key, appSecret: "s1", name: "First", now: f.now)
            let second = try await f.store.upsertApp(appKey: key, appSecret: "s2", name: "Second", now: f.now + 5000)
            #expect(second == AppRecord(id: first.id, appKey: key, appSecret: "s2", name: "Second", createdAt: f.now))
            #expect(try await f.store.loadApps().filter { $0.appKey == key } == [second], "one app per key")
        }

        await check(area, "setAppBanned bans and lifts, kept by upsertApp; deleteApp removes the app and every row naming it, in batches, and nothing of another app") { f in
            let key = "app-\(UUID().uuidString)"
            let app = try await f.store.upsertApp(appKey: key, appSecret: "s1", name: "First", now: f.now)
            #expect(try await f.store.setAppBanned(appKey: key, banned: true)?.banned == true)
            #expect(try await f.store.upsertApp(appKey: key, appSecret: "s2", name: "First", now: f.now).banned, "a new secret keeps the ban")
            #expect(try await f.store.loadApps().first { $0.appKey == key }?.banned == true)
            #expect(try await f.store.setAppBanned(appKey: key, banned: false)?.banned == false)
            #expect(try await f.store.setAppBanned(appKey: "no-such-app", banned: true) == nil)

            for index in 0..<7 {
                _ = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + Int64(index), app: app.id))
            }
            let mine = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now))
            try await f.store.upsertUser(appId: app.id, userId: "alice", name: "A", portraitUri: "", now: f.now)
            try await f.store.addToUserList(appId: app.id, owner: "alice", kind: .blacklist, members: ["bob"], now: f.now)
            _ = try await f.store.joinGroup(appId: app.id, groupId: "g", name: "G", userIds: ["alice"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Mine", portraitUri: "", now: f.now)

            try await f.store.deleteApp(appId: app.id, batch: 3)
            #expect(try await f.store.loadApps().allSatisfy { $0.appKey != key })
            #expect(try await f.store.deleteMessages(appId: app.id, conversationKey: nil, ultraGroups: true, sentBefore: Int64.max, limit: 100) == 0)
            #expect(try await f.store.user(appId: app.id, userId: "alice") == nil)
            #expect(try await f.store.userList(appId: app.id, owner: "alice", kind: .blacklist).isEmpty)
            #expect(try await f.store.group(appId: app.id, groupId: "g") == nil)
            #expect(try await f.store.message(appId: f.appId, uid: mine[0].uid) != nil)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")?.name == "Mine")
        }

        await check(area, "apps of different keys get different ids") { f in
            var ids: Set<Int64> = [f.appId]
            for index in 0..<5 {
                let app = try await f.store.upsertApp(appKey: "app-\(index)-\(UUID().uuidString)", appSecret: "s", name: "n", now: f.now)
                ids.insert(app.id)
            }
            #expect(ids.count == 6)
            let loaded = Set(try await f.store.loadApps().map(\.id))
            #expect(ids.isSubset(of: loaded))
        }
    }
}
