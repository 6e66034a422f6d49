import Foundation
import GRDB
import IMCore
import IMStore

/// Chatroom settings (bans, mutes, whitelists, keep-alive, priorities) and the optional room history.
extension SQLiteStore {
    static func createChatroomTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE chatroom_settings (
                app_id INTEGER NOT NULL, kind TEXT NOT NULL, room_id TEXT NOT NULL, item TEXT NOT NULL,
                until INTEGER NOT NULL,
                PRIMARY KEY (app_id, kind, room_id, item)
            ) WITHOUT ROWID;
            CREATE TABLE chatroom_messages (
                seq INTEGER PRIMARY KEY,
                app_id INTEGER NOT NULL, room_id TEXT NOT NULL, sender_id TEXT NOT NULL, object_name TEXT NOT NULL,
                content BLOB NOT NULL, uid TEXT NOT NULL, sent_time INTEGER NOT NULL, flags INTEGER NOT NULL,
                client_msg_id TEXT NOT NULL
            );
            CREATE UNIQUE INDEX chatroom_messages_by_uid ON chatroom_messages (app_id, uid);
            CREATE INDEX chatroom_messages_by_room ON chatroom_messages (app_id, room_id, sent_time);
            CREATE INDEX chatroom_messages_by_time ON chatroom_messages (sent_time);
            """)
    }

    public func chatroomSettings(appId: Int64) async throws -> [ChatroomSettingRecord] {
        try await pool.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT kind, room_id, item, until FROM chatroom_settings WHERE app_id = ?"),
                             arguments: [appId]).compactMap { row in
                guard let kind = ChatroomSettingKind(rawValue: row[0]) else { return nil }
                return ChatroomSettingRecord(appId: appId, kind: kind, roomId: row[1], item: row[2], until: row[3])
            }
        }
    }

    public func putChatroomSettings(_ records: [ChatroomSettingRecord]) async throws {
        guard !records.isEmpty else { return }
        try await pool.write { db in
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO chatroom_settings (app_id, kind, room_id, item, until) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (app_id, kind, room_id, item) DO UPDATE SET until = excluded.until
                """)
            for record in records {
                try upsert.execute(arguments: [record.appId, record.kind.rawValue, record.roomId, record.item, record.until])
            }
        }
    }

    public func deleteChatroomSettings(appId: Int64, kind: ChatroomSettingKind, roomId: String, items: [String]) async throws {
        guard !items.isEmpty else { return }
        try await pool.write { db in
            let delete = try db.cachedStatement(sql: "DELETE FROM chatroom_settings WHERE app_id = ? AND kind = ? AND room_id = ? AND item = ?")
            for item in items { try delete.execute(arguments: [appId, kind.rawValue, roomId, item]) }
        }
    }

    public func appendChatroomHistory(_ messages: [StoredMessage]) async throws {
        guard !messages.isEmpty else { return }
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO chatroom_messages (app_id, room_id, sender_id, object_name, content, uid, sent_time, flags, client_msg_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for message in messages {
                try insert.execute(arguments: [message.appId, message.targetId, message.senderId, message.objectName, message.content,
                                               message.uid, message.sentTime, Int64(message.flags.rawValue), message.clientMessageId])
            }
        }
    }

    private static let chatroomColumns = "app_id, room_id, sender_id, object_name, content, uid, sent_time, flags, client_msg_id"

    private static func chatroomMessage(_ row: Row) -> StoredMessage {
        let flags: Int64 = row[7]
        let roomId: String = row[1]
        return StoredMessage(appId: row[0], conversationType: .chatroom, conversationKey: chatroomConversationKey(roomId), targetId: roomId,
                             senderId: row[2], objectName: row[3], content: row[4], uid: row[5], sentTime: row[6],
                             flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: row[8])
    }

    public func chatroomHistory(appId: Int64, roomId: String, recordTime: Int64, count: Int, ascending: Bool,
                                minSentTime: Int64, maxBytes: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            let range = ascending ? "sent_time > ? ORDER BY sent_time ASC" : "sent_time < ? ORDER BY sent_time DESC"
            let bound = ascending ? recordTime : (recordTime <= 0 ? Int64.max : recordTime)
            // Rows are read one at a time, and reading stops once the page has `maxBytes`.
            let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT \(Self.chatroomColumns) FROM chatroom_messages
                WHERE app_id = ? AND room_id = ? AND sent_time >= ? AND \(range) LIMIT ?
                """), arguments: [appId, roomId, minSentTime, bound, count])
            var messages: [StoredMessage] = []
            var bytes = 0
            while let row = try rows.next() {
                let message = Self.chatroomMessage(row)
                bytes += message.wireSize
                if bytes > maxBytes && !messages.isEmpty { break }
                messages.append(message)
            }
            return messages
        }
    }

    public func chatroomMessage(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.chatroomColumns) FROM chatroom_messages WHERE app_id = ? AND uid = ?"),
                             arguments: [appId, uid]).map(Self.chatroomMessage)
        }
    }

    public func replaceChatroomMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE chatroom_messages SET object_name = ?, content = ?, flags = ? WHERE app_id = ? AND uid = ?",
                           arguments: [objectName, content, Int64(PersistentFlag.isPersisted.rawValue), appId, uid])
        }
    }

    public func pruneChatroomHistory(appId: Int64, before: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM chatroom_messages WHERE app_id = ? AND sent_time < ?", arguments: [appId, before])
        }
    }
}
