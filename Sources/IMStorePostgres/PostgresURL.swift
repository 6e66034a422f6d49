import Foundation
import IMCore

/// Where a PostgreSQL database is, as `--database` gives it:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=disable|prefer|require]` (`postgresql://`
/// too). User and password may be percent-encoded.
public struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    public enum SSLMode: String, Sendable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it (libpq's default).
        case prefer
        /// TLS or no connection.
        case require
    }

    public var user: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    public var sslMode: SSLMode

    public init(user: String, password: String? = nil, host: String, port: Int = 5432, database: String, sslMode: SSLMode = .prefer) {
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.database = database
        self.sslMode = sslMode
    }

    /// Reads a URL, or says what is wrong with it (an `IMError(.databaseError)`).
    public init(parsing text: String) throws {
        func refuse(_ problem: String) -> IMError {
            IMError(.databaseError, "the database URL \(Self.withoutPassword(text)) \(problem): write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        guard let schemeEnd = text.range(of: "://") else { throw refuse("has no scheme") }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw refuse("is not a postgres:// or postgresql:// URL")
        }
        guard let components = URLComponents(string: text) else { throw refuse("is not a valid URL") }
        guard let user = components.percentEncodedUser.flatMap({ $0.removingPercentEncoding }), !user.isEmpty else {
            throw refuse("names no user")
        }
        guard let host = components.host, !host.isEmpty else { throw refuse("names no host") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw refuse("names no database (the path after the host)") }
        var sslMode = SSLMode.prefer
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let mode = item.value.flatMap(SSLMode.init(rawValue:)) else {
                    throw refuse("has sslmode=\(item.value ?? ""): use disable, prefer or require")
                }
                sslMode = mode
            default:
                throw refuse("has the parameter \(item.name), which imserver does not know (only sslmode)")
            }
        }
        if let port = components.port, !(1...65535).contains(port) { throw refuse("has port \(port)") }
        self.init(user: user, password: components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }, host: host,
                  port: components.port ?? 5432, database: database.removingPercentEncoding ?? database, sslMode: sslMode)
    }

    /// The URL without its password: what logs and the startup banner show.
    public var description: String {
        "postgres://\(user)@\(host):\(port)/\(database)"
    }

    /// The same server and login, another database (the tests' fresh databases, `CREATE DATABASE`
    /// from the server's `postgres` database).
    public func with(database: String) -> PostgresURL {
        var url = self
        url.database = database
        return url
    }

    /// The URL as given, with any password replaced, for error messages.
    static func withoutPassword(_ text: String) -> String {
        guard let components = URLComponents(string: text), components.password != nil else { return text }
        var shown = components
        shown.password = "***"
        return shown.string ?? text
    }
}
