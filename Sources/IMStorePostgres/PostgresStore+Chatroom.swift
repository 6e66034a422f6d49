import Foundation
import IMCore
import IMStore
import PostgresNIO

/// Chatroom settings (bans, mutes, whitelists, keep-alive, priorities) and the optional room history.
extension PostgresStore {
    public func chatroomSettings(appId: Int64) async throws -> [ChatroomSettingRecord] {
        try await rows("SELECT kind, room_id, item, until FROM chatroom_settings WHERE app_id = \(appId)").compactMap { row in
            var cells = Cells(row)
            guard let kind = ChatroomSettingKind(rawValue: try cells.string()) else { return nil }
            return ChatroomSettingRecord(appId: appId, kind: kind, roomId: try cells.string(), item: try cells.string(), until: try cells.int())
        }
    }

    public func putChatroomSettings(_ records: [ChatroomSettingRecord]) async throws {
        guard !records.isEmpty else { return }
        try await write { connection in
            for record in records {
                try await connection.run("""
                    INSERT INTO chatroom_settings (app_id, kind, room_id, item, until)
                    VALUES (\(record.appId), \(record.kind.rawValue), \(record.roomId), \(record.item), \(record.until))
                    ON CONFLICT (app_id, kind, room_id, item) DO UPDATE SET until = excluded.until
                    """, logger)
            }
        }
    }

    public func deleteChatroomSettings(appId: Int64, kind: ChatroomSettingKind, roomId: String, items: [String]) async throws {
        guard !items.isEmpty else { return }
        _ = try await rows("""
            DELETE FROM chatroom_settings WHERE app_id = \(appId) AND kind = \(kind.rawValue) AND room_id = \(roomId) AND item = ANY(\(items))
            """)
    }

    public func appendChatroomHistory(_ messages: [StoredMessage]) async throws {
        guard !messages.isEmpty else { return }
        try await write { connection in
            for message in messages {
                try await connection.run("""
                    INSERT INTO chatroom_messages (app_id, room_id, sender_id, object_name, content, uid, sent_time, flags, client_msg_id)
                    VALUES (\(message.appId), \(message.targetId), \(message.senderId), \(message.objectName), \(message.content),
                            \(message.uid), \(message.sentTime), \(Int64(message.flags.rawValue)), \(message.clientMessageId))
                    ON CONFLICT DO NOTHING
                    """, logger)
            }
        }
    }

    private static let chatroomColumns = "app_id, room_id, sender_id, object_name, content, uid, sent_time, flags, client_msg_id"

    private static func chatroomMessage(_ row: PostgresRow) throws -> StoredMessage {
        var cells = Cells(row)
        let appId = try cells.int()
        let roomId = try cells.string()
        return StoredMessage(appId: appId, conversationType: .chatroom, conversationKey: chatroomConversationKey(roomId), targetId: roomId,
                             senderId: try cells.string(), objectName: try cells.string(), content: try cells.next(Data.self),
                             uid: try cells.string(), sentTime: try cells.int(),
                             flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: try cells.int())), clientMessageId: try cells.string())
    }

    public func chatroomHistory(appId: Int64, roomId: String, recordTime: Int64, count: Int, ascending: Bool,
                                minSentTime: Int64, maxBytes: Int) async throws -> [StoredMessage] {
        let range = ascending ? "sent_time > $4 ORDER BY sent_time ASC" : "sent_time < $4 ORDER BY sent_time DESC"
        let bound = ascending ? recordTime : (recordTime <= 0 ? Int64.max : recordTime)
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(appId)
        bindings.append(roomId)
        bindings.append(minSentTime)
        bindings.append(bound)
        bindings.append(Int64(count))
        // Rows are decoded as they arrive, and reading stops once the page has `maxBytes`.
        var messages: [StoredMessage] = []
        var bytes = 0
        for row in try await rows(PostgresQuery(unsafeSQL: """
            SELECT \(Self.chatroomColumns) FROM chatroom_messages
            WHERE app_id = $1 AND room_id = $2 AND sent_time >= $3 AND \(range) LIMIT $5
            """, binds: bindings)) {
            let message = try Self.chatroomMessage(row)
            bytes += message.wireSize
            if bytes > maxBytes && !messages.isEmpty { break }
            messages.append(message)
        }
        return messages
    }

    public func chatroomMessage(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await rows("SELECT \(unescaped: Self.chatroomColumns) FROM chatroom_messages WHERE app_id = \(appId) AND uid = \(uid)")
            .first.map(Self.chatroomMessage)
    }

    public func replaceChatroomMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        _ = try await rows("""
            UPDATE chatroom_messages SET object_name = \(objectName), content = \(content), flags = \(Int64(PersistentFlag.isPersisted.rawValue))
            WHERE app_id = \(appId) AND uid = \(uid)
            """)
    }

    public func pruneChatroomHistory(appId: Int64, before: Int64) async throws {
        _ = try await rows("DELETE FROM chatroom_messages WHERE app_id = \(appId) AND sent_time < \(before)")
    }
}
