import Foundation
import IMCore
import Logging
import PostgresNIO

/// Databases of their own for tests on the tests' PostgreSQL server (`TestPostgresServer`): each
/// test makes one (`make`) and drops it afterwards, so that the nodes of one test never hear
/// another test's cluster bus.
public enum TestPostgresDatabase {
    /// A new, empty database on the test server; its URL.
    public static func make() async throws -> String {
        let url = try TestPostgresServer.url()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await admin(url) { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        return replacingDatabase(in: url, with: name)
    }

    /// Drops a database `make` made (its connections are ended first).
    public static func drop(_ url: String) async {
        guard let name = url.split(separator: "/").last.map(String.init), name.hasPrefix("t_"), let server = try? TestPostgresServer.url() else { return }
        try? await admin(server) { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
        }
    }

    /// The parts of a `postgres://USER[:PASSWORD]@HOST:PORT/DB` URL.
    public static func parts(_ url: String) -> (user: String, password: String?, host: String, port: Int, database: String) {
        let components = URLComponents(string: url)
        return (components?.user ?? "postgres", components?.password, components?.host ?? "127.0.0.1", components?.port ?? 5432,
                String((components?.path ?? "/postgres").dropFirst()))
    }

    private static func replacingDatabase(in url: String, with name: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/" + name
        return components.string!
    }

    private static func admin(_ url: String, _ body: (PostgresConnection, Logger) async throws -> Void) async throws {
        let (user, password, host, port, database) = parts(url)
        let logger = Logger(label: "test-postgres")
        let configuration = PostgresConnection.Configuration(host: host, port: port, username: user, password: password,
                                                             database: database, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            try await body(connection, logger)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
