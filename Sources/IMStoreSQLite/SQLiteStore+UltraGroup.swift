import Foundation
import GRDB
import IMCore
import IMStore

/// Ultra groups: groups, members, channels, private lists, user groups and bindings, mutes, and
/// read times. Their messages are rows of `messages` like any other (conv_type 10).
extension SQLiteStore {
    static func createUltraGroupTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE ultra_groups (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, name TEXT NOT NULL,
                created_at INTEGER NOT NULL, created_seq INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_members (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                joined_at INTEGER NOT NULL, joined_seq INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, user_id)
            ) WITHOUT ROWID;
            CREATE INDEX ultra_group_members_by_user ON ultra_group_members (app_id, user_id);
            CREATE TABLE ultra_group_channels (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, type INTEGER NOT NULL,
                created_at INTEGER NOT NULL, created_seq INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_channel_members (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_user_groups (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_group_id TEXT NOT NULL, created_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, user_group_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_user_group_members (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (app_id, group_id, user_group_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_channel_bindings (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_group_id TEXT NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id, user_group_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_mutes (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
                until INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_muted_channels (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_mute_whitelist (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE ultra_group_reads (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL,
                read_time INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, group_id, channel_id)
            ) WITHOUT ROWID;
            ALTER TABLE messages ADD COLUMN mentioned TEXT;
            ALTER TABLE messages ADD COLUMN modified_time INTEGER NOT NULL DEFAULT 0;
            CREATE INDEX messages_modified ON messages (app_id, conv_key, modified_time) WHERE modified_time > 0;
            """)
    }

    /// The `mentioned` column: `*` for everyone and the user ids, between newlines (found with
    /// `instr`, like `audience`); NULL when nothing is mentioned.
    static func mentioned(_ mentions: MentionedInfo?) -> String? {
        guard let mentions else { return nil }
        // Only valid user ids are kept: an entry holding a newline or "*" would otherwise read as
        // other users, or as @all, in the column's lookups.
        let entries = (mentions.type == .all ? ["*"] : []) + mentions.userIdList.filter(UserID.isValid)
        return entries.isEmpty ? nil : audience(entries)
    }

    private static func lastSeq(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM messages") ?? 0
    }

    private static func groupExists(_ db: Database, _ appId: Int64, _ groupId: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM ultra_groups WHERE app_id = ? AND group_id = ?"),
                          arguments: [appId, groupId]) ?? false
    }

    private static func channelExists(_ db: Database, _ appId: Int64, _ groupId: String, _ channelId: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM ultra_group_channels WHERE app_id = ? AND group_id = ? AND channel_id = ?"),
                          arguments: [appId, groupId, channelId]) ?? false
    }

    /// Adds users who are not yet members, all or none: users already in `maxGroups` groups refuse the call.
    private static func addMembers(_ db: Database, appId: Int64, groupId: String, userIds: [String], now: Int64,
                                   maxGroups: Int) throws -> UltraGroupJoinOutcome {
        let isMember = try db.cachedStatement(sql: "SELECT 1 FROM ultra_group_members WHERE app_id = ? AND group_id = ? AND user_id = ?")
        let count = try db.cachedStatement(sql: "SELECT COUNT(*) FROM ultra_group_members WHERE app_id = ? AND user_id = ?")
        var newcomers: [String] = []
        var full: [String] = []
        for userId in Set(userIds).sorted() {
            if try Bool.fetchOne(isMember, arguments: [appId, groupId, userId]) == true { continue }
            if try Int.fetchOne(count, arguments: [appId, userId]) ?? 0 >= maxGroups { full.append(userId) } else { newcomers.append(userId) }
        }
        guard full.isEmpty else { return .tooManyGroups(userIds: full) }
        let seq = try lastSeq(db)
        let insert = try db.cachedStatement(sql: """
            INSERT INTO ultra_group_members (app_id, group_id, user_id, joined_at, joined_seq) VALUES (?, ?, ?, ?, ?)
            """)
        for userId in newcomers { try insert.execute(arguments: [appId, groupId, userId, now, seq]) }
        return .joined
    }

    public func createUltraGroup(appId: Int64, groupId: String, name: String, ownerId: String, now: Int64,
                                 maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome {
        try await pool.write { db in
            let exists = try Self.groupExists(db, appId, groupId)
            if !exists {
                // A refused owner leaves no group behind.
                let groups = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ultra_group_members WHERE app_id = ? AND user_id = ?",
                                              arguments: [appId, ownerId]) ?? 0
                guard groups < maxGroupsPerUser else { return .tooManyGroups(userIds: [ownerId]) }
                let seq = try Self.lastSeq(db)
                try db.execute(sql: "INSERT INTO ultra_groups (app_id, group_id, name, created_at, created_seq) VALUES (?, ?, ?, ?, ?)",
                               arguments: [appId, groupId, name, now, seq])
                try db.execute(sql: """
                    INSERT INTO ultra_group_channels (app_id, group_id, channel_id, type, created_at, created_seq) VALUES (?, ?, ?, 0, ?, ?)
                    """, arguments: [appId, groupId, UltraGroupLimits.defaultChannelId, now, seq])
            }
            return try Self.addMembers(db, appId: appId, groupId: groupId, userIds: [ownerId], now: now, maxGroups: maxGroupsPerUser)
        }
    }

    public func joinUltraGroup(appId: Int64, groupId: String, userIds: [String], now: Int64,
                               maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome {
        try await pool.write { db in
            guard try Self.groupExists(db, appId, groupId) else { return .notFound }
            return try Self.addMembers(db, appId: appId, groupId: groupId, userIds: userIds, now: now, maxGroups: maxGroupsPerUser)
        }
    }

    public func quitUltraGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Bool {
        try await pool.write { db in
            guard try Self.groupExists(db, appId, groupId) else { return false }
            for table in ["ultra_group_members", "ultra_group_channel_members", "ultra_group_user_group_members",
                          "ultra_group_mutes", "ultra_group_mute_whitelist"] {
                let delete = try db.cachedStatement(sql: "DELETE FROM \(table) WHERE app_id = ? AND group_id = ? AND user_id = ?")
                for userId in userIds { try delete.execute(arguments: [appId, groupId, userId]) }
            }
            let reads = try db.cachedStatement(sql: "DELETE FROM ultra_group_reads WHERE app_id = ? AND user_id = ? AND group_id = ?")
            for userId in userIds { try reads.execute(arguments: [appId, userId, groupId]) }
            return true
        }
    }

    public func dismissUltraGroup(appId: Int64, groupId: String) async throws -> Bool {
        try await pool.write { db in
            guard try Self.groupExists(db, appId, groupId) else { return false }
            for table in ["ultra_groups", "ultra_group_members", "ultra_group_channels", "ultra_group_channel_members",
                          "ultra_group_user_groups", "ultra_group_user_group_members", "ultra_group_channel_bindings",
                          "ultra_group_mutes", "ultra_group_muted_channels", "ultra_group_mute_whitelist", "ultra_group_reads",
                          "ultra_group_unpush_levels"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ? AND group_id = ?", arguments: [appId, groupId])
            }
            return true
        }
    }

    public func renameUltraGroup(appId: Int64, groupId: String, name: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE ultra_groups SET name = ? WHERE app_id = ? AND group_id = ?", arguments: [name, appId, groupId])
            return db.changesCount > 0
        }
    }

    public func ultraGroupRoster(appId: Int64, groupId: String) async throws -> UltraGroupRosterRecord? {
        try await pool.read { db in
            guard let group = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT name, created_at, created_seq FROM ultra_groups WHERE app_id = ? AND group_id = ?
                """), arguments: [appId, groupId]) else { return nil }
            let arguments: StatementArguments = [appId, groupId]
            var members: [String: UltraGroupRosterRecord.Member] = [:]
            let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT user_id, joined_at, joined_seq FROM ultra_group_members WHERE app_id = ? AND group_id = ?
                """), arguments: arguments)
            while let row = try rows.next() {
                let seq: Int64 = row[2]
                members[row[0]] = UltraGroupRosterRecord.Member(joinedAt: row[1], joinedSeq: UInt64(seq))
            }
            var channels: [String: UltraGroupChannelRecord] = [:]
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id, type, created_at, created_seq FROM ultra_group_channels WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                let seq: Int64 = row[3]
                channels[row[0]] = UltraGroupChannelRecord(channelId: row[0], type: UltraGroupChannelType(rawValue: row[1]) ?? .publicChannel,
                                                           createdAt: row[2], createdSeq: UInt64(seq))
            }
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id, user_id FROM ultra_group_channel_members WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                channels[row[0] as String]?.members.insert(row[1])
            }
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id, user_group_id FROM ultra_group_channel_bindings WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                channels[row[0] as String]?.userGroups.insert(row[1])
            }
            var userGroups: [String: Set<String>] = [:]
            for id in try String.fetchAll(db.cachedStatement(sql: """
                SELECT user_group_id FROM ultra_group_user_groups WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                userGroups[id] = []
            }
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT user_group_id, user_id FROM ultra_group_user_group_members WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                userGroups[row[0] as String]?.insert(row[1])
            }
            var mutedUsers: [String: [String: Int64]] = [:]
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id, user_id, until FROM ultra_group_mutes WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                mutedUsers[row[0], default: [:]][row[1]] = row[2]
            }
            var whitelist: [String: Set<String>] = [:]
            for row in try Row.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id, user_id FROM ultra_group_mute_whitelist WHERE app_id = ? AND group_id = ?
                """), arguments: arguments) {
                whitelist[row[0], default: []].insert(row[1])
            }
            let mutedChannels = Set(try String.fetchAll(db.cachedStatement(sql: """
                SELECT channel_id FROM ultra_group_muted_channels WHERE app_id = ? AND group_id = ?
                """), arguments: arguments))
            let createdSeq: Int64 = group[2]
            return UltraGroupRosterRecord(groupId: groupId, name: group[0], createdAt: group[1], createdSeq: UInt64(createdSeq),
                                          members: members, channels: channels, userGroups: userGroups,
                                          mutedUsers: mutedUsers, mutedChannels: mutedChannels, muteWhitelist: whitelist)
        }
    }

    public func ultraGroupIds(appId: Int64, ofUser userId: String) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db.cachedStatement(sql: """
                SELECT group_id FROM ultra_group_members WHERE app_id = ? AND user_id = ? ORDER BY joined_at, group_id
                """), arguments: [appId, userId])
        }
    }

    // MARK: channels

    public func createUltraGroupChannel(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType,
                                        now: Int64, maxChannels: Int) async throws {
        try await pool.write { db in
            guard try Self.groupExists(db, appId, groupId) else {
                throw StoreRefusal.noSuchUltraGroup(groupId: groupId)
            }
            guard try !Self.channelExists(db, appId, groupId, channelId) else {
                throw StoreRefusal.channelExists(groupId: groupId, channelId: channelId)
            }
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ultra_group_channels WHERE app_id = ? AND group_id = ?",
                                         arguments: [appId, groupId]) ?? 0
            guard count < maxChannels else {
                throw StoreRefusal.tooManyChannels(groupId: groupId, count: count, limit: maxChannels)
            }
            try db.execute(sql: """
                INSERT INTO ultra_group_channels (app_id, group_id, channel_id, type, created_at, created_seq) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [appId, groupId, channelId, type.rawValue, now, try Self.lastSeq(db)])
        }
    }

