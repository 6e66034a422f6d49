import GRDB
import GRDBSQLite

/// The message log's per-message lookups (is this client message id stored already, the
/// conversation's newest sentTime), run on the statement's SQLite handle: the arguments are bound
/// where they lie (no copy of a string, no argument array, no row object), and the first row's one
/// column is read as an integer. Every message committed runs both, inside the writer's
/// transaction; GRDB's general path allocated about 25 times per message for them.
///
/// The statement must be one this code alone uses (its SQL is not run through GRDB elsewhere), so
/// that GRDB's own record of its bindings is never relied on.
extension Statement {
    /// The first row's first column, or nil when there is no row or the value is NULL.
    /// - Parameters: the statement's arguments, in order: an app id, then one or two texts.
    func firstInteger(_ appId: Int64, _ first: String, _ second: String? = nil) throws -> Int64? {
        let handle = sqliteStatement
        // Left reset after every use, and without the texts' addresses, which end with this call.
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        try Self.check(sqlite3_bind_int64(handle, 1, appId), handle)
        return try Self.withText(first, bound: 2, to: handle) {
            guard let second else { return try Self.stepInteger(handle) }
            return try Self.withText(second, bound: 3, to: handle) { try Self.stepInteger(handle) }
        }
    }

    /// Binds `text` without a copy (SQLITE_STATIC: SQLite reads it during `body`, which steps).
    private static func withText<T>(_ text: String, bound index: CInt, to handle: SQLiteStatement,
                                    _ body: () throws -> T) throws -> T {
        var text = text
        return try text.withUTF8 { bytes in
            // An empty buffer may have no address, which SQLite would bind as NULL.
            let code = bytes.isEmpty
                ? sqlite3_bind_text(handle, index, "", 0, nil)
                : sqlite3_bind_text(handle, index, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self),
                                    CInt(bytes.count), nil)
            try check(code, handle)
            return try body()
        }
    }

    private static func stepInteger(_ handle: SQLiteStatement) throws -> Int64? {
        switch sqlite3_step(handle) {
        case SQLITE_ROW:
            return sqlite3_column_type(handle, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, 0)
        case SQLITE_DONE:
            return nil
        case let code:
            throw error(code, handle)
        }
    }

    private static func check(_ code: CInt, _ handle: SQLiteStatement) throws {
        guard code == SQLITE_OK else { throw error(code, handle) }
    }

    private static func error(_ code: CInt, _ handle: SQLiteStatement) -> DatabaseError {
        let message = sqlite3_db_handle(handle).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sqlite3_sql(handle).map { String(cString: $0) })
    }
}
