import Foundation
import IMStorePostgres
import Logging
import PostgresNIO

/// The PostgreSQL server of this test process (`TestPostgresServer`: `IMSERVER_TEST_POSTGRES_URL`,
/// or one started with scripts/postgres.sh).
public actor TestPostgres {
    public static let shared = TestPostgres()
    public static let logger = Logger(label: "imserver-tests-postgres") { _ in SwiftLogNoOpLogHandler() }

    public func serverURL() throws -> PostgresURL {
        try PostgresURL(parsing: try TestPostgresServer.url())
    }

    public func databases() throws -> TestDatabases {
        TestDatabases(server: try serverURL())
    }
}

/// Fresh databases on the test server, made and dropped from its `postgres` database.
public struct TestDatabases: Sendable {
    public let server: PostgresURL

    public init(server: PostgresURL) {
        self.server = server
    }

    /// A new, empty database (its name).
    public func makeDatabase() async throws -> String {
        let name = "imserver_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        try await admin("CREATE DATABASE \(name)")
        return name
    }

    /// A new, empty database and a store on it (migrated by `connect`).
    public func makeStore(poolSize: Int = 4) async throws -> PostgresStore {
        try await PostgresStore.connect(url: url(of: try await makeDatabase()), logger: TestPostgres.logger, poolSize: poolSize)
    }

    private var sslSuffix: String { server.sslMode == .prefer ? "" : "?sslmode=\(server.sslMode.rawValue)" }

    /// The URL of a store's database with the password, for `connect`.
    public func url(of database: String) -> String {
        var text = "postgres://\(server.user)"
        if let password = server.password { text += ":\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password)" }
        return text + "@\(server.host):\(server.port)/\(database)" + sslSuffix
    }

    public func drop(_ database: String) async throws {
        try await admin("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
    }

    public func dropAll(closing stores: [PostgresStore]) async {
        for store in stores {
            await store.close()
            try? await drop(store.url.database)
        }
    }

    /// Runs one statement on the server's `postgres` database.
    public func admin(_ sql: String) async throws {
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
