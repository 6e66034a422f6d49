import Foundation
import GRDB
import IMCore
import IMStore

/// Callbacks to the app's server: settings and the outbox.
extension SQLiteStore {
    static func createCallbackTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE callback_settings (
                app_id INTEGER PRIMARY KEY, settings BLOB NOT NULL
            );
            CREATE TABLE callback_outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                app_id INTEGER NOT NULL, kind INTEGER NOT NULL, order_key TEXT NOT NULL, dedup_key TEXT NOT NULL,
                body BLOB NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, created_at INTEGER NOT NULL,
                last_error TEXT NOT NULL
            );
            CREATE UNIQUE INDEX callback_outbox_by_dedup ON callback_outbox (app_id, kind, dedup_key);
            CREATE INDEX callback_outbox_by_app ON callback_outbox (app_id, id);
            CREATE INDEX callback_outbox_by_time ON callback_outbox (created_at);
            CREATE TABLE callback_cursors (
                node TEXT PRIMARY KEY, seq INTEGER NOT NULL
            );
            """)
    }

    public func callbackSettings(appId: Int64) async throws -> Data? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT settings FROM callback_settings WHERE app_id = ?", arguments: [appId])
        }
    }

    public func setCallbackSettings(appId: Int64, settings: Data) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO callback_settings (app_id, settings) VALUES (?, ?)
                ON CONFLICT (app_id) DO UPDATE SET settings = excluded.settings
                """, arguments: [appId, settings])
        }
    }

    public func enqueueCallbacks(_ records: [CallbackRecord], node: String, cursor: UInt64?) async throws {
        guard !records.isEmpty || cursor != nil else { return }
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO callback_outbox (app_id, kind, order_key, dedup_key, body, attempts, next_attempt_at, created_at, last_error)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_id, kind, dedup_key) DO NOTHING
                """)
            for record in records {
                try insert.execute(arguments: [record.appId, record.kind.rawValue, record.orderKey, record.dedupKey, record.body,
                                               record.attempts, record.nextAttemptAt, record.createdAt, record.lastError])
            }
            if let cursor {
                try db.execute(sql: """
                    INSERT INTO callback_cursors (node, seq) VALUES (?, ?)
                    ON CONFLICT (node) DO UPDATE SET seq = MAX(callback_cursors.seq, excluded.seq)
                    """, arguments: [node, Int64(clamping: cursor)])
            }
        }
    }

    public func callbackCursor(node: String) async throws -> UInt64? {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT seq FROM callback_cursors WHERE node = ?", arguments: [node]).map { UInt64($0) }
        }
    }

    public func callbackBacklog() async throws -> [Int64: Int] {
        try await pool.read { db in
            var backlog: [Int64: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT app_id, COUNT(*) FROM callback_outbox GROUP BY app_id") {
                backlog[row[0]] = row[1]
            }
            return backlog
        }
    }

    public func pendingCallbacks(appId: Int64, limit: Int) async throws -> [CallbackRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT id, app_id, kind, order_key, dedup_key, body, attempts, next_attempt_at, created_at, last_error
                FROM callback_outbox WHERE app_id = ? ORDER BY id LIMIT ?
                """, arguments: [appId, limit]).map { row in
                    CallbackRecord(id: row[0], appId: row[1], kind: CallbackKind(rawValue: row[2]) ?? .routing, orderKey: row[3],
                                   dedupKey: row[4], body: row[5], attempts: row[6], nextAttemptAt: row[7], createdAt: row[8],
                                   lastError: row[9])
                }
        }
    }

    public func claimCallbacks(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return try await pool.write { db in
            var claimed: [Int64] = []
            for chunk in ids.uniqued().chunked(Self.maxBoundIds - 2) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                claimed += try Int64.fetchAll(db, sql: """
                    UPDATE callback_outbox SET next_attempt_at = ? WHERE id IN (\(marks)) AND next_attempt_at <= ?
                    RETURNING id
                    """, arguments: StatementArguments([leaseUntil] + chunk.map { $0 as any DatabaseValueConvertible } + [now]))
            }
            return claimed
        }
    }

    public func deleteCallbacks(ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        try await pool.write { db in
            for chunk in ids.chunked(Self.maxBoundIds) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                try db.execute(sql: "DELETE FROM callback_outbox WHERE id IN (\(marks))", arguments: StatementArguments(Array(chunk)))
            }
        }
    }

    public func retryCallbacks(_ retries: [CallbackRetry]) async throws {
        guard !retries.isEmpty else { return }
        try await pool.write { db in
            let update = try db.cachedStatement(sql: "UPDATE callback_outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?")
            for retry in retries {
                try update.execute(arguments: [retry.attempts, retry.nextAttemptAt, retry.error, retry.id])
            }
        }
    }

    public func rescheduleCallbacks(ids: [Int64], nextAttemptAt: Int64) async throws {
        guard !ids.isEmpty else { return }
        try await pool.write { db in
            for chunk in ids.chunked(Self.maxBoundIds - 1) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                try db.execute(sql: "UPDATE callback_outbox SET next_attempt_at = ? WHERE id IN (\(marks))",
                               arguments: StatementArguments([nextAttemptAt] + chunk.map { $0 as any DatabaseValueConvertible }))
            }
        }
    }

    public func trimCallbacks(appId: Int64, keeping: Int) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: """
                DELETE FROM callback_outbox WHERE app_id = ? AND id < (
                    SELECT id FROM callback_outbox WHERE app_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)
                """, arguments: [appId, appId, max(0, keeping - 1)])
            return db.changesCount
        }
    }

    public func expireCallbacks(createdBefore before: Int64) async throws -> [Int64: Int] {
        try await pool.write { db in
            var expired: [Int64: Int] = [:]
            for row in try Row.fetchAll(db, sql: "DELETE FROM callback_outbox WHERE created_at < ? RETURNING app_id", arguments: [before]) {
                let appId: Int64 = row[0]
                expired[appId, default: 0] += 1
            }
            return expired
        }
    }
}
