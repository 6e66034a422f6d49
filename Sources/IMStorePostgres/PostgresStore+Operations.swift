import Foundation
import IMCore
import IMStore
import PostgresNIO

/// Per-app settings, daily statistics and the operator console's accounts and sessions (as
/// `SQLiteStore+Operations`).
extension PostgresStore {
    public func updateAppSettings(appKey: String, set given: [String: JSONValue], reset resetGiven: [String]) async throws -> AppRecord? {
        // A null value removes its key, as SQLite's json_patch does.
        let set = given.filter { $0.value != .null }
        let reset = resetGiven + given.filter { $0.value == .null }.map(\.key)
        let patch = String(decoding: try JSONValue.object(set).data(), as: UTF8.self)
        return try await rows("""
            UPDATE apps SET settings = ((settings::jsonb || \(patch)::jsonb) - \(reset)::text[])::text WHERE app_key = \(appKey)
            RETURNING \(unescaped: Self.appColumns)
            """).first.map(Self.app)
    }

    // MARK: statistics

    public func addDailyFigures(counts: [DailyFigure], peaks: [DailyFigure]) async throws {
        guard !counts.isEmpty || !peaks.isEmpty else { return }
        try await write { connection in
            for figure in counts {
                try await connection.run("""
                    INSERT INTO app_daily_stats (app_id, day, name, value) VALUES (\(figure.appId), \(figure.day), \(figure.name), \(figure.value))
                    ON CONFLICT (app_id, day, name) DO UPDATE SET value = app_daily_stats.value + excluded.value
                    """, logger)
            }
            for figure in peaks {
                try await connection.run("""
                    INSERT INTO app_daily_stats (app_id, day, name, value) VALUES (\(figure.appId), \(figure.day), \(figure.name), \(figure.value))
                    ON CONFLICT (app_id, day, name) DO UPDATE SET value = GREATEST(app_daily_stats.value, excluded.value)
                    """, logger)
            }
        }
    }

    public func recordActiveUsers(appId: Int64, day: String, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            WITH added AS (
                INSERT INTO app_daily_users (app_id, day, user_id)
                SELECT \(appId), \(day), user_id FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
                ON CONFLICT DO NOTHING RETURNING 1
            )
            INSERT INTO app_daily_stats (app_id, day, name, value)
            SELECT \(appId), \(day), \(DailyFigure.activeUsers), COUNT(*) FROM added HAVING COUNT(*) > 0
            ON CONFLICT (app_id, day, name) DO UPDATE SET value = app_daily_stats.value + excluded.value
            """)
    }

    public func dailyStatistics(appId: Int64, fromDay: String, toDay: String) async throws -> [DailyStatistics] {
        let rows = try await rows("""
            SELECT day, name, value FROM app_daily_stats WHERE app_id = \(appId) AND day >= \(fromDay) AND day <= \(toDay) ORDER BY day
            """)
        var days: [DailyStatistics] = []
        for row in rows {
            var cells = Cells(row)
            let day = try cells.string(), name = try cells.string(), value = try cells.int()
            if days.last?.day != day { days.append(DailyStatistics(day: day, figures: [:])) }
            days[days.count - 1].figures[name] = value
        }
        return days
    }

    public func pruneActiveUsers(beforeDay day: String) async throws {
        _ = try await rows("DELETE FROM app_daily_users WHERE day < \(day)")
    }

    // MARK: console

    public func operatorPasswordHash(name: String) async throws -> String? {
        try await rows("SELECT password_hash FROM console_operators WHERE name = \(name)").first.map { row in
            var cells = Cells(row)
            return try cells.string()
        }
    }

    public func setOperatorPassword(name: String, hash: String, now: Int64) async throws {
        _ = try await rows("""
            INSERT INTO console_operators (name, password_hash, changed_at) VALUES (\(name), \(hash), \(now))
            ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, changed_at = excluded.changed_at
            """)
    }

    public func createConsoleSession(tokenHash: String, operatorName: String, createdAt: Int64, expiresAt: Int64) async throws {
        _ = try await rows("""
            INSERT INTO console_sessions (token_hash, operator_name, created_at, expires_at)
            VALUES (\(tokenHash), \(operatorName), \(createdAt), \(expiresAt))
            """)
    }

    public func consoleSession(tokenHash: String, now: Int64) async throws -> String? {
        try await rows("SELECT operator_name FROM console_sessions WHERE token_hash = \(tokenHash) AND expires_at > \(now)").first.map { row in
            var cells = Cells(row)
            return try cells.string()
        }
    }

    public func deleteConsoleSession(tokenHash: String) async throws {
        _ = try await rows("DELETE FROM console_sessions WHERE token_hash = \(tokenHash)")
    }

    public func deleteConsoleSessions(operatorName: String?, expiredBefore now: Int64) async throws {
        _ = try await rows("DELETE FROM console_sessions WHERE expires_at <= \(now) OR operator_name = \(operatorName)")
    }
}

/// Media files' records (as `SQLiteStore`).
extension PostgresStore {
    private static let mediaColumns = "app_id, file_id, user_id, media_type, name, mime_type, size, created_at, expires_at"

    private static func mediaFile(_ row: PostgresRow) throws -> MediaFileRecord {
        var cells = Cells(row)
        return MediaFileRecord(appId: try cells.int(), fileId: try cells.string(), userId: try cells.string(), mediaType: try cells.string(),
                               name: try cells.string(), mimeType: try cells.string(), size: try cells.int(), createdAt: try cells.int(),
                               expiresAt: try cells.int())
    }

    public func insertMediaFile(_ file: MediaFileRecord) async throws {
        _ = try await rows("""
            INSERT INTO media_files (\(unescaped: Self.mediaColumns)) VALUES (\(file.appId), \(file.fileId), \(file.userId), \(file.mediaType),
                \(file.name), \(file.mimeType), \(file.size), \(file.createdAt), \(file.expiresAt))
            """)
    }

    public func mediaFile(appId: Int64, fileId: String) async throws -> MediaFileRecord? {
        try await rows("SELECT \(unescaped: Self.mediaColumns) FROM media_files WHERE app_id = \(appId) AND file_id = \(fileId)")
            .first.map(Self.mediaFile)
    }

    public func expiredMediaFiles(before now: Int64, limit: Int) async throws -> [MediaFileRecord] {
        try await rows("""
            SELECT \(unescaped: Self.mediaColumns) FROM media_files WHERE expires_at <= \(now) ORDER BY expires_at LIMIT \(Int64(limit))
            """).map(Self.mediaFile)
    }

    public func deleteMediaFiles(appId: Int64, fileIds: [String]) async throws {
        guard !fileIds.isEmpty else { return }
        _ = try await rows("DELETE FROM media_files WHERE app_id = \(appId) AND file_id = ANY(\(fileIds))")
    }
}
