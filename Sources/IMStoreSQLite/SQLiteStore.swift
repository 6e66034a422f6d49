import Foundation
import GRDB
import IMCore
import IMServer

/// The embedded store: one SQLite database (WAL, `synchronous=FULL`) in the data directory.
///
/// Every write is one transaction that is on disk when the call returns, so a message acknowledged
/// to its sender survives `kill -9` and power loss. Reads run concurrently with the writer (WAL).
public final class SQLiteStore: IMStore {
    let pool: DatabasePool
    public let path: String

    /// Opens (and creates or migrates) the database in `directory`.
    public init(directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw IMError(.databaseError, "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("imserver.sqlite")
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw IMError(.databaseError, "cannot open the database \(path): \(error)")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE apps (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_key TEXT NOT NULL UNIQUE,
                    app_secret TEXT NOT NULL,
                    name TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE users (
                    app_id INTEGER NOT NULL REFERENCES apps(id),
                    user_id TEXT NOT NULL,
                    name TEXT NOT NULL DEFAULT '',
                    portrait_uri TEXT NOT NULL DEFAULT '',
                    created_at INTEGER NOT NULL,
                    tokens_valid_after INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (app_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE messages (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id INTEGER NOT NULL,
                    conv_type INTEGER NOT NULL,
                    conv_key TEXT NOT NULL,
                    target_id TEXT NOT NULL,
                    sender_id TEXT NOT NULL,
                    object_name TEXT NOT NULL,
                    content BLOB NOT NULL,
                    uid TEXT NOT NULL UNIQUE,
                    sent_time INTEGER NOT NULL,
                    flags INTEGER NOT NULL,
                    in_history INTEGER NOT NULL,
                    client_msg_id TEXT NOT NULL,
                    push_content TEXT NOT NULL,
                    push_data TEXT NOT NULL,
                    disable_notification INTEGER NOT NULL,
                    can_include_expansion INTEGER NOT NULL,
                    expansion TEXT,
                    channel_id TEXT NOT NULL
                );
                CREATE INDEX messages_by_conversation ON messages (app_id, conv_key, sent_time);
                CREATE INDEX messages_by_target ON messages (app_id, target_id, seq);
                CREATE INDEX messages_by_sender ON messages (app_id, sender_id, seq);
                CREATE UNIQUE INDEX messages_by_client_id ON messages (app_id, sender_id, client_msg_id)
                    WHERE client_msg_id <> '';
                """)
        }
        migrator.registerMigration("v2-directory") { db in
            try db.execute(sql: """
                ALTER TABLE users ADD COLUMN blocked_until INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX users_blocked ON users (app_id, blocked_until) WHERE blocked_until > 0;
                ALTER TABLE messages ADD COLUMN include_sender INTEGER NOT NULL DEFAULT 1;
                CREATE INDEX messages_by_time ON messages (app_id, sent_time);
                CREATE TABLE user_lists (
                    app_id INTEGER NOT NULL, owner TEXT NOT NULL, kind INTEGER NOT NULL, member TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, owner, kind, member)
                ) WITHOUT ROWID;
                CREATE TABLE user_tags (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, tag TEXT NOT NULL,
                    PRIMARY KEY (app_id, user_id, tag)
                ) WITHOUT ROWID;
                CREATE TABLE chat_groups (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id)
                ) WITHOUT ROWID;
                CREATE TABLE group_members (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL, joined_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE INDEX group_members_by_user ON group_members (app_id, user_id);
                CREATE TABLE group_mutes (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                    since INTEGER NOT NULL, until INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE muted_groups (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL,
                    PRIMARY KEY (app_id, group_id)
                ) WITHOUT ROWID;
                CREATE TABLE group_mute_whitelist (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE sensitive_words (
                    app_id INTEGER NOT NULL, word TEXT NOT NULL, replacement TEXT, created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, word)
                ) WITHOUT ROWID;
                CREATE TABLE conversation_settings (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, conv_type INTEGER NOT NULL, target_id TEXT NOT NULL,
                    channel_id TEXT NOT NULL, unpush_level INTEGER NOT NULL,
                    PRIMARY KEY (app_id, user_id, conv_type, target_id, channel_id)
                ) WITHOUT ROWID;
                CREATE TABLE deleted_message_logs (
                    app_id INTEGER NOT NULL, hour TEXT NOT NULL,
                    PRIMARY KEY (app_id, hour)
                ) WITHOUT ROWID;
                """)
        }
        return migrator
    }

    // MARK: apps and users

    public func loadApps() async throws -> [AppRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, app_key, app_secret, name, created_at FROM apps ORDER BY id").map {
                AppRecord(id: $0["id"], appKey: $0["app_key"], appSecret: $0["app_secret"], name: $0["name"], createdAt: $0["created_at"])
            }
        }
    }

    public func upsertApp(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO apps (app_key, app_secret, name, created_at) VALUES (?, ?, ?, ?)
                ON CONFLICT(app_key) DO UPDATE SET app_secret = excluded.app_secret, name = excluded.name
                """, arguments: [appKey, appSecret, name, now])
            let row = try Row.fetchOne(db, sql: "SELECT id, created_at FROM apps WHERE app_key = ?", arguments: [appKey])!
            return AppRecord(id: row["id"], appKey: appKey, appSecret: appSecret, name: name, createdAt: row["created_at"])
        }
    }

    // MARK: messages

    private static let columns = """
        seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
        client_msg_id, push_content, push_data, disable_notification, can_include_expansion, expansion, channel_id,
        include_sender
        """

    public func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome] {
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO messages (app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                    sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                    can_include_expansion, expansion, channel_id, include_sender)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            let existing = try db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages WHERE app_id = ? AND sender_id = ? AND client_msg_id = ?
                """)
            var outcomes: [CommitOutcome] = []
            outcomes.reserveCapacity(messages.count)
            for var message in messages {
                if !message.clientMessageId.isEmpty,
                   let row = try Row.fetchOne(existing, arguments: [message.appId, message.senderId, message.clientMessageId]) {
                    outcomes.append(.duplicate(try Self.message(row)))
                    continue
                }
                let expansion: String? = message.expansion.isEmpty ? nil
                    : String(data: try JSONEncoder().encode(message.expansion), encoding: .utf8)
                try insert.execute(arguments: [
                    message.appId, message.conversationType.rawValue, message.conversationKey, message.targetId,
                    message.senderId, message.objectName, message.content, message.uid, message.sentTime,
                    message.flags.rawValue, message.isInHistory, message.clientMessageId, message.pushContent,
                    message.pushData, message.disableNotification, message.canIncludeExpansion, expansion,
                    message.channelId, message.includeSender,
                ])
                message.seq = UInt64(db.lastInsertedRowID)
                outcomes.append(.stored(message))
            }
            return outcomes
        }
    }

    public func lastSentTime(appId: Int64, conversationKey: String) async throws -> Int64? {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT MAX(sent_time) FROM messages WHERE app_id = ? AND conv_key = ?",
                               arguments: [appId, conversationKey])
        }
    }

    public func syncPage(appId: Int64, userId: String, after: UInt64, minSentTime: Int64, limit: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            // Three index range scans (received, sent, broadcast to everyone), each stopping at
            // `limit`, merged by seq. Private and system conversations sync this way.
            func scan(_ condition: String, _ id: String) throws -> [StoredMessage] {
                try Self.messages(db.cachedStatement(sql: """
                    SELECT \(Self.columns) FROM messages
                    WHERE app_id = ? AND \(condition) AND seq > ? AND sent_time >= ? AND conv_type IN (1, 6)
                    ORDER BY seq LIMIT ?
                    """), arguments: [appId, id, Int64(after), minSentTime, limit])
            }
            let scans = [
                try scan("target_id = ?", userId),
                try scan("sender_id = ? AND include_sender = 1", userId),
                try scan("target_id = '\(StoredMessage.everyone)' AND sender_id <> ?", userId),
            ]
            var merged: [StoredMessage] = []
            merged.reserveCapacity(min(limit, scans.reduce(0) { $0 + $1.count }))
            var positions = [0, 0, 0]
            while merged.count < limit {
                var best: Int?
                for index in scans.indices where positions[index] < scans[index].count {
                    if let current = best, scans[current][positions[current]].seq <= scans[index][positions[index]].seq { continue }
                    best = index
                }
                guard let best else { break }
                let next = scans[best][positions[best]]
                merged.append(next)
                // A message to oneself appears in both the received and the sent scan.
                for index in scans.indices where positions[index] < scans[index].count && scans[index][positions[index]].seq == next.seq {
                    positions[index] += 1
                }
            }
            return merged
        }
    }

    public func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool) async throws -> HistoryPage {
        try await pool.read { db in
            let sql = ascending
                ? "SELECT \(Self.columns) FROM messages WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND sent_time > ? ORDER BY sent_time ASC LIMIT ?"
                : "SELECT \(Self.columns) FROM messages WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND sent_time < ? ORDER BY sent_time DESC LIMIT ?"
            let bound = ascending ? recordTime : (recordTime <= 0 ? Int64.max : recordTime)
            let rows = try Self.messages(db.cachedStatement(sql: sql), arguments: [appId, conversationKey, bound, count + 1])
            return HistoryPage(messages: Array(rows.prefix(count)), hasMore: rows.count > count)
        }
    }

    public func message(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.columns) FROM messages WHERE uid = ? AND app_id = ?"),
                             arguments: [uid, appId]).map(Self.message)
        }
    }

    public func replaceMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE messages SET object_name = ?, content = ?, expansion = NULL WHERE uid = ? AND app_id = ?",
                           arguments: [objectName, content, uid, appId])
        }
    }

    public func deleteMessage(appId: Int64, uid: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM messages WHERE uid = ? AND app_id = ?", arguments: [uid, appId])
        }
    }

    public func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                                     ascending: Bool, limit: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            let low = ascending ? (includeStart ? ">=" : ">") : ">="
            let high = ascending ? "<=" : (includeStart ? "<=" : "<")
            let (from, to) = ascending ? (start, end) : (end, start)
            return try Row.fetchAll(db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages
                WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND sent_time \(low) ? AND sent_time \(high) ?
                ORDER BY sent_time \(ascending ? "ASC" : "DESC") LIMIT ?
                """), arguments: [appId, conversationKey, from, to, limit]).map(Self.message)
        }
    }

    public func messages(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages
                WHERE app_id = ? AND sent_time >= ? AND sent_time < ? AND (sent_time > ? OR seq > ?)
                ORDER BY sent_time, seq LIMIT ?
                """), arguments: [appId, from, to, from, Int64(afterSeq), limit]).map(Self.message)
        }
    }

    public func deleteMessageLog(appId: Int64, hour: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO deleted_message_logs (app_id, hour) VALUES (?, ?)", arguments: [appId, hour])
        }
    }

    public func isMessageLogDeleted(appId: Int64, hour: String) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM deleted_message_logs WHERE app_id = ? AND hour = ?", arguments: [appId, hour]) ?? false
        }
    }

    /// The messages a `SELECT \(columns)` statement returns, decoded straight from the statement
    /// (`Row.fetchAll` copies every row first, and decoding a copied row looks up generic metadata
    /// per column).
    static func messages(_ statement: Statement, arguments: StatementArguments) throws -> [StoredMessage] {
        try Array(Row.fetchCursor(statement, arguments: arguments).map(Self.message))
    }

    /// A row of `SELECT \(columns)`, read by position: looking columns up by name costs a
    /// case-insensitive string comparison per column and was most of a history page's CPU.
    static func message(_ row: Row) throws -> StoredMessage {
        let expansionText: String? = row[16]
        let expansion = try expansionText.map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let seq: Int64 = row[0]
        let type: Int = row[2]
        let flags: Int64 = row[10]
        return StoredMessage(
            seq: UInt64(seq), appId: row[1], conversationType: ConversationType(rawValue: type) ?? .private,
            conversationKey: row[3], targetId: row[4], senderId: row[5],
            objectName: row[6], content: row[7], uid: row[8], sentTime: row[9],
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: row[11],
            pushContent: row[12], pushData: row[13],
            disableNotification: row[14], canIncludeExpansion: row[15],
            expansion: expansion, channelId: row[17], includeSender: row[18])
    }
}
