import Foundation
import GRDB
import IMCore

/// The client's own database, one per app and user: messages, conversations and the sync watermark.
final class LocalStore: Sendable {
    let pool: DatabasePool
    let registry: MessageTypeRegistry
    let userId: String
    /// The folder of this user's database (and of the media files downloaded for it).
    let directory: URL

    init(directory: URL, userId: String, registry: MessageTypeRegistry) throws {
        self.userId = userId
        self.directory = directory
        self.registry = registry
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            pool = try DatabasePool(path: directory.appendingPathComponent("imlib.sqlite").path,
                                    configuration: Self.configuration(registry: registry))
            try Self.migrator.migrate(pool)
        } catch {
            throw IMError(.databaseError, "cannot open the local database in \(directory.path): \(error)")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE messages (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    conv_type INTEGER NOT NULL,
                    target_id TEXT NOT NULL,
                    channel_id TEXT NOT NULL DEFAULT '',
                    sender_id TEXT NOT NULL,
                    direction INTEGER NOT NULL,
                    object_name TEXT NOT NULL,
                    content BLOB NOT NULL,
                    flags INTEGER NOT NULL,
                    uid TEXT UNIQUE,
                    client_msg_id TEXT NOT NULL,
                    sent_time INTEGER NOT NULL,
                    received_time INTEGER NOT NULL,
                    sent_status INTEGER NOT NULL,
                    is_read INTEGER NOT NULL DEFAULT 0,
                    push_content TEXT NOT NULL DEFAULT '',
                    push_data TEXT NOT NULL DEFAULT ''
                );
                CREATE INDEX messages_by_conversation ON messages (conv_type, target_id, channel_id, sent_time, id);
                CREATE INDEX messages_unsent_by_client_id ON messages (client_msg_id) WHERE uid IS NULL;
                CREATE TABLE conversations (
                    conv_type INTEGER NOT NULL,
                    target_id TEXT NOT NULL,
                    channel_id TEXT NOT NULL DEFAULT '',
                    latest_message_id INTEGER NOT NULL DEFAULT 0,
                    sort_time INTEGER NOT NULL DEFAULT 0,
                    unread_count INTEGER NOT NULL DEFAULT 0,
                    is_top INTEGER NOT NULL DEFAULT 0,
                    draft TEXT NOT NULL DEFAULT '',
                    PRIMARY KEY (conv_type, target_id, channel_id)
                ) WITHOUT ROWID;
                CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2-groups") { db in
            try db.execute(sql: """
                ALTER TABLE conversations ADD COLUMN mentioned_count INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE messages ADD COLUMN directed_user_ids TEXT NOT NULL DEFAULT '';
                ALTER TABLE messages ADD COLUMN receipt_requested INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE messages ADD COLUMN receipt_responded INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE message_readers (
                    uid TEXT NOT NULL, reader_id TEXT NOT NULL, read_time INTEGER NOT NULL,
                    PRIMARY KEY (uid, reader_id)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3-conversation-state") { db in
            // RongCloud's RCPushNotificationLevel of the conversation as the server keeps it for this
            // user: -1 all messages, 0 default (the app-level setting), 1 mentions, 2 mentions of
            // this user, 4 @all only, 5 blocked. A level of 1 or more is do-not-disturb.
            try db.execute(sql: "ALTER TABLE conversations ADD COLUMN notification_level INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v4-local") { db in
            try LocalStore.migrateLocalFeatures(db)
        }
        migrator.registerMigration("v5-conversation-tags") { db in
            try Self.createConversationState(db)
        }
        migrator.registerMigration("v6-message-lifecycle") { db in
            try db.execute(sql: """
                ALTER TABLE messages ADD COLUMN can_include_expansion INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE messages ADD COLUMN expansion TEXT;
                -- A read receipt marks this user's sent, not yet read messages up to a time.
                CREATE INDEX messages_sent_unread ON messages (conv_type, target_id, channel_id, sent_time)
                    WHERE direction = 1 AND sent_status = 30;
                """)
        }
        migrator.registerMigration("v7-push") { db in
            try db.execute(sql: """
                ALTER TABLE messages ADD COLUMN push_config BLOB;
                ALTER TABLE messages ADD COLUMN disable_notification INTEGER NOT NULL DEFAULT 0;
                """)
        }
        migrator.registerMigration("v8-local-extra") { db in
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN extra TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v9-media") { db in
            // Where a media message's file is on this device (sent from, or downloaded to).
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN media_path TEXT")
        }
        return migrator
    }

    // MARK: access

    /// A read through GRDB's async access: the client's actor is suspended, not blocked, while it
    /// runs on one of the pool's reader connections.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.read(body)
    }

    /// A write transaction through GRDB's async access: the client's actor is suspended, not
    /// blocked, through the write and its commit.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.write(body)
    }

    // MARK: sync watermark

    func watermark() async throws -> UInt64 {
        try await meta("sync_watermark")
    }

    /// Whether this database ever completed a sync page (false on a new install): the server then
    /// sends only its compensation window.
    func hasSynced() async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM meta WHERE key = 'sync_watermark'") ?? false }
    }

    /// The seq of the last read receipt of this user's messages pulled from the server.
    func receiptWatermark() async throws -> UInt64 {
        try await meta("receipt_watermark")
    }

    func meta(_ key: String) async throws -> UInt64 {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]).flatMap(UInt64.init) ?? 0
        }
    }

    /// Raises a watermark in `meta` (never lowers it).
    static func raise(_ key: String, to value: UInt64, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO meta (key, value) VALUES (?, ?)
            ON CONFLICT(key) DO UPDATE SET value = CASE
                WHEN CAST(excluded.value AS INTEGER) > CAST(meta.value AS INTEGER) THEN excluded.value ELSE meta.value END
            """, arguments: [key, String(value)])
    }

