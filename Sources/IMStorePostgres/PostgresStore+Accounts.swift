import Foundation
import IMCore
import IMStore
import PostgresNIO

/// The account side of users: listing and deleting them, deactivation, the one-to-one chat mute,
/// and hosted profiles (as `SQLiteStore+Accounts`).
extension PostgresStore {
    private func erasePersonalData(appId: Int64, userIds: [String], _ connection: PostgresConnection) async throws {
        for (table, column) in PersonalDataTables.all {
            try await connection.run("""
                DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND \(unescaped: column) = ANY(\(userIds))
                """, logger)
        }
        try await connection.run("""
            UPDATE conversation_state_users SET quiet_start = NULL, quiet_span = 0, quiet_level = 0, quiet_time_zone = NULL
            WHERE app_id = \(appId) AND user_id = ANY(\(userIds))
            """, logger)
        try await connection.run("""
            UPDATE users SET name = '', portrait_uri = '' WHERE app_id = \(appId) AND user_id = ANY(\(userIds))
            """, logger)
    }

    public func users(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> (total: Int, users: [UserRecord]) {
        let order = descending ? "DESC" : "ASC"
        return try await read { connection in
            var count = Cells(try await connection.rows("SELECT COUNT(*) FROM users WHERE app_id = \(appId) AND deleted_at = 0", logger)[0])
            let users = try await connection.rows("""
                SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users WHERE app_id = \(appId) AND deleted_at = 0
                ORDER BY created_at \(unescaped: order), user_id \(unescaped: order) LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
                """, logger).map(Self.user)
            return (Int(try count.int()), users)
        }
    }

    public func deleteUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        try await write { connection in
            try await erasePersonalData(appId: appId, userIds: userIds, connection)
            // A user registered again under the id reads nothing of the deleted one's history.
            let seq = try await lastSeq(connection)
            try await connection.run("""
                UPDATE users SET deleted_at = \(now), tokens_valid_after = \(now + 1), blocked_until = 0, deactivated_at = 0, private_muted_at = 0,
                    history_after_seq = \(seq)
                WHERE app_id = \(appId) AND user_id = ANY(\(userIds))
                """, logger)
        }
    }

    public func deactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        try await write { connection in
            try await connection.run("""
                INSERT INTO users (app_id, user_id, created_at, deactivated_at)
                SELECT \(appId), user_id, \(now), \(now) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
                ON CONFLICT (app_id, user_id) DO UPDATE SET
                    deactivated_at = CASE WHEN users.deactivated_at > 0 THEN users.deactivated_at ELSE excluded.deactivated_at END
                """, logger)
            try await erasePersonalData(appId: appId, userIds: userIds, connection)
        }
    }

    public func reactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        try await write { connection in
            let seq = try await lastSeq(connection)
            try await connection.run("""
                UPDATE users SET deactivated_at = 0, history_after_seq = \(seq)
                WHERE app_id = \(appId) AND user_id = ANY(\(userIds)) AND deactivated_at > 0
                """, logger)
        }
    }

    public func deactivatedUsers(appId: Int64, offset: Int, limit: Int) async throws -> [String] {
        try await rows("""
            SELECT user_id FROM users WHERE app_id = \(appId) AND deactivated_at > 0
            ORDER BY deactivated_at, user_id LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
            """).map { row in var cells = Cells(row); return try cells.string() }
    }

    public func setPrivateChatMuted(appId: Int64, userIds: [String], muted: Bool, now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        if muted {
            _ = try await rows("""
                INSERT INTO users (app_id, user_id, created_at, private_muted_at)
                SELECT \(appId), user_id, \(now), \(now) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
                ON CONFLICT (app_id, user_id) DO UPDATE SET
                    private_muted_at = CASE WHEN users.private_muted_at > 0 THEN users.private_muted_at ELSE excluded.private_muted_at END
                """)
        } else {
            _ = try await rows("UPDATE users SET private_muted_at = 0 WHERE app_id = \(appId) AND user_id = ANY(\(userIds))")
        }
    }

    public func privateChatMutedUsers(appId: Int64) async throws -> [String] {
        try await rows("""
            SELECT user_id FROM users WHERE app_id = \(appId) AND private_muted_at > 0 ORDER BY user_id
            """).map { row in var cells = Cells(row); return try cells.string() }
    }

    public func mergeHostedProfile(appId: Int64, userId: String, profile: String, extProfile: String, now: Int64) async throws -> Bool {
        try await write { connection in
            guard try await !connection.rows("""
                SELECT 1 FROM users WHERE app_id = \(appId) AND user_id = \(userId) AND deleted_at = 0 FOR UPDATE
                """, logger).isEmpty else { return false }
            try await connection.run("""
                INSERT INTO user_profiles (app_id, user_id, profile, ext_profile, version)
                VALUES (\(appId), \(userId), \(profile)::jsonb::text, \(extProfile)::jsonb::text, \(now))
                ON CONFLICT (app_id, user_id) DO UPDATE SET
                    profile = (user_profiles.profile::jsonb || excluded.profile::jsonb)::text,
                    ext_profile = (user_profiles.ext_profile::jsonb || excluded.ext_profile::jsonb)::text,
                    version = GREATEST(excluded.version, user_profiles.version + 1)
                """, logger)
            return true
        }
    }

    public func removeHostedProfiles(appId: Int64, userIds: [String]) async throws {
        _ = try await rows("DELETE FROM user_profiles WHERE app_id = \(appId) AND user_id = ANY(\(userIds))")
    }

    public func hostedProfiles(appId: Int64, userIds: [String]) async throws -> [HostedProfile] {
        let found = try await rows("""
            SELECT user_id, profile, ext_profile, version FROM user_profiles WHERE app_id = \(appId) AND user_id = ANY(\(userIds))
            """).map(Self.hostedProfile)
        let byUser = Dictionary(found.map { ($0.userId, $0) }, uniquingKeysWith: { first, _ in first })
        return userIds.compactMap { byUser[$0] }
    }

    public func hostedProfiles(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> [HostedProfile] {
        let order = descending ? "DESC" : "ASC"
        return try await rows("""
            SELECT p.user_id, p.profile, p.ext_profile, p.version
            FROM user_profiles p JOIN users u ON u.app_id = p.app_id AND u.user_id = p.user_id
            WHERE p.app_id = \(appId) ORDER BY u.created_at \(unescaped: order), p.user_id \(unescaped: order)
            LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
            """).map(Self.hostedProfile)
    }

    private static func hostedProfile(_ row: PostgresRow) throws -> HostedProfile {
        var cells = Cells(row)
        return HostedProfile(userId: try cells.string(), profile: try cells.string(), extProfile: try cells.string(), version: try cells.int())
    }
}
