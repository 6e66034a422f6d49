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

/// The PostgreSQL server of this test process (`TestPostgresServer`: `IMSERVER_TEST_POSTGRES_URL`,
/// or one started with scripts/postgres.sh).
actor TestPostgres {
    static let shared = TestPostgres()
    static let logger = Logger(label: "imserver-tests-postgres") { _ in SwiftLogNoOpLogHandler() }

    func serverURL() throws -> PostgresURL {
        try PostgresURL(parsing: try TestPostgresServer.url())
    }

    func databases() throws -> TestDatabases {
        TestDatabases(server: try serverURL())
    }
}

/// Fresh databases on the test server, made and dropped from its `postgres` database.
struct TestDatabases: Sendable {
    let server: PostgresURL

    /// A new, empty database and a store on it (migrated by `connect`).
    func makeStore() async throws -> PostgresStore {
        let name = "imserver_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        try await admin("CREATE DATABASE \(name)")
        return try await PostgresStore.connect(url: url(of: name), logger: TestPostgres.logger, poolSize: 4)
    }

    private var sslSuffix: String { server.sslMode == .prefer ? "" : "?sslmode=\(server.sslMode.rawValue)" }

    /// The URL of a store's database with the password, for `connect`.
    func url(of database: String) -> String {
        var text = "postgres://\(server.user)"
        if let password = server.password { text += ":\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password)" }
        return text + "@\(server.host):\(server.port)/\(database)" + sslSuffix
    }

    func drop(_ database: String) async throws {
        try await admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
    }

    func dropAll(closing stores: [PostgresStore]) async {
        for store in stores {
            await store.close()
            try? await drop(store.url.database)
        }
    }

    /// Runs one statement on the server's `postgres` database.
    func admin(_ sql: String) async throws {
        let connection = try await PostgresConnector.connect(server.with(database: "postgres"), logger: TestPostgres.logger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestPostgres.logger).collect()
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}
