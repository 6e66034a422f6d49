import Foundation
import IMCore
import IMServerTesting
import IMStorePostgres
import Logging
import Testing

/// What `PostgresStore.connect` says when `--database` is wrong: each mistake is an
/// `IMError(.databaseError)` naming what to fix, within a few seconds, never a hang.
@Suite("PostgresStore.connect errors")
struct PostgresConnectTests {
    static let logger = Logger(label: "imserver-tests-connect") { _ in SwiftLogNoOpLogHandler() }

    /// Connects and returns the error, checking that it came rather than a hang: the connect
    /// timeout is 5 s, and the bound is wide because the whole suite shares two cores (a precise
    /// figure is not a unit test's business).
    func connectError(_ url: String, within seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async -> IMError? {
        let started = ContinuousClock.now
        do {
            let store = try await PostgresStore.connect(url: url, logger: Self.logger, poolSize: 1)
            await store.close()
            Issue.record("connecting to \(url) succeeded", sourceLocation: sourceLocation)
            return nil
        } catch let error as IMError {
            #expect(error.code == .databaseError, sourceLocation: sourceLocation)
            #expect(ContinuousClock.now - started < .seconds(seconds), "gave up in time", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("not an IMError: \(String(reflecting: error))", sourceLocation: sourceLocation)
            return nil
        }
    }

    @Test("a malformed URL says how to write one", arguments: [
        "mysql://user@127.0.0.1/db", "postgres://127.0.0.1:5432/db", "postgres://user@:5432/db", "postgres://user@127.0.0.1:5432",
        "postgres://user@127.0.0.1:5432/db?sslmode=sometimes", "postgres://user@127.0.0.1:5432/db?timeout=3", "127.0.0.1:5432/db",
    ])
    func malformed(url: String) async throws {
        let error = try #require(await connectError(url, within: 10))
        #expect(error.message.contains("postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"), "\(error.message)")
    }

    @Test("a password never shows in the error")
    func passwordHidden() async throws {
        let error = try #require(await connectError("postgres://user:s3cret@127.0.0.1:5432", within: 10))
        #expect(!error.message.contains("s3cret"), "\(error.message)")
    }

    @Test("nothing listening on the port: cannot reach, connection refused")
    func nothingListening() async throws {
        let port = try freePort()
        let error = try #require(await connectError("postgres://postgres@127.0.0.1:\(port)/imserver"))
        #expect(error.message == "cannot reach PostgreSQL at 127.0.0.1:\(port) (connection refused): is the server running, and is the port in --database right?",
                "\(error.message)")
    }

    @Test("a server that accepts and never answers is given up after the connect timeout")
    func silentServer() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let error = try #require(await connectError("postgres://postgres@127.0.0.1:\(listener.port)/imserver?sslmode=disable", within: 60))
        // Cut off by the TCP connect's timeout or by the one around the login, whichever ends first.
        #expect(error.message.hasPrefix("cannot reach PostgreSQL at 127.0.0.1:\(listener.port) (timed out)")
                || error.message.hasPrefix("cannot reach PostgreSQL at 127.0.0.1:\(listener.port) (no answer within"), "\(error.message)")
    }

    @Test("an unknown database is named, with how to create it")
    func unknownDatabase() async throws {
        let server = try await TestPostgres.shared.serverURL()
        let databases = TestDatabases(server: server)
        let error = try #require(await connectError(databases.url(of: "imserver_no_such_database")))
        #expect(error.message.contains("has no database \"imserver_no_such_database\": create it"), "\(error.message)")
    }

    @Test("an unknown user is a refused login")
    func unknownUser() async throws {
        var server = try await TestPostgres.shared.serverURL()
        server.user = "imserver_no_such_user"
        let error = try #require(await connectError(TestDatabases(server: server).url(of: server.database)))
        #expect(error.message.contains("refused the login of user \"imserver_no_such_user\""), "\(error.message)")
    }

    @Test("the URL is parsed: postgresql://, percent-encoded login, default port, sslmode; description hides the password")
    func parsing() throws {
        let url = try PostgresURL(parsing: "postgresql://us%40er:p%3Ass@db.example:6543/chat?sslmode=disable")
        #expect(url == PostgresURL(user: "us@er", password: "p:ss", host: "db.example", port: 6543, database: "chat", sslMode: .disable))
        #expect(url.description == "postgres://us@er@db.example:6543/chat")
        let plain = try PostgresURL(parsing: "postgres://im@localhost/im")
        #expect(plain.port == 5432 && plain.password == nil && plain.sslMode == .prefer)
    }
}

/// A free TCP port on 127.0.0.1 (bound, then let go).
func freePort() throws -> Int {
    let listener = try SilentListener()
    let port = listener.port
    listener.close()
    return port
}

/// A socket that listens on 127.0.0.1 and never accepts: the kernel completes connections, and
/// nothing ever answers them.
final class SilentListener: Sendable {
    let descriptor: Int32
    let port: Int

    init() throws {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socketDescriptor, 16) == 0 else {
            _ = Glibc.close(socketDescriptor)
            throw IMError(.databaseError, "cannot listen on 127.0.0.1")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketDescriptor, $0, &length) }
        }
        descriptor = socketDescriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}