    public func deleteUltraGroupChannel(appId: Int64, groupId: String, channelId: String) async throws -> Bool {
        try await pool.write { db in
            guard try Self.channelExists(db, appId, groupId, channelId) else { return false }
            for table in ["ultra_group_channels", "ultra_group_channel_members", "ultra_group_channel_bindings",
                          "ultra_group_mutes", "ultra_group_muted_channels", "ultra_group_mute_whitelist", "ultra_group_reads",
                          "ultra_group_unpush_levels"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ? AND group_id = ? AND channel_id = ?",
                               arguments: [appId, groupId, channelId])
            }
            return true
        }
    }

    public func setUltraGroupChannelType(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE ultra_group_channels SET type = ? WHERE app_id = ? AND group_id = ? AND channel_id = ?",
                           arguments: [type.rawValue, appId, groupId, channelId])
            return db.changesCount > 0
        }
    }

    public func setPrivateChannelMembers(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws -> Bool {
        try await pool.write { db in
            guard try Self.channelExists(db, appId, groupId, channelId) else { return false }
            let statement = try db.cachedStatement(sql: add
                ? "INSERT OR IGNORE INTO ultra_group_channel_members (app_id, group_id, channel_id, user_id) VALUES (?, ?, ?, ?)"
                : "DELETE FROM ultra_group_channel_members WHERE app_id = ? AND group_id = ? AND channel_id = ? AND user_id = ?")
            for userId in userIds { try statement.execute(arguments: [appId, groupId, channelId, userId]) }
            return true
        }
    }

    // MARK: user groups

    public func createUserGroups(appId: Int64, groupId: String, userGroupIds: [String], now: Int64, maxUserGroups: Int) async throws {
        try await pool.write { db in
            guard try Self.groupExists(db, appId, groupId) else {
                throw StoreRefusal.noSuchUltraGroup(groupId: groupId)
            }
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO ultra_group_user_groups (app_id, group_id, user_group_id, created_at) VALUES (?, ?, ?, ?)
                """)
            for id in userGroupIds { try insert.execute(arguments: [appId, groupId, id, now]) }
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ultra_group_user_groups WHERE app_id = ? AND group_id = ?",
                                         arguments: [appId, groupId]) ?? 0
            guard count <= maxUserGroups else {
                throw StoreRefusal.tooManyUserGroups(groupId: groupId, count: count, limit: maxUserGroups)
            }
        }
    }

    public func deleteUserGroups(appId: Int64, groupId: String, userGroupIds: [String]) async throws {
        try await pool.write { db in
            for table in ["ultra_group_user_groups", "ultra_group_user_group_members", "ultra_group_channel_bindings"] {
                let delete = try db.cachedStatement(sql: "DELETE FROM \(table) WHERE app_id = ? AND group_id = ? AND user_group_id = ?")
                for id in userGroupIds { try delete.execute(arguments: [appId, groupId, id]) }
            }
        }
    }

    public func setUserGroupMembers(appId: Int64, groupId: String, userGroupId: String, userIds: [String], add: Bool,
                                    maxMembers: Int) async throws -> Bool {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: """
                SELECT 1 FROM ultra_group_user_groups WHERE app_id = ? AND group_id = ? AND user_group_id = ?
                """, arguments: [appId, groupId, userGroupId]) == true else { return false }
            let statement = try db.cachedStatement(sql: add
                ? "INSERT OR IGNORE INTO ultra_group_user_group_members (app_id, group_id, user_group_id, user_id) VALUES (?, ?, ?, ?)"
                : "DELETE FROM ultra_group_user_group_members WHERE app_id = ? AND group_id = ? AND user_group_id = ? AND user_id = ?")
            for userId in userIds { try statement.execute(arguments: [appId, groupId, userGroupId, userId]) }
            let count = try Int.fetchOne(db, sql: """
                SELECT COUNT(*) FROM ultra_group_user_group_members WHERE app_id = ? AND group_id = ? AND user_group_id = ?
                """, arguments: [appId, groupId, userGroupId]) ?? 0
            guard count <= maxMembers else {
                throw StoreRefusal.userGroupTooLarge(userGroupId: userGroupId, count: count, limit: maxMembers)
            }
            return true
        }
    }

    public func bindUserGroups(appId: Int64, groupId: String, channelId: String, userGroupIds: [String], bind: Bool) async throws -> Bool {
        try await pool.write { db in
            guard try Self.channelExists(db, appId, groupId, channelId) else { return false }
            let exists = try db.cachedStatement(sql: "SELECT 1 FROM ultra_group_user_groups WHERE app_id = ? AND group_id = ? AND user_group_id = ?")
            for id in userGroupIds where bind {
                guard try Bool.fetchOne(exists, arguments: [appId, groupId, id]) == true else { return false }
            }
            let statement = try db.cachedStatement(sql: bind
                ? "INSERT OR IGNORE INTO ultra_group_channel_bindings (app_id, group_id, channel_id, user_group_id) VALUES (?, ?, ?, ?)"
                : "DELETE FROM ultra_group_channel_bindings WHERE app_id = ? AND group_id = ? AND channel_id = ? AND user_group_id = ?")
            for id in userGroupIds { try statement.execute(arguments: [appId, groupId, channelId, id]) }
            return true
        }
    }

    // MARK: mutes

    public func setUltraGroupMutedUsers(appId: Int64, groupId: String, channelId: String, userIds: [String], until: Int64?) async throws {
        try await pool.write { db in
            let statement = try db.cachedStatement(sql: until != nil ? """
                INSERT INTO ultra_group_mutes (app_id, group_id, channel_id, user_id, until) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(app_id, group_id, channel_id, user_id) DO UPDATE SET until = excluded.until
                """ : "DELETE FROM ultra_group_mutes WHERE app_id = ? AND group_id = ? AND channel_id = ? AND user_id = ?")
            for userId in userIds {
                var arguments: StatementArguments = [appId, groupId, channelId, userId]
                if let until { arguments += [until] }
                try statement.execute(arguments: arguments)
            }
        }
    }

    public func setUltraGroupChannelMuted(appId: Int64, groupId: String, channelId: String, muted: Bool) async throws {
        try await pool.write { db in
            try db.execute(sql: muted
                ? "INSERT OR IGNORE INTO ultra_group_muted_channels (app_id, group_id, channel_id) VALUES (?, ?, ?)"
                : "DELETE FROM ultra_group_muted_channels WHERE app_id = ? AND group_id = ? AND channel_id = ?",
                arguments: [appId, groupId, channelId])
        }
    }

    public func setUltraGroupMuteWhitelist(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws {
        try await pool.write { db in
            let statement = try db.cachedStatement(sql: add
                ? "INSERT OR IGNORE INTO ultra_group_mute_whitelist (app_id, group_id, channel_id, user_id) VALUES (?, ?, ?, ?)"
                : "DELETE FROM ultra_group_mute_whitelist WHERE app_id = ? AND group_id = ? AND channel_id = ? AND user_id = ?")
            for userId in userIds { try statement.execute(arguments: [appId, groupId, channelId, userId]) }
        }
    }

    // MARK: reading state

    public func setUltraGroupReadTime(appId: Int64, userId: String, groupId: String, channelId: String, time: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO ultra_group_reads (app_id, user_id, group_id, channel_id, read_time) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(app_id, user_id, group_id, channel_id) DO UPDATE SET read_time = MAX(read_time, excluded.read_time)
                """, arguments: [appId, userId, groupId, channelId, time])
        }
    }

    public func ultraGroupSummaries(appId: Int64, userId: String, channels: [UltraGroupChannelView],
                                    minSentTime: Int64) async throws -> [UltraGroupChannelSummary] {
        try await pool.read { db in
            let readTime = try db.cachedStatement(sql: """
                SELECT read_time FROM ultra_group_reads WHERE app_id = ? AND user_id = ? AND group_id = ? AND channel_id = ?
                """)
            // The newest message the user may see: kept in history, and not hidden by a deletion of theirs.
            // Directional messages count only for their listed members (and their sender).
            let last = try db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages
                WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND seq > ? AND sent_time >= ?
                    AND (audience IS NULL OR sender_id = ? OR instr(audience, ?) > 0)
                    AND NOT EXISTS (SELECT 1 FROM hidden_messages h WHERE h.app_id = messages.app_id AND h.user_id = ? AND h.uid = messages.uid)
                ORDER BY sent_time DESC LIMIT 1
                """)
            let counts = try db.cachedStatement(sql: """
                SELECT COUNT(*), COALESCE(SUM(mentioned IS NOT NULL AND (instr(mentioned, ?) > 0 OR instr(mentioned, ?) > 0)), 0)
                FROM messages
                WHERE app_id = ? AND conv_key = ? AND sent_time > ? AND seq > ? AND (flags & ?) <> 0 AND sender_id <> ?
                    AND (audience IS NULL OR instr(audience, ?) > 0)
                """)
            var summaries: [UltraGroupChannelSummary] = []
            summaries.reserveCapacity(channels.count)
            for channel in channels {
                let key = ultraGroupConversationKey(channel.groupId, channel.channelId)
                let read = try Int64.fetchOne(readTime, arguments: [appId, userId, channel.groupId, channel.channelId]) ?? 0
                let message = try Self.messages(last, arguments: [appId, key, Int64(clamping: channel.afterSeq), minSentTime, userId,
                                                                  Self.audienceEntry(userId), userId]).first
                var unread = 0
                var mentioned = 0
                if let message, message.sentTime > read {
                    // Counted: sent after the read time and at or after `minSentTime` (which may be Int64.min).
                    let after = max(read, minSentTime == .min ? .min : minSentTime - 1)
                    let row = try Row.fetchOne(counts, arguments: [
                        Self.audienceEntry(userId), Self.audienceEntry("*"), appId, key, after,
                        Int64(clamping: channel.afterSeq), Int64(PersistentFlag.isCounted.rawValue), userId, Self.audienceEntry(userId),
                    ])
                    unread = row?[0] ?? 0
                    mentioned = row?[1] ?? 0
                }
                summaries.append(UltraGroupChannelSummary(groupId: channel.groupId, channelId: channel.channelId,
                                                          channelType: channel.channelType, lastMessage: message, readTime: read,
                                                          unreadCount: unread, mentionedCount: mentioned))
            }
            return summaries
        }
    }

    // MARK: modification

    public func modifyMessage(appId: Int64, uid: String, content: Data, mentions: MentionedInfo?, modifiedTime: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE messages SET content = ?, mentioned = ?, modified_time = ? WHERE uid = ? AND app_id = ?",
                           arguments: [content, Self.mentioned(mentions), modifiedTime, uid, appId])
        }
    }

    public func modifiedMessages(appId: Int64, conversationKeys: [String], after cursor: ModificationCursor, limit: Int,
                                 maxBytes: Int) async throws -> ModifiedPage {
        guard !conversationKeys.isEmpty, limit > 0 else { return ModifiedPage(messages: [], next: cursor, hasMore: false) }
        return try await pool.read { db in
            // Candidates from the (app_id, conv_key, modified_time) index: times and seqs only.
            let statement = try db.cachedStatement(sql: """
                SELECT modified_time, seq FROM messages
                WHERE app_id = ? AND conv_key = ? AND modified_time >= ? AND (modified_time > ? OR seq > ?)
                ORDER BY modified_time, seq LIMIT ?
                """)
            // Within the cursor's millisecond, only seqs after it (none when it covers the whole millisecond).
            let afterSeq = cursor.seq == 0 ? Int64.max : Int64(clamping: cursor.seq)
            var candidates: [(time: Int64, seq: UInt64)] = []
            for key in conversationKeys {
                for row in try Row.fetchAll(statement, arguments: [appId, key, cursor.time, cursor.time, afterSeq, limit + 1]) {
                    let time: Int64 = row[0], seq: Int64 = row[1]
                    candidates.append((time, UInt64(seq)))
                }
            }
            candidates.sort { ($0.time, $0.seq) < ($1.time, $1.seq) }
            let page = Array(candidates.prefix(limit))
            var messages: [(modifiedTime: Int64, message: StoredMessage)] = []
            var bytes = 0
            var next = cursor
            let read = try db.cachedStatement(sql: "SELECT \(Self.columns) FROM messages WHERE seq = ?")
            for candidate in page {
                guard let row = try Row.fetchOne(read, arguments: [Int64(clamping: candidate.seq)]) else { continue }
                let message = try Self.message(row)
                bytes += message.wireSize
                if bytes > maxBytes && !messages.isEmpty {
                    return ModifiedPage(messages: messages, next: next, hasMore: true)
                }
                messages.append((candidate.time, message))
                next = ModificationCursor(time: candidate.time, seq: candidate.seq)
            }
            return ModifiedPage(messages: messages, next: next, hasMore: candidates.count > limit)
        }
    }
}