    // MARK: writes

    /// Stores an outgoing message before it is sent (status `sending`).
    func insertOutgoing(_ message: Message) async throws -> Message {
        try await write { [self] db in
            var message = message
            if message.flags.contains(.isPersisted) {
                try insert(message, db)
                message.messageId = db.lastInsertedRowID
                try touchConversation(message, counted: false, db)
            }
            return message
        }
    }

    func markSent(_ message: Message) async throws {
        guard message.messageId != 0 else { return }
        try await write { [self] db in
            try db.execute(sql: "UPDATE messages SET uid = ?, sent_time = ?, sent_status = ? WHERE id = ?",
                           arguments: [message.messageUId, message.sentTime, SentStatus.sent.rawValue, message.messageId])
            try touchConversation(message, counted: false, db)
        }
    }

    func markFailed(_ messageId: Int64) async throws {
        try await setSentStatus(messageId, .failed)
    }

    func setSentStatus(_ messageId: Int64, _ status: SentStatus) async throws {
        guard messageId != 0 else { return }
        try await write { db in
            try db.execute(sql: "UPDATE messages SET sent_status = ? WHERE id = ?", arguments: [status.rawValue, messageId])
        }
    }

    /// A media message's content once its file is uploaded (URL, thumbnail, size).
    func updateContent(messageId: Int64, data: Data) async throws {
        guard messageId != 0 else { return }
        try await write { db in
            try db.execute(sql: "UPDATE messages SET content = ? WHERE id = ?", arguments: [data, messageId])
        }
    }

    /// Where a media message's file is on this device.
    func setMediaPath(messageId: Int64, path: String?) async throws {
        guard messageId != 0 else { return }
        try await write { db in
            try db.execute(sql: "UPDATE messages SET media_path = ? WHERE id = ?", arguments: [path, messageId])
        }
    }

