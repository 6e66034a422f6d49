import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// Conversation state per user: do-not-disturb levels and pins (`conversation_settings`), quiet
/// hours and the user's state version (`conversation_state_users`), tags (`conversation_tags`) and
/// the conversations in them (`conversation_tag_links`).
///
/// Every edit runs in one transaction that takes the user's state lock, reads the user's version,
/// gives each row it changes the next version, and stores the new version. Versions are a
/// watermark too (devices pull the rows after theirs): under the lock, one user's edits commit in
/// the order of their versions, which are unique and gapless. Removed tags and links stay as
/// tombstones (`removed = 1`); re-adding revives the same row.
extension PostgresStore {
    // MARK: reads

    public func conversationUnpushLevel(appId: Int64, userId: String, type: ConversationType, targetId: String, channelId: String) async throws -> Int {
        guard let row = try await rows("""
            SELECT unpush_level FROM conversation_settings
            WHERE app_id = \(appId) AND user_id = \(userId) AND conv_type = \(Int64(type.rawValue)) AND target_id = \(targetId)
                AND channel_id = \(channelId)
            """).first else { return 0 }
        var cells = Cells(row)
        return Int(try cells.int())
    }

    public func quietHours(appId: Int64, userId: String) async throws -> QuietHours? {
        try await client.withConnection { connection in
            try await Self.quietHoursRecord(connection, logger, appId: appId, userId: userId)?.hours
        }
    }

    public func conversationStateChanges(appId: Int64, userId: String, since: UInt64, limit: Int) async throws -> ConversationStateDeltaRecord {
        try await read { connection in
            let fresh = since == 0
            let after = Int64(clamping: since)
            let settings = try await connection.rows("""
                SELECT \(unescaped: Self.settingColumns) FROM conversation_settings
                WHERE app_id = \(appId) AND user_id = \(userId) AND version > \(after) \(unescaped: fresh ? "AND (unpush_level <> 0 OR is_top <> 0)" : "")
                ORDER BY version LIMIT \(Int64(limit) + 1)
                """, logger).map(Self.setting)
            let tags = try await connection.rows("""
                SELECT \(unescaped: Self.tagColumns) FROM conversation_tags
                WHERE app_id = \(appId) AND user_id = \(userId) AND version > \(after) \(unescaped: fresh ? "AND removed = 0" : "")
                ORDER BY version LIMIT \(Int64(limit) + 1)
                """, logger).map(Self.tag)
            let links = try await connection.rows("""
                SELECT \(unescaped: Self.linkColumns) FROM conversation_tag_links
                WHERE app_id = \(appId) AND user_id = \(userId) AND version > \(after) \(unescaped: fresh ? "AND removed = 0" : "")
                ORDER BY version LIMIT \(Int64(limit) + 1)
                """, logger).map(Self.link)
            var quiet = try await Self.quietHoursRecord(connection, logger, appId: appId, userId: userId)
            if let record = quiet, record.version <= since || (fresh && record.hours == nil) { quiet = nil }
            let current = try await Self.version(connection, logger, appId: appId, userId: userId)

            return ConversationStateDeltaRecord.page(settings: settings, tags: tags, links: links, quietHours: quiet,
                                                     current: current, since: since, limit: limit)
        }
    }

    // MARK: edits

    public func editConversationState(appId: Int64, userId: String, _ edit: ConversationStateEdit, now: Int64) async throws -> ConversationStateDeltaRecord {
        try await write { connection in
            try await connection.lock(LockKey.conversationState(appId, userId), logger)
            var edits = StateEdits(connection: connection, logger: logger, appId: appId, userId: userId, now: now,
                                   previous: try await Self.version(connection, logger, appId: appId, userId: userId))
            try await edits.apply(edit)
            return try await edits.finish()
        }
    }

    /// One edit transaction: hands out versions and collects the rows it changed.
    private struct StateEdits {
        let connection: PostgresConnection
        let logger: Logger
        let appId: Int64
        let userId: String
        let now: Int64
        let previous: UInt64
        var next: UInt64
        var delta = ConversationStateDeltaRecord()

        init(connection: PostgresConnection, logger: Logger, appId: Int64, userId: String, now: Int64, previous: UInt64) {
            self.connection = connection
            self.logger = logger
            self.appId = appId
            self.userId = userId
            self.now = now
            self.previous = previous
            self.next = previous
        }

