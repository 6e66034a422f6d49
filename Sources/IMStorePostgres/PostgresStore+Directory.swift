import Foundation
import IMCore
import IMStore
import PostgresNIO

/// Users, groups and moderation settings: small tables, one transaction per call.
extension PostgresStore {
    // MARK: users

    public func upsertUser(appId: Int64, userId: String, name: String, portraitUri: String, now: Int64) async throws {
        _ = try await rows("""
            INSERT INTO users (app_id, user_id, name, portrait_uri, created_at) VALUES (\(appId), \(userId), \(name), \(portraitUri), \(now))
            ON CONFLICT (app_id, user_id) DO UPDATE SET
                name = CASE WHEN excluded.name = '' AND users.deleted_at = 0 THEN users.name ELSE excluded.name END,
                portrait_uri = CASE WHEN excluded.portrait_uri = '' AND users.deleted_at = 0 THEN users.portrait_uri ELSE excluded.portrait_uri END,
                created_at = CASE WHEN users.deleted_at > 0 THEN excluded.created_at ELSE users.created_at END,
                deleted_at = 0
            """)
    }

    public func user(appId: Int64, userId: String) async throws -> UserRecord? {
        try await rows("""
            SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users WHERE app_id = \(appId) AND user_id = \(userId) AND deleted_at = 0
            """).first.map(Self.user)
    }

    public func userAccess(appId: Int64, userId: String) async throws -> UserAccess {
        guard let row = try await rows("""
            SELECT tokens_valid_after, blocked_until, deactivated_at, history_after_seq FROM users
            WHERE app_id = \(appId) AND user_id = \(userId)
            """).first else { return UserAccess() }
        var cells = Cells(row)
        return UserAccess(tokensValidAfter: try cells.int(), blockedUntil: try cells.int(), deactivatedAt: try cells.int(),
                          historyAfterSeq: try cells.seq())
    }

    public func expireTokens(appId: Int64, userIds: [String], before: Int64, now: Int64) async throws {
        try await setUserTime(column: "tokens_valid_after", appId: appId, userIds: userIds, value: before, now: now)
    }

    public func setBlocked(appId: Int64, userIds: [String], until: Int64, now: Int64) async throws {
        try await setUserTime(column: "blocked_until", appId: appId, userIds: userIds, value: until, now: now)
    }

