import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// The store on PostgreSQL: the same ports as the embedded store (`IMStoreSQLite`, whose behaviour
/// is the reference), for one server process or several sharing one database.
///
/// Every port method is one transaction on a connection of a `PostgresClient` pool, which the
/// store runs in a task of its own from `connect` until `close`. `synchronous_commit` is left on,
/// so `commit` returns once its transaction is durable. Writes run at READ COMMITTED and take the
/// lock that orders them where SQLite's single writer did (docs/POSTGRES.md):
///
/// - seqs come from a counter row (`imserver_counters`) that the committing transaction updates
///   first and holds until it commits, so commits are serialized and seq order is commit order: a
///   reader that sees seq N sees every seq below it (a sequence would hand out numbers that commit
///   out of order). Read receipts take their seqs the same way.
/// - a limit is checked under a transaction-scoped advisory lock on what owns it (the group, the
///   user, the app's word list or push templates) or a row lock (the message of `updateExpansion`),
///   so concurrent callers that each stay under it never pass it together; a push token is taken
///   under a lock on it, so it ends with one holder.
///
/// Reads of more than one statement run in a REPEATABLE READ READ ONLY transaction: one snapshot,
/// as SQLite's read transactions.
public final class PostgresStore: IMStore, CustomStringConvertible {
    let client: PostgresClient
    let logger: Logger
    public let url: PostgresURL
    /// Runs the pool (`PostgresClient.run`) until `close` cancels it.
    private let running: Task<Void, Never>

    /// The URL without its password, for the startup banner and logs.
    public var description: String { url.description }

    private init(url: PostgresURL, client: PostgresClient, running: Task<Void, Never>, logger: Logger) {
        self.url = url
        self.client = client
        self.logger = logger
        self.running = running
    }

    /// How long connecting may take before it is given up (TCP, TLS and the login together).
    public static let connectTimeout: Duration = .seconds(5)

    /// Connects to the database at `url`, runs its migrations, and returns the store.
    ///
    /// A malformed URL, a server that cannot be reached, a refused login or a missing database is
    /// an `IMError(.databaseError)` saying what to fix, within `connectTimeout`.
    /// - Parameter poolSize: connections the pool may open (each server process holds its own pool).
    public static func connect(url text: String, logger: Logger, poolSize: Int = 16) async throws -> PostgresStore {
        let url = try PostgresURL(parsing: text)
        // One connection first, on its own: the pool retries a failing server for ever, so its
        // errors would come as a hang; this one fails at once and says why.
        let probe = try await PostgresConnector.connect(url, logger: logger, timeout: connectTimeout)

        var configuration = PostgresClient.Configuration(host: url.host, port: url.port, username: url.user, password: url.password,
                                                         database: url.database, tls: PostgresConnector.clientTLS(url.sslMode))
        configuration.options.maximumConnections = max(1, poolSize)
        configuration.options.connectTimeout = connectTimeout
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let store = PostgresStore(url: url, client: client, running: await client.startRunning(), logger: logger)
        do {
            try await PostgresMigrations.run(on: probe, logger: logger)
        } catch {
            try? await probe.close()
            await store.close()
            throw IMError(.databaseError, "cannot migrate the database \(url): \(Self.describe(error))")
        }
        try? await probe.close()
        return store
    }

    /// Closes the pool once nothing uses the store any more: every later call fails.
    public func close() async {
        running.cancel()
        await running.value
    }

    /// Starts closing without waiting (what a synchronous closer can do); `close()` then waits.
    public func beginClosing() {
        running.cancel()
    }

    // MARK: transactions