        mutating func stamp() -> Int64 {
            next += 1
            return Int64(next)
        }

        mutating func apply(_ edit: ConversationStateEdit) async throws {
            switch edit {
            case .setLevel(let conversation, let level):
                try await setting(conversation, column: "unpush_level", value: Int64(level.rawValue))
            case .setTop(let conversation, let isTop):
                try await setting(conversation, column: "is_top", value: isTop.flag)
            case .setQuietHours(let hours):
                let version = stamp()
                try await connection.run("""
                    INSERT INTO conversation_state_users (app_id, user_id, version, quiet_start, quiet_span, quiet_level, quiet_time_zone, quiet_version)
                    VALUES (\(appId), \(userId), \(version), \(hours.startTime), \(Int64(hours.spanMinutes)), \(Int64(hours.level.rawValue)),
                            \(hours.timeZone), \(version))
                    ON CONFLICT (app_id, user_id) DO UPDATE SET quiet_start = excluded.quiet_start, quiet_span = excluded.quiet_span,
                        quiet_level = excluded.quiet_level, quiet_time_zone = excluded.quiet_time_zone, quiet_version = excluded.quiet_version
                    """, logger)
                delta.quietHours = QuietHoursRecord(hours: hours, version: UInt64(version))
            case .removeQuietHours:
                guard try await PostgresStore.quietHoursRecord(connection, logger, appId: appId, userId: userId)?.hours != nil else { return }
                let version = stamp()
                try await connection.run("""
                    UPDATE conversation_state_users SET quiet_start = NULL, quiet_span = 0, quiet_level = 0, quiet_time_zone = NULL,
                        quiet_version = \(version)
                    WHERE app_id = \(appId) AND user_id = \(userId)
                    """, logger)
                delta.quietHours = QuietHoursRecord(hours: nil, version: UInt64(version))
            case .addTag(let tagId, let name, let limit):
                if let existing = try await tag(tagId), !existing.removed {
                    throw StoreRefusal.tagExists(tagId: tagId)
                }
                var cells = Cells(try await connection.rows("""
                    SELECT COUNT(*) FROM conversation_tags WHERE app_id = \(appId) AND user_id = \(userId) AND removed = 0
                    """, logger)[0])
                guard try cells.int() < Int64(limit) else {
                    throw StoreRefusal.tooManyTags(tagId: tagId, limit: limit)
                }
                try await connection.run("""
                    INSERT INTO conversation_tags (app_id, user_id, tag_id, name, created_at, removed, version)
                    VALUES (\(appId), \(userId), \(tagId), \(name), \(now), 0, \(stamp()))
                    ON CONFLICT (app_id, user_id, tag_id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at,
                        removed = 0, version = excluded.version
                    """, logger)
                delta.tags.append(try await tag(tagId)!)
            case .renameTag(let tagId, let name):
                guard let existing = try await tag(tagId), !existing.removed else { throw StoreRefusal.noSuchTag(tagId: tagId) }
                guard existing.name != name else { return }
                try await connection.run("""
                    UPDATE conversation_tags SET name = \(name), version = \(stamp())
                    WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId)
                    """, logger)
                delta.tags.append(try await tag(tagId)!)
            case .removeTag(let tagId):
                guard let existing = try await tag(tagId), !existing.removed else { return }
                // Every link of the tag removed in one statement (a tag may hold many thousands of
                // conversations), each stamped with a version of its own in the order they had.
                let base = Int64(next)
                let removed = try await connection.rows("""
                    WITH live AS (
                        SELECT conv_type, target_id, channel_id, row_number() OVER (ORDER BY version) AS n
                        FROM conversation_tag_links
                        WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId) AND removed = 0
                    )
                    UPDATE conversation_tag_links AS l SET removed = 1, is_top = 0, version = \(base) + live.n
                    FROM live
                    WHERE l.app_id = \(appId) AND l.user_id = \(userId) AND l.tag_id = \(tagId)
                        AND l.conv_type = live.conv_type AND l.target_id = live.target_id AND l.channel_id = live.channel_id
                    RETURNING \(unescaped: PostgresStore.qualifiedLinkColumns)
                    """, logger).map(PostgresStore.link).sorted { $0.version < $1.version }
                next += UInt64(removed.count)
                delta.links += removed
                try await connection.run("""
                    UPDATE conversation_tags SET removed = 1, version = \(stamp())
                    WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId)
                    """, logger)
                delta.tags.append(try await tag(tagId)!)
            case .addConversations(let tagId, let conversations):
                guard let existing = try await tag(tagId), !existing.removed else { throw StoreRefusal.noSuchTag(tagId: tagId) }
                for conversation in conversations.uniqued() {
                    if let current = try await link(tagId: tagId, conversation), !current.removed { continue }
                    let version = stamp()
                    try await connection.run("""
                        INSERT INTO conversation_tag_links (app_id, user_id, tag_id, conv_type, target_id, channel_id, is_top, linked_at, removed, version)
                        VALUES (\(appId), \(userId), \(tagId), \(Int64(conversation.type.rawValue)), \(conversation.targetId),
                                \(conversation.channelId), 0, \(now), 0, \(version))
                        ON CONFLICT (app_id, user_id, tag_id, conv_type, target_id, channel_id) DO UPDATE SET
                            is_top = 0, linked_at = excluded.linked_at, removed = 0, version = excluded.version
                        """, logger)
                    delta.links.append(ConversationTagLinkRecord(tagId: tagId, conversation: conversation, isTop: false, removed: false,
                                                                 version: UInt64(version), linkedAt: now))
                }
            case .removeConversations(let tagId, let conversations):
                for conversation in conversations.uniqued() {
                    if let current = try await link(tagId: tagId, conversation), !current.removed { try await unlink(current) }
                }
            case .removeTags(let conversation, let tagIds):
                for tagId in Set(tagIds).sorted() {
                    if let current = try await link(tagId: tagId, conversation), !current.removed { try await unlink(current) }
                }
            case .setTopInTag(let tagId, let conversation, let isTop):
                guard let existing = try await link(tagId: tagId, conversation), !existing.removed else {
                    throw StoreRefusal.conversationNotInTag(tagId: tagId, type: conversation.type, targetId: conversation.targetId)
                }
                guard existing.isTop != isTop else { return }
                try await connection.run("""
                    UPDATE conversation_tag_links SET is_top = \(isTop.flag), version = \(stamp())
                    WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId) AND conv_type = \(Int64(conversation.type.rawValue))
                        AND target_id = \(conversation.targetId) AND channel_id = \(conversation.channelId)
                    """, logger)
                delta.links.append(try await link(tagId: tagId, conversation)!)
            }
        }

