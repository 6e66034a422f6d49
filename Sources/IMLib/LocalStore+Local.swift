import Foundation
import GRDB
import IMCore

/// The local-only features of the database: unread counts up to a time, drafts, inserted messages,
/// local deletes and full-text search.
///
/// Search runs on an FTS5 table, `message_search`, whose rowid is the message id. Triggers on
/// `messages` keep it in step with every insert, delete and content change, whichever code path
/// makes it, by calling `imlib_search_words(object_name, content)`: a SQL function each connection
/// of the pool gets, which decodes the content with the type registry and returns its searchable
/// words as `SearchText` indexes them (NULL for a type that is unknown or not searchable).
extension LocalStore {
    static func configuration(registry: MessageTypeRegistry) -> Configuration {
        var configuration = Configuration()
        let searchWords = DatabaseFunction("imlib_search_words", argumentCount: 2, pure: false) { values in
            guard let objectName = String.fromDatabaseValue(values[0]),
                  let data = Data.fromDatabaseValue(values[1]),
                  let words = registry.decode(objectName: objectName, data: data)?.searchableWords else { return nil }
            let nonEmpty = words.filter { !$0.isEmpty }
            return nonEmpty.isEmpty ? nil : SearchText.indexed(nonEmpty)
        }
        configuration.prepareDatabase { db in
            db.add(function: searchWords)
        }
        return configuration
    }

    static func migrateLocalFeatures(_ db: Database) throws {
        try db.execute(sql: """
            CREATE VIRTUAL TABLE message_search USING fts5(words, tokenize = 'unicode61 remove_diacritics 2');
            CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
                INSERT INTO message_search (rowid, words)
                SELECT new.id, words FROM (SELECT imlib_search_words(new.object_name, new.content) AS words) WHERE words IS NOT NULL;
            END;
            CREATE TRIGGER message_search_update AFTER UPDATE OF object_name, content ON messages BEGIN
                DELETE FROM message_search WHERE rowid = old.id;
                INSERT INTO message_search (rowid, words)
                SELECT new.id, words FROM (SELECT imlib_search_words(new.object_name, new.content) AS words) WHERE words IS NOT NULL;
            END;
            CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
                DELETE FROM message_search WHERE rowid = old.id;
            END;
            INSERT INTO message_search (rowid, words)
            SELECT id, words FROM (SELECT id, imlib_search_words(object_name, content) AS words FROM messages) WHERE words IS NOT NULL;
            -- Unread received messages only: recounting a conversation reads these, not its history.
            CREATE INDEX messages_unread ON messages (conv_type, target_id, channel_id, sent_time) WHERE direction = 2 AND is_read = 0;
            """)
    }

    // MARK: unread counts

