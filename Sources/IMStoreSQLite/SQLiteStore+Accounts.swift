import Foundation
import GRDB
import IMCore
import IMStore

/// The account side of users: listing and deleting them, deactivation, the one-to-one chat mute,
/// and hosted profiles.
extension SQLiteStore {
    static func createAccountTables(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE users ADD COLUMN deleted_at INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE users ADD COLUMN deactivated_at INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE users ADD COLUMN history_after_seq INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE users ADD COLUMN private_muted_at INTEGER NOT NULL DEFAULT 0;
            CREATE INDEX users_by_created ON users (app_id, created_at, user_id);
            CREATE INDEX users_deactivated ON users (app_id, deactivated_at, user_id) WHERE deactivated_at > 0;
            CREATE INDEX users_private_muted ON users (app_id, user_id) WHERE private_muted_at > 0;
            CREATE TABLE user_profiles (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL,
                profile TEXT NOT NULL, ext_profile TEXT NOT NULL, version INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id)
            ) WITHOUT ROWID;
            """)
    }

    private static func erasePersonalData(appId: Int64, userIds: [String], _ db: Database) throws {
        for userId in userIds {
            for (table, column) in PersonalDataTables.all {
                try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ? AND \(column) = ?", arguments: [appId, userId])
            }
            try db.execute(sql: """
                UPDATE conversation_state_users SET quiet_start = NULL, quiet_span = 0, quiet_level = 0, quiet_time_zone = NULL
                WHERE app_id = ? AND user_id = ?
                """, arguments: [appId, userId])
            try db.execute(sql: "UPDATE users SET name = '', portrait_uri = '' WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
        }
    }

    public func users(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> (total: Int, users: [UserRecord]) {
        let order = descending ? "DESC" : "ASC"
        return try await pool.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM users WHERE app_id = ? AND deleted_at = 0", arguments: [appId]) ?? 0
            let users = try Row.fetchAll(db, sql: """
                SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users WHERE app_id = ? AND deleted_at = 0
                ORDER BY created_at \(order), user_id \(order) LIMIT ? OFFSET ?
                """, arguments: [appId, limit, offset]).map(Self.user)
            return (total, users)
        }
    }

    public func deleteUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        try await pool.write { db in
            try Self.erasePersonalData(appId: appId, userIds: userIds, db)
            forgetDevices(db, appId: appId, userIds: userIds)
            // A user registered again under the id reads nothing of the deleted one's history.
            let seq = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM messages") ?? 0
            for userId in userIds {
                try db.execute(sql: """
                    UPDATE users SET deleted_at = ?, tokens_valid_after = ?, blocked_until = 0, deactivated_at = 0, private_muted_at = 0,
                        history_after_seq = ?
                    WHERE app_id = ? AND user_id = ?
                    """, arguments: [now, now + 1, seq, appId, userId])
            }
        }
        try await erasePushBadges(appId: appId, userIds: userIds)
    }

    public func deactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: """
                    INSERT INTO users (app_id, user_id, created_at, deactivated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(app_id, user_id) DO UPDATE SET
                        deactivated_at = CASE WHEN users.deactivated_at > 0 THEN users.deactivated_at ELSE excluded.deactivated_at END
                    """, arguments: [appId, userId, now, now])
            }
            try Self.erasePersonalData(appId: appId, userIds: userIds, db)
            forgetDevices(db, appId: appId, userIds: userIds)
        }
        try await erasePushBadges(appId: appId, userIds: userIds)
    }

    public func reactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        try await pool.write { db in
            let seq = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM messages") ?? 0
            for userId in userIds {
                try db.execute(sql: """
                    UPDATE users SET deactivated_at = 0, history_after_seq = ? WHERE app_id = ? AND user_id = ? AND deactivated_at > 0
                    """, arguments: [seq, appId, userId])
            }
        }
    }

    public func deactivatedUsers(appId: Int64, offset: Int, limit: Int) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db, sql: """
                SELECT user_id FROM users WHERE app_id = ? AND deactivated_at > 0 ORDER BY deactivated_at, user_id LIMIT ? OFFSET ?
                """, arguments: [appId, limit, offset])
        }
    }

    public func setPrivateChatMuted(appId: Int64, userIds: [String], muted: Bool, now: Int64) async throws {
        try await pool.write { db in
            for userId in userIds {
                if muted {
                    try db.execute(sql: """
                        INSERT INTO users (app_id, user_id, created_at, private_muted_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(app_id, user_id) DO UPDATE SET
                            private_muted_at = CASE WHEN users.private_muted_at > 0 THEN users.private_muted_at ELSE excluded.private_muted_at END
                        """, arguments: [appId, userId, now, now])
                } else {
                    try db.execute(sql: "UPDATE users SET private_muted_at = 0 WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
                }
            }
        }
    }

    public func privateChatMutedUsers(appId: Int64) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT user_id FROM users WHERE app_id = ? AND private_muted_at > 0 ORDER BY user_id",
                                arguments: [appId])
        }
    }

    public func mergeHostedProfile(appId: Int64, userId: String, profile: String, extProfile: String, now: Int64) async throws -> Bool {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE app_id = ? AND user_id = ? AND deleted_at = 0",
                                    arguments: [appId, userId]) == true else { return false }
            try db.execute(sql: """
                INSERT INTO user_profiles (app_id, user_id, profile, ext_profile, version) VALUES (?, ?, json(?), json(?), ?)
                ON CONFLICT(app_id, user_id) DO UPDATE SET
                    profile = json_patch(user_profiles.profile, excluded.profile),
                    ext_profile = json_patch(user_profiles.ext_profile, excluded.ext_profile),
                    version = MAX(excluded.version, user_profiles.version + 1)
                """, arguments: [appId, userId, profile, extProfile, now])
            return true
        }
    }

    public func removeHostedProfiles(appId: Int64, userIds: [String]) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: "DELETE FROM user_profiles WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
            }
        }
    }

    public func hostedProfiles(appId: Int64, userIds: [String]) async throws -> [HostedProfile] {
        try await pool.read { db in
            try userIds.compactMap { userId in
                try Row.fetchOne(db, sql: """
                    SELECT user_id, profile, ext_profile, version FROM user_profiles WHERE app_id = ? AND user_id = ?
                    """, arguments: [appId, userId]).map(Self.hostedProfile)
            }
        }
    }

    public func hostedProfiles(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> [HostedProfile] {
        let order = descending ? "DESC" : "ASC"
        return try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT p.user_id, p.profile, p.ext_profile, p.version
                FROM user_profiles p JOIN users u ON u.app_id = p.app_id AND u.user_id = p.user_id
                WHERE p.app_id = ? ORDER BY u.created_at \(order), p.user_id \(order) LIMIT ? OFFSET ?
                """, arguments: [appId, limit, offset]).map(Self.hostedProfile)
        }
    }

    private static func hostedProfile(_ row: Row) -> HostedProfile {
        HostedProfile(userId: row[0], profile: row[1], extProfile: row[2], version: row[3])
    }
}
