import Foundation
import GRDB
import IMCore
import IMStore
import IMStorePostgres
import IMStoreSQLite
import Logging
import PostgresNIO

/// `imserver migrate`: copies a single-node installation's embedded database into an empty
/// PostgreSQL database, table by table.
///
/// The PostgreSQL schema names its tables and columns as the SQLite schema does after all its
/// migrations (`PostgresMigrations`), so every table is copied column by column, whatever it holds:
/// the tables and their columns are read off the PostgreSQL schema and looked up in SQLite (the
/// push records, which the embedded store packs per message, are unpacked into rows). The
/// copy is one PostgreSQL transaction that first locks every table (a server started on the
/// database meanwhile waits) and refuses a database that holds data; it reads one SQLite snapshot,
/// in batches by primary key. Then the seq counters are set past the copied seqs, and the
/// identity columns past the copied ids, so new messages, reads, apps and push records come after them.
public enum SQLiteToPostgres {
    /// What was copied of one table.
    public struct Copied: Sendable, Equatable {
        public let table: String
        public let rows: Int
    }

    /// Rows read from SQLite at a time.
    static let batchRows = 5_000

    /// Copies the embedded database in `dataDirectory` into the PostgreSQL database at `url`, which
    /// must hold no data (its schema is made or migrated first). Calls `progress` after each table.
    public static func copy(fromDataDirectory dataDirectory: String, to url: String, logger: Logger,
                            progress: @Sendable (Copied) -> Void = { _ in }) async throws -> [Copied] {
        let path = (dataDirectory as NSString).appendingPathComponent("imserver.sqlite")
        guard FileManager.default.fileExists(atPath: path) else {
            throw IMError(.databaseError, "no embedded database at \(path): --from names the data directory of the installation (its dataDir)")
        }
        // Brings the SQLite schema to its latest version first: the copy reads its final tables.
        try SQLiteStore(directory: dataDirectory).close()
        // The push bookkeeping's file is attached under the name `push`: its tables are found by
        // their names as the main file's are (SQLite looks in the attached files too).
        let pushPath = (dataDirectory as NSString).appendingPathComponent(SQLiteStore.pushFileName)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "ATTACH DATABASE ? AS push", arguments: [pushPath])
        }
        let source: DatabasePool
        let snapshot: DatabaseSnapshot
        do {
            source = try DatabasePool(path: path, configuration: configuration)
            snapshot = try source.makeSnapshot()
        } catch {
            throw IMError(.databaseError, "cannot read the database \(path): \(error)")
        }
        defer { try? source.close() }

        // The schema, made or brought up to date by the store's own migrations.
        let target = try PostgresURL(parsing: url)
        let store = try await PostgresStore.connect(url: url, logger: logger, poolSize: 1)
        await store.close()
        let connection = try await PostgresConnector.connect(target, logger: logger)
        do {
            let copied = try await copy(from: snapshot, to: connection, database: target, logger: logger, progress: progress)
            try await connection.close()
            return copied
        } catch {
            try? await connection.close()
            if let error = error as? IMError { throw error }
            throw IMError(.databaseError, "copying into \(target) failed, nothing was kept: \(PostgresStore.describe(error))")
        }
    }

    private static func copy(from snapshot: DatabaseSnapshot, to connection: PostgresConnection, database: PostgresURL, logger: Logger,
                             progress: (Copied) -> Void) async throws -> [Copied] {
        let tables = try await PostgresTable.all(connection, logger: logger)
        try await connection.query("BEGIN", logger: logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: "LOCK TABLE \(tables.map(\.name).joined(separator: ", ")) IN ACCESS EXCLUSIVE MODE"),
                                       logger: logger)
            for table in tables {
                let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT EXISTS (SELECT 1 FROM \(table.name))"), logger: logger)
                    .collect()
                if try rows.first?.decode(Bool.self) == true {
                    throw IMError(.databaseError, "the PostgreSQL database \(database) already holds data (table \(table.name) has rows): imserver migrate copies into an empty database only; create a new one (createdb) and name it in --to")
                }
            }
            var copied: [Copied] = []
            for table in tables {
                let count = try await copy(table, from: snapshot, to: connection, logger: logger)
                let result = Copied(table: table.name, rows: count)
                copied.append(result)
                progress(result)
            }
            try await setCounters(from: snapshot, on: connection, tables: tables, logger: logger)
            try await connection.query("COMMIT", logger: logger)
            return copied
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Copies one table in batches ordered by its SQLite primary key; returns how many rows.
    private static func copy(_ table: PostgresTable, from snapshot: DatabaseSnapshot, to connection: PostgresConnection,
                             logger: Logger) async throws -> Int {
        if table.name == "push_records" { return try await copyPushRecords(table, from: snapshot, to: connection, logger: logger) }
        let key = try await snapshot.read { db in try primaryKey(of: table, db) }
        let columns = table.columns.map { sourceExpression(table: table.name, column: $0.name) }.joined(separator: ", ")
        let order = key.joined(separator: ", ")
        // PostgreSQL takes at most 65,535 parameters per statement.
        let rowsPerInsert = max(1, min(batchRows, 65_535 / table.columns.count))
        var after: [DatabaseValue]?
        var total = 0
        while true {
            let cursor = after
            let rows: [[DatabaseValue]] = try await snapshot.read { db in
                var sql = "SELECT \(columns) FROM \(table.name)"
                var arguments = StatementArguments()
                if let cursor {
                    sql += " WHERE (\(order)) > (\(key.map { _ in "?" }.joined(separator: ", ")))"
                    arguments = StatementArguments(cursor)
                }
                sql += " ORDER BY \(order) LIMIT \(batchRows)"
                return try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in row.databaseValues.map { $0 } }
            }
            guard let last = rows.last else { return total }
            for start in stride(from: 0, to: rows.count, by: rowsPerInsert) {
                try await insert(rows[start..<min(start + rowsPerInsert, rows.count)], into: table, on: connection, logger: logger)
            }
            total += rows.count
            after = key.map { column in last[table.columns.firstIndex { $0.name == column }!] }
            if rows.count < batchRows { return total }
        }
    }

    /// Copies the push records, which the embedded store keeps packed per message
    /// (`SQLiteStore.pushRecordsToCopy`), one row per record, ids kept.
    private static func copyPushRecords(_ table: PostgresTable, from snapshot: DatabaseSnapshot, to connection: PostgresConnection,
                                        logger: Logger) async throws -> Int {
        let rowsPerInsert = max(1, min(batchRows, 65_535 / table.columns.count))
        var after: Int64 = 0
        var total = 0
        while true {
            let cursor = after
            let (records, last) = try await snapshot.read { db in
                try SQLiteStore.pushRecordsToCopy(db, schema: "push", afterBatch: cursor, batches: 20)
            }
            guard let last else { return total }
            let rows = try records.map { record in try table.columns.map { try pushRecordValue(record, column: $0.name) } }
            for start in stride(from: 0, to: rows.count, by: rowsPerInsert) {
                try await insert(rows[start..<min(start + rowsPerInsert, rows.count)], into: table, on: connection, logger: logger)
            }
            total += rows.count
            after = last
        }
    }

    /// A push record's value for a column of PostgreSQL's push_records.
    static func pushRecordValue(_ record: PushRecord, column: String) throws -> DatabaseValue {
        switch column {
        case "id": record.id.databaseValue
        case "app_id": record.appId.databaseValue
        case "message_uid": record.messageUid.databaseValue
        case "user_id": record.userId.databaseValue
        case "device_id": record.deviceId.databaseValue
        case "kind": record.kind?.rawValue.databaseValue ?? .null
        case "token": record.token.databaseValue
        case "environment": record.environment.databaseValue
        case "notification": record.notification.databaseValue
        case "status": record.status.rawValue.databaseValue
        case "code": record.code.databaseValue
        case "attempts": record.attempts.databaseValue
        case "next_attempt_at": record.nextAttemptAt.databaseValue
        case "created_at": record.createdAt.databaseValue
        case "updated_at": record.updatedAt.databaseValue
        default: throw IMError(.databaseError, "push_records.\(column) has no counterpart in the embedded store's push records")
        }
    }

    /// What a column is read as: the column, except a device's badge, which the embedded store
    /// keeps in the push file.
    static func sourceExpression(table: String, column: String) -> String {
        guard table == "push_devices", column == "badge" else { return column }
        return """
            COALESCE((SELECT b.badge FROM push.push_badges b WHERE b.app_id = push_devices.app_id
                AND b.user_id = push_devices.user_id AND b.device_id = push_devices.device_id AND b.kind = push_devices.kind), 0)
            """
    }

    /// The columns of the SQLite table's primary key (all of them in the PostgreSQL table too).
    private static func primaryKey(of table: PostgresTable, _ db: Database) throws -> [String] {
        let info = try Row.fetchAll(db, sql: "SELECT name, pk FROM pragma_table_info(?)", arguments: [table.name])
        guard !info.isEmpty else {
            throw IMError(.databaseError, "the embedded database has no table \(table.name): is it an imserver data directory?")
        }
        let sqliteColumns = Set(info.map { $0["name"] as String })
        if let missing = table.columns.first(where: { !sqliteColumns.contains($0.name) }) {
            throw IMError(.databaseError, "the embedded database's table \(table.name) has no column \(missing.name)")
        }
        let key = info.filter { ($0["pk"] as Int) > 0 }.sorted { ($0["pk"] as Int) < ($1["pk"] as Int) }.map { $0["name"] as String }
        return key.isEmpty ? table.columns.map(\.name) : key
    }

    /// One multi-row INSERT of SQLite rows, each value bound as its PostgreSQL column's type.
    private static func insert(_ rows: ArraySlice<[DatabaseValue]>, into table: PostgresTable, on connection: PostgresConnection,
                               logger: Logger) async throws {
        var bindings = PostgresBindings(capacity: rows.count * table.columns.count)
        var values: [String] = []
        values.reserveCapacity(rows.count)
        var parameter = 0
        for row in rows {
            var marks: [String] = []
            for (column, value) in zip(table.columns, row) {
                parameter += 1
                marks.append("$\(parameter)")
                try column.bind(value, into: &bindings, table: table.name)
            }
            values.append("(" + marks.joined(separator: ", ") + ")")
        }
        let sql = "INSERT INTO \(table.name) (\(table.columns.map(\.name).joined(separator: ", "))) VALUES " + values.joined(separator: ", ")
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
    }

    /// Sets the seq counters past the copied seqs and the identity columns past the copied ids.
    /// SQLite's AUTOINCREMENT never gives a number twice, even one whose row was deleted since:
    /// its `sqlite_sequence` counts too (for the seqs and for the ids of AUTOINCREMENT tables, such
    /// as swept push records).
    private static func setCounters(from snapshot: DatabaseSnapshot, on connection: PostgresConnection, tables: [PostgresTable],
                                    logger: Logger) async throws {
        let (messageSeq, readSeq) = try await snapshot.read { db -> (Int64, Int64) in
            func highest(_ table: String, _ column: String) throws -> Int64 {
                let used = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(\(column)), 0) FROM \(table)") ?? 0
                let given = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table]) ?? 0
                return max(used, given)
            }
            return (try highest("messages", "seq"), try highest("message_reads", "seq"))
        }
        try await connection.query("UPDATE imserver_counters SET value = \(messageSeq) WHERE name = 'message_seq'", logger: logger)
        try await connection.query("UPDATE imserver_counters SET value = \(readSeq) WHERE name = 'read_seq'", logger: logger)
        for table in tables {
            for column in table.columns where column.isIdentity {
                let given = try await snapshot.read { db in
                    let sequence = try Int64.fetchOne(db, sql: """
                        SELECT MAX(seq) FROM (SELECT seq FROM main.sqlite_sequence WHERE name = ?
                                              UNION ALL SELECT seq FROM push.sqlite_sequence WHERE name = ?)
                        """, arguments: [table.name, table.name]) ?? 0
                    // Push record ids are given per batch: past every id of the last batch begun.
                    return table.name == "push_records" ? max(sequence, try SQLiteStore.highestPushRecordId(db, schema: "push")) : sequence
                }
                try await connection.query(PostgresQuery(unsafeSQL: """
                    SELECT setval(pg_get_serial_sequence('\(table.name)', '\(column.name)'), GREATEST(used, \(given), 1), GREATEST(used, \(given)) > 0)
                    FROM (SELECT COALESCE(MAX(\(column.name)), 0) AS used FROM \(table.name)) AS copied
                    """), logger: logger)
            }
        }
    }
}

