import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `CallbackStore`: app settings, the outbox (taking on once per dedup key, the app's rows in
    /// id order, claiming with a lease, retries, deletes, the backlog and its trim, expiry) and
    /// the routing cursor.
    ///
    /// Reads across apps (`callbackBacklog`, `expireCallbacks`) are filtered to the check's app;
    /// the expiry check writes rows created in 1970, which no other check does.
    public func callbackStore() async throws {
        let area = "CallbackStore"

        func row(_ f: Fixture, _ key: String, _ dedup: String, next: Int64 = 0, created: Int64? = nil, app: Int64? = nil) -> CallbackRecord {
            CallbackRecord(appId: app ?? f.appId, kind: .routing, orderKey: key, dedupKey: dedup, body: Data("body=\(dedup)&中=文".utf8),
                           nextAttemptAt: next, createdAt: created ?? f.now)
        }

        await check(area, "settings are kept per app") { f in
            #expect(try await f.store.callbackSettings(appId: f.appId) == nil)
            try await f.store.setCallbackSettings(appId: f.appId, settings: Data("{\"a\":1}".utf8))
            try await f.store.setCallbackSettings(appId: f.appId, settings: Data("{\"a\":2}".utf8))
            #expect(try await f.store.callbackSettings(appId: f.appId) == Data("{\"a\":2}".utf8))
            #expect(try await f.store.callbackSettings(appId: try await f.otherApp()) == nil)
        }

        await check(area, "rows are taken on once per dedup key and read back in order") { f in
            try await f.store.enqueueCallbacks([row(f, "k1", "a"), row(f, "k2", "b"), row(f, "k1", "c")], node: "n", cursor: nil)
            var again = row(f, "k9", "a")
            again.body = Data("other".utf8)
            try await f.store.enqueueCallbacks([again, row(f, "k1", "d")], node: "n", cursor: nil)
            let rows = try await f.store.pendingCallbacks(appId: f.appId, limit: 10)
            #expect(rows.map(\.dedupKey) == ["a", "b", "c", "d"])
            #expect(rows.first?.orderKey == "k1" && rows.first?.body == Data("body=a&中=文".utf8), "the first one taken on is kept")
            #expect(rows.map(\.id) == rows.map(\.id).sorted())
            #expect(try await f.store.pendingCallbacks(appId: f.appId, limit: 2).count == 2)
            let backlog = try await f.store.callbackBacklog()
            #expect(backlog[f.appId] == 4)
            #expect(try await f.store.pendingCallbacks(appId: try await f.otherApp(), limit: 10).isEmpty)
        }

        await check(area, "a claim takes each due row once, retries and reschedules move them, deletes end them") { f in
            try await f.store.enqueueCallbacks([row(f, "k", "a", next: f.now), row(f, "k", "b", next: f.now + 5_000)], node: "n", cursor: nil)
            let ids = try await f.store.pendingCallbacks(appId: f.appId, limit: 10).map(\.id)
            #expect(try await f.store.claimCallbacks(ids: ids, now: f.now, leaseUntil: f.now + 60_000) == [ids[0]], "only the due one")
            #expect(try await f.store.claimCallbacks(ids: ids, now: f.now, leaseUntil: f.now + 60_000).isEmpty, "leased: taken once")
            try await f.store.retryCallbacks([CallbackRetry(id: ids[0], attempts: 3, nextAttemptAt: f.now + 1_000, error: "HTTP 503")])
            let retried = try await f.store.pendingCallbacks(appId: f.appId, limit: 10)[0]
            #expect(retried.attempts == 3 && retried.nextAttemptAt == f.now + 1_000 && retried.lastError == "HTTP 503")
            try await f.store.rescheduleCallbacks(ids: [ids[1]], nextAttemptAt: f.now)
            #expect(try await f.store.claimCallbacks(ids: [ids[1]], now: f.now, leaseUntil: f.now + 60_000) == [ids[1]])
            try await f.store.deleteCallbacks(ids: ids)
            #expect(try await f.store.pendingCallbacks(appId: f.appId, limit: 10).isEmpty)
            #expect(try await f.store.callbackBacklog()[f.appId] == nil)
        }

        await check(area, "a trim keeps the newest rows of the app only") { f in
            let other = try await f.otherApp()
            try await f.store.enqueueCallbacks((0..<5).map { row(f, "k", "r\($0)") } + [row(f, "k", "o", app: other)], node: "n", cursor: nil)
            #expect(try await f.store.trimCallbacks(appId: f.appId, keeping: 2) == 3)
            #expect(try await f.store.pendingCallbacks(appId: f.appId, limit: 10).map(\.dedupKey) == ["r3", "r4"])
            #expect(try await f.store.trimCallbacks(appId: f.appId, keeping: 2) == 0)
            #expect(try await f.store.pendingCallbacks(appId: other, limit: 10).count == 1)
        }

        await check(area, "expiry deletes the rows taken on before a time, by app") { f in
            try await f.store.enqueueCallbacks([row(f, "k", "old1", created: 1_000), row(f, "k", "old2", created: 1_500),
                                                row(f, "k", "new", created: 9_000)], node: "n", cursor: nil)
            let expired = try await f.store.expireCallbacks(createdBefore: 2_000)
            #expect(expired[f.appId] == 2)
            #expect(try await f.store.pendingCallbacks(appId: f.appId, limit: 10).map(\.dedupKey) == ["new"])
        }

        await check(area, "the routing cursor is per node and only rises") { f in
            let node = "conformance-\(UUID().uuidString)"
            #expect(try await f.store.callbackCursor(node: node) == nil)
            try await f.store.enqueueCallbacks([], node: node, cursor: 10)
            try await f.store.enqueueCallbacks([row(f, "k", "x")], node: node, cursor: 7)
            #expect(try await f.store.callbackCursor(node: node) == 10)
            try await f.store.enqueueCallbacks([], node: node, cursor: 12)
            #expect(try await f.store.callbackCursor(node: node) == 12)
            #expect(try await f.store.callbackCursor(node: node + "-other") == nil)
        }
    }
}