    /// One read-write transaction at READ COMMITTED: committed when `body` returns, rolled back when
    /// it throws (a `StoreRefusal` comes out as it is; a database error as an `IMError`).
    func write<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        try await transaction("BEGIN", body)
    }

    /// One read-only snapshot: the reads of `body` see the same committed state.
    func read<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        try await transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    private func transaction<Result: Sendable>(_ begin: PostgresQuery,
                                               _ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        do {
            return try await client.withConnection { connection in
                try await connection.query(begin, logger: logger)
                do {
                    let result = try await body(connection)
                    try await connection.query("COMMIT", logger: logger)
                    return result
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: logger)
                    throw error
                }
            }
        } catch let error as PSQLError {
            throw IMError(.databaseError, "PostgreSQL: \(Self.describe(error))")
        }
    }

    /// A single statement, its own transaction, and its rows.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        do {
            return try await client.query(query, logger: logger).collect()
        } catch let error as PSQLError {
            throw IMError(.databaseError, "PostgreSQL: \(Self.describe(error))")
        }
    }

    /// A single prepared statement, its own transaction, and its rows.
    func rows<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row] {
        do {
            var rows: [Statement.Row] = []
            for try await row in try await client.execute(statement, logger: logger) { rows.append(row) }
            return rows
        } catch let error as PSQLError {
            throw IMError(.databaseError, "PostgreSQL: \(Self.describe(error))")
        }
    }

    /// A single prepared statement, its rows handed to `body` as they arrive until it returns false
    /// (the rest is not decoded, and the statement's rows are dropped).
    func forEachRow<Statement: PostgresPreparedStatement>(_ statement: Statement,
                                                           _ body: (Statement.Row) throws -> Bool) async throws {
        do {
            for try await row in try await client.execute(statement, logger: logger) {
                guard try body(row) else { break }
            }
        } catch let error as PSQLError {
            throw IMError(.databaseError, "PostgreSQL: \(Self.describe(error))")
        }
    }

    /// An error as the logs should show it: PostgreSQL's own message and SQLSTATE (postgres-nio
    /// hides them behind a generic description).
    package static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let info = error.serverInfo {
            let detail = info[.detail].map { " (\($0))" } ?? ""
            return "\(info[.message] ?? "error")\(detail) [SQLSTATE \(info[.sqlState] ?? "?")]"
        }
        return String(reflecting: error)
    }

    // MARK: apps

    public func loadApps() async throws -> [AppRecord] {
        try await rows("SELECT \(unescaped: Self.appColumns) FROM apps ORDER BY id").map(Self.app)
    }

    static let appColumns = "id, app_key, app_secret, name, created_at, banned, settings"

    static func app(_ row: PostgresRow) throws -> AppRecord {
        var cells = Cells(row)
        var app = AppRecord(id: try cells.int(), appKey: try cells.string(), appSecret: try cells.string(), name: try cells.string(),
                            createdAt: try cells.int(), banned: try cells.bool())
        if case .object(let settings)? = try? JSONValue(data: Data(try cells.string().utf8)) { app.settings = settings }
        return app
    }

    public func deleteApp(appId: Int64, batch: Int) async throws {
        while try await deleteMessages(appId: appId, conversationKey: nil, ultraGroups: true, sentBefore: Int64.max, limit: batch) == batch {}
        try await write { connection in
            let tables = try await connection.rows("""
                SELECT table_name::text FROM information_schema.columns
                WHERE table_schema = current_schema() AND column_name = 'app_id' AND table_name <> 'apps' ORDER BY table_name
                """, logger).map { row in var cells = Cells(row); return try cells.string() }
            for table in tables {
                try await connection.run("DELETE FROM \(unescaped: "\"" + table + "\"") WHERE app_id = \(appId)", logger)
            }
            try await connection.run("DELETE FROM apps WHERE id = \(appId)", logger)
        }
    }

    public func setAppBanned(appKey: String, banned: Bool) async throws -> AppRecord? {
        try await rows("""
            UPDATE apps SET banned = \(banned.flag) WHERE app_key = \(appKey) RETURNING \(unescaped: Self.appColumns)
            """).first.map(Self.app)
    }

    public func upsertApp(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        let rows = try await rows("""
            INSERT INTO apps (app_key, app_secret, name, created_at) VALUES (\(appKey), \(appSecret), \(name), \(now))
            ON CONFLICT (app_key) DO UPDATE SET app_secret = excluded.app_secret, name = excluded.name
            RETURNING \(unescaped: Self.appColumns)
            """)
        return try Self.app(rows[0])
    }
}

// MARK: - rows

