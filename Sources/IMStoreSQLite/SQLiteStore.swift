import Foundation
import GRDB
import IMCore
import IMServer

/// The embedded store: one SQLite database (WAL, `synchronous=FULL`) in the data directory.
///
/// Every write is one transaction that is on disk when the call returns, so a message acknowledged
/// to its sender survives `kill -9` and power loss. Reads run concurrently with the writer (WAL).
public final class SQLiteStore: IMStore {
    private let pool: DatabasePool
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

    public func upsertUser(appId: Int64, userId: String, name: String, portraitUri: String, now: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO users (app_id, user_id, name, portrait_uri, created_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(app_id, user_id) DO UPDATE SET
                    name = CASE WHEN excluded.name = '' THEN users.name ELSE excluded.name END,
                    portrait_uri = CASE WHEN excluded.portrait_uri = '' THEN users.portrait_uri ELSE excluded.portrait_uri END
                """, arguments: [appId, userId, name, portraitUri, now])
        }
    }

    public func tokensValidAfter(appId: Int64, userId: String) async throws -> Int64 {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT tokens_valid_after FROM users WHERE app_id = ? AND user_id = ?",
                               arguments: [appId, userId]) ?? 0
        }
    }

    // MARK: messages

    private static let columns = """
        seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
        client_msg_id, push_content, push_data, disable_notification, can_include_expansion, expansion, channel_id
        """

    public func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome] {
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO messages (app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                    sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                    can_include_expansion, expansion, channel_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
                    message.channelId,
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
            // Two index range scans (received, sent), each stopping at `limit`, merged by seq.
            func scan(_ column: String) throws -> [StoredMessage] {
                try Row.fetchAll(db.cachedStatement(sql: """
                    SELECT \(Self.columns) FROM messages
                    WHERE app_id = ? AND \(column) = ? AND seq > ? AND sent_time >= ? AND conv_type = 1
                    ORDER BY seq LIMIT ?
                    """), arguments: [appId, userId, Int64(after), minSentTime, limit]).map(Self.message)
            }
            let received = try scan("target_id")
            let sent = try scan("sender_id")
            var merged: [StoredMessage] = []
            merged.reserveCapacity(min(limit, received.count + sent.count))
            var i = 0, j = 0
            while merged.count < limit && (i < received.count || j < sent.count) {
                let next: StoredMessage
                if j >= sent.count || (i < received.count && received[i].seq <= sent[j].seq) {
                    next = received[i]
                    i += 1
                    if j < sent.count && sent[j].seq == next.seq { j += 1 }   // a message to oneself
                } else {
                    next = sent[j]
                    j += 1
                }
                merged.append(next)
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
            let rows = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: [appId, conversationKey, bound, count + 1])
            return HistoryPage(messages: try rows.prefix(count).map(Self.message), hasMore: rows.count > count)
        }
    }

    static func message(_ row: Row) throws -> StoredMessage {
        let expansionText: String? = row["expansion"]
        let expansion = try expansionText.map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let seq: Int64 = row["seq"]
        let type: Int = row["conv_type"]
        let flags: Int64 = row["flags"]
        return StoredMessage(
            seq: UInt64(seq), appId: row["app_id"], conversationType: ConversationType(rawValue: type) ?? .private,
            conversationKey: row["conv_key"], targetId: row["target_id"], senderId: row["sender_id"],
            objectName: row["object_name"], content: row["content"], uid: row["uid"], sentTime: row["sent_time"],
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: row["client_msg_id"],
            pushContent: row["push_content"], pushData: row["push_data"],
            disableNotification: row["disable_notification"], canIncludeExpansion: row["can_include_expansion"],
            expansion: expansion, channelId: row["channel_id"])
    }
}
