import Foundation
import GRDB
import IMCore
import IMWire

/// The user's conversation state as the server keeps it, mirrored on this device:
///
/// - `conversation_state`: each conversation's (and, with an empty target, each type's)
///   do-not-disturb level and pin, with the server version of the row. `conversations.is_top` and
///   `conversations.notification_level` copy it; a trigger copies it into a conversation row that
///   appears later (the first message of a muted or pinned conversation), so a removed and re-created
///   conversation keeps its settings.
/// - `conversation_tags` and `conversation_tag_links`: tags and the conversations in them;
///   removed ones stay as tombstones so an older row arriving late cannot bring them back.
/// - `meta`: the state version applied (`conversation_state_version`) and the quiet hours.
///
/// Every row is applied only if its version is newer than the one held, so pages, change replies
/// and notices may arrive in any order.
extension LocalStore {
    static func createConversationState(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE conversation_state (
                conv_type INTEGER NOT NULL, target_id TEXT NOT NULL, channel_id TEXT NOT NULL DEFAULT '',
                notification_level INTEGER NOT NULL DEFAULT 0, is_top INTEGER NOT NULL DEFAULT 0,
                version INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (conv_type, target_id, channel_id)
            ) WITHOUT ROWID;
            CREATE TRIGGER conversations_take_state AFTER INSERT ON conversations
            WHEN EXISTS (SELECT 1 FROM conversation_state s
                         WHERE s.conv_type = NEW.conv_type AND s.target_id = NEW.target_id AND s.channel_id = NEW.channel_id)
            BEGIN
                UPDATE conversations SET
                    notification_level = (SELECT s.notification_level FROM conversation_state s
                        WHERE s.conv_type = NEW.conv_type AND s.target_id = NEW.target_id AND s.channel_id = NEW.channel_id),
                    is_top = (SELECT s.is_top FROM conversation_state s
                        WHERE s.conv_type = NEW.conv_type AND s.target_id = NEW.target_id AND s.channel_id = NEW.channel_id)
                WHERE conv_type = NEW.conv_type AND target_id = NEW.target_id AND channel_id = NEW.channel_id;
            END;
            CREATE TABLE conversation_tags (
                tag_id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
                removed INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE conversation_tag_links (
                tag_id TEXT NOT NULL, conv_type INTEGER NOT NULL, target_id TEXT NOT NULL, channel_id TEXT NOT NULL DEFAULT '',
                is_top INTEGER NOT NULL DEFAULT 0, linked_at INTEGER NOT NULL,
                removed INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL,
                PRIMARY KEY (tag_id, conv_type, target_id, channel_id)
            ) WITHOUT ROWID;
            CREATE INDEX conversation_tag_links_by_conversation ON conversation_tag_links (conv_type, target_id, channel_id);
            """)
    }

    /// The highest server state version this device has applied in full.
    func conversationStateVersion() async throws -> UInt64 {
        try await meta("conversation_state_version")
    }

    // MARK: applying server state

    /// What applying a delta did: the changes to report, and whether the device now holds every
    /// change up to the delta's version.
    struct AppliedState {
        var changes: [ConversationStateChange] = []
        var upToDate = false
    }

    /// Applies a page of the state sync: its rows, then the version it reaches.
    func applyConversationStatePage(_ page: Im_ConversationStateDelta) async throws -> AppliedState {
        try await write { db in
            var applied = AppliedState()
            applied.changes = try Self.apply(page, db)
            try Self.raise("conversation_state_version", to: page.version, db)
            applied.upToDate = !page.more
            return applied
        }
    }

    /// Applies the reply to one of this device's own changes. The version moves on only if this
    /// device held exactly the version before the change; otherwise something else changed in
    /// between and `upToDate` is false (the caller pulls).
    func applyConversationStateEdit(_ delta: Im_ConversationStateDelta) async throws -> AppliedState {
        try await write { db in
            var applied = AppliedState()
            applied.changes = try Self.apply(delta, db)
            let held: UInt64 = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'conversation_state_version'")
                .flatMap(UInt64.init) ?? 0
            if held >= delta.version {
                applied.upToDate = true
            } else if held == delta.previousVersion {
                try Self.raise("conversation_state_version", to: delta.version, db)
                applied.upToDate = true
            }
            return applied
        }
    }

    private static func apply(_ delta: Im_ConversationStateDelta, _ db: Database) throws -> [ConversationStateChange] {
        var changes: [ConversationStateChange] = []
        for setting in delta.settings {
            changes += try apply(setting, db)
        }
        if delta.hasQuietHours {
            let state = delta.quietHours
            let held: UInt64 = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'quiet_hours_version'")
                .flatMap(UInt64.init) ?? 0
            if state.version > held {
                let hours = state.set
                    ? QuietHours(startTime: state.startTime, spanMinutes: Int(state.spanMins),
                                 level: PushNotificationLevel(rawValue: Int(state.level)) ?? .blocked,
                                 timeZone: state.timeZone.isEmpty ? nil : state.timeZone)
                    : nil
                let json = try hours.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) } ?? ""
                try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('quiet_hours', ?), ('quiet_hours_version', ?)",
                               arguments: [json, String(state.version)])
                changes.append(.quietHours(hours))
            }
        }
        for tag in delta.tags {
            try db.execute(sql: """
                INSERT INTO conversation_tags (tag_id, name, created_at, removed, version) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(tag_id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at,
                    removed = excluded.removed, version = excluded.version
                WHERE excluded.version > conversation_tags.version
                """, arguments: [tag.tagID, tag.name, tag.createdAt, tag.removed, Int64(clamping: tag.version)])
            guard db.changesCount > 0 else { continue }
            changes.append(tag.removed ? .tagRemoved(tagId: tag.tagID) : .tag(tagId: tag.tagID, name: tag.name))
        }
        for link in delta.links {
            guard let conversation = try? link.conversation.identifier() else { continue }
            try db.execute(sql: """
                INSERT INTO conversation_tag_links (tag_id, conv_type, target_id, channel_id, is_top, linked_at, removed, version)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(tag_id, conv_type, target_id, channel_id) DO UPDATE SET is_top = excluded.is_top,
                    linked_at = excluded.linked_at, removed = excluded.removed, version = excluded.version
                WHERE excluded.version > conversation_tag_links.version
                """, arguments: [link.tagID, conversation.type.rawValue, conversation.targetId, conversation.channelId,
                                 link.isTop, link.linkedAt, link.removed, Int64(clamping: link.version)])
            guard db.changesCount > 0 else { continue }
            changes.append(link.removed ? .conversationUntagged(tagId: link.tagID, conversation)
                                        : .conversationTagged(tagId: link.tagID, conversation, isTopInTag: link.isTop))
        }
        return changes
    }

    private static func apply(_ setting: Im_ConversationSetting, _ db: Database) throws -> [ConversationStateChange] {
        guard let conversation = try? setting.conversation.identifier() else { return [] }
        let key: StatementArguments = [conversation.type.rawValue, conversation.targetId, conversation.channelId]
        let old = try Row.fetchOne(db, sql: """
            SELECT notification_level, is_top, version FROM conversation_state WHERE conv_type = ? AND target_id = ? AND channel_id = ?
            """, arguments: key)
        let oldVersion: Int64 = old?["version"] ?? 0
        guard Int64(clamping: setting.version) > oldVersion else { return [] }
        let oldLevel: Int = old?["notification_level"] ?? 0
        let oldTop: Bool = old?["is_top"] ?? false
        let level = PushNotificationLevel(rawValue: Int(setting.notificationLevel)) ?? .default
        try db.execute(sql: """
            INSERT OR REPLACE INTO conversation_state (conv_type, target_id, channel_id, notification_level, is_top, version)
            VALUES (?, ?, ?, ?, ?, ?)
            """, arguments: key + [level.rawValue, setting.isTop, Int64(clamping: setting.version)])
        var changes: [ConversationStateChange] = []
        if oldLevel != level.rawValue { changes.append(.notificationLevel(conversation, level)) }
        guard !conversation.targetId.isEmpty else { return changes }
        if oldTop != setting.isTop { changes.append(.top(conversation, isTop: setting.isTop)) }
        try db.execute(sql: """
            UPDATE conversations SET notification_level = ?, is_top = ? WHERE conv_type = ? AND target_id = ? AND channel_id = ?
            """, arguments: [level.rawValue, setting.isTop] + key)
        // A pinned conversation shows in the list even before it has a message here.
        if db.changesCount == 0 && setting.isTop {
            try db.execute(sql: "INSERT INTO conversations (conv_type, target_id, channel_id) VALUES (?, ?, ?)", arguments: key)
        }
        return changes
    }

    // MARK: reading

    /// The conversation's own level, or nil when none was ever set.
    func notificationLevel(_ conversation: ConversationIdentifier) async throws -> PushNotificationLevel? {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT notification_level FROM conversation_state WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                             arguments: [conversation.type.rawValue, conversation.targetId, conversation.channelId])
                .flatMap(PushNotificationLevel.init(rawValue:))
        }
    }

    /// The level in force for a conversation: its own if set, else its type's.
    static let effectiveLevel = """
        CASE WHEN c.notification_level <> 0 THEN c.notification_level ELSE COALESCE((SELECT t.notification_level
            FROM conversation_state t WHERE t.conv_type = c.conv_type AND t.target_id = '' AND t.channel_id = ''), 0) END
        """

    /// Conversations of these types that are in do-not-disturb (their own level or their type's).
    func blockedConversations(types: [ConversationType]) async throws -> [Conversation] {
        try await listConversations(types: types, filter: "(\(Self.effectiveLevel)) >= 1")
    }

    func topConversations(types: [ConversationType]) async throws -> [Conversation] {
        try await listConversations(types: types, filter: "c.is_top = 1")
    }

    private func listConversations(types: [ConversationType], filter: String) async throws -> [Conversation] {
        guard !types.isEmpty else { return [] }
        return try await read { db in
            let marks = types.map { _ in "?" }.joined(separator: ",")
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.conversationColumns) FROM conversations c LEFT JOIN messages m ON m.id = c.latest_message_id
                WHERE c.conv_type IN (\(marks)) AND \(filter)
                ORDER BY c.is_top DESC, c.sort_time DESC
                """, arguments: StatementArguments(types.map(\.rawValue))).map(Self.conversation)
        }
    }

