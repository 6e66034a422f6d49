import Foundation
import IMCore
import Logging
import PostgresNIO

/// The PostgreSQL server of the tests: `IMSERVER_TEST_POSTGRES_URL` (scripts/test.sh starts a
/// private one and sets it), or else one this process starts with scripts/postgres.sh in a
/// temporary directory. Each test gets a database of its own (`makeDatabase`), dropped afterwards,
/// so that the nodes of one test never hear another test's cluster bus.
public enum TestPostgres {
    private static let started: Result<String, any Error> = {
        if let url = ProcessInfo.processInfo.environment["IMSERVER_TEST_POSTGRES_URL"], !url.isEmpty { return .success(url) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/postgres.sh").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-tests-postgres").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, "start", directory]
        let output = Pipe()
        process.standardOutput = output
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            return .failure(error)
        }
        let url = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, url.hasPrefix("postgres://") else {
            return .failure(IMError(.databaseError, "scripts/postgres.sh start \(directory) failed (exit \(process.terminationStatus)); run it by hand to see why"))
        }
        return .success(url)
    }()

    /// The URL of the test server's maintenance database.
    public static func serverURL() throws -> String { try started.get() }

    /// A new, empty database on the test server; its URL.
    public static func makeDatabase() async throws -> String {
        let url = try serverURL()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await admin(url) { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        return replacingDatabase(in: url, with: name)
    }

    /// Drops a database `makeDatabase` made (its connections are ended first).
    public static func dropDatabase(_ url: String) async {
        guard let name = url.split(separator: "/").last.map(String.init), name.hasPrefix("t_"), let server = try? serverURL() else { return }
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
