import Foundation
import IMCore
import IMStore
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

/// The PostgreSQL server of this test process.
actor TestPostgres {
    static let shared = TestPostgres()

    private var url: PostgresURL?
    static let logger = Logger(label: "imserver-tests-postgres") { _ in SwiftLogNoOpLogHandler() }

    /// The server's URL: `IMSERVER_TEST_POSTGRES_URL`, or a server started here (once).
    func serverURL() throws -> PostgresURL {
        if let url { return url }
        let text: String
        if let given = ProcessInfo.processInfo.environment["IMSERVER_TEST_POSTGRES_URL"], !given.isEmpty {
            text = given
        } else {
            text = try Self.startServer()
        }
        let parsed = try PostgresURL(parsing: text)
        url = parsed
        return parsed
    }

    func databases() throws -> TestDatabases {
        TestDatabases(server: try serverURL())
    }

    /// Runs `scripts/postgres.sh start` in a temporary directory and returns the URL it prints; the
    /// server is stopped when the process exits.
    private static func startServer() throws -> String {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/postgres.sh").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-tests-postgres-\(getpid())").path
        let output = try run(script, ["start", directory])
        ownServer.withLock { $0 = (script, directory) }
        atexit(stopOwnServer)
        guard let url = output.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres") else {
            throw IMError(.databaseError, "scripts/postgres.sh start printed no URL: \(output)")
        }
        return url
    }

    /// Runs a program and returns what it printed; throws when it fails.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw IMError(.databaseError, "\(program) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The server this process started, stopped at exit.
private let ownServer = Mutex<(script: String, directory: String)?>(nil)

/// Stops the server this process started (an `atexit` handler).
private func stopOwnServer() {
    guard let (script, directory) = ownServer.withLock({ $0 }) else { return }
    _ = try? TestPostgres.run(script, ["stop", directory])
    try? FileManager.default.removeItem(atPath: directory)
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
