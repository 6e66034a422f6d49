import Foundation
import GRDB
import IMStore
import IMStoreConformance
@testable import IMStoreSQLite
import Synchronization
import Testing

/// The store conformance suite against the embedded store: every check opens a `SQLiteStore` in a
/// temporary directory of its own, and each test removes the directories it made when it ends.
@Suite("SQLiteStore conformance")
struct SQLiteStoreConformanceTests {
    @Test func appStore() async throws { try await withSQLiteStores { try await $0.appStore() } }
    @Test func messageStore() async throws { try await withSQLiteStores { try await $0.messageStore() } }
    @Test func syncStore() async throws { try await withSQLiteStores { try await $0.syncStore() } }
    @Test func messageLifecycleStore() async throws { try await withSQLiteStores { try await $0.messageLifecycleStore() } }
    @Test func userStore() async throws { try await withSQLiteStores { try await $0.userStore() } }
    @Test func groupStore() async throws { try await withSQLiteStores { try await $0.groupStore() } }
    @Test func sensitiveWordStore() async throws { try await withSQLiteStores { try await $0.sensitiveWordStore() } }
    @Test func conversationStateStore() async throws { try await withSQLiteStores { try await $0.conversationStateStore() } }
    @Test func chatroomStore() async throws { try await withSQLiteStores { try await $0.chatroomStore() } }
    @Test func ultraGroupStore() async throws { try await withSQLiteStores { try await $0.ultraGroupStore() } }
    @Test func pushStore() async throws { try await withSQLiteStores { try await $0.pushStore() } }
    @Test func callbackStore() async throws { try await withSQLiteStores { try await $0.callbackStore() } }
    @Test func operationsStore() async throws { try await withSQLiteStores { try await $0.operationsStore() } }
    @Test func conversationKeys() async throws { try await withSQLiteStores { try await $0.conversationKeys() } }
    @Test func tenantIsolation() async throws { try await withSQLiteStores { try await $0.tenantIsolation() } }
    @Test func concurrency() async throws { try await withSQLiteStores { try await $0.concurrency() } }

    @Test("the writer's page cache is 64 MiB and stays so across transactions; readers keep SQLite's 2 MiB")
    func writerCache() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        // A negative cache_size is in KiB; SQLite's default is -2000.
        for _ in 0..<2 {
            #expect(try await store.pool.write { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -SQLiteStore.writerCacheKiB)
        }
        #expect(SQLiteStore.writerCacheKiB == 65_536)
        #expect(try await store.pool.read { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -2000)
    }
}

/// Runs `body` with a suite whose stores are SQLite databases in fresh temporary directories,
/// and removes those directories afterwards.
func withSQLiteStores(_ body: (StoreConformance) async throws -> Void) async throws {
    let directories = TemporaryDirectories()
    defer { directories.removeAll() }
    try await body(StoreConformance {
        try SQLiteStore(directory: directories.make().path)
    })
}

/// The temporary directories a test's stores live in.
final class TemporaryDirectories: Sendable {
    private let made = Mutex<[URL]>([])

    func make() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-conformance-\(UUID().uuidString)")
        made.withLock { $0.append(directory) }
        return directory
    }

    func removeAll() {
        for directory in made.withLock({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}