    /// Unread messages over every conversation.
    func totalUnreadCount() async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(unread_count), 0) FROM conversations") ?? 0
        }
    }

    func unreadCount(type: ConversationType, targetId: String, channelId: String) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT unread_count FROM conversations WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                             arguments: [type.rawValue, targetId, channelId]) ?? 0
        }
    }

    /// Marks the conversation's received messages sent at or before `time` (0: all) read, and
    /// recounts its unread and mention counts. Returns false if there is no such conversation.
    /// Also for another device of the user reporting that it read the conversation up to a time.
    @discardableResult
    func markRead(type: ConversationType, targetId: String, channelId: String, upTo time: Int64) async throws -> Bool {
        try await write { [self] db in try markRead(type: type, targetId: targetId, channelId: channelId, upTo: time, db) }
    }

    @discardableResult
    func markRead(type: ConversationType, targetId: String, channelId: String, upTo time: Int64, _ db: Database) throws -> Bool {
        try db.execute(sql: """
            UPDATE messages SET is_read = 1
            WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND direction = 2 AND is_read = 0 AND (? = 0 OR sent_time <= ?)
            """, arguments: [type.rawValue, targetId, channelId, time, time])
        return try recountUnread(type: type, targetId: targetId, channelId: channelId, db)
    }

    /// Sets a conversation's unread and mention counts from its unread, counted, received messages.
    /// Returns false if there is no such conversation.
    @discardableResult
    func recountUnread(type: ConversationType, targetId: String, channelId: String, _ db: Database) throws -> Bool {
        let key: StatementArguments = [type.rawValue, targetId, channelId]
        let unreadFilter = """
            FROM messages WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND direction = 2 AND is_read = 0 AND (flags & ?) != 0
            """
        let arguments = key + [Int64(PersistentFlag.isCounted.rawValue)]
        let unread: Int
        var mentions = 0
        if type == .group {
            // Only group messages mention: read their contents for the mentions of this user.
            let contents = try Data.fetchAll(db, sql: "SELECT content \(unreadFilter)", arguments: arguments)
            unread = contents.count
            mentions = contents.count(where: { MentionedInfo.of(content: $0)?.mentions(userId) == true })
        } else {
            unread = try Int.fetchOne(db, sql: "SELECT COUNT(*) \(unreadFilter)", arguments: arguments) ?? 0
        }
        try db.execute(sql: "UPDATE conversations SET unread_count = ?, mentioned_count = ? WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                       arguments: [unread, mentions] + key)
        return db.changesCount > 0
    }

    // MARK: drafts

    /// Saves a conversation's text draft (empty clears it). A conversation not in the list is
    /// created, at `now` in the list's order; one in the list keeps its place.
    func saveDraft(type: ConversationType, targetId: String, channelId: String, draft: String, now: Int64) async throws {
        try await write { db in
            try db.execute(sql: """
                INSERT INTO conversations (conv_type, target_id, channel_id, sort_time, draft) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(conv_type, target_id, channel_id) DO UPDATE SET draft = excluded.draft
                """, arguments: [type.rawValue, targetId, channelId, now, draft])
        }
    }

    /// The draft of a conversation, or nil when it has none.
    func draft(type: ConversationType, targetId: String, channelId: String) async throws -> String? {
        try await read { db in
            let draft = try String.fetchOne(db, sql: "SELECT draft FROM conversations WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                                            arguments: [type.rawValue, targetId, channelId])
            return draft?.isEmpty == false ? draft : nil
        }
    }

    /// Clears a conversation's draft; false if there is no such conversation.
    func clearDraft(type: ConversationType, targetId: String, channelId: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE conversations SET draft = '' WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                           arguments: [type.rawValue, targetId, channelId])
            return db.changesCount > 0
        }
    }

    // MARK: inserted messages

    /// Stores a message made on this device that the server never sees (no messageUId), in its
    /// conversation's history and list; an unread, counted received one counts as unread.
    /// Sets a message's local `extra`; false when there is no such message.
    func setExtra(messageId: Int64, value: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE messages SET extra = ? WHERE id = ?", arguments: [value, messageId])
            return db.changesCount > 0
        }
    }

    func insertLocal(_ message: Message) async throws -> Message {
        try await write { [self] db in
            var message = message
            try insert(message, db)
            message.messageId = db.lastInsertedRowID
            let counted = message.direction == .receive && !message.isRead && message.flags.contains(.isCounted)
            let mentioned = counted && message.conversationType == .group
                && MentionedInfo.of(content: message.contentData)?.mentions(userId) == true
            try touchConversation(message, counted: counted, mentioned: mentioned, db)
            return message
        }
    }

    // MARK: local deletes

    /// Deletes messages by local id; their conversations' latest message and counts follow.
    /// Returns how many were deleted.
    func deleteMessages(ids: [Int64]) async throws -> Int {
        try await write { [self] db in
            var deleted = 0
            for start in stride(from: 0, to: ids.count, by: 500) {
                let chunk = Array(ids[start..<min(start + 500, ids.count)])
                let marks = chunk.map { _ in "?" }.joined(separator: ",")
                let conversations = try Row.fetchAll(db, sql: """
                    SELECT DISTINCT conv_type, target_id, channel_id FROM messages WHERE id IN (\(marks))
                    """, arguments: StatementArguments(chunk))
                try db.execute(sql: """
                    DELETE FROM message_readers WHERE uid IN (SELECT uid FROM messages WHERE id IN (\(marks)) AND uid IS NOT NULL)
                    """, arguments: StatementArguments(chunk))
                try db.execute(sql: "DELETE FROM messages WHERE id IN (\(marks))", arguments: StatementArguments(chunk))
                deleted += db.changesCount
                for row in conversations {
                    try refreshConversation(type: ConversationType(rawValue: row["conv_type"]) ?? .private,
                                            targetId: row["target_id"], channelId: row["channel_id"], db)
                }
            }
            return deleted
        }
    }

    /// Deletes a conversation's local messages sent at or before `time` (0: all of them); its latest
    /// message and counts follow, and the conversation stays in the list. Returns how many were
    /// deleted. For `clearMessages` and the local part of `clearHistoryMessages`.
    @discardableResult
    func deleteMessages(type: ConversationType, targetId: String, channelId: String, sentAtOrBefore time: Int64) async throws -> Int {
        try await write { [self] db in
            try deleteMessages(type: type, targetId: targetId, channelId: channelId, sentAtOrBefore: time, db)
        }
    }

    @discardableResult
    func deleteMessages(type: ConversationType, targetId: String, channelId: String, sentAtOrBefore time: Int64, _ db: Database) throws -> Int {
        let arguments: StatementArguments = [type.rawValue, targetId, channelId, time, time]
        let scope = "conv_type = ? AND target_id = ? AND channel_id = ? AND (? = 0 OR sent_time <= ?)"
        try db.execute(sql: "DELETE FROM message_readers WHERE uid IN (SELECT uid FROM messages WHERE \(scope) AND uid IS NOT NULL)",
                       arguments: arguments)
        try db.execute(sql: "DELETE FROM messages WHERE \(scope)", arguments: arguments)
        let deleted = db.changesCount
        try refreshConversation(type: type, targetId: targetId, channelId: channelId, db)
        return deleted
    }

    /// Replaces a stored message's content in place (a recalled message becomes its recall
    /// notification), optionally with new flags; the search index and the conversation's counts
    /// follow. Returns false if there is no such message.
    @discardableResult
    func replaceContent(messageId: Int64, objectName: String, data: Data, flags: PersistentFlag? = nil) async throws -> Bool {
        try await write { [self] db in try replaceContent(messageId: messageId, objectName: objectName, data: data, flags: flags, db) }
    }

    @discardableResult
    func replaceContent(messageId: Int64, objectName: String, data: Data, flags: PersistentFlag? = nil, _ db: Database) throws -> Bool {
        guard let row = try Row.fetchOne(db, sql: "SELECT conv_type, target_id, channel_id, flags FROM messages WHERE id = ?",
                                         arguments: [messageId]) else { return false }
        let newFlags = flags.map { Int64($0.rawValue) } ?? (row["flags"] as Int64)
        try db.execute(sql: "UPDATE messages SET object_name = ?, content = ?, flags = ? WHERE id = ?",
                       arguments: [objectName, data, newFlags, messageId])
        try recountUnread(type: ConversationType(rawValue: row["conv_type"]) ?? .private, targetId: row["target_id"],
                          channelId: row["channel_id"], db)
        return true
    }

    /// Points a conversation at its newest remaining message (keeping its time in the list when none
    /// remains) and recounts it.
    func refreshConversation(type: ConversationType, targetId: String, channelId: String, _ db: Database) throws {
        let key: StatementArguments = [type.rawValue, targetId, channelId]
        let latest = try Row.fetchOne(db, sql: """
            SELECT id, sent_time FROM messages WHERE conv_type = ? AND target_id = ? AND channel_id = ?
            ORDER BY sent_time DESC, id DESC LIMIT 1
            """, arguments: key)
        if let latest {
            let id: Int64 = latest["id"]
            let sentTime: Int64 = latest["sent_time"]
            try db.execute(sql: "UPDATE conversations SET latest_message_id = ?, sort_time = ? WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                           arguments: [id, sentTime] + key)
        } else {
            try db.execute(sql: "UPDATE conversations SET latest_message_id = 0 WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                           arguments: key)
        }
        try recountUnread(type: type, targetId: targetId, channelId: channelId, db)
    }

    // MARK: search

    /// Up to `count` messages of a conversation whose searchable words contain the keyword, sent
    /// before `before` (0: no limit), newest first.
    func searchMessages(type: ConversationType, targetId: String, channelId: String, keyword: String, count: Int, before: Int64) async throws -> [Message] {
        guard let query = SearchText.query(keyword) else { return [] }
        return try await read { [self] db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.messageColumns) FROM messages
                WHERE id IN (SELECT rowid FROM message_search WHERE message_search MATCH ?)
                    AND conv_type = ? AND target_id = ? AND channel_id = ? AND (? = 0 OR sent_time < ?)
                ORDER BY sent_time DESC, id DESC LIMIT ?
                """, arguments: [query, type.rawValue, targetId, channelId, before, before, count]).map { self.message($0) }
        }
    }

    /// Up to `count` messages of a conversation sent by `senderId` before `before` (0: no limit),
    /// newest first.
    func searchMessages(type: ConversationType, targetId: String, channelId: String, senderId: String, count: Int, before: Int64) async throws -> [Message] {
        try await read { [self] db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.messageColumns) FROM messages
                WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND sender_id = ? AND (? = 0 OR sent_time < ?)
                ORDER BY sent_time DESC, id DESC LIMIT ?
                """, arguments: [type.rawValue, targetId, channelId, senderId, before, before, count]).map { self.message($0) }
        }
    }

    /// The listed conversations of these types holding messages (of these object names, if given)
    /// that contain the keyword, newest first, each with its number of such messages.
    func searchConversations(types: [ConversationType], objectNames: [String], keyword: String) async throws -> [(Conversation, Int)] {
        guard !types.isEmpty, let query = SearchText.query(keyword) else { return [] }
        return try await read { db in
            var arguments: [any DatabaseValueConvertible] = [query]
            arguments += types.map(\.rawValue)
            var nameFilter = ""
            if !objectNames.isEmpty {
                nameFilter = "AND hit.object_name IN (\(objectNames.map { _ in "?" }.joined(separator: ",")))"
                arguments += objectNames
            }
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.conversationColumns), found.matches FROM (
                    SELECT hit.conv_type, hit.target_id, hit.channel_id, COUNT(*) AS matches FROM messages hit
                    WHERE hit.id IN (SELECT rowid FROM message_search WHERE message_search MATCH ?)
                        AND hit.conv_type IN (\(types.map { _ in "?" }.joined(separator: ","))) \(nameFilter)
                    GROUP BY hit.conv_type, hit.target_id, hit.channel_id
                ) found
                JOIN conversations c ON c.conv_type = found.conv_type AND c.target_id = found.target_id AND c.channel_id = found.channel_id
                LEFT JOIN messages m ON m.id = c.latest_message_id
                ORDER BY c.sort_time DESC
                """, arguments: StatementArguments(arguments)).map { (Self.conversation($0), $0["matches"]) }
        }
    }
}