    /// Unread messages of these types' conversations, without do-not-disturb ones unless `containBlocked`.
    func unreadCount(types: [ConversationType], containBlocked: Bool) async throws -> Int {
        guard !types.isEmpty else { return 0 }
        return try await read { db in
            let marks = types.map { _ in "?" }.joined(separator: ",")
            return try Int.fetchOne(db, sql: """
                SELECT COALESCE(SUM(c.unread_count), 0) FROM conversations c
                WHERE c.conv_type IN (\(marks)) \(containBlocked ? "" : "AND (\(Self.effectiveLevel)) < 1")
                """, arguments: StatementArguments(types.map(\.rawValue))) ?? 0
        }
    }

    func quietHours() async throws -> QuietHours? {
        try await read { db in
            guard let json = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'quiet_hours'"), !json.isEmpty else { return nil }
            return try? JSONDecoder().decode(QuietHours.self, from: Data(json.utf8))
        }
    }

    func tags() async throws -> [ConversationTag] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT t.tag_id, t.name, t.created_at,
                    (SELECT COUNT(*) FROM conversation_tag_links l WHERE l.tag_id = t.tag_id AND l.removed = 0) AS count
                FROM conversation_tags t WHERE t.removed = 0 ORDER BY t.created_at, t.tag_id
                """).map { ConversationTag(tagId: $0["tag_id"], tagName: $0["name"], count: $0["count"], timestamp: $0["created_at"]) }
        }
    }

    func tag(_ tagId: String) async throws -> ConversationTag? {
        try await tags().first { $0.tagId == tagId }
    }

    func tags(of conversation: ConversationIdentifier) async throws -> [ConversationTagInfo] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT t.tag_id, t.name, t.created_at, l.is_top,
                    (SELECT COUNT(*) FROM conversation_tag_links n WHERE n.tag_id = t.tag_id AND n.removed = 0) AS count
                FROM conversation_tag_links l JOIN conversation_tags t ON t.tag_id = l.tag_id AND t.removed = 0
                WHERE l.conv_type = ? AND l.target_id = ? AND l.channel_id = ? AND l.removed = 0
                ORDER BY t.created_at, t.tag_id
                """, arguments: [conversation.type.rawValue, conversation.targetId, conversation.channelId]).map {
                ConversationTagInfo(tag: ConversationTag(tagId: $0["tag_id"], tagName: $0["name"], count: $0["count"], timestamp: $0["created_at"]),
                                    isTop: $0["is_top"])
            }
        }
    }

    /// A tag's conversations, pinned-in-tag first, then newest first; `before` > 0 pages by the
    /// time of the latest message. Conversations without a message on this device are included
    /// (time 0) so a new device shows the whole tag.
    func conversations(inTag tagId: String, before: Int64, count: Int) async throws -> [Conversation] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT l.conv_type, l.target_id, l.channel_id,
                    COALESCE(c.unread_count, 0) AS unread_count, COALESCE(c.is_top, 0) AS is_top,
                    COALESCE(c.sort_time, 0) AS sort_time, COALESCE(c.latest_message_id, 0) AS latest_message_id,
                    COALESCE(c.draft, '') AS draft, m.object_name, m.sender_id,
                    COALESCE(c.mentioned_count, 0) AS mentioned_count,
                    COALESCE(c.notification_level, s.notification_level, 0) AS notification_level
                FROM conversation_tag_links l
                LEFT JOIN conversations c ON c.conv_type = l.conv_type AND c.target_id = l.target_id AND c.channel_id = l.channel_id
                LEFT JOIN messages m ON m.id = c.latest_message_id
                LEFT JOIN conversation_state s ON s.conv_type = l.conv_type AND s.target_id = l.target_id AND s.channel_id = l.channel_id
                WHERE l.tag_id = ? AND l.removed = 0 AND (? <= 0 OR COALESCE(c.sort_time, 0) < ?)
                ORDER BY l.is_top DESC, COALESCE(c.sort_time, 0) DESC, l.linked_at DESC
                LIMIT ?
                """, arguments: [tagId, before, before, count]).map(Self.conversation)
        }
    }

    /// Unread messages in a tag's conversations, without do-not-disturb ones unless `containBlocked`.
    func unreadCount(inTag tagId: String, containBlocked: Bool) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: """
                SELECT COALESCE(SUM(c.unread_count), 0) FROM conversation_tag_links l
                JOIN conversations c ON c.conv_type = l.conv_type AND c.target_id = l.target_id AND c.channel_id = l.channel_id
                WHERE l.tag_id = ? AND l.removed = 0 \(containBlocked ? "" : "AND (\(Self.effectiveLevel)) < 1")
                """, arguments: [tagId]) ?? 0
        }
    }

}