/// The cells of a row, read in the order of the SELECT: by position, as the SQLite store reads
/// its rows (looking columns up by name costs a string comparison per column).
struct Cells {
    private var iterator: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        iterator = row.makeIterator()
    }

    mutating func next<Value: PostgresDecodable>(_ type: Value.Type = Value.self) throws -> Value {
        guard let cell = iterator.next() else { throw IMError(.databaseError, "PostgreSQL returned fewer columns than selected") }
        return try cell.decode(Value.self)
    }

    mutating func int() throws -> Int64 { try next(Int64.self) }
    mutating func string() throws -> String { try next(String.self) }
    mutating func optionalString() throws -> String? { try next(String?.self) }
    /// Flags are BIGINT 0 or 1, as SQLite's INTEGER columns they mirror.
    mutating func bool() throws -> Bool { try next(Int64.self) != 0 }
    mutating func seq() throws -> UInt64 { UInt64(max(0, try next(Int64.self))) }
}

extension Bool {
    /// A flag as its BIGINT column holds it.
    var flag: Int64 { self ? 1 : 0 }
}

extension PostgresConnection {
    /// Runs a statement of the transaction and returns its rows.
    func rows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }

    /// Runs a statement of the transaction, its rows (if any) read and dropped.
    func run(_ query: PostgresQuery, _ logger: Logger) async throws {
        _ = try await self.query(query, logger: logger).collect()
    }

    /// Runs a prepared statement of the transaction and returns its rows.
    func rows<Statement: PostgresPreparedStatement>(_ statement: Statement, _ logger: Logger) async throws -> [Statement.Row] {
        var rows: [Statement.Row] = []
        for try await row in try await execute(statement, logger: logger) { rows.append(row) }
        return rows
    }

    /// Runs a statement of the transaction and hands its rows to `body` as they arrive, until it
    /// returns false: rows after that are neither decoded nor kept.
    func forEachRow(_ query: PostgresQuery, _ logger: Logger, _ body: (PostgresRow) throws -> Bool) async throws {
        for try await row in try await self.query(query, logger: logger) {
            guard try body(row) else { break }
        }
    }

    /// The same for a prepared statement.
    func forEachRow<Statement: PostgresPreparedStatement>(_ statement: Statement, _ logger: Logger,
                                                           _ body: (Statement.Row) throws -> Bool) async throws {
        for try await row in try await execute(statement, logger: logger) {
            guard try body(row) else { break }
        }
    }

    /// Waits for a transaction-scoped advisory lock on `key` (released at COMMIT or ROLLBACK): what
    /// serializes the writers of something that has a limit, where SQLite had one writer. Keys are
    /// hashed to 64 bits; two keys sharing a hash only wait for each other.
    func lock(_ key: String, _ logger: Logger) async throws {
        try await run("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger)
    }

    /// Locks several keys, in one order for every caller so that two never wait for each other.
    func lock(_ keys: [String], _ logger: Logger) async throws {
        for key in Set(keys).sorted() { try await lock(key, logger) }
    }
}

/// The keys of the advisory locks: the kind of thing, its app and its ids, escaped as the
/// conversation keys are so that ids holding `|` name one thing.
enum LockKey {
    static func group(_ appId: Int64, _ groupId: String) -> String { "group|\(appId)|\(ConversationKey.escape(groupId))" }
    static func userGroups(_ appId: Int64, _ userId: String) -> String { "user-groups|\(appId)|\(ConversationKey.escape(userId))" }
    static func sensitiveWords(_ appId: Int64) -> String { "sensitive-words|\(appId)" }
    static func conversationState(_ appId: Int64, _ userId: String) -> String { "state|\(appId)|\(ConversationKey.escape(userId))" }
    static func ultraGroup(_ appId: Int64, _ groupId: String) -> String { "ultra-group|\(appId)|\(ConversationKey.escape(groupId))" }
    static func ultraGroupUser(_ appId: Int64, _ userId: String) -> String { "ultra-group-user|\(appId)|\(ConversationKey.escape(userId))" }
    static func pushTemplates(_ appId: Int64) -> String { "push-templates|\(appId)" }
    static func pushToken(_ appId: Int64, _ kind: PushTokenKind, _ token: String) -> String {
        "push-token|\(appId)|\(kind.rawValue)|\(ConversationKey.escape(token))"
    }
}
