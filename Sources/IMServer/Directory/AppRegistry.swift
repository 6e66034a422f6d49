import Foundation
import IMCore
import IMStore
import Synchronization

/// The apps this server hosts, held in memory (they change rarely) and written through to the store.
public final class AppRegistry: Sendable {
    private let store: any AppStore
    private let apps = Mutex<[String: AppRecord]>([:])
    private let peers: ClusterPeers
    /// When the store was last read for a key nobody knew (ms since the reference date).
    private let lastMissReload = Mutex<Int64>(0)

    public convenience init(store: any AppStore) {
        self.init(store: store, peers: ClusterPeers(transport: nil))
    }

    init(store: any AppStore, peers: ClusterPeers) {
        self.store = store
        self.peers = peers
    }

    /// The app with this key; an unknown key has the store read again, at most once a second, so
    /// an app created elsewhere (`imserver app create`, another node of a cluster) is found.
    func find(key: String) async -> AppRecord? {
        if let app = app(key: key) { return app }
        let now = Int64(Date().timeIntervalSinceReferenceDate * 1000)
        let due = lastMissReload.withLock { last in
            guard now - last >= 1000 else { return false }
            last = now
            return true
        }
        guard due else { return nil }
        try? await load()
        return app(key: key)
    }

    /// Loads every app from the store (an app deleted meanwhile goes).
    public func load() async throws {
        let all = try await store.loadApps()
        apps.withLock { table in
            table = Dictionary(all.map { ($0.appKey, $0) }, uniquingKeysWith: { _, last in last })
        }
    }

    /// Deletes the app with its data (`AppStore.deleteApp`): banned first, in the store and on
    /// every node (no connect, call or message of it gets in from then on, and a reload cannot
    /// bring it back live), then `beforeData` runs (its sessions are closed), then its rows go
    /// and it is forgotten.
    public func delete(_ app: AppRecord, beforeData: () -> Void) async throws {
        _ = try await setBanned(appKey: app.appKey, banned: true)
        beforeData()
        try await store.deleteApp(appId: app.id, batch: 5_000)
        apps.withLock { _ = $0.removeValue(forKey: app.appKey) }
        peers.announce(.apps)
    }

    public func app(key: String) -> AppRecord? {
        apps.withLock { $0[key] }
    }

    /// The app with this id.
    public func app(id: Int64) -> AppRecord? {
        apps.withLock { $0.values.first { $0.id == id } }
    }

    public var all: [AppRecord] {
        apps.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }

    /// Creates the app or sets its secret.
    @discardableResult
    public func upsert(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        let app = try await store.upsertApp(appKey: appKey, appSecret: appSecret, name: name, now: now)
        apps.withLock { $0[app.appKey] = app }
        peers.announce(.apps)
        return app
    }

    /// Bans the app or lifts its ban; nil when there is no such app.
    public func setBanned(appKey: String, banned: Bool) async throws -> AppRecord? {
        guard let app = try await store.setAppBanned(appKey: appKey, banned: banned) else { return nil }
        apps.withLock { $0[app.appKey] = app }
        peers.announce(.apps)
        return app
    }

    /// A fresh random key or secret: lowercase letters and digits, like RongCloud's.
    public static func randomCredential(length: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
    }
}