    /// Stores messages from the server, skipping ones already stored (by messageUId), applies the
    /// commands among them (recall, read status, extensions, receipt requests) to the messages they
    /// name, and advances the watermark, all in one transaction. Returns what changed.
    func storeIncoming(_ messages: [Message], watermark: UInt64?,
                       ultraGroupThroughs: [UltraGroupChannelKey: Int64] = [:]) async throws -> IncomingChanges {
        try await write { [self] db in
            var changes = IncomingChanges()
            for var message in messages {
                if try applySignal(message, &changes, db) { continue }
                if !message.messageUId.isEmpty,
                   try Bool.fetchOne(db, sql: "SELECT 1 FROM messages WHERE uid = ?", arguments: [message.messageUId]) == true {
                    continue
                }
                // This device's own send whose reply was lost: the server's copy completes the local one.
                if message.direction == .send, !message.clientMessageId.isEmpty {
                    try db.execute(
                        sql: "UPDATE messages SET uid = ?, sent_time = ?, sent_status = ? WHERE client_msg_id = ? AND uid IS NULL",
                        arguments: [message.messageUId, message.sentTime, SentStatus.sent.rawValue, message.clientMessageId])
                    if db.changesCount > 0 { continue }
                }
                if message.flags.contains(.isPersisted) {
                    try insert(message, db)
                    message.messageId = db.lastInsertedRowID
                    let counted = message.direction == .receive && message.flags.contains(.isCounted)
                    // A mention of this user (or of everyone) in a group or ultra group channel marks the conversation.
                    let mentioned = counted && (message.conversationType == .group || message.conversationType == .ultraGroup)
                        && MentionedInfo.of(content: message.contentData)?.mentions(userId) == true
                    try touchConversation(message, counted: counted, mentioned: mentioned, db)
                }
                changes.fresh.append(message)
            }
            if let watermark { try Self.raise("sync_watermark", to: watermark, db) }
            try Self.raiseUltraGroupThroughs(ultraGroupThroughs, db)
            return changes
        }
    }

    // MARK: read receipts

    /// Records readers of this user's messages; returns those not known before, by message uid.
    func storeReaders(_ reads: [(uid: String, readerId: String, readTime: Int64)], watermark: UInt64?) async throws -> [String: [String: Int64]] {
        try await write { db in
            var fresh: [String: [String: Int64]] = [:]
            for read in reads {
                try db.execute(sql: "INSERT OR IGNORE INTO message_readers (uid, reader_id, read_time) VALUES (?, ?, ?)",
                               arguments: [read.uid, read.readerId, read.readTime])
                if db.changesCount > 0 { fresh[read.uid, default: [:]][read.readerId] = read.readTime }
            }
            if let watermark { try Self.raise("receipt_watermark", to: watermark, db) }
            return fresh
        }
    }