/// A table of the PostgreSQL schema and its columns, in their order.
struct PostgresTable: Sendable {
    struct Column: Sendable {
        enum Kind: Sendable {
            case integer, text, bytes
        }

        let name: String
        let kind: Kind
        let isIdentity: Bool

        /// Binds a SQLite value as this column's type (SQLite's columns take any type; the embedded
        /// store writes integers, text and blobs where its schema says so).
        func bind(_ value: DatabaseValue, into bindings: inout PostgresBindings, table: String) throws {
            switch (kind, value.storage) {
            case (_, .null): bindings.appendNull()
            case (.integer, .int64(let number)): bindings.append(number)
            case (.integer, .double(let number)) where number == number.rounded(): bindings.append(Int64(number))
            case (.text, .string(let text)): bindings.append(text)
            case (.text, .int64(let number)): bindings.append(String(number))
            case (.text, .blob(let data)): bindings.append(String(decoding: data, as: UTF8.self))
            case (.bytes, .blob(let data)): bindings.append(ByteBuffer(bytes: data))
            case (.bytes, .string(let text)): bindings.append(ByteBuffer(string: text))
            default:
                throw IMError(.databaseError, "\(table).\(name) holds \(value), which is not a \(kind) value")
            }
        }
    }

    let name: String
    let columns: [Column]

    /// The tables of the store's schema (not its own bookkeeping, `imserver_*`): apps first, which
    /// users reference, then by name.
    static func all(_ connection: PostgresConnection, logger: Logger) async throws -> [PostgresTable] {
        var columns: [String: [Column]] = [:]
        for row in try await connection.query("""
            SELECT c.table_name::text, c.column_name::text, c.data_type::text, c.is_identity::text
            FROM information_schema.columns c JOIN information_schema.tables t
                ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.table_name NOT LIKE 'imserver\\_%'
            ORDER BY c.table_name, c.ordinal_position
            """, logger: logger).collect() {
            let (table, column, type, identity) = try row.decode((String, String, String, String).self)
            let kind: Column.Kind
            switch type {
            case "bigint", "integer", "smallint": kind = .integer
            case "bytea": kind = .bytes
            default: kind = .text
            }
            columns[table, default: []].append(Column(name: column, kind: kind, isIdentity: identity == "YES"))
        }
        return columns.keys.sorted { ($0 == "apps" ? 0 : 1, $0) < ($1 == "apps" ? 0 : 1, $1) }
            .map { PostgresTable(name: $0, columns: columns[$0]!) }
    }
}