    /// Sets one of the users' access times, registering users the store has not seen.
    private func setUserTime(column: String, appId: Int64, userIds: [String], value: Int64, now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            INSERT INTO users (app_id, user_id, created_at, \(unescaped: column))
            SELECT \(appId), user_id, \(now), \(value) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
            ON CONFLICT (app_id, user_id) DO UPDATE SET \(unescaped: column) = excluded.\(unescaped: column)
            """)
    }

    public func blockedUsers(appId: Int64, now: Int64) async throws -> [UserRecord] {
        try await rows("""
            SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users
            WHERE app_id = \(appId) AND blocked_until > \(now) ORDER BY user_id
            """).map(Self.user)
    }

    static func user(_ row: PostgresRow) throws -> UserRecord {
        var cells = Cells(row)
        return UserRecord(userId: try cells.string(), name: try cells.string(), portraitUri: try cells.string(),
                          createdAt: try cells.int(), blockedUntil: try cells.int())
    }


    // MARK: blacklists and whitelists

    public func addToUserList(appId: Int64, owner: String, kind: UserListKind, members: [String], now: Int64) async throws {
        guard !members.isEmpty else { return }
        _ = try await rows("""
            INSERT INTO user_lists (app_id, owner, kind, member, created_at)
            SELECT \(appId), \(owner), \(Int64(kind.rawValue)), member, \(now) FROM unnest(\(members)::text[]) AS m(member)
            ON CONFLICT DO NOTHING
            """)
    }

    public func removeFromUserList(appId: Int64, owner: String, kind: UserListKind, members: [String]) async throws {
        guard !members.isEmpty else { return }
        _ = try await rows("""
            DELETE FROM user_lists WHERE app_id = \(appId) AND owner = \(owner) AND kind = \(Int64(kind.rawValue)) AND member = ANY(\(members))
            """)
    }

    public func userList(appId: Int64, owner: String, kind: UserListKind) async throws -> [String] {
        try await rows("""
            SELECT member FROM user_lists WHERE app_id = \(appId) AND owner = \(owner) AND kind = \(Int64(kind.rawValue))
            ORDER BY created_at, member
            """).map { var cells = Cells($0); return try cells.string() }
    }

    // MARK: tags

    public func setUserTags(appId: Int64, userIds: [String], tags: [String]) async throws {
        guard !userIds.isEmpty else { return }
        try await write { connection in
            try await connection.run("DELETE FROM user_tags WHERE app_id = \(appId) AND user_id = ANY(\(userIds))", logger)
            guard !tags.isEmpty else { return }
            try await connection.run("""
                INSERT INTO user_tags (app_id, user_id, tag)
                SELECT \(appId), u.user_id, t.tag FROM unnest(\(userIds)::text[]) AS u(user_id) CROSS JOIN unnest(\(tags)::text[]) AS t(tag)
                ON CONFLICT DO NOTHING
                """, logger)
        }
    }

    public func userTags(appId: Int64, userIds: [String]) async throws -> [String: [String]] {
        var result: [String: [String]] = [:]
        for userId in userIds { result[userId] = [] }
        guard !userIds.isEmpty else { return result }
        for row in try await rows("""
            SELECT user_id, tag FROM user_tags WHERE app_id = \(appId) AND user_id = ANY(\(userIds)) ORDER BY user_id, tag
            """) {
            var cells = Cells(row)
            result[try cells.string(), default: []].append(try cells.string())
        }
        return result
    }

    public func users(appId: Int64, withAllTags allOf: [String], anyTag anyOf: [String]) async throws -> [String] {
        let all = Array(Set(allOf)), any = Array(Set(anyOf))
        guard !all.isEmpty || !any.isEmpty else { return [] }
        return try await read { connection in
            // Both read the (app_id, tag, user_id) index.
            var matched: Set<String>?
            if !all.isEmpty {
                matched = Set(try await connection.rows("""
                    SELECT user_id FROM user_tags WHERE app_id = \(appId) AND tag = ANY(\(all))
                    GROUP BY user_id HAVING COUNT(*) = \(Int64(all.count))
                    """, logger).map { var cells = Cells($0); return try cells.string() })
            }
            if !any.isEmpty {
                let either = Set(try await connection.rows("""
                    SELECT DISTINCT user_id FROM user_tags WHERE app_id = \(appId) AND tag = ANY(\(any))
                    """, logger).map { var cells = Cells($0); return try cells.string() })
                matched = matched.map { $0.intersection(either) } ?? either
            }
            return (matched ?? []).sorted()
        }
    }

    // MARK: groups

    public func joinGroup(appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int,
                          preJoinHistory: Int, now: Int64) async throws -> GroupJoinOutcome {
        do {
            return try await write { connection in
                try await connection.lock(LockKey.group(appId, groupId), logger)
                return try await join(connection, appId: appId, groupId: groupId, name: name, userIds: userIds, maxMembers: maxMembers,
                                      preJoinHistory: preJoinHistory, now: now)
            }
        } catch let error as GroupLimitExceeded {
            return .tooManyMembers(limit: error.limit)
        }
    }

    /// The last seq committed: what joining members and new groups start after. The counter row's
    /// committed value, so a commit under way (holding the row) is after it, and every seq at or
    /// below it is committed: nothing can later appear below it.
    func lastSeq(_ connection: PostgresConnection) async throws -> Int64 {
        var cells = Cells(try await connection.rows("SELECT value FROM imserver_counters WHERE name = 'message_seq'", logger)[0])
        return try cells.int()
    }

    /// Joins inside a transaction that holds the group's lock (the member limit is counted under it).
    func join(_ connection: PostgresConnection, appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int,
              preJoinHistory: Int, now: Int64) async throws -> GroupJoinOutcome {
        // New members sync the messages committed after this read.
        let lastSeq = try await lastSeq(connection)
        // Adding members to a dismissed group starts a new group of the same id: the former
        // members are not in it, and nothing of the old group is its history.
        if !userIds.isEmpty, try await !connection.rows("""
            SELECT 1 FROM chat_groups WHERE app_id = \(appId) AND group_id = \(groupId) AND dismissed_at > 0
            """, logger).isEmpty {
            try await connection.run("DELETE FROM group_members WHERE app_id = \(appId) AND group_id = \(groupId)", logger)
            try await connection.run("""
                UPDATE chat_groups SET dismissed_at = 0, created_at = \(now), created_seq = \(lastSeq)
                WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger)
        }
        try await connection.run("""
            INSERT INTO chat_groups (app_id, group_id, name, created_at, created_seq) VALUES (\(appId), \(groupId), \(name ?? ""), \(now), \(lastSeq))
            ON CONFLICT (app_id, group_id) DO UPDATE SET name = CASE WHEN excluded.name = '' THEN chat_groups.name ELSE excluded.name END
            """, logger)
        if !userIds.isEmpty {
            // Cloud history starts after joining, or at the N-th latest message of this group
            // (never before the group was created) when the app shows pre-join history.
            var historyAfter = lastSeq
            if preJoinHistory > 0 {
                var created = Cells(try await connection.rows("""
                    SELECT created_seq FROM chat_groups WHERE app_id = \(appId) AND group_id = \(groupId)
                    """, logger)[0])
                let createdSeq = try created.int()
                historyAfter = createdSeq
                if let row = try await connection.rows("""
                    SELECT seq - 1 FROM messages
                    WHERE app_id = \(appId) AND conv_key = \(groupConversationKey(groupId)) AND in_history = 1 AND audience IS NULL
                        AND seq > \(createdSeq)
                    ORDER BY sent_time DESC LIMIT 1 OFFSET \(Int64(preJoinHistory - 1))
                    """, logger).first {
                    var cells = Cells(row)
                    historyAfter = try cells.int()
                }
            }
            try await connection.run("""
                INSERT INTO group_members (app_id, group_id, user_id, joined_at, joined_seq, history_after_seq)
                SELECT \(appId), \(groupId), user_id, \(now), \(lastSeq), \(historyAfter) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
                ON CONFLICT DO NOTHING
                """, logger)
        }
        let count = try await memberCount(connection, appId: appId, groupId: groupId)
        if count > maxMembers {
            // Roll the whole call back: nobody joins a group that would be over its limit.
            throw GroupLimitExceeded(limit: maxMembers)
        }
        return .joined(memberCount: count)
    }

    func memberCount(_ connection: PostgresConnection, appId: Int64, groupId: String) async throws -> Int {
        var cells = Cells(try await connection.rows("""
            SELECT COUNT(*) FROM group_members WHERE app_id = \(appId) AND group_id = \(groupId)
            """, logger)[0])
        return Int(try cells.int())
    }

    /// Whether the group exists and is not dismissed.
    func groupExists(_ connection: PostgresConnection, appId: Int64, groupId: String) async throws -> Bool {
        try await !connection.rows("""
            SELECT 1 FROM chat_groups WHERE app_id = \(appId) AND group_id = \(groupId) AND dismissed_at = 0
            """, logger).isEmpty
    }

    public func quitGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Int? {
        try await write { connection in
            guard try await groupExists(connection, appId: appId, groupId: groupId) else { return nil }
            for table in ["group_members", "group_mutes", "group_mute_whitelist"] {
                try await connection.run("""
                    DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId) AND user_id = ANY(\(userIds))
                    """, logger)
            }
            return try await memberCount(connection, appId: appId, groupId: groupId)
        }
    }

    public func dismissGroup(appId: Int64, groupId: String, now: Int64) async throws -> Bool {
        try await write { connection in
            guard try await groupExists(connection, appId: appId, groupId: groupId) else { return false }
            try await connection.run("""
                UPDATE chat_groups SET dismissed_at = \(max(now, 1)) WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger)
            for table in ["group_mutes", "muted_groups", "group_mute_whitelist"] {
                try await connection.run("DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId)", logger)
            }
            return true
        }
    }

    public func renameGroup(appId: Int64, groupId: String, name: String) async throws -> Bool {
        try await !rows("""
            UPDATE chat_groups SET name = \(name) WHERE app_id = \(appId) AND group_id = \(groupId) AND dismissed_at = 0 RETURNING 1
            """).isEmpty
    }

    public func group(appId: Int64, groupId: String) async throws -> GroupRecord? {
        try await rows("""
            SELECT g.group_id, g.name, g.created_at,
                   (SELECT COUNT(*) FROM group_members c WHERE c.app_id = g.app_id AND c.group_id = g.group_id)
            FROM chat_groups g WHERE g.app_id = \(appId) AND g.group_id = \(groupId) AND g.dismissed_at = 0
            """).first.map(Self.group)
    }

    public func groupMembers(appId: Int64, groupId: String) async throws -> [GroupMember] {
        try await rows("""
            SELECT m.user_id, m.joined_at FROM group_members m
            WHERE m.app_id = \(appId) AND m.group_id = \(groupId)
                AND EXISTS (SELECT 1 FROM chat_groups g WHERE g.app_id = m.app_id AND g.group_id = m.group_id AND g.dismissed_at = 0)
            ORDER BY m.joined_at, m.user_id
            """).map { row in
            var cells = Cells(row)
            return GroupMember(userId: try cells.string(), joinedAt: try cells.int())
        }
    }

    public func groups(appId: Int64, ofUser userId: String) async throws -> [GroupRecord] {
        try await rows("""
            SELECT g.group_id, g.name, g.created_at,
                   (SELECT COUNT(*) FROM group_members c WHERE c.app_id = g.app_id AND c.group_id = g.group_id)
            FROM group_members m JOIN chat_groups g ON g.app_id = m.app_id AND g.group_id = m.group_id
            WHERE m.app_id = \(appId) AND m.user_id = \(userId) AND g.dismissed_at = 0 ORDER BY m.joined_at, g.group_id
            """).map(Self.group)
    }

    private static func group(_ row: PostgresRow) throws -> GroupRecord {
        var cells = Cells(row)
        return GroupRecord(groupId: try cells.string(), name: try cells.string(), createdAt: try cells.int(), memberCount: Int(try cells.int()))
    }

    public func syncGroups(appId: Int64, userId: String, groups: [(id: String, name: String)], maxMembers: Int,
                           preJoinHistory: Int, now: Int64) async throws -> [String] {
        do {
            return try await write { connection in
                // The user's memberships, then every group it touches, locked in one order.
                try await connection.lock(LockKey.userGroups(appId, userId), logger)
                let query: PostgresQuery = """
                    SELECT m.group_id FROM group_members m JOIN chat_groups g ON g.app_id = m.app_id AND g.group_id = m.group_id
                    WHERE m.app_id = \(appId) AND m.user_id = \(userId) AND g.dismissed_at = 0
                    """
                let before = try await connection.rows(query, logger).map { var cells = Cells($0); return try cells.string() }
                let wanted = Set(groups.map(\.id))
                try await connection.lock((before + groups.map(\.id)).map { LockKey.group(appId, $0) }, logger)
                let current = try await connection.rows(query, logger).map { var cells = Cells($0); return try cells.string() }
                let leaving = current.filter { !wanted.contains($0) }
                if !leaving.isEmpty {
                    try await connection.run("""
                        DELETE FROM group_members WHERE app_id = \(appId) AND user_id = \(userId) AND group_id = ANY(\(leaving))
                        """, logger)
                }
                for group in groups {
                    _ = try await join(connection, appId: appId, groupId: group.id, name: group.name, userIds: [userId],
                                       maxMembers: maxMembers, preJoinHistory: preJoinHistory, now: now)
                }
                return leaving
            }
        } catch let error as GroupLimitExceeded {
            throw StoreRefusal.tooManyGroupMembers(limit: error.limit)
        }
    }

    public func groupRoster(appId: Int64, groupId: String) async throws -> GroupRosterRecord? {
        try await read { connection in
            guard let group = try await connection.rows("""
                SELECT dismissed_at, EXISTS (SELECT 1 FROM muted_groups WHERE app_id = \(appId) AND group_id = \(groupId))
                FROM chat_groups WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger).first else { return nil }
            var groupCells = Cells(group)
            let dismissedAt = try groupCells.int()
            let isMuted = try groupCells.next(Bool.self)
            var members: [String: GroupRosterRecord.Member] = [:]
            for row in try await connection.rows("""
                SELECT user_id, joined_seq, history_after_seq FROM group_members WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger) {
                var cells = Cells(row)
                members[try cells.string()] = GroupRosterRecord.Member(joinedSeq: try cells.seq(), historyAfterSeq: try cells.seq())
            }
            var mutedUntil: [String: Int64] = [:]
            for row in try await connection.rows("""
                SELECT user_id, until FROM group_mutes WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger) {
                var cells = Cells(row)
                mutedUntil[try cells.string()] = try cells.int()
            }
            let whitelist = try await connection.rows("""
                SELECT user_id FROM group_mute_whitelist WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger).map { var cells = Cells($0); return try cells.string() }
            return GroupRosterRecord(groupId: groupId, members: members, isDismissed: dismissedAt > 0, isMuted: isMuted,
                                     muteWhitelist: Set(whitelist), mutedUntil: mutedUntil)
        }
    }

    // MARK: group mutes

    public func muteGroupMembers(appId: Int64, groupId: String?, userIds: [String], until: Int64, now: Int64) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            INSERT INTO group_mutes (app_id, group_id, user_id, since, until)
            SELECT \(appId), \(groupId ?? ""), user_id, \(now), \(until) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
            ON CONFLICT (app_id, group_id, user_id) DO UPDATE SET since = excluded.since, until = excluded.until
            """)
    }

    public func unmuteGroupMembers(appId: Int64, groupId: String?, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            DELETE FROM group_mutes WHERE app_id = \(appId) AND group_id = \(groupId ?? "") AND user_id = ANY(\(userIds))
            """)
    }

    public func groupMutes(appId: Int64, groupId: String?, now: Int64) async throws -> [GroupMute] {
        let rows: [PostgresRow]
        if groupId == "*" {
            rows = try await self.rows("""
                SELECT group_id, user_id, since, until FROM group_mutes WHERE app_id = \(appId) AND until > \(now)
                ORDER BY group_id, since, user_id
                """)
        } else {
            rows = try await self.rows("""
                SELECT group_id, user_id, since, until FROM group_mutes WHERE app_id = \(appId) AND group_id = \(groupId ?? "") AND until > \(now)
                ORDER BY since, user_id
                """)
        }
        return try rows.map { row in
            var cells = Cells(row)
            return GroupMute(groupId: try cells.string(), userId: try cells.string(), since: try cells.int(), until: try cells.int())
        }
    }

    public func setGroupMuted(appId: Int64, groupIds: [String], muted: Bool) async throws {
        guard !groupIds.isEmpty else { return }
        if muted {
            _ = try await rows("""
                INSERT INTO muted_groups (app_id, group_id) SELECT \(appId), group_id FROM unnest(\(groupIds)::text[]) AS g(group_id)
                ON CONFLICT DO NOTHING
                """)
        } else {
            _ = try await rows("DELETE FROM muted_groups WHERE app_id = \(appId) AND group_id = ANY(\(groupIds))")
        }
    }

    public func mutedGroups(appId: Int64, groupIds: [String]) async throws -> [String: Bool] {
        if groupIds.isEmpty {
            let all = try await rows("SELECT group_id FROM muted_groups WHERE app_id = \(appId) ORDER BY group_id")
                .map { var cells = Cells($0); return try cells.string() }
            return Dictionary(uniqueKeysWithValues: all.map { ($0, true) })
        }
        let muted = Set(try await rows("SELECT group_id FROM muted_groups WHERE app_id = \(appId) AND group_id = ANY(\(groupIds))")
            .map { var cells = Cells($0); return try cells.string() })
        var result: [String: Bool] = [:]
        for groupId in groupIds { result[groupId] = muted.contains(groupId) }
        return result
    }

    public func addGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            INSERT INTO group_mute_whitelist (app_id, group_id, user_id)
            SELECT \(appId), \(groupId), user_id FROM unnest(\(userIds)::text[]) AS u(user_id)
            ON CONFLICT DO NOTHING
            """)
    }

    public func removeGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        _ = try await rows("""
            DELETE FROM group_mute_whitelist WHERE app_id = \(appId) AND group_id = \(groupId) AND user_id = ANY(\(userIds))
            """)
    }

    public func groupMuteWhitelist(appId: Int64, groupId: String) async throws -> [String] {
        try await rows("""
            SELECT user_id FROM group_mute_whitelist WHERE app_id = \(appId) AND group_id = \(groupId) ORDER BY user_id
            """).map { var cells = Cells($0); return try cells.string() }
    }

    // MARK: sensitive words

    public func addSensitiveWords(appId: Int64, words: [SensitiveWord], limit: Int, now: Int64) async throws {
        try await write { connection in
            // The app's list is counted under its lock: concurrent adds never pass the limit together.
            try await connection.lock(LockKey.sensitiveWords(appId), logger)
            for word in words {
                try await connection.run("""
                    INSERT INTO sensitive_words (app_id, word, replacement, created_at) VALUES (\(appId), \(word.word), \(word.replacement), \(now))
                    ON CONFLICT (app_id, word) DO UPDATE SET replacement = excluded.replacement
                    """, logger)
            }
            var cells = Cells(try await connection.rows("SELECT COUNT(*) FROM sensitive_words WHERE app_id = \(appId)", logger)[0])
            if try cells.int() > Int64(limit) {
                throw StoreRefusal.tooManySensitiveWords(limit: limit)
            }
        }
    }

    public func removeSensitiveWords(appId: Int64, words: [String]) async throws {
        guard !words.isEmpty else { return }
        _ = try await rows("DELETE FROM sensitive_words WHERE app_id = \(appId) AND word = ANY(\(words))")
    }

    public func sensitiveWords(appId: Int64) async throws -> [SensitiveWord] {
        try await rows("SELECT word, replacement FROM sensitive_words WHERE app_id = \(appId) ORDER BY created_at, word").map { row in
            var cells = Cells(row)
            return SensitiveWord(word: try cells.string(), replacement: try cells.optionalString())
        }
    }
}

/// Thrown inside a group transaction to roll it back when the member limit would be exceeded.
struct GroupLimitExceeded: Error {
    let limit: Int
}
