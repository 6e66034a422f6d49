import Foundation
import IMCore
import Logging
import PostgresNIO

/// Opens single connections (the store's first one, and the admin connections of tests and
/// `imserver migrate`), and turns what goes wrong into a sentence that says what to fix.
public enum PostgresConnector {
    /// Connects to `url` within `timeout`, or throws an `IMError(.databaseError)` naming the cause:
    /// nothing listening, a refused login, a missing database, no TLS where it is required.
    public static func connect(_ url: PostgresURL, logger: Logger, timeout: Duration = PostgresStore.connectTimeout) async throws
        -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(host: url.host, port: url.port, username: url.user, password: url.password,
                                                             database: url.database, tls: try connectionTLS(url.sslMode))
        configuration.options.connectTimeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000
                                                            + timeout.components.attoseconds / 1_000_000_000)
        let settings = configuration
        do {
            // The TCP connect has its own timeout; a server that accepts and then says nothing
            // (a wrong port of another service) is cut off here.
            return try await withThrowingTaskGroup(of: PostgresConnection?.self) { group in
                group.addTask {
                    try await PostgresConnection.connect(configuration: settings, id: 0, logger: logger)
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let connection = try await group.next() ?? nil else {
                    throw IMError(.databaseError, "cannot reach PostgreSQL at \(url.host):\(url.port) (no answer within \(timeout)): is the server running, and is the port in --database right?")
                }
                return connection
            }
        } catch let error as IMError {
            throw error
        } catch {
            throw explain(error, url: url)
        }
    }

    /// What a failed connection attempt means for whoever set `--database`.
    static func explain(_ error: any Error, url: PostgresURL) -> IMError {
        let server = "PostgreSQL at \(url.host):\(url.port)"
        guard let error = error as? PSQLError else {
            return IMError(.databaseError, "cannot connect to \(server): \(error)")
        }
        if let info = error.serverInfo {
            let message = info[.message] ?? "refused"
            switch info[.sqlState] ?? "" {
            case "3D000":
                return IMError(.databaseError, "\(server) has no database \"\(url.database)\": create it (createdb -h \(url.host) -p \(url.port) -U \(url.user) \(url.database)) or fix the database name in --database")
            case "28P01", "28000":
                return IMError(.databaseError, "\(server) refused the login of user \"\(url.user)\" (\(message)): check the user and password in --database")
            case "53300":
                return IMError(.databaseError, "\(server) has no free connection (\(message)): raise max_connections or lower the pools of the imserver nodes")
            default:
                return IMError(.databaseError, "\(server) refused the connection: \(message) [SQLSTATE \(info[.sqlState] ?? "?")]")
            }
        }
        switch error.code {
        case .sslUnsupported:
            return IMError(.databaseError, "\(server) does not offer TLS, which sslmode=require asks for: enable ssl on the server or use sslmode=disable")
        case .authMechanismRequiresPassword:
            return IMError(.databaseError, "\(server) asks user \"\(url.user)\" for a password: give it in --database (postgres://USER:PASSWORD@HOST:PORT/DB)")
        case .unsupportedAuthMechanism:
            return IMError(.databaseError, "\(server) asks for a login method imserver does not support: use scram-sha-256, md5, password or trust in pg_hba.conf")
        default:
            let cause = error.underlying.map { reason(of: $0) } ?? "\(error.code)"
            return IMError(.databaseError, "cannot reach \(server) (\(cause)): is the server running, and is the port in --database right?")
        }
    }

    /// A short cause of a failed TCP connect: NIO's errors name the errno deep inside.
    private static func reason(of error: any Error) -> String {
        let text = String(reflecting: error)
        if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
        if text.localizedCaseInsensitiveContains("timeout") || text.localizedCaseInsensitiveContains("timed out") { return "timed out" }
        if text.localizedCaseInsensitiveContains("dns") || text.localizedCaseInsensitiveContains("resolve") { return "host not found" }
        if text.localizedCaseInsensitiveContains("unreachable") { return "network unreachable" }
        return text
    }

    /// TLS as libpq's sslmode means it: encryption without checking the certificate (a
    /// self-hosted server's certificate is rarely one a CA signed).
    private static func tlsConfiguration() -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        return tls
    }

    public static func connectionTLS(_ mode: PostgresURL.SSLMode) throws -> PostgresConnection.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(try NIOSSLContext(configuration: tlsConfiguration()))
        case .require: return .require(try NIOSSLContext(configuration: tlsConfiguration()))
        }
    }

    public static func clientTLS(_ mode: PostgresURL.SSLMode) -> PostgresClient.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(tlsConfiguration())
        case .require: return .require(tlsConfiguration())
        }
    }
}

extension PostgresClient {
    /// Runs the pool in a new task and returns that task once it is about to call `run()`, so that
    /// the caller's first lease does not come before it (PostgresNIO warns about each such lease).
    /// Cancelling the task stops the pool.
    /// - Parameter detached: run it detached, outside the caller's graceful shutdown (which the
    ///   pool would otherwise follow by stopping on its own).
    public func startRunning(detached: Bool = false) async -> Task<Void, Never> {
        let (begun, begin) = AsyncStream.makeStream(of: Void.self)
        let body: @Sendable () async -> Void = { [self] in
            begin.finish()
            // `run()` marks the pool running before its first suspension.
            await run()
        }
        let task = detached ? Task.detached(operation: body) : Task(operation: body)
        for await _ in begun {}
        return task
    }
}
