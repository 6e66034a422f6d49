import Foundation
import IMCore
import IMStore
import Logging
import NIOCore
import PostgresNIO

/// Callbacks to the app's server: settings and the outbox (the SQLite store's
/// `SQLiteStore+Callbacks`).
extension PostgresStore {
    public func callbackSettings(appId: Int64) async throws -> Data? {
        guard let row = try await rows("SELECT settings FROM callback_settings WHERE app_id = \(appId)").first else { return nil }
        var cells = Cells(row)
        return try cells.next(Data.self)
    }

    public func setCallbackSettings(appId: Int64, settings: Data) async throws {
        _ = try await rows("""
            INSERT INTO callback_settings (app_id, settings) VALUES (\(appId), \(ByteBuffer(bytes: settings)))
            ON CONFLICT (app_id) DO UPDATE SET settings = excluded.settings
            """)
    }

    public func enqueueCallbacks(_ records: [CallbackRecord], node: String, cursor: UInt64?) async throws {
        guard !records.isEmpty || cursor != nil else { return }
        try await write { connection in
            if !records.isEmpty {
                try await connection.run("""
                    INSERT INTO callback_outbox (app_id, kind, order_key, dedup_key, body, attempts, next_attempt_at, created_at, last_error)
                    SELECT r.app_id, r.kind, r.order_key, r.dedup_key, r.body, r.attempts, r.next_attempt_at, r.created_at, r.last_error
                    FROM unnest(\(records.map(\.appId))::bigint[], \(records.map { Int64($0.kind.rawValue) })::bigint[],
                                \(records.map(\.orderKey))::text[], \(records.map(\.dedupKey))::text[],
                                \(records.map { ByteBuffer(bytes: $0.body) })::bytea[], \(records.map { Int64($0.attempts) })::bigint[],
                                \(records.map(\.nextAttemptAt))::bigint[], \(records.map(\.createdAt))::bigint[],
                                \(records.map(\.lastError))::text[]) WITH ORDINALITY
                        AS r(app_id, kind, order_key, dedup_key, body, attempts, next_attempt_at, created_at, last_error, ord)
                    ORDER BY r.ord
                    ON CONFLICT (app_id, kind, dedup_key) DO NOTHING
                    """, logger)
            }
            if let cursor {
                try await connection.run("""
                    INSERT INTO callback_cursors (node, seq) VALUES (\(node), \(Int64(clamping: cursor)))
                    ON CONFLICT (node) DO UPDATE SET seq = GREATEST(callback_cursors.seq, excluded.seq)
                    """, logger)
            }
        }
    }

    public func callbackCursor(node: String) async throws -> UInt64? {
        guard let row = try await rows("SELECT seq FROM callback_cursors WHERE node = \(node)").first else { return nil }
        var cells = Cells(row)
        return try cells.seq()
    }

    public func callbackBacklog() async throws -> [Int64: Int] {
        var backlog: [Int64: Int] = [:]
        for row in try await rows("SELECT app_id, COUNT(*) FROM callback_outbox GROUP BY app_id") {
            var cells = Cells(row)
            backlog[try cells.int()] = Int(try cells.int())
        }
        return backlog
    }

    public func pendingCallbacks(appId: Int64, limit: Int) async throws -> [CallbackRecord] {
        try await rows("""
            SELECT id, app_id, kind, order_key, dedup_key, body, attempts, next_attempt_at, created_at, last_error
            FROM callback_outbox WHERE app_id = \(appId) ORDER BY id LIMIT \(Int64(limit))
            """).map { row in
                var cells = Cells(row)
                let id = try cells.int(), appId = try cells.int(), kind = try cells.int(), orderKey = try cells.string()
                let dedupKey = try cells.string(), body = try cells.next(Data.self), attempts = try cells.int()
                return CallbackRecord(id: id, appId: appId, kind: CallbackKind(rawValue: Int(kind)) ?? .routing, orderKey: orderKey,
                                      dedupKey: dedupKey, body: body, attempts: Int(attempts), nextAttemptAt: try cells.int(),
                                      createdAt: try cells.int(), lastError: try cells.string())
            }
    }

    /// One statement: a row another node claimed first no longer matches when its lock is released.
    public func claimCallbacks(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return try await rows("""
            UPDATE callback_outbox SET next_attempt_at = \(leaseUntil)
            WHERE id = ANY(\(ids)::bigint[]) AND next_attempt_at <= \(now)
            RETURNING id
            """).map { row in
                var cells = Cells(row)
                return try cells.int()
            }
    }

    public func deleteCallbacks(ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        _ = try await rows("DELETE FROM callback_outbox WHERE id = ANY(\(ids)::bigint[])")
    }

    public func retryCallbacks(_ retries: [CallbackRetry]) async throws {
        guard !retries.isEmpty else { return }
        _ = try await rows("""
            UPDATE callback_outbox o SET attempts = r.attempts, next_attempt_at = r.next_attempt_at, last_error = r.error
            FROM unnest(\(retries.map(\.id))::bigint[], \(retries.map { Int64($0.attempts) })::bigint[],
                        \(retries.map(\.nextAttemptAt))::bigint[], \(retries.map(\.error))::text[])
                AS r(id, attempts, next_attempt_at, error)
            WHERE o.id = r.id
            """)
    }

    public func rescheduleCallbacks(ids: [Int64], nextAttemptAt: Int64) async throws {
        guard !ids.isEmpty else { return }
        _ = try await rows("UPDATE callback_outbox SET next_attempt_at = \(nextAttemptAt) WHERE id = ANY(\(ids)::bigint[])")
    }

    public func trimCallbacks(appId: Int64, keeping: Int) async throws -> Int {
        var cells = Cells(try await rows("""
            WITH gone AS (
                DELETE FROM callback_outbox WHERE app_id = \(appId) AND id < (
                    SELECT id FROM callback_outbox WHERE app_id = \(appId) ORDER BY id DESC LIMIT 1 OFFSET \(Int64(max(0, keeping - 1))))
                RETURNING 1)
            SELECT COUNT(*) FROM gone
            """)[0])
        return Int(try cells.int())
    }

    public func expireCallbacks(createdBefore before: Int64) async throws -> [Int64: Int] {
        var expired: [Int64: Int] = [:]
        for row in try await rows("""
            WITH gone AS (DELETE FROM callback_outbox WHERE created_at < \(before) RETURNING app_id)
            SELECT app_id, COUNT(*) FROM gone GROUP BY app_id
            """) {
            var cells = Cells(row)
            expired[try cells.int()] = Int(try cells.int())
        }
        return expired
    }
}
