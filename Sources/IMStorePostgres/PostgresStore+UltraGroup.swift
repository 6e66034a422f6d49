import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// Ultra groups: groups, members, channels, private lists, user groups and bindings, mutes, read
/// times and default levels. Their messages are rows of `messages` like any other (conv_type 10).
///
/// The limits are counted under advisory locks: a group's (channels, user groups, a user group's
/// members) under the group's, the groups a user is in under the user's, taken group first and
/// then users in one order, so two calls never wait for each other.
extension PostgresStore {
    private func ultraGroupExists(_ connection: PostgresConnection, _ appId: Int64, _ groupId: String) async throws -> Bool {
        try await !connection.rows("SELECT 1 FROM ultra_groups WHERE app_id = \(appId) AND group_id = \(groupId)", logger).isEmpty
    }

    private func channelExists(_ connection: PostgresConnection, _ appId: Int64, _ groupId: String, _ channelId: String) async throws -> Bool {
        try await !connection.rows("""
            SELECT 1 FROM ultra_group_channels WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId)
            """, logger).isEmpty
    }

    /// Adds users who are not yet members, all or none: users already in `maxGroups` groups refuse
    /// the call. The caller holds the group's lock; the users' locks are taken here.
    private func addMembers(_ connection: PostgresConnection, appId: Int64, groupId: String, userIds: [String], now: Int64,
                            maxGroups: Int) async throws -> UltraGroupJoinOutcome {
        let users = Set(userIds).sorted()
        try await connection.lock(users.map { LockKey.ultraGroupUser(appId, $0) }, logger)
        var newcomers: [String] = []
        var full: [String] = []
        for row in try await connection.rows("""
            SELECT u.user_id,
                   EXISTS (SELECT 1 FROM ultra_group_members m WHERE m.app_id = \(appId) AND m.group_id = \(groupId) AND m.user_id = u.user_id),
                   (SELECT COUNT(*) FROM ultra_group_members m WHERE m.app_id = \(appId) AND m.user_id = u.user_id)
            FROM unnest(\(users)::text[]) WITH ORDINALITY AS u(user_id, position) ORDER BY u.position
            """, logger) {
            var cells = Cells(row)
            let userId = try cells.string()
            if try cells.next(Bool.self) { continue }
            if try cells.int() >= Int64(maxGroups) { full.append(userId) } else { newcomers.append(userId) }
        }
        guard full.isEmpty else { return .tooManyGroups(userIds: full) }
        guard !newcomers.isEmpty else { return .joined }
        try await connection.run("""
            INSERT INTO ultra_group_members (app_id, group_id, user_id, joined_at, joined_seq)
            SELECT \(appId), \(groupId), user_id, \(now), \(try await lastSeq(connection)) FROM unnest(\(newcomers)::text[]) AS u(user_id)
            """, logger)
        return .joined
    }

