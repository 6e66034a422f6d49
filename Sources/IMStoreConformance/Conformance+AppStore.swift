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