        /// Stores the new version (if anything changed) and returns the delta.
        mutating func finish() async throws -> ConversationStateDeltaRecord {
            if next != previous {
                try await connection.run("""
                    INSERT INTO conversation_state_users (app_id, user_id, version) VALUES (\(appId), \(userId), \(Int64(next)))
                    ON CONFLICT (app_id, user_id) DO UPDATE SET version = excluded.version
                    """, logger)
            }
            delta.previousVersion = previous
            delta.version = next
            return delta
        }

        private mutating func setting(_ conversation: ConversationIdentifier, column: String, value: Int64) async throws {
            let type = Int64(conversation.type.rawValue)
            try await connection.run("""
                INSERT INTO conversation_settings (app_id, user_id, conv_type, target_id, channel_id, unpush_level, is_top, version, updated_at)
                VALUES (\(appId), \(userId), \(type), \(conversation.targetId), \(conversation.channelId), 0, 0, 0, \(now))
                ON CONFLICT (app_id, user_id, conv_type, target_id, channel_id) DO NOTHING
                """, logger)
            let rows = try await connection.rows("""
                UPDATE conversation_settings SET \(unescaped: column) = \(value), version = \(stamp()), updated_at = \(now)
                WHERE app_id = \(appId) AND user_id = \(userId) AND conv_type = \(type) AND target_id = \(conversation.targetId)
                    AND channel_id = \(conversation.channelId)
                RETURNING \(unescaped: PostgresStore.settingColumns)
                """, logger)
            delta.settings.append(try PostgresStore.setting(rows[0]))
        }

        private mutating func unlink(_ link: ConversationTagLinkRecord) async throws {
            let conversation = link.conversation
            let version = stamp()
            try await connection.run("""
                UPDATE conversation_tag_links SET removed = 1, is_top = 0, version = \(version)
                WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(link.tagId) AND conv_type = \(Int64(conversation.type.rawValue))
                    AND target_id = \(conversation.targetId) AND channel_id = \(conversation.channelId)
                """, logger)
            // The changed row is known without reading it back (one round trip per link, not two).
            var removed = link
            removed.removed = true
            removed.isTop = false
            removed.version = UInt64(version)
            delta.links.append(removed)
        }

