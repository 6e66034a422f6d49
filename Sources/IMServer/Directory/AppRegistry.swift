import Foundation
import IMCore
import IMStore
import Logging
import Synchronization

/// The apps this server hosts, held in memory (they change rarely) and written through to the
/// store, each with its settings: the server's, with the app's own values of the per-app ones.
public final class AppRegistry: Sendable {
    private struct Table {
        var byKey: [String: AppRecord] = [:]
        var settings: [Int64: AppSettings] = [:]
        /// Bumped by every change written through this registry: a load that read the store
        /// before a change must not put the older apps back over it.
        var generation = 0
    }

    private let store: any AppStore
    private let apps = Mutex(Table())
    private let peers: ClusterPeers
    private let logger: Logger
    /// The server's settings: those of every app that has no value of its own.
    public let defaults: AppSettings
    /// When the store was last read for a key nobody knew (ms since the reference date).
    private let lastMissReload = Mutex<Int64>(0)

    public convenience init(store: any AppStore, config: ServerConfig = ServerConfig()) {
        self.init(store: store, peers: ClusterPeers(transport: nil), config: config, logger: Logger(label: "imserver.apps"))
    }

    init(store: any AppStore, peers: ClusterPeers, config: ServerConfig, logger: Logger) {
        self.store = store
        self.peers = peers
        self.logger = logger
        self.defaults = AppSettings(config: config)
    }

    /// The settings of the app with this id: the server's where the app has no value of its own.
    public func settings(appId: Int64) -> AppSettings {
        apps.withLock { $0.settings[appId] } ?? defaults
    }

    /// The app's settings made from its record; values that no longer apply (a setting renamed
    /// by an upgrade) are logged and left out.
    private func resolve(_ app: AppRecord) -> AppSettings {
        guard !app.settings.isEmpty else { return defaults }
        let (config, problems) = defaults.config.forApp(app.settings, appKey: app.appKey)
        for problem in problems {
            logger.warning("an app setting was not applied", metadata: ["appKey": "\(app.appKey)", "problem": "\(problem)"])
        }
        return AppSettings(config: config)
    }

    private func remember(_ app: AppRecord, in table: inout Table, settings: AppSettings) {
        table.byKey[app.appKey] = app
        table.settings[app.id] = settings
    }

    /// A change of this registry's own, written to the store, now in memory.
    private func changed(_ app: AppRecord, settings: AppSettings) {
        apps.withLock { table in
            remember(app, in: &table, settings: settings)
            table.generation += 1
        }
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
        while true {
            let before = apps.withLock { $0.generation }
            let all = try await store.loadApps()
            let resolved = all.map { ($0, resolve($0)) }
            let applied = apps.withLock { table -> Bool in
                // A change written meanwhile may be missing from what was read: read again.
                guard table.generation == before else { return false }
                var fresh = Table()
                fresh.generation = before
                for (app, settings) in resolved { remember(app, in: &fresh, settings: settings) }
                table = fresh
                return true
            }
            if applied { return }
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
        apps.withLock { table in
            table.byKey[app.appKey] = nil
            table.settings[app.id] = nil
            table.generation += 1
        }
        peers.announce(.apps)
    }

    public func app(key: String) -> AppRecord? {
        apps.withLock { $0.byKey[key] }
    }

    /// The app with this id.
    public func app(id: Int64) -> AppRecord? {
        apps.withLock { $0.byKey.values.first { $0.id == id } }
    }

    public var all: [AppRecord] {
        apps.withLock { Array($0.byKey.values) }.sorted { $0.id < $1.id }
    }

    /// Creates the app or sets its secret.
    @discardableResult
    public func upsert(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        let app = try await store.upsertApp(appKey: appKey, appSecret: appSecret, name: name, now: now)
        changed(app, settings: resolve(app))
        peers.announce(.apps)
        return app
    }

    /// Bans the app or lifts its ban; nil when there is no such app.
    public func setBanned(appKey: String, banned: Bool) async throws -> AppRecord? {
        guard let app = try await store.setAppBanned(appKey: appKey, banned: banned) else { return nil }
        changed(app, settings: resolve(app))
        peers.announce(.apps)
        return app
    }

    /// Sets some of the app's own settings (JSON values by key) and returns others to the server's
    /// (`reset`, or a null value); every node applies them at once. A key that is no per-app setting, or a value
    /// the setting does not allow, refuses the whole change (1002) and changes nothing.
    public func updateSettings(appKey: String, set given: [String: JSONValue], reset resetGiven: [String]) async throws -> AppRecord? {
        // A null value returns the setting to the server's, as a reset does.
        let set = given.filter { $0.value != .null }
        let reset = resetGiven + given.filter { $0.value == .null }.map(\.key)
        let unknown = reset.filter { ServerConfig.table.setting(key: $0)?.isPerApp != true }
        let (_, problems) = defaults.config.forApp(set, appKey: appKey)
        guard problems.isEmpty, unknown.isEmpty else {
            let resetProblems = unknown.map { "\($0) is not a per-app setting and cannot be reset" }
            throw IMError(.apiBadParameter, (problems + resetProblems).joined(separator: "; "))
        }
        guard let app = try await store.updateAppSettings(appKey: appKey, set: set, reset: reset) else { return nil }
        changed(app, settings: resolve(app))
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

/// One app's settings: the server's (`ServerConfig`), with the app's own values of the per-app
/// ones. Read as the config is: `settings.messaging.cloudHistoryEnabled`.
@dynamicMemberLookup
public final class AppSettings: Sendable {
    public let config: ServerConfig

    init(config: ServerConfig) {
        self.config = config
    }

    public subscript<Value>(dynamicMember path: KeyPath<ServerConfig, Value>) -> Value {
        config[keyPath: path]
    }
}
