import Foundation
import GRDB
import IMCore
import IMStore

/// Per-app settings, daily statistics and the operator console's accounts and sessions.
extension SQLiteStore {
    static func createOperationsTables(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE apps ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
            CREATE TABLE app_daily_stats (
                app_id INTEGER NOT NULL, day TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
                PRIMARY KEY (app_id, day, name)
            ) WITHOUT ROWID;
            CREATE TABLE app_daily_users (
                app_id INTEGER NOT NULL, day TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (app_id, day, user_id)
            ) WITHOUT ROWID;
            CREATE INDEX app_daily_users_by_day ON app_daily_users (day);
            CREATE TABLE console_operators (
                name TEXT PRIMARY KEY NOT NULL, password_hash TEXT NOT NULL, changed_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE console_sessions (
                token_hash TEXT PRIMARY KEY NOT NULL, operator_name TEXT NOT NULL,
                created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            """)
    }

    // MARK: app settings

    public func updateAppSettings(appKey: String, set: [String: JSONValue], reset: [String]) async throws -> AppRecord? {
        // A JSON merge patch: null removes a key.
        var patch = set
        for key in reset { patch[key] = .null }
        let text = String(decoding: try JSONValue.object(patch).data(), as: UTF8.self)
        return try await pool.write { db in
            try db.execute(sql: "UPDATE apps SET settings = json_patch(settings, ?) WHERE app_key = ?", arguments: [text, appKey])
            return try Row.fetchOne(db, sql: "SELECT \(Self.appColumns) FROM apps WHERE app_key = ?", arguments: [appKey]).map(Self.app)
        }
    }

    // MARK: statistics

    public func addDailyFigures(counts: [DailyFigure], peaks: [DailyFigure]) async throws {
        guard !counts.isEmpty || !peaks.isEmpty else { return }
        try await pool.write { db in
            for figure in counts {
                try db.execute(sql: """
                    INSERT INTO app_daily_stats (app_id, day, name, value) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, day, name) DO UPDATE SET value = value + excluded.value
                    """, arguments: [figure.appId, figure.day, figure.name, figure.value])
            }
            for figure in peaks {
                try db.execute(sql: """
                    INSERT INTO app_daily_stats (app_id, day, name, value) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, day, name) DO UPDATE SET value = max(value, excluded.value)
                    """, arguments: [figure.appId, figure.day, figure.name, figure.value])
            }
        }
    }

    public func recordActiveUsers(appId: Int64, day: String, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        try await pool.write { db in
            var added: Int64 = 0
            // One statement compiled for the whole list (a minute's new users after a connect
            // storm are thousands).
            let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO app_daily_users (app_id, day, user_id) VALUES (?, ?, ?)")
            for userId in userIds {
                try insert.execute(arguments: [appId, day, userId])
                added += Int64(db.changesCount)
            }
            guard added > 0 else { return }
            try db.execute(sql: """
                INSERT INTO app_daily_stats (app_id, day, name, value) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, day, name) DO UPDATE SET value = value + excluded.value
                """, arguments: [appId, day, DailyFigure.activeUsers, added])
        }
    }

    public func dailyStatistics(appId: Int64, fromDay: String, toDay: String) async throws -> [DailyStatistics] {
        try await pool.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT day, name, value FROM app_daily_stats WHERE app_id = ? AND day >= ? AND day <= ? ORDER BY day
                """, arguments: [appId, fromDay, toDay])
            var days: [DailyStatistics] = []
            for row in rows {
                let day: String = row["day"]
                if days.last?.day != day { days.append(DailyStatistics(day: day, figures: [:])) }
                days[days.count - 1].figures[row["name"]] = row["value"]
            }
            return days
        }
    }

    public func pruneActiveUsers(beforeDay day: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM app_daily_users WHERE day < ?", arguments: [day])
        }
    }

    // MARK: console

    public func operatorPasswordHash(name: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT password_hash FROM console_operators WHERE name = ?", arguments: [name])
        }
    }

    public func setOperatorPassword(name: String, hash: String, now: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO console_operators (name, password_hash, changed_at) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, changed_at = excluded.changed_at
                """, arguments: [name, hash, now])
        }
    }

    public func createConsoleSession(tokenHash: String, operatorName: String, createdAt: Int64, expiresAt: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO console_sessions (token_hash, operator_name, created_at, expires_at) VALUES (?, ?, ?, ?)
                """, arguments: [tokenHash, operatorName, createdAt, expiresAt])
        }
    }

    public func consoleSession(tokenHash: String, now: Int64) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT operator_name FROM console_sessions WHERE token_hash = ? AND expires_at > ?",
                                arguments: [tokenHash, now])
        }
    }

    public func deleteConsoleSession(tokenHash: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM console_sessions WHERE token_hash = ?", arguments: [tokenHash])
        }
    }

    public func deleteConsoleSessions(operatorName: String?, expiredBefore now: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM console_sessions WHERE expires_at <= ? OR operator_name = ?",
                           arguments: [now, operatorName])
        }
    }
}

/// Media files' records.
extension SQLiteStore {
    static func createMediaTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE media_files (
                app_id INTEGER NOT NULL, file_id TEXT NOT NULL, user_id TEXT NOT NULL, media_type TEXT NOT NULL,
                name TEXT NOT NULL, mime_type TEXT NOT NULL, size INTEGER NOT NULL, created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, file_id)
            ) WITHOUT ROWID;
            CREATE INDEX media_files_by_expiry ON media_files (expires_at);
            """)
    }

    private static let mediaColumns = "app_id, file_id, user_id, media_type, name, mime_type, size, created_at, expires_at"

    private static func mediaFile(_ row: Row) -> MediaFileRecord {
        MediaFileRecord(appId: row["app_id"], fileId: row["file_id"], userId: row["user_id"], mediaType: row["media_type"],
                        name: row["name"], mimeType: row["mime_type"], size: row["size"], createdAt: row["created_at"],
                        expiresAt: row["expires_at"])
    }

    public func insertMediaFile(_ file: MediaFileRecord) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO media_files (\(Self.mediaColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", arguments: [
                file.appId, file.fileId, file.userId, file.mediaType, file.name, file.mimeType, file.size, file.createdAt, file.expiresAt,
            ])
        }
    }

    public func mediaFile(appId: Int64, fileId: String) async throws -> MediaFileRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.mediaColumns) FROM media_files WHERE app_id = ? AND file_id = ?",
                             arguments: [appId, fileId]).map(Self.mediaFile)
        }
    }

    public func expiredMediaFiles(before now: Int64, limit: Int) async throws -> [MediaFileRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.mediaColumns) FROM media_files WHERE expires_at <= ? ORDER BY expires_at LIMIT ?",
                             arguments: [now, limit]).map(Self.mediaFile)
        }
    }

    public func deleteMediaFiles(appId: Int64, fileIds: [String]) async throws {
        guard !fileIds.isEmpty else { return }
        try await pool.write { db in
            for fileId in fileIds {
                try db.execute(sql: "DELETE FROM media_files WHERE app_id = ? AND file_id = ?", arguments: [appId, fileId])
            }
        }
    }
}
