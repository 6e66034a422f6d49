import Foundation
import IMCore
import IMProcess
import IMServerTesting
import IMStorePostgres
import Logging
import PostgresNIO
import Testing

/// The imserver binary on PostgreSQL: `serve`, `app create` and `app list` keep their data in the
/// database `--database` (or IMSERVER_DATABASE_URL) names, and the banner names it without its
/// password.
@Suite("imserver on PostgreSQL")
struct PostgresServeTests {
    static let logger = Logger(label: "imserver-tests-serve-postgres") { _ in SwiftLogNoOpLogHandler() }

    @Test("serve, app create and app list use the PostgreSQL database, and the banner names it")
    func serveOnPostgres() async throws {
        let server = try PostgresURL(parsing: try TestPostgresServer.url())
        let name = "imserver_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        try await Self.admin(server, "CREATE DATABASE \(name)")
        let database = server.with(database: name)
        var url = "postgres://\(database.user)"
        if let password = database.password { url += ":\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password)" }
        url += "@\(database.host):\(database.port)/\(database.database)"
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-pg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        do {
            let created = try await ServerConfigTests.run(["app", "create", "--database", url, "--data-dir", dataDir.path,
                                                     "--app-key", "pgkey", "--app-secret", "pgsecret", "--name", "On PG"])
            #expect(created.status == 0 && created.output.contains("app key: pgkey\napp secret: pgsecret"), "\(created.output)")

            // serve, given the database by its variable; the banner names it, without a password.
            let process = try ChildProcess(ChildServer.binaryURL().path,
                                           ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir.path, "--app-key", "devkey",
                                            "--app-secret", "devsecret", "--log-level", "error"],
                                           environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("IMSERVER_") }
                                               .merging(["IMSERVER_DATABASE_URL": url]) { $1 },
                                           standardOutput: .pipe, standardError: .null)
            var text = ""
            let descriptor = process.standardOutput!
            while !text.contains("app secret:") {
                guard let chunk = await ChildProcess.nextChunk(descriptor), !chunk.isEmpty else { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            process.terminate()
            let ended = await process.exit()
            #expect(text.contains("database: \(database)  (cluster node "), "\(text)")
            #expect(text.contains("app key: devkey"), "\(text)")
            #expect(ended == .exited(0), "a graceful shutdown closes the pool and exits 0")
            #expect(!FileManager.default.fileExists(atPath: dataDir.appendingPathComponent("imserver.sqlite").path),
                    "no embedded database beside PostgreSQL")

            let listed = try await ServerConfigTests.run(["app", "list", "--database", url])
            #expect(listed.status == 0 && listed.output.contains("pgkey\tpgsecret\tOn PG") && listed.output.contains("devkey\tdevsecret"),
                    "the apps of both commands are in PostgreSQL: \(listed.output)")
            let embedded = try await ServerConfigTests.run(["app", "list", "--data-dir", dataDir.path])
            #expect(embedded.status == 0 && !embedded.output.contains("pgkey"), "without --database, the embedded database: \(embedded.output)")
        } catch {
            try? await Self.admin(server, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            throw error
        }
        try await Self.admin(server, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs one statement on the server's `postgres` database.
    static func admin(_ server: PostgresURL, _ sql: String) async throws {
        let connection = try await PostgresConnector.connect(server.with(database: "postgres"), logger: logger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}
