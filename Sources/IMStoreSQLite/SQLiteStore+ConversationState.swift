import Foundation
import GRDB
import IMCore
import IMStore

/// Conversation state per user: do-not-disturb levels and pins (`conversation_settings`), quiet
/// hours and the user's state version (`conversation_state_users`), tags (`conversation_tags`) and
/// the conversations in them (`conversation_tag_links`).
///
/// Every edit runs in one transaction that reads the user's version, gives each row it changes the
/// next version, and stores the new version. Versions are therefore unique per user, and a sync
/// page can end after any row. Removed tags and links stay as tombstones (`removed = 1`) so a
/// device that synced before learns of the removal; re-adding revives the same row, so the
/// tombstones of a user never outnumber the tags and tag links they ever had.
extension SQLiteStore {
    static func createConversationState(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE conversation_settings ADD COLUMN is_top INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE conversation_settings ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE conversation_settings ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
            CREATE INDEX conversation_settings_by_version ON conversation_settings (app_id, user_id, version);
            CREATE TABLE conversation_state_users (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL,
                version INTEGER NOT NULL DEFAULT 0,
                quiet_start TEXT, quiet_span INTEGER NOT NULL DEFAULT 0, quiet_level INTEGER NOT NULL DEFAULT 0,
                quiet_time_zone TEXT, quiet_version INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (app_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE conversation_tags (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, tag_id TEXT NOT NULL,
                name TEXT NOT NULL, created_at INTEGER NOT NULL,
                removed INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, tag_id)
            ) WITHOUT ROWID;
            CREATE INDEX conversation_tags_by_version ON conversation_tags (app_id, user_id, version);
            CREATE TABLE conversation_tag_links (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, tag_id TEXT NOT NULL,
                conv_type INTEGER NOT NULL, target_id TEXT NOT NULL, channel_id TEXT NOT NULL,
                is_top INTEGER NOT NULL DEFAULT 0, linked_at INTEGER NOT NULL,
                removed INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, tag_id, conv_type, target_id, channel_id)
            ) WITHOUT ROWID;
            CREATE INDEX conversation_tag_links_by_version ON conversation_tag_links (app_id, user_id, version);
            """)
        // Levels set before versions existed get versions 1, 2, ... per user, so a device's first
        // state sync sees them.
        var versions: [String: UInt64] = [:]
        let rows = try Row.fetchAll(db, sql: "SELECT app_id, user_id, conv_type, target_id, channel_id FROM conversation_settings")
        for row in rows {
            let appId: Int64 = row["app_id"]
            let userId: String = row["user_id"]
            let key = "\(appId)|\(userId)"
            let version = versions[key, default: 0] + 1
            versions[key] = version
            try db.execute(sql: """
                UPDATE conversation_settings SET version = ?
                WHERE app_id = ? AND user_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """, arguments: [Int64(version), appId, userId, row["conv_type"], row["target_id"], row["channel_id"]])
            try db.execute(sql: """
                INSERT INTO conversation_state_users (app_id, user_id, version) VALUES (?, ?, ?)
                ON CONFLICT(app_id, user_id) DO UPDATE SET version = excluded.version
                """, arguments: [appId, userId, Int64(version)])
        }
    }

    // MARK: reads

    public func conversationUnpushLevel(appId: Int64, userId: String, type: ConversationType, targetId: String, channelId: String) async throws -> Int {
        try await pool.read { db in
            try Int.fetchOne(db, sql: """
                SELECT unpush_level FROM conversation_settings
                WHERE app_id = ? AND user_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """, arguments: [appId, userId, type.rawValue, targetId, channelId]) ?? 0
        }
    }

    public func quietHours(appId: Int64, userId: String) async throws -> QuietHours? {
        try await pool.read { db in
            try Self.quietHoursRecord(db, appId: appId, userId: userId)?.hours
        }
    }

    public func conversationStateChanges(appId: Int64, userId: String, since: UInt64, limit: Int) async throws -> ConversationStateDeltaRecord {
        try await pool.read { db in
            let fresh = since == 0
            let after = Int64(clamping: since)
            let settings = try Row.fetchAll(db, sql: """
                SELECT \(Self.settingColumns) FROM conversation_settings
                WHERE app_id = ? AND user_id = ? AND version > ? \(fresh ? "AND (unpush_level <> 0 OR is_top <> 0)" : "")
                ORDER BY version LIMIT ?
                """, arguments: [appId, userId, after, limit + 1]).map(Self.setting)
            let tags = try Row.fetchAll(db, sql: """
                SELECT \(Self.tagColumns) FROM conversation_tags
                WHERE app_id = ? AND user_id = ? AND version > ? \(fresh ? "AND removed = 0" : "")
                ORDER BY version LIMIT ?
                """, arguments: [appId, userId, after, limit + 1]).map(Self.tag)
            let links = try Row.fetchAll(db, sql: """
                SELECT \(Self.linkColumns) FROM conversation_tag_links
                WHERE app_id = ? AND user_id = ? AND version > ? \(fresh ? "AND removed = 0" : "")
                ORDER BY version LIMIT ?
                """, arguments: [appId, userId, after, limit + 1]).map(Self.link)
            var quiet = try Self.quietHoursRecord(db, appId: appId, userId: userId)
            if let record = quiet, record.version <= since || (fresh && record.hours == nil) { quiet = nil }
            let current = try Self.version(db, appId: appId, userId: userId)

            return ConversationStateDeltaRecord.page(settings: settings, tags: tags, links: links, quietHours: quiet,
                                                     current: current, since: since, limit: limit)
        }
    }

    // MARK: edits

    public func editConversationState(appId: Int64, userId: String, _ edit: ConversationStateEdit, now: Int64) async throws -> ConversationStateDeltaRecord {
        try await pool.write { db in
            var edits = StateEdits(db: db, appId: appId, userId: userId, now: now,
                                   previous: try Self.version(db, appId: appId, userId: userId))
            try edits.apply(edit)
            return try edits.finish()
        }
    }

    /// One edit transaction: hands out versions and collects the rows it changed.
    private struct StateEdits {
        let db: Database
        let appId: Int64
        let userId: String
        let now: Int64
        let previous: UInt64
        var next: UInt64
        var delta = ConversationStateDeltaRecord()

        init(db: Database, appId: Int64, userId: String, now: Int64, previous: UInt64) {
            self.db = db
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

        mutating func apply(_ edit: ConversationStateEdit) throws {
            switch edit {
            case .setLevel(let conversation, let level):
                try setting(conversation, column: "unpush_level", value: level.rawValue)
            case .setTop(let conversation, let isTop):
                try setting(conversation, column: "is_top", value: isTop ? 1 : 0)
            case .setQuietHours(let hours):
                let version = stamp()
                try db.execute(sql: """
                    INSERT INTO conversation_state_users (app_id, user_id, version, quiet_start, quiet_span, quiet_level, quiet_time_zone, quiet_version)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(app_id, user_id) DO UPDATE SET quiet_start = excluded.quiet_start, quiet_span = excluded.quiet_span,
                        quiet_level = excluded.quiet_level, quiet_time_zone = excluded.quiet_time_zone, quiet_version = excluded.quiet_version
                    """, arguments: [appId, userId, version, hours.startTime, hours.spanMinutes, hours.level.rawValue, hours.timeZone, version])
                delta.quietHours = QuietHoursRecord(hours: hours, version: UInt64(version))
            case .removeQuietHours:
                guard try SQLiteStore.quietHoursRecord(db, appId: appId, userId: userId)?.hours != nil else { return }
                let version = stamp()
                try db.execute(sql: """
                    UPDATE conversation_state_users SET quiet_start = NULL, quiet_span = 0, quiet_level = 0, quiet_time_zone = NULL, quiet_version = ?
                    WHERE app_id = ? AND user_id = ?
                    """, arguments: [version, appId, userId])
                delta.quietHours = QuietHoursRecord(hours: nil, version: UInt64(version))
            case .addTag(let tagId, let name, let limit):
                if let existing = try tag(tagId), !existing.removed {
                    throw StoreRefusal.tagExists(tagId: tagId)
                }
                let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM conversation_tags WHERE app_id = ? AND user_id = ? AND removed = 0",
                                             arguments: [appId, userId]) ?? 0
                guard count < limit else {
                    throw StoreRefusal.tooManyTags(tagId: tagId, limit: limit)
                }
                try db.execute(sql: """
                    INSERT INTO conversation_tags (app_id, user_id, tag_id, name, created_at, removed, version) VALUES (?, ?, ?, ?, ?, 0, ?)
                    ON CONFLICT(app_id, user_id, tag_id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at,
                        removed = 0, version = excluded.version
                    """, arguments: [appId, userId, tagId, name, now, stamp()])
                delta.tags.append(try tag(tagId)!)
            case .renameTag(let tagId, let name):
                guard let existing = try tag(tagId), !existing.removed else { throw StoreRefusal.noSuchTag(tagId: tagId) }
                guard existing.name != name else { return }
                try db.execute(sql: "UPDATE conversation_tags SET name = ?, version = ? WHERE app_id = ? AND user_id = ? AND tag_id = ?",
                               arguments: [name, stamp(), appId, userId, tagId])
                delta.tags.append(try tag(tagId)!)
            case .removeTag(let tagId):
                guard let existing = try tag(tagId), !existing.removed else { return }
                for current in try links(tagId: tagId) where !current.removed {
                    try unlink(current)
                }
                try db.execute(sql: "UPDATE conversation_tags SET removed = 1, version = ? WHERE app_id = ? AND user_id = ? AND tag_id = ?",
                               arguments: [stamp(), appId, userId, tagId])
                delta.tags.append(try tag(tagId)!)
            case .addConversations(let tagId, let conversations):
                guard let existing = try tag(tagId), !existing.removed else { throw StoreRefusal.noSuchTag(tagId: tagId) }
                for conversation in conversations.uniqued() {
                    if let current = try link(tagId: tagId, conversation), !current.removed { continue }
                    let version = stamp()
                    try db.cachedStatement(sql: """
                        INSERT INTO conversation_tag_links (app_id, user_id, tag_id, conv_type, target_id, channel_id, is_top, linked_at, removed, version)
                        VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0, ?)
                        ON CONFLICT(app_id, user_id, tag_id, conv_type, target_id, channel_id) DO UPDATE SET
                            is_top = 0, linked_at = excluded.linked_at, removed = 0, version = excluded.version
                        """).execute(arguments: [appId, userId, tagId, conversation.type.rawValue, conversation.targetId, conversation.channelId,
                                                 now, version])
                    delta.links.append(ConversationTagLinkRecord(tagId: tagId, conversation: conversation, isTop: false, removed: false,
                                                                 version: UInt64(version), linkedAt: now))
                }
            case .removeConversations(let tagId, let conversations):
                for conversation in conversations.uniqued() {
                    if let current = try link(tagId: tagId, conversation), !current.removed { try unlink(current) }
                }
            case .removeTags(let conversation, let tagIds):
                for tagId in Set(tagIds).sorted() {
                    if let current = try link(tagId: tagId, conversation), !current.removed { try unlink(current) }
                }
            case .setTopInTag(let tagId, let conversation, let isTop):
                guard let existing = try link(tagId: tagId, conversation), !existing.removed else {
                    throw StoreRefusal.conversationNotInTag(tagId: tagId, type: conversation.type, targetId: conversation.targetId)
                }
                guard existing.isTop != isTop else { return }
                try db.execute(sql: """
                    UPDATE conversation_tag_links SET is_top = ?, version = ?
                    WHERE app_id = ? AND user_id = ? AND tag_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                    """, arguments: [isTop, stamp(), appId, userId, tagId, conversation.type.rawValue, conversation.targetId, conversation.channelId])
                delta.links.append(try link(tagId: tagId, conversation)!)
            }
        }

        /// Stores the new version (if anything changed) and returns the delta.
        mutating func finish() throws -> ConversationStateDeltaRecord {
            if next != previous {
                try db.execute(sql: """
                    INSERT INTO conversation_state_users (app_id, user_id, version) VALUES (?, ?, ?)
                    ON CONFLICT(app_id, user_id) DO UPDATE SET version = excluded.version
                    """, arguments: [appId, userId, Int64(next)])
            }
            delta.previousVersion = previous
            delta.version = next
            return delta
        }

        private mutating func setting(_ conversation: ConversationIdentifier, column: String, value: Int) throws {
            try db.execute(sql: """
                INSERT INTO conversation_settings (app_id, user_id, conv_type, target_id, channel_id, unpush_level, is_top, version, updated_at)
                VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?)
                ON CONFLICT(app_id, user_id, conv_type, target_id, channel_id) DO NOTHING
                """, arguments: [appId, userId, conversation.type.rawValue, conversation.targetId, conversation.channelId, 0, now])
            try db.execute(sql: """
                UPDATE conversation_settings SET \(column) = ?, version = ?, updated_at = ?
                WHERE app_id = ? AND user_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """, arguments: [value, stamp(), now, appId, userId, conversation.type.rawValue, conversation.targetId, conversation.channelId])
            let row = try Row.fetchOne(db, sql: """
                SELECT \(SQLiteStore.settingColumns) FROM conversation_settings
                WHERE app_id = ? AND user_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """, arguments: [appId, userId, conversation.type.rawValue, conversation.targetId, conversation.channelId])!
            delta.settings.append(SQLiteStore.setting(row))
        }

        /// Marks a link removed. The statement is prepared once per connection and the changed row
        /// is known without reading it back: removing a tag of 15,000 conversations is 15,000 of these.
        private mutating func unlink(_ link: ConversationTagLinkRecord) throws {
            let conversation = link.conversation
            let version = stamp()
            try db.cachedStatement(sql: """
                UPDATE conversation_tag_links SET removed = 1, is_top = 0, version = ?
                WHERE app_id = ? AND user_id = ? AND tag_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """).execute(arguments: [version, appId, userId, link.tagId, conversation.type.rawValue, conversation.targetId, conversation.channelId])
            var removed = link
            removed.removed = true
            removed.isTop = false
            removed.version = UInt64(version)
            delta.links.append(removed)
        }

        private func tag(_ tagId: String) throws -> ConversationTagRecord? {
            try Row.fetchOne(db, sql: "SELECT \(SQLiteStore.tagColumns) FROM conversation_tags WHERE app_id = ? AND user_id = ? AND tag_id = ?",
                             arguments: [appId, userId, tagId]).map(SQLiteStore.tag)
        }

        private func link(tagId: String, _ conversation: ConversationIdentifier) throws -> ConversationTagLinkRecord? {
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT \(SQLiteStore.linkColumns) FROM conversation_tag_links
                WHERE app_id = ? AND user_id = ? AND tag_id = ? AND conv_type = ? AND target_id = ? AND channel_id = ?
                """), arguments: [appId, userId, tagId, conversation.type.rawValue, conversation.targetId, conversation.channelId])
                .map(SQLiteStore.link)
        }

        private func links(tagId: String) throws -> [ConversationTagLinkRecord] {
            try Row.fetchAll(db, sql: """
                SELECT \(SQLiteStore.linkColumns) FROM conversation_tag_links WHERE app_id = ? AND user_id = ? AND tag_id = ?
                ORDER BY version
                """, arguments: [appId, userId, tagId]).map(SQLiteStore.link)
        }
    }

    // MARK: rows

    static let settingColumns = "conv_type, target_id, channel_id, unpush_level, is_top, version, updated_at"
    static let tagColumns = "tag_id, name, created_at, removed, version"
    static let linkColumns = "tag_id, conv_type, target_id, channel_id, is_top, linked_at, removed, version"

    static func version(_ db: Database, appId: Int64, userId: String) throws -> UInt64 {
        let version = try Int64.fetchOne(db, sql: "SELECT version FROM conversation_state_users WHERE app_id = ? AND user_id = ?",
                                         arguments: [appId, userId]) ?? 0
        return UInt64(max(0, version))
    }

    static func quietHoursRecord(_ db: Database, appId: Int64, userId: String) throws -> QuietHoursRecord? {
        guard let row = try Row.fetchOne(db, sql: """
            SELECT quiet_start, quiet_span, quiet_level, quiet_time_zone, quiet_version FROM conversation_state_users
            WHERE app_id = ? AND user_id = ? AND quiet_version > 0
            """, arguments: [appId, userId]) else { return nil }
        let version = UInt64(max(0, row["quiet_version"] as Int64))
        guard let start: String = row["quiet_start"] else { return QuietHoursRecord(hours: nil, version: version) }
        let hours = QuietHours(startTime: start, spanMinutes: row["quiet_span"],
                               level: PushNotificationLevel(rawValue: row["quiet_level"]) ?? .blocked,
                               timeZone: row["quiet_time_zone"])
        return QuietHoursRecord(hours: hours, version: version)
    }

    static func conversation(_ row: Row) -> ConversationIdentifier {
        ConversationIdentifier(ConversationType(rawValue: row["conv_type"]) ?? .private, targetId: row["target_id"], channelId: row["channel_id"])
    }

    static func setting(_ row: Row) -> ConversationSettingRecord {
        ConversationSettingRecord(conversation: conversation(row), level: PushNotificationLevel(rawValue: row["unpush_level"]) ?? .default,
                                  isTop: row["is_top"], version: UInt64(max(0, row["version"] as Int64)), updatedAt: row["updated_at"])
    }

    static func tag(_ row: Row) -> ConversationTagRecord {
        ConversationTagRecord(tagId: row["tag_id"], name: row["name"], createdAt: row["created_at"], removed: row["removed"],
                              version: UInt64(max(0, row["version"] as Int64)))
    }

    static func link(_ row: Row) -> ConversationTagLinkRecord {
        ConversationTagLinkRecord(tagId: row["tag_id"], conversation: conversation(row), isTop: row["is_top"], removed: row["removed"],
                                  version: UInt64(max(0, row["version"] as Int64)), linkedAt: row["linked_at"])
    }
}