        private func tag(_ tagId: String) async throws -> ConversationTagRecord? {
            try await connection.rows("""
                SELECT \(unescaped: PostgresStore.tagColumns) FROM conversation_tags WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId)
                """, logger).first.map(PostgresStore.tag)
        }

        private func link(tagId: String, _ conversation: ConversationIdentifier) async throws -> ConversationTagLinkRecord? {
            try await connection.rows("""
                SELECT \(unescaped: PostgresStore.linkColumns) FROM conversation_tag_links
                WHERE app_id = \(appId) AND user_id = \(userId) AND tag_id = \(tagId) AND conv_type = \(Int64(conversation.type.rawValue))
                    AND target_id = \(conversation.targetId) AND channel_id = \(conversation.channelId)
                """, logger).first.map(PostgresStore.link)
        }
    }

    // MARK: rows

    static let settingColumns = "conv_type, target_id, channel_id, unpush_level, is_top, version, updated_at"
    static let tagColumns = "tag_id, name, created_at, removed, version"
    static let linkColumns = "tag_id, conv_type, target_id, channel_id, is_top, linked_at, removed, version"
    /// `linkColumns` of the table named `l` (an UPDATE ... FROM returning them).
    static let qualifiedLinkColumns = linkColumns.split(separator: ", ").map { "l.\($0)" }.joined(separator: ", ")

    static func version(_ connection: PostgresConnection, _ logger: Logger, appId: Int64, userId: String) async throws -> UInt64 {
        guard let row = try await connection.rows("""
            SELECT version FROM conversation_state_users WHERE app_id = \(appId) AND user_id = \(userId)
            """, logger).first else { return 0 }
        var cells = Cells(row)
        return try cells.seq()
    }

    static func quietHoursRecord(_ connection: PostgresConnection, _ logger: Logger, appId: Int64, userId: String) async throws -> QuietHoursRecord? {
        guard let row = try await connection.rows("""
            SELECT quiet_start, quiet_span, quiet_level, quiet_time_zone, quiet_version FROM conversation_state_users
            WHERE app_id = \(appId) AND user_id = \(userId) AND quiet_version > 0
            """, logger).first else { return nil }
        var cells = Cells(row)
        let start = try cells.optionalString()
        let span = try cells.int()
        let level = try cells.int()
        let timeZone = try cells.optionalString()
        let version = try cells.seq()
        guard let start else { return QuietHoursRecord(hours: nil, version: version) }
        let hours = QuietHours(startTime: start, spanMinutes: Int(span), level: PushNotificationLevel(rawValue: Int(level)) ?? .blocked,
                               timeZone: timeZone)
        return QuietHoursRecord(hours: hours, version: version)
    }

    static func setting(_ row: PostgresRow) throws -> ConversationSettingRecord {
        var cells = Cells(row)
        let conversation = try Self.conversation(&cells)
        return ConversationSettingRecord(conversation: conversation, level: PushNotificationLevel(rawValue: Int(try cells.int())) ?? .default,
                                         isTop: try cells.bool(), version: try cells.seq(), updatedAt: try cells.int())
    }

    static func tag(_ row: PostgresRow) throws -> ConversationTagRecord {
        var cells = Cells(row)
        return ConversationTagRecord(tagId: try cells.string(), name: try cells.string(), createdAt: try cells.int(), removed: try cells.bool(),
                                     version: try cells.seq())
    }

    static func link(_ row: PostgresRow) throws -> ConversationTagLinkRecord {
        var cells = Cells(row)
        let tagId = try cells.string()
        let conversation = try Self.conversation(&cells)
        let isTop = try cells.bool()
        let linkedAt = try cells.int()
        return ConversationTagLinkRecord(tagId: tagId, conversation: conversation, isTop: isTop, removed: try cells.bool(),
                                         version: try cells.seq(), linkedAt: linkedAt)
    }

    /// conv_type, target_id, channel_id.
    private static func conversation(_ cells: inout Cells) throws -> ConversationIdentifier {
        ConversationIdentifier(ConversationType(rawValue: Int(try cells.int())) ?? .private, targetId: try cells.string(),
                               channelId: try cells.string())
    }
}