    public func createUltraGroup(appId: Int64, groupId: String, name: String, ownerId: String, now: Int64,
                                 maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            if try await !ultraGroupExists(connection, appId, groupId) {
                try await connection.lock(LockKey.ultraGroupUser(appId, ownerId), logger)
                // A refused owner leaves no group behind.
                var cells = Cells(try await connection.rows("""
                    SELECT COUNT(*) FROM ultra_group_members WHERE app_id = \(appId) AND user_id = \(ownerId)
                    """, logger)[0])
                guard try cells.int() < Int64(maxGroupsPerUser) else { return .tooManyGroups(userIds: [ownerId]) }
                let seq = try await lastSeq(connection)
                try await connection.run("""
                    INSERT INTO ultra_groups (app_id, group_id, name, created_at, created_seq) VALUES (\(appId), \(groupId), \(name), \(now), \(seq))
                    """, logger)
                try await connection.run("""
                    INSERT INTO ultra_group_channels (app_id, group_id, channel_id, type, created_at, created_seq)
                    VALUES (\(appId), \(groupId), \(UltraGroupLimits.defaultChannelId), 0, \(now), \(seq))
                    """, logger)
            }
            return try await addMembers(connection, appId: appId, groupId: groupId, userIds: [ownerId], now: now, maxGroups: maxGroupsPerUser)
        }
    }

    public func joinUltraGroup(appId: Int64, groupId: String, userIds: [String], now: Int64,
                               maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            guard try await ultraGroupExists(connection, appId, groupId) else { return .notFound }
            return try await addMembers(connection, appId: appId, groupId: groupId, userIds: userIds, now: now, maxGroups: maxGroupsPerUser)
        }
    }

    public func quitUltraGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Bool {
        try await write { connection in
            guard try await ultraGroupExists(connection, appId, groupId) else { return false }
            for table in ["ultra_group_members", "ultra_group_channel_members", "ultra_group_user_group_members",
                          "ultra_group_mutes", "ultra_group_mute_whitelist", "ultra_group_reads"] {
                try await connection.run("""
                    DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId) AND user_id = ANY(\(userIds))
                    """, logger)
            }
            return true
        }
    }

    public func dismissUltraGroup(appId: Int64, groupId: String) async throws -> Bool {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            guard try await ultraGroupExists(connection, appId, groupId) else { return false }
            for table in ["ultra_groups", "ultra_group_members", "ultra_group_channels", "ultra_group_channel_members",
                          "ultra_group_user_groups", "ultra_group_user_group_members", "ultra_group_channel_bindings",
                          "ultra_group_mutes", "ultra_group_muted_channels", "ultra_group_mute_whitelist", "ultra_group_reads",
                          "ultra_group_unpush_levels"] {
                try await connection.run("DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId)", logger)
            }
            return true
        }
    }

    public func renameUltraGroup(appId: Int64, groupId: String, name: String) async throws -> Bool {
        try await !rows("UPDATE ultra_groups SET name = \(name) WHERE app_id = \(appId) AND group_id = \(groupId) RETURNING 1").isEmpty
    }

    public func ultraGroupRoster(appId: Int64, groupId: String) async throws -> UltraGroupRosterRecord? {
        try await read { connection in
            guard let group = try await connection.rows("""
                SELECT name, created_at, created_seq FROM ultra_groups WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger).first else { return nil }
            var groupCells = Cells(group)
            let name = try groupCells.string()
            let createdAt = try groupCells.int()
            let createdSeq = try groupCells.seq()
            func rows(_ table: String, _ columns: String) async throws -> [PostgresRow] {
                try await connection.rows("""
                    SELECT \(unescaped: columns) FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId)
                    """, logger)
            }
            var members: [String: UltraGroupRosterRecord.Member] = [:]
            for row in try await rows("ultra_group_members", "user_id, joined_at, joined_seq") {
                var cells = Cells(row)
                members[try cells.string()] = UltraGroupRosterRecord.Member(joinedAt: try cells.int(), joinedSeq: try cells.seq())
            }
            var channels: [String: UltraGroupChannelRecord] = [:]
            for row in try await rows("ultra_group_channels", "channel_id, type, created_at, created_seq") {
                var cells = Cells(row)
                let channelId = try cells.string()
                channels[channelId] = UltraGroupChannelRecord(
                    channelId: channelId, type: UltraGroupChannelType(rawValue: Int(try cells.int())) ?? .publicChannel,
                    createdAt: try cells.int(), createdSeq: try cells.seq())
            }
            for row in try await rows("ultra_group_channel_members", "channel_id, user_id") {
                var cells = Cells(row)
                channels[try cells.string()]?.members.insert(try cells.string())
            }
            for row in try await rows("ultra_group_channel_bindings", "channel_id, user_group_id") {
                var cells = Cells(row)
                channels[try cells.string()]?.userGroups.insert(try cells.string())
            }
            var userGroups: [String: Set<String>] = [:]
            for row in try await rows("ultra_group_user_groups", "user_group_id") {
                var cells = Cells(row)
                userGroups[try cells.string()] = []
            }
            for row in try await rows("ultra_group_user_group_members", "user_group_id, user_id") {
                var cells = Cells(row)
                userGroups[try cells.string()]?.insert(try cells.string())
            }
            var mutedUsers: [String: [String: Int64]] = [:]
            for row in try await rows("ultra_group_mutes", "channel_id, user_id, until") {
                var cells = Cells(row)
                mutedUsers[try cells.string(), default: [:]][try cells.string()] = try cells.int()
            }
            var whitelist: [String: Set<String>] = [:]
            for row in try await rows("ultra_group_mute_whitelist", "channel_id, user_id") {
                var cells = Cells(row)
                whitelist[try cells.string(), default: []].insert(try cells.string())
            }
            var mutedChannels = Set<String>()
            for row in try await rows("ultra_group_muted_channels", "channel_id") {
                var cells = Cells(row)
                mutedChannels.insert(try cells.string())
            }
            return UltraGroupRosterRecord(groupId: groupId, name: name, createdAt: createdAt, createdSeq: createdSeq,
                                          members: members, channels: channels, userGroups: userGroups,
                                          mutedUsers: mutedUsers, mutedChannels: mutedChannels, muteWhitelist: whitelist)
        }
    }

    public func ultraGroupIds(appId: Int64, ofUser userId: String) async throws -> [String] {
        try await rows("""
            SELECT group_id FROM ultra_group_members WHERE app_id = \(appId) AND user_id = \(userId) ORDER BY joined_at, group_id
            """).map { var cells = Cells($0); return try cells.string() }
    }

    // MARK: channels

    public func createUltraGroupChannel(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType,
                                        now: Int64, maxChannels: Int) async throws {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            guard try await ultraGroupExists(connection, appId, groupId) else {
                throw StoreRefusal.noSuchUltraGroup(groupId: groupId)
            }
            guard try await !channelExists(connection, appId, groupId, channelId) else {
                throw StoreRefusal.channelExists(groupId: groupId, channelId: channelId)
            }
            var cells = Cells(try await connection.rows("""
                SELECT COUNT(*) FROM ultra_group_channels WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger)[0])
            let count = Int(try cells.int())
            guard count < maxChannels else {
                throw StoreRefusal.tooManyChannels(groupId: groupId, count: count, limit: maxChannels)
            }
            try await connection.run("""
                INSERT INTO ultra_group_channels (app_id, group_id, channel_id, type, created_at, created_seq)
                VALUES (\(appId), \(groupId), \(channelId), \(Int64(type.rawValue)), \(now), \(try await lastSeq(connection)))
                """, logger)
        }
    }

    public func deleteUltraGroupChannel(appId: Int64, groupId: String, channelId: String) async throws -> Bool {
        try await write { connection in
            guard try await channelExists(connection, appId, groupId, channelId) else { return false }
            for table in ["ultra_group_channels", "ultra_group_channel_members", "ultra_group_channel_bindings",
                          "ultra_group_mutes", "ultra_group_muted_channels", "ultra_group_mute_whitelist", "ultra_group_reads",
                          "ultra_group_unpush_levels"] {
                try await connection.run("""
                    DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId)
                    """, logger)
            }
            return true
        }
    }

    public func setUltraGroupChannelType(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType) async throws -> Bool {
        try await !rows("""
            UPDATE ultra_group_channels SET type = \(Int64(type.rawValue))
            WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId) RETURNING 1
            """).isEmpty
    }

    public func setPrivateChannelMembers(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws -> Bool {
        try await write { connection in
            guard try await channelExists(connection, appId, groupId, channelId) else { return false }
            if add {
                try await connection.run("""
                    INSERT INTO ultra_group_channel_members (app_id, group_id, channel_id, user_id)
                    SELECT \(appId), \(groupId), \(channelId), user_id FROM unnest(\(userIds)::text[]) AS u(user_id)
                    ON CONFLICT DO NOTHING
                    """, logger)
            } else {
                try await connection.run("""
                    DELETE FROM ultra_group_channel_members
                    WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId) AND user_id = ANY(\(userIds))
                    """, logger)
            }
            return true
        }
    }

    // MARK: user groups

    public func createUserGroups(appId: Int64, groupId: String, userGroupIds: [String], now: Int64, maxUserGroups: Int) async throws {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            guard try await ultraGroupExists(connection, appId, groupId) else {
                throw StoreRefusal.noSuchUltraGroup(groupId: groupId)
            }
            try await connection.run("""
                INSERT INTO ultra_group_user_groups (app_id, group_id, user_group_id, created_at)
                SELECT \(appId), \(groupId), user_group_id, \(now) FROM unnest(\(userGroupIds)::text[]) AS u(user_group_id)
                ON CONFLICT DO NOTHING
                """, logger)
            var cells = Cells(try await connection.rows("""
                SELECT COUNT(*) FROM ultra_group_user_groups WHERE app_id = \(appId) AND group_id = \(groupId)
                """, logger)[0])
            let count = Int(try cells.int())
            guard count <= maxUserGroups else {
                throw StoreRefusal.tooManyUserGroups(groupId: groupId, count: count, limit: maxUserGroups)
            }
        }
    }

    public func deleteUserGroups(appId: Int64, groupId: String, userGroupIds: [String]) async throws {
        try await write { connection in
            for table in ["ultra_group_user_groups", "ultra_group_user_group_members", "ultra_group_channel_bindings"] {
                try await connection.run("""
                    DELETE FROM \(unescaped: table) WHERE app_id = \(appId) AND group_id = \(groupId) AND user_group_id = ANY(\(userGroupIds))
                    """, logger)
            }
        }
    }

    public func setUserGroupMembers(appId: Int64, groupId: String, userGroupId: String, userIds: [String], add: Bool,
                                    maxMembers: Int) async throws -> Bool {
        try await write { connection in
            try await connection.lock(LockKey.ultraGroup(appId, groupId), logger)
            guard try await !connection.rows("""
                SELECT 1 FROM ultra_group_user_groups WHERE app_id = \(appId) AND group_id = \(groupId) AND user_group_id = \(userGroupId)
                """, logger).isEmpty else { return false }
            if add {
                try await connection.run("""
                    INSERT INTO ultra_group_user_group_members (app_id, group_id, user_group_id, user_id)
                    SELECT \(appId), \(groupId), \(userGroupId), user_id FROM unnest(\(userIds)::text[]) AS u(user_id)
                    ON CONFLICT DO NOTHING
                    """, logger)
            } else {
                try await connection.run("""
                    DELETE FROM ultra_group_user_group_members
                    WHERE app_id = \(appId) AND group_id = \(groupId) AND user_group_id = \(userGroupId) AND user_id = ANY(\(userIds))
                    """, logger)
            }
            var cells = Cells(try await connection.rows("""
                SELECT COUNT(*) FROM ultra_group_user_group_members WHERE app_id = \(appId) AND group_id = \(groupId) AND user_group_id = \(userGroupId)
                """, logger)[0])
            let count = Int(try cells.int())
            guard count <= maxMembers else {
                throw StoreRefusal.userGroupTooLarge(userGroupId: userGroupId, count: count, limit: maxMembers)
            }
            return true
        }
    }

    public func bindUserGroups(appId: Int64, groupId: String, channelId: String, userGroupIds: [String], bind: Bool) async throws -> Bool {
        try await write { connection in
            guard try await channelExists(connection, appId, groupId, channelId) else { return false }
            if bind {
                var cells = Cells(try await connection.rows("""
                    SELECT COUNT(*) FROM ultra_group_user_groups
                    WHERE app_id = \(appId) AND group_id = \(groupId) AND user_group_id = ANY(\(userGroupIds.uniqued()))
                    """, logger)[0])
                guard try cells.int() == Int64(userGroupIds.uniqued().count) else { return false }
                try await connection.run("""
                    INSERT INTO ultra_group_channel_bindings (app_id, group_id, channel_id, user_group_id)
                    SELECT \(appId), \(groupId), \(channelId), user_group_id FROM unnest(\(userGroupIds)::text[]) AS u(user_group_id)
                    ON CONFLICT DO NOTHING
                    """, logger)
            } else {
                try await connection.run("""
                    DELETE FROM ultra_group_channel_bindings
                    WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId) AND user_group_id = ANY(\(userGroupIds))
                    """, logger)
            }
            return true
        }
    }

    // MARK: mutes

    public func setUltraGroupMutedUsers(appId: Int64, groupId: String, channelId: String, userIds: [String], until: Int64?) async throws {
        guard !userIds.isEmpty else { return }
        if let until {
            _ = try await rows("""
                INSERT INTO ultra_group_mutes (app_id, group_id, channel_id, user_id, until)
                SELECT \(appId), \(groupId), \(channelId), user_id, \(until) FROM unnest(\(userIds.uniqued())::text[]) AS u(user_id)
                ON CONFLICT (app_id, group_id, channel_id, user_id) DO UPDATE SET until = excluded.until
                """)
        } else {
            _ = try await rows("""
                DELETE FROM ultra_group_mutes WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId) AND user_id = ANY(\(userIds))
                """)
        }
    }

    public func setUltraGroupChannelMuted(appId: Int64, groupId: String, channelId: String, muted: Bool) async throws {
        if muted {
            _ = try await rows("""
                INSERT INTO ultra_group_muted_channels (app_id, group_id, channel_id) VALUES (\(appId), \(groupId), \(channelId))
                ON CONFLICT DO NOTHING
                """)
        } else {
            _ = try await rows("""
                DELETE FROM ultra_group_muted_channels WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId)
                """)
        }
    }

    public func setUltraGroupMuteWhitelist(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws {
        guard !userIds.isEmpty else { return }
        if add {
            _ = try await rows("""
                INSERT INTO ultra_group_mute_whitelist (app_id, group_id, channel_id, user_id)
                SELECT \(appId), \(groupId), \(channelId), user_id FROM unnest(\(userIds)::text[]) AS u(user_id)
                ON CONFLICT DO NOTHING
                """)
        } else {
            _ = try await rows("""
                DELETE FROM ultra_group_mute_whitelist
                WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId) AND user_id = ANY(\(userIds))
                """)
        }
    }

    /// The default do-not-disturb level an ultra group sets for all its members, per channel (""
    /// for the whole group); a member's own level (conversation state) overrides it.
    public func setUltraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String, level: Int) async throws {
        if level == 0 {
            _ = try await rows("""
                DELETE FROM ultra_group_unpush_levels WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId)
                """)
        } else {
            _ = try await rows("""
                INSERT INTO ultra_group_unpush_levels (app_id, group_id, channel_id, level) VALUES (\(appId), \(groupId), \(channelId), \(Int64(level)))
                ON CONFLICT (app_id, group_id, channel_id) DO UPDATE SET level = excluded.level
                """)
        }
    }

    public func ultraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String) async throws -> Int {
        guard let row = try await rows("""
            SELECT level FROM ultra_group_unpush_levels WHERE app_id = \(appId) AND group_id = \(groupId) AND channel_id = \(channelId)
            """).first else { return 0 }
        var cells = Cells(row)
        return Int(try cells.int())
    }

    // MARK: reading state

    public func setUltraGroupReadTime(appId: Int64, userId: String, groupId: String, channelId: String, time: Int64) async throws {
        _ = try await rows("""
            INSERT INTO ultra_group_reads (app_id, user_id, group_id, channel_id, read_time) VALUES (\(appId), \(userId), \(groupId), \(channelId), \(time))
            ON CONFLICT (app_id, user_id, group_id, channel_id) DO UPDATE SET read_time = GREATEST(ultra_group_reads.read_time, excluded.read_time)
            """)
    }

    public func ultraGroupSummaries(appId: Int64, userId: String, channels: [UltraGroupChannelView],
                                    minSentTime: Int64) async throws -> [UltraGroupChannelSummary] {
        guard !channels.isEmpty else { return [] }
        return try await read { connection in
            var summaries: [UltraGroupChannelSummary] = []
            summaries.reserveCapacity(channels.count)
            for channel in channels {
                let key = ultraGroupConversationKey(channel.groupId, channel.channelId)
                let afterSeq = Int64(clamping: channel.afterSeq)
                var read: Int64 = 0
                if let row = try await connection.rows("""
                    SELECT read_time FROM ultra_group_reads
                    WHERE app_id = \(appId) AND user_id = \(userId) AND group_id = \(channel.groupId) AND channel_id = \(channel.channelId)
                    """, logger).first {
                    var cells = Cells(row)
                    read = try cells.int()
                }
                // The newest message the user may see: kept in history, and not hidden by a deletion
                // of theirs; directional messages count only for their listed members (and sender).
                let message = try await connection.rows("""
                    SELECT \(unescaped: Self.columns) FROM messages
                    WHERE app_id = \(appId) AND conv_key = \(key) AND in_history = 1 AND seq > \(afterSeq) AND sent_time >= \(minSentTime)
                        AND (audience IS NULL OR sender_id = \(userId) OR strpos(audience, \(Self.audienceEntry(userId))) > 0)
                        AND NOT EXISTS (SELECT 1 FROM hidden_messages h WHERE h.app_id = messages.app_id AND h.user_id = \(userId)
                                        AND h.uid = messages.uid)
                    ORDER BY sent_time DESC LIMIT 1
                    """, logger).first.map(Self.message)
                var unread = 0
                var mentioned = 0
                if let message, message.sentTime > read {
                    // Counted: sent after the read time and at or after `minSentTime` (which may be Int64.min).
                    let after = max(read, minSentTime == .min ? .min : minSentTime - 1)
                    var cells = Cells(try await connection.rows("""
                        SELECT COUNT(*),
                               COUNT(*) FILTER (WHERE mentioned IS NOT NULL
                                   AND (strpos(mentioned, \(Self.audienceEntry(userId))) > 0 OR strpos(mentioned, \(Self.audienceEntry("*"))) > 0))
                        FROM messages
                        WHERE app_id = \(appId) AND conv_key = \(key) AND sent_time > \(after) AND seq > \(afterSeq)
                            AND (flags & \(Int64(PersistentFlag.isCounted.rawValue))) <> 0 AND sender_id <> \(userId)
                            AND (audience IS NULL OR strpos(audience, \(Self.audienceEntry(userId))) > 0)
                        """, logger)[0])
                    unread = Int(try cells.int())
                    mentioned = Int(try cells.int())
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
        _ = try await rows("""
            UPDATE messages SET content = \(content), mentioned = \(Self.mentioned(mentions)), modified_time = \(modifiedTime)
            WHERE uid = \(uid) AND app_id = \(appId)
            """)
    }

    public func modifiedMessages(appId: Int64, conversationKeys: [String], after cursor: ModificationCursor, limit: Int,
                                 maxBytes: Int) async throws -> ModifiedPage {
        guard !conversationKeys.isEmpty, limit > 0 else { return ModifiedPage(messages: [], next: cursor, hasMore: false) }
        return try await read { connection in
            // Candidates from the (app_id, conv_key, modified_time) index, per conversation: times and seqs only.
            // Within the cursor's millisecond, only seqs after it (none when it covers the whole millisecond).
            let afterSeq = cursor.seq == 0 ? Int64.max : Int64(clamping: cursor.seq)
            var candidates: [(time: Int64, seq: UInt64)] = []
            for row in try await connection.rows("""
                SELECT c.modified_time, c.seq FROM unnest(\(conversationKeys)::text[]) AS k(conv_key)
                CROSS JOIN LATERAL (
                    SELECT modified_time, seq FROM messages
                    WHERE app_id = \(appId) AND conv_key = k.conv_key AND modified_time > 0 AND modified_time >= \(cursor.time)
                        AND (modified_time > \(cursor.time) OR seq > \(afterSeq))
                    ORDER BY modified_time, seq LIMIT \(Int64(limit) + 1)) AS c
                """, logger) {
                var cells = Cells(row)
                candidates.append((try cells.int(), try cells.seq()))
            }
            candidates.sort { ($0.time, $0.seq) < ($1.time, $1.seq) }
            let page = Array(candidates.prefix(limit))
            // Full rows only for what the page takes: read in the page's order as they arrive,
            // until its bytes are spent.
            var messages: [(modifiedTime: Int64, message: StoredMessage)] = []
            var bytes = 0
            var next = cursor
            var full = false
            try await connection.forEachRow("""
                SELECT \(unescaped: Self.columns), modified_time FROM messages WHERE seq = ANY(\(page.map { Int64(clamping: $0.seq) }))
                ORDER BY modified_time, seq
                """, logger) { row in
                var cells = Cells(row)
                let message = try Self.message(&cells)
                let time = try cells.int()
                bytes += message.wireSize
                if bytes > maxBytes && !messages.isEmpty {
                    full = true
                    return false
                }
                messages.append((time, message))
                next = ModificationCursor(time: time, seq: message.seq)
                return true
            }
            if full { return ModifiedPage(messages: messages, next: next, hasMore: true) }
            return ModifiedPage(messages: messages, next: next, hasMore: candidates.count > limit)
        }
    }
}