    /// Readers of one message known on this device, with their read times.
    func readers(uid: String) async throws -> [String: Int64] {
        try await read { db in
            var readers: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT reader_id, read_time FROM message_readers WHERE uid = ?", arguments: [uid]) {
                readers[row[0]] = row[1]
            }
            return readers
        }
    }

    func markReceiptRequested(uid: String) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE messages SET receipt_requested = 1 WHERE uid = ?", arguments: [uid])
        }
    }

    func markReceiptResponded(uids: [String]) async throws {
        try await write { db in
            for uid in uids {
                try db.execute(sql: "UPDATE messages SET receipt_responded = 1 WHERE uid = ?", arguments: [uid])
            }
        }
    }

    /// Clears a conversation's unread count and mention flag, and marks its messages read.
    func clearUnread(type: ConversationType, targetId: String, channelId: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE conversations SET unread_count = 0, mentioned_count = 0 WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                           arguments: [type.rawValue, targetId, channelId])
            let found = db.changesCount > 0
            try db.execute(sql: "UPDATE messages SET is_read = 1 WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND is_read = 0",
                           arguments: [type.rawValue, targetId, channelId])
            return found
        }
    }

    func insert(_ message: Message, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO messages (conv_type, target_id, channel_id, sender_id, direction, object_name, content, flags,
                uid, client_msg_id, sent_time, received_time, sent_status, is_read, push_content, push_data,
                directed_user_ids, receipt_requested, can_include_expansion, expansion, push_config, disable_notification, extra, media_path)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [
                message.conversationType.rawValue, message.targetId, message.channelId, message.senderUserId,
                message.direction.rawValue, message.objectName, message.contentData, Int64(message.flags.rawValue),
                message.messageUId.isEmpty ? nil : message.messageUId, message.clientMessageId, message.sentTime,
                message.receivedTime, message.sentStatus.rawValue, message.isRead, message.pushContent, message.pushData,
                message.directedUserIds.joined(separator: "\n"), message.readReceiptInfo.isReceiptRequestMessage,
                message.canIncludeExpansion, Self.encodeExpansion(message.expansion),
                message.pushConfig.map { $0.encoded() }, message.disableNotification, message.extra, message.localMediaPath,
            ])
    }

    /// Creates or updates the conversation of a stored message. A message sent with
    /// `disableUpdateLastMessage` leaves an existing conversation's last message and time as they
    /// were (it still counts as unread); it starts a conversation that did not exist.
    func touchConversation(_ message: Message, counted: Bool, mentioned: Bool = false, _ db: Database) throws {
        let replaces = message.disableUpdateLastMessage ? "0" : "excluded.sort_time >= conversations.sort_time"
        try db.execute(sql: """
            INSERT INTO conversations (conv_type, target_id, channel_id, latest_message_id, sort_time, unread_count, mentioned_count)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(conv_type, target_id, channel_id) DO UPDATE SET
                latest_message_id = CASE WHEN \(replaces)
                    THEN excluded.latest_message_id ELSE conversations.latest_message_id END,
                sort_time = CASE WHEN \(replaces) THEN MAX(conversations.sort_time, excluded.sort_time) ELSE conversations.sort_time END,
                unread_count = conversations.unread_count + excluded.unread_count,
                mentioned_count = conversations.mentioned_count + excluded.mentioned_count
            """, arguments: [message.conversationType.rawValue, message.targetId, message.channelId,
                             message.messageId, message.sentTime, counted ? 1 : 0, mentioned ? 1 : 0])
    }

    // MARK: conversations

    static let conversationColumns = """
        c.conv_type, c.target_id, c.channel_id, c.unread_count, c.is_top, c.sort_time, c.latest_message_id, c.draft,
        m.object_name, m.sender_id, c.mentioned_count, c.notification_level
        """

    /// Conversations of these types (of one target when `targetId` is given), pinned first, then
    /// newest first.
    func conversations(types: [ConversationType], count: Int, startTime: Int64, targetId: String? = nil) async throws -> [Conversation] {
        guard !types.isEmpty, count > 0 else { return [] }
        return try await read { db in
            let marks = types.map { _ in "?" }.joined(separator: ",")
            var arguments: [any DatabaseValueConvertible] = types.map(\.rawValue)
            var filter = ""
            if startTime > 0 {
                filter = "AND c.sort_time < ?"
                arguments.append(startTime)
            }
            if let targetId {
                filter += " AND c.target_id = ?"
                arguments.append(targetId)
            }
            arguments.append(count)
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.conversationColumns) FROM conversations c LEFT JOIN messages m ON m.id = c.latest_message_id
                WHERE c.conv_type IN (\(marks)) \(filter)
                ORDER BY c.is_top DESC, c.sort_time DESC LIMIT ?
                """, arguments: StatementArguments(arguments)).map(Self.conversation)
        }
    }

    func conversation(type: ConversationType, targetId: String, channelId: String) async throws -> Conversation? {
        try await read { db in
            try Row.fetchOne(db, sql: """
                SELECT \(Self.conversationColumns) FROM conversations c LEFT JOIN messages m ON m.id = c.latest_message_id
                WHERE c.conv_type = ? AND c.target_id = ? AND c.channel_id = ?
                """, arguments: [type.rawValue, targetId, channelId]).map(Self.conversation)
        }
    }

    func removeConversation(type: ConversationType, targetId: String, channelId: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM conversations WHERE conv_type = ? AND target_id = ? AND channel_id = ?",
                           arguments: [type.rawValue, targetId, channelId])
            return db.changesCount > 0
        }
    }

    func clearConversations(types: [ConversationType]) async throws {
        guard !types.isEmpty else { return }
        try await write { db in
            let marks = types.map { _ in "?" }.joined(separator: ",")
            try db.execute(sql: "DELETE FROM conversations WHERE conv_type IN (\(marks))",
                           arguments: StatementArguments(types.map(\.rawValue)))
        }
    }

    static func conversation(_ row: Row) -> Conversation {
        Conversation(
            conversationType: ConversationType(rawValue: row["conv_type"]) ?? .private,
            targetId: row["target_id"], channelId: row["channel_id"], unreadMessageCount: row["unread_count"],
            isTop: row["is_top"], sentTime: row["sort_time"], latestMessageId: row["latest_message_id"],
            latestObjectName: row["object_name"] ?? "", latestSenderUserId: row["sender_id"] ?? "", draft: row["draft"],
            mentionedCount: row["mentioned_count"],
            notificationLevel: PushNotificationLevel(rawValue: row["notification_level"]) ?? .default)
    }

    // MARK: messages

    static let messageColumns = """
        id, conv_type, target_id, channel_id, sender_id, direction, object_name, content, flags, uid, client_msg_id,
        sent_time, received_time, sent_status, is_read, push_content, push_data, directed_user_ids, receipt_requested,
        receipt_responded, (SELECT COUNT(*) FROM message_readers r WHERE r.uid = messages.uid) AS reader_count,
        can_include_expansion, expansion, push_config, disable_notification, extra, media_path
        """

    /// Up to `count` messages older than `oldestMessageId` (-1 or 0: from the newest), newest first.
    func history(type: ConversationType, targetId: String, channelId: String, oldestMessageId: Int64, count: Int) async throws -> [Message] {
        try await read { [self] db in
            var anchor = "(sent_time, id) < (?, ?)"
            var arguments: [any DatabaseValueConvertible] = [type.rawValue, targetId, channelId]
            if oldestMessageId > 0,
               let time = try Int64.fetchOne(db, sql: "SELECT sent_time FROM messages WHERE id = ?", arguments: [oldestMessageId]) {
                arguments += [time, oldestMessageId]
            } else if oldestMessageId > 0 {
                return []
            } else {
                anchor = "1"
            }
            arguments.append(count)
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.messageColumns) FROM messages
                WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND \(anchor)
                ORDER BY sent_time DESC, id DESC LIMIT ?
                """, arguments: StatementArguments(arguments)).map { self.message($0) }
        }
    }

    /// Messages by local id, in one read (the ids not found are left out).
    func messages(ids: [Int64]) async throws -> [Int64: Message] {
        guard !ids.isEmpty else { return [:] }
        return try await read { [self] db in
            var found: [Int64: Message] = [:]
            for chunk in stride(from: 0, to: ids.count, by: 500) {
                let part = Array(ids[chunk..<min(chunk + 500, ids.count)])
                let marks = part.map { _ in "?" }.joined(separator: ",")
                for row in try Row.fetchAll(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE id IN (\(marks))",
                                            arguments: StatementArguments(part)) {
                    let message = self.message(row)
                    found[message.messageId] = message
                }
            }
            return found
        }
    }

    func message(id: Int64) async throws -> Message? {
        try await read { [self] db in
            try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE id = ?", arguments: [id]).map { self.message($0) }
        }
    }

    func message(_ row: Row) -> Message {
        let objectName: String = row["object_name"]
        let data: Data = row["content"]
        let flags: Int64 = row["flags"]
        return Message(
            messageId: row["id"], conversationType: ConversationType(rawValue: row["conv_type"]) ?? .private,
            targetId: row["target_id"], channelId: row["channel_id"], senderUserId: row["sender_id"],
            direction: MessageDirection(rawValue: row["direction"]) ?? .receive, objectName: objectName,
            contentData: data, content: registry.decode(objectName: objectName, data: data),
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)),
            sentStatus: SentStatus(rawValue: row["sent_status"]) ?? .sent, isRead: row["is_read"],
            sentTime: row["sent_time"], receivedTime: row["received_time"], messageUId: row["uid"] ?? "",
            clientMessageId: row["client_msg_id"], pushContent: row["push_content"], pushData: row["push_data"],
            directedUserIds: (row["directed_user_ids"] as String).split(separator: "\n").map(String.init),
            readReceiptInfo: ReadReceiptInfo(isReceiptRequestMessage: row["receipt_requested"], hasRespond: row["receipt_responded"],
                                             readerCount: row["reader_count"]),
            canIncludeExpansion: row["can_include_expansion"], expansion: Self.decodeExpansion(row["expansion"]),
            pushConfig: (row["push_config"] as Data?).flatMap { try? MessagePushConfig.decode($0) },
            disableNotification: row["disable_notification"], extra: row["extra"], localMediaPath: row["media_path"])
    }
}
