import Foundation
import IMCore
import IMStore
import IMServerTesting
import IMStoreConformance
import IMStorePostgres
import Logging
import PostgresNIO
import Synchronization
import Testing

/// The store conformance suite against `PostgresStore`: every store a check opens is a fresh
/// database on the test server, dropped when the test ends.
///
/// The server is `IMSERVER_TEST_POSTGRES_URL` (scripts/test.sh starts one with scripts/postgres.sh);
/// without it the tests start their own with scripts/postgres.sh, once per test process, and stop
/// it when the process exits. Never skipped: a suite that did not run would count as passed.
@Suite("PostgresStore conformance")
struct PostgresStoreConformanceTests {
    @Test func appStore() async throws { try await withPostgresStores { try await $0.appStore() } }
    @Test func messageStore() async throws { try await withPostgresStores { try await $0.messageStore() } }
    @Test func syncStore() async throws { try await withPostgresStores { try await $0.syncStore() } }
    @Test func messageLifecycleStore() async throws { try await withPostgresStores { try await $0.messageLifecycleStore() } }
    @Test func userStore() async throws { try await withPostgresStores { try await $0.userStore() } }
    @Test func groupStore() async throws { try await withPostgresStores { try await $0.groupStore() } }
    @Test func sensitiveWordStore() async throws { try await withPostgresStores { try await $0.sensitiveWordStore() } }
    @Test func conversationStateStore() async throws { try await withPostgresStores { try await $0.conversationStateStore() } }
    @Test func chatroomStore() async throws { try await withPostgresStores { try await $0.chatroomStore() } }
    @Test func ultraGroupStore() async throws { try await withPostgresStores { try await $0.ultraGroupStore() } }
    @Test func pushStore() async throws { try await withPostgresStores { try await $0.pushStore() } }
    @Test func callbackStore() async throws { try await withPostgresStores { try await $0.callbackStore() } }
    @Test func operationsStore() async throws { try await withPostgresStores { try await $0.operationsStore() } }
    @Test func conversationKeys() async throws { try await withPostgresStores { try await $0.conversationKeys() } }
    @Test func tenantIsolation() async throws { try await withPostgresStores { try await $0.tenantIsolation() } }
    @Test func concurrency() async throws { try await withPostgresStores { try await $0.concurrency() } }
}

/// Runs `body` with a suite whose stores are fresh databases of the test server, and drops them
/// afterwards. The suite runs one check at a time, so each new store closes the one before (a
/// test of 13 checks holds one pool at a time, not 13).
func withPostgresStores(_ body: (StoreConformance) async throws -> Void) async throws {
    let databases = try await TestPostgres.shared.databases()
    let stores = Mutex<[PostgresStore]>([])
    do {
        try await body(StoreConformance {
            for store in stores.withLock({ list in defer { list.removeAll() }; return list }) {
                await store.close()
                try await databases.drop(store.url.database)
            }
            let store = try await databases.makeStore()
            stores.withLock { $0.append(store) }
            return store
        })
    } catch {
        await databases.dropAll(closing: stores.withLock { $0 })
        throw error
    }
    await databases.dropAll(closing: stores.withLock { $0 })
}
