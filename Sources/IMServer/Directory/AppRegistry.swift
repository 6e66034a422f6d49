import Foundation
import IMCore
import IMStore
import Synchronization

/// The apps this server hosts, held in memory (they change rarely) and written through to the store.
public final class AppRegistry: Sendable {
    private let store: any AppStore
    private let apps = Mutex<[String: AppRecord]>([:])

    public init(store: any AppStore) {
        self.store = store
    }

    /// Loads every app from the store.
    public func load() async throws {
        let all = try await store.loadApps()
        apps.withLock { table in
            for app in all { table[app.appKey] = app }
        }
    }

    public func app(key: String) -> AppRecord? {
        apps.withLock { $0[key] }
    }

    public var all: [AppRecord] {
        apps.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }

    /// Creates the app or sets its secret.
    @discardableResult
    public func upsert(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        let app = try await store.upsertApp(appKey: appKey, appSecret: appSecret, name: name, now: now)
        apps.withLock { $0[app.appKey] = app }
        return app
    }

    /// A fresh random key or secret: lowercase letters and digits, like RongCloud's.
    public static func randomCredential(length: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
    }
}
