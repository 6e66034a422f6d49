import Foundation
import GRDB
import IMCore
import IMStore

/// Users, groups and moderation settings: small tables, one transaction per call.
extension SQLiteStore {
    // MARK: users

    public func upsertUser(appId: Int64, userId: String, name: String, portraitUri: String, now: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO users (app_id, user_id, name, portrait_uri, created_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(app_id, user_id) DO UPDATE SET
                    name = CASE WHEN excluded.name = '' AND users.deleted_at = 0 THEN users.name ELSE excluded.name END,
                    portrait_uri = CASE WHEN excluded.portrait_uri = '' AND users.deleted_at = 0 THEN users.portrait_uri ELSE excluded.portrait_uri END,
                    created_at = CASE WHEN users.deleted_at > 0 THEN excluded.created_at ELSE users.created_at END,
                    deleted_at = 0
                """, arguments: [appId, userId, name, portraitUri, now])
        }
    }

    public func user(appId: Int64, userId: String) async throws -> UserRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: """
                SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users WHERE app_id = ? AND user_id = ? AND deleted_at = 0
                """, arguments: [appId, userId]).map(Self.user)
        }
    }

    public func userAccess(appId: Int64, userId: String) async throws -> UserAccess {
        try await pool.read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT tokens_valid_after, blocked_until, deactivated_at, history_after_seq FROM users WHERE app_id = ? AND user_id = ?
                """), arguments: [appId, userId]) else { return UserAccess() }
            let historyAfterSeq: Int64 = row["history_after_seq"]
            return UserAccess(tokensValidAfter: row["tokens_valid_after"], blockedUntil: row["blocked_until"],
                              deactivatedAt: row["deactivated_at"], historyAfterSeq: UInt64(max(0, historyAfterSeq)))
        }
    }

    public func expireTokens(appId: Int64, userIds: [String], before: Int64, now: Int64) async throws {
        try await setUserTime(column: "tokens_valid_after", appId: appId, userIds: userIds, value: before, now: now)
    }

    public func setBlocked(appId: Int64, userIds: [String], until: Int64, now: Int64) async throws {
        try await setUserTime(column: "blocked_until", appId: appId, userIds: userIds, value: until, now: now)
    }

    /// Sets one of the users' access times, registering users the store has not seen.
    private func setUserTime(column: String, appId: Int64, userIds: [String], value: Int64, now: Int64) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: """
                    INSERT INTO users (app_id, user_id, created_at, \(column)) VALUES (?, ?, ?, ?)
                    ON CONFLICT(app_id, user_id) DO UPDATE SET \(column) = excluded.\(column)
                    """, arguments: [appId, userId, now, value])
            }
        }
    }

    public func blockedUsers(appId: Int64, now: Int64) async throws -> [UserRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT user_id, name, portrait_uri, created_at, blocked_until FROM users
                WHERE app_id = ? AND blocked_until > ? ORDER BY user_id
                """, arguments: [appId, now]).map(Self.user)
        }
    }

    static func user(_ row: Row) -> UserRecord {
        UserRecord(userId: row["user_id"], name: row["name"], portraitUri: row["portrait_uri"],
                   createdAt: row["created_at"], blockedUntil: row["blocked_until"])
    }

    // MARK: blacklists and whitelists

    public func addToUserList(appId: Int64, owner: String, kind: UserListKind, members: [String], now: Int64) async throws {
        try await pool.write { db in
            for member in members {
                try db.execute(sql: "INSERT OR IGNORE INTO user_lists (app_id, owner, kind, member, created_at) VALUES (?, ?, ?, ?, ?)",
                               arguments: [appId, owner, kind.rawValue, member, now])
            }
        }
    }

    public func removeFromUserList(appId: Int64, owner: String, kind: UserListKind, members: [String]) async throws {
        try await pool.write { db in
            for member in members {
                try db.execute(sql: "DELETE FROM user_lists WHERE app_id = ? AND owner = ? AND kind = ? AND member = ?",
                               arguments: [appId, owner, kind.rawValue, member])
            }
        }
    }

    public func userList(appId: Int64, owner: String, kind: UserListKind) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT member FROM user_lists WHERE app_id = ? AND owner = ? AND kind = ? ORDER BY created_at, member",
                                arguments: [appId, owner, kind.rawValue])
        }
    }

    // MARK: tags

    public func setUserTags(appId: Int64, userIds: [String], tags: [String]) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: "DELETE FROM user_tags WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
                for tag in tags {
                    try db.execute(sql: "INSERT OR IGNORE INTO user_tags (app_id, user_id, tag) VALUES (?, ?, ?)", arguments: [appId, userId, tag])
                }
            }
        }
    }

    public func userTags(appId: Int64, userIds: [String]) async throws -> [String: [String]] {
        try await pool.read { db in
            var result: [String: [String]] = [:]
            for userId in userIds {
                result[userId] = try String.fetchAll(db, sql: "SELECT tag FROM user_tags WHERE app_id = ? AND user_id = ? ORDER BY tag",
                                                     arguments: [appId, userId])
            }
            return result
        }
    }

    public func users(appId: Int64, withAllTags allOf: [String], anyTag anyOf: [String]) async throws -> [String] {
        let all = Array(Set(allOf)), any = Array(Set(anyOf))
        guard !all.isEmpty || !any.isEmpty else { return [] }
        return try await pool.read { db in
            // Both read the (app_id, tag, user_id) index of v8-system-messages.
            func marks(_ list: [String]) -> String { list.map { _ in "?" }.joined(separator: ",") }
            var matched: Set<String>?
            if !all.isEmpty {
                matched = Set(try String.fetchAll(db, sql: """
                    SELECT user_id FROM user_tags WHERE app_id = ? AND tag IN (\(marks(all)))
                    GROUP BY user_id HAVING COUNT(*) = ?
                    """, arguments: StatementArguments([appId] as [any DatabaseValueConvertible] + all + [all.count])))
            }
            if !any.isEmpty {
                let either = Set(try String.fetchAll(db, sql: """
                    SELECT DISTINCT user_id FROM user_tags WHERE app_id = ? AND tag IN (\(marks(any)))
                    """, arguments: StatementArguments([appId] as [any DatabaseValueConvertible] + any)))
                matched = matched.map { $0.intersection(either) } ?? either
            }
            return (matched ?? []).sorted()
        }
    }

    // MARK: groups

    public func joinGroup(appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int,
                          preJoinHistory: Int, now: Int64) async throws -> GroupJoinOutcome {
        do {
            return try await pool.write { db in
                try Self.join(db, appId: appId, groupId: groupId, name: name, userIds: userIds, maxMembers: maxMembers,
                              preJoinHistory: preJoinHistory, now: now)
            }
        } catch let error as GroupLimitExceeded {
            return .tooManyMembers(limit: error.limit)
        }
    }

    static func join(_ db: Database, appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int,
                     preJoinHistory: Int, now: Int64) throws -> GroupJoinOutcome {
        // Messages committed after this transaction are the first new members sync; SQLite has one
        // writer, so no commit falls between this read and the inserts.
        let lastSeq = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM messages") ?? 0
        // Adding members to a dismissed group starts a new group of the same id: the former
        // members are not in it, and nothing of the old group is its history.
        if !userIds.isEmpty, try Bool.fetchOne(db, sql: "SELECT 1 FROM chat_groups WHERE app_id = ? AND group_id = ? AND dismissed_at > 0",
                                               arguments: [appId, groupId]) == true {
            try db.execute(sql: "DELETE FROM group_members WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId])
            try db.execute(sql: "UPDATE chat_groups SET dismissed_at = 0, created_at = ?, created_seq = ? WHERE app_id = ? AND group_id = ?",
                           arguments: [now, lastSeq, appId, groupId])
        }
        try db.execute(sql: """
            INSERT INTO chat_groups (app_id, group_id, name, created_at, created_seq) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(app_id, group_id) DO UPDATE SET name = CASE WHEN excluded.name = '' THEN chat_groups.name ELSE excluded.name END
            """, arguments: [appId, groupId, name ?? "", now, lastSeq])
        if !userIds.isEmpty {
            // Cloud history starts after joining, or at the N-th latest message of this group
            // (never before the group was created) when the app shows pre-join history.
            var historyAfter = lastSeq
            if preJoinHistory > 0 {
                let createdSeq = try Int64.fetchOne(db, sql: "SELECT created_seq FROM chat_groups WHERE app_id = ? AND group_id = ?",
                                                    arguments: [appId, groupId]) ?? 0
                historyAfter = try Int64.fetchOne(db, sql: """
                    SELECT seq - 1 FROM messages
                    WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND audience IS NULL AND seq > ?
                    ORDER BY sent_time DESC LIMIT 1 OFFSET ?
                    """, arguments: [appId, groupConversationKey(groupId), createdSeq, preJoinHistory - 1]) ?? createdSeq
            }
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO group_members (app_id, group_id, user_id, joined_at, joined_seq, history_after_seq)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
            for userId in userIds {
                try insert.execute(arguments: [appId, groupId, userId, now, lastSeq, historyAfter])
            }
        }
        let count = try Self.memberCount(db, appId: appId, groupId: groupId)
        if count > maxMembers {
            // Roll the whole call back: nobody joins a group that would be over its limit.
            throw GroupLimitExceeded(limit: maxMembers)
        }
        return .joined(memberCount: count)
    }

    static func memberCount(_ db: Database, appId: Int64, groupId: String) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM group_members WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId]) ?? 0
    }

    public func quitGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Int? {
        try await pool.write { db in
            guard try Self.groupExists(db, appId: appId, groupId: groupId) else { return nil }
            for userId in userIds {
                try db.execute(sql: "DELETE FROM group_members WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId, userId])
                try db.execute(sql: "DELETE FROM group_mutes WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId, userId])
                try db.execute(sql: "DELETE FROM group_mute_whitelist WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId, userId])
            }
            return try Self.memberCount(db, appId: appId, groupId: groupId)
        }
    }

    /// Whether the group exists and is not dismissed.
    static func groupExists(_ db: Database, appId: Int64, groupId: String) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT 1 FROM chat_groups WHERE app_id = ? AND group_id = ? AND dismissed_at = 0",
                          arguments: [appId, groupId]) ?? false
    }

    public func dismissGroup(appId: Int64, groupId: String, now: Int64) async throws -> Bool {
        try await pool.write { db in
            guard try Self.groupExists(db, appId: appId, groupId: groupId) else { return false }
            try db.execute(sql: "UPDATE chat_groups SET dismissed_at = ? WHERE app_id = ? AND group_id = ?",
                           arguments: [max(now, 1), appId, groupId])
            for table in ["group_mutes", "muted_groups", "group_mute_whitelist"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId])
            }
            return true
        }
    }

    public func renameGroup(appId: Int64, groupId: String, name: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE chat_groups SET name = ? WHERE app_id = ? AND group_id = ? AND dismissed_at = 0",
                           arguments: [name, appId, groupId])
            return db.changesCount > 0
        }
    }

    public func group(appId: Int64, groupId: String) async throws -> GroupRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT group_id, name, created_at FROM chat_groups WHERE app_id = ? AND group_id = ? AND dismissed_at = 0",
                             arguments: [appId, groupId]).map { row in
                GroupRecord(groupId: row["group_id"], name: row["name"], createdAt: row["created_at"],
                            memberCount: try Self.memberCount(db, appId: appId, groupId: groupId))
            }
        }
    }

    public func groupMembers(appId: Int64, groupId: String) async throws -> [GroupMember] {
        try await pool.read { db in
            guard try Self.groupExists(db, appId: appId, groupId: groupId) else { return [] }
            return try Row.fetchAll(db, sql: "SELECT user_id, joined_at FROM group_members WHERE app_id = ? AND group_id = ? ORDER BY joined_at, user_id",
                                    arguments: [appId, groupId]).map { GroupMember(userId: $0["user_id"], joinedAt: $0["joined_at"]) }
        }
    }

    public func groups(appId: Int64, ofUser userId: String) async throws -> [GroupRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT g.group_id, g.name, g.created_at,
                       (SELECT COUNT(*) FROM group_members c WHERE c.app_id = g.app_id AND c.group_id = g.group_id) AS member_count
                FROM group_members m JOIN chat_groups g ON g.app_id = m.app_id AND g.group_id = m.group_id
                WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at = 0 ORDER BY m.joined_at, g.group_id
                """, arguments: [appId, userId]).map {
                GroupRecord(groupId: $0["group_id"], name: $0["name"], createdAt: $0["created_at"], memberCount: $0["member_count"])
            }
        }
    }

    public func syncGroups(appId: Int64, userId: String, groups: [(id: String, name: String)], maxMembers: Int,
                           preJoinHistory: Int, now: Int64) async throws -> [String] {
        do {
            return try await pool.write { db in
                let wanted = Set(groups.map(\.id))
                let current = try String.fetchAll(db, sql: """
                    SELECT m.group_id FROM group_members m JOIN chat_groups g ON g.app_id = m.app_id AND g.group_id = m.group_id
                    WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at = 0
                    """, arguments: [appId, userId])
                for groupId in current where !wanted.contains(groupId) {
                    try db.execute(sql: "DELETE FROM group_members WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId, userId])
                }
                for group in groups {
                    _ = try Self.join(db, appId: appId, groupId: group.id, name: group.name, userIds: [userId], maxMembers: maxMembers,
                                      preJoinHistory: preJoinHistory, now: now)
                }
                return current.filter { !wanted.contains($0) }
            }
        } catch let error as GroupLimitExceeded {
            throw StoreRefusal.tooManyGroupMembers(limit: error.limit)
        }
    }

    public func groupRoster(appId: Int64, groupId: String) async throws -> GroupRosterRecord? {
        try await pool.read { db in
            guard let dismissedAt = try Int64.fetchOne(db, sql: "SELECT dismissed_at FROM chat_groups WHERE app_id = ? AND group_id = ?",
                                                       arguments: [appId, groupId]) else { return nil }
            var members: [String: GroupRosterRecord.Member] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT user_id, joined_seq, history_after_seq FROM group_members WHERE app_id = ? AND group_id = ?",
                                           arguments: [appId, groupId])
            while let row = try rows.next() {
                let joined: Int64 = row[1]
                let historyAfter: Int64 = row[2]
                members[row[0]] = GroupRosterRecord.Member(joinedSeq: UInt64(joined), historyAfterSeq: UInt64(historyAfter))
            }
            var mutedUntil: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT user_id, until FROM group_mutes WHERE app_id = ? AND group_id = ?",
                                        arguments: [appId, groupId]) {
                mutedUntil[row[0]] = row[1]
            }
            return GroupRosterRecord(
                groupId: groupId, members: members, isDismissed: dismissedAt > 0,
                isMuted: try Bool.fetchOne(db, sql: "SELECT 1 FROM muted_groups WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId]) ?? false,
                muteWhitelist: Set(try String.fetchAll(db, sql: "SELECT user_id FROM group_mute_whitelist WHERE app_id = ? AND group_id = ?",
                                                       arguments: [appId, groupId])),
                mutedUntil: mutedUntil)
        }
    }

    // MARK: group mutes

    public func muteGroupMembers(appId: Int64, groupId: String?, userIds: [String], until: Int64, now: Int64) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: """
                    INSERT INTO group_mutes (app_id, group_id, user_id, since, until) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(app_id, group_id, user_id) DO UPDATE SET since = excluded.since, until = excluded.until
                    """, arguments: [appId, groupId ?? "", userId, now, until])
            }
        }
    }

    public func unmuteGroupMembers(appId: Int64, groupId: String?, userIds: [String]) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: "DELETE FROM group_mutes WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId ?? "", userId])
            }
        }
    }

    public func groupMutes(appId: Int64, groupId: String?, now: Int64) async throws -> [GroupMute] {
        try await pool.read { db in
            let rows: [Row]
            if groupId == "*" {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM group_mutes WHERE app_id = ? AND until > ? ORDER BY group_id, since, user_id",
                                        arguments: [appId, now])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM group_mutes WHERE app_id = ? AND group_id = ? AND until > ? ORDER BY since, user_id",
                                        arguments: [appId, groupId ?? "", now])
            }
            return rows.map { GroupMute(groupId: $0["group_id"], userId: $0["user_id"], since: $0["since"], until: $0["until"]) }
        }
    }

    public func setGroupMuted(appId: Int64, groupIds: [String], muted: Bool) async throws {
        try await pool.write { db in
            for groupId in groupIds {
                try db.execute(sql: muted
                    ? "INSERT OR IGNORE INTO muted_groups (app_id, group_id) VALUES (?, ?)"
                    : "DELETE FROM muted_groups WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId])
            }
        }
    }

    public func mutedGroups(appId: Int64, groupIds: [String]) async throws -> [String: Bool] {
        try await pool.read { db in
            if groupIds.isEmpty {
                let all = try String.fetchAll(db, sql: "SELECT group_id FROM muted_groups WHERE app_id = ? ORDER BY group_id", arguments: [appId])
                return Dictionary(uniqueKeysWithValues: all.map { ($0, true) })
            }
            var result: [String: Bool] = [:]
            for groupId in groupIds {
                result[groupId] = try Bool.fetchOne(db, sql: "SELECT 1 FROM muted_groups WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId]) ?? false
            }
            return result
        }
    }

    public func addGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: "INSERT OR IGNORE INTO group_mute_whitelist (app_id, group_id, user_id) VALUES (?, ?, ?)", arguments: [appId, groupId, userId])
            }
        }
    }

    public func removeGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws {
        try await pool.write { db in
            for userId in userIds {
                try db.execute(sql: "DELETE FROM group_mute_whitelist WHERE app_id = ? AND group_id = ? AND user_id = ?", arguments: [appId, groupId, userId])
            }
        }
    }

    public func groupMuteWhitelist(appId: Int64, groupId: String) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT user_id FROM group_mute_whitelist WHERE app_id = ? AND group_id = ? ORDER BY user_id", arguments: [appId, groupId])
        }
    }

    // MARK: sensitive words

    public func addSensitiveWords(appId: Int64, words: [SensitiveWord], limit: Int, now: Int64) async throws {
        try await pool.write { db in
            for word in words {
                try db.execute(sql: """
                    INSERT INTO sensitive_words (app_id, word, replacement, created_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(app_id, word) DO UPDATE SET replacement = excluded.replacement
                    """, arguments: [appId, word.word, word.replacement, now])
            }
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sensitive_words WHERE app_id = ?", arguments: [appId]) ?? 0
            if count > limit {
                throw StoreRefusal.tooManySensitiveWords(limit: limit)
            }
        }
    }

    public func removeSensitiveWords(appId: Int64, words: [String]) async throws {
        try await pool.write { db in
            for word in words {
                try db.execute(sql: "DELETE FROM sensitive_words WHERE app_id = ? AND word = ?", arguments: [appId, word])
            }
        }
    }

    public func sensitiveWords(appId: Int64) async throws -> [SensitiveWord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT word, replacement FROM sensitive_words WHERE app_id = ? ORDER BY created_at, word", arguments: [appId])
                .map { SensitiveWord(word: $0["word"], replacement: $0["replacement"]) }
        }
    }
}

/// Thrown inside a group transaction to roll it back when the member limit would be exceeded.
struct GroupLimitExceeded: Error {
    let limit: Int
}
