import Foundation
import GRDB
import IMCore
import IMStore

/// What happens to stored messages after they are sent: a user's own deletions, and extensions.
extension SQLiteStore {
    public func hideMessages(appId: Int64, userId: String, uids: [String]) async throws {
        guard !uids.isEmpty else { return }
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO hidden_messages (app_id, user_id, uid) VALUES (?, ?, ?)")
            for uid in uids { try insert.execute(arguments: [appId, userId, uid]) }
        }
    }

    public func clearConversation(appId: Int64, userId: String, conversationKey: String, through: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO cleared_conversations (app_id, user_id, conv_key, cleared_through) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, user_id, conv_key) DO UPDATE SET
                    cleared_through = MAX(cleared_through, excluded.cleared_through)
                """, arguments: [appId, userId, conversationKey, through])
        }
    }

    /// The messages of a sync page less those the user deleted from their own view. Only messages
    /// kept in history can be deleted; commands (recall, receipts) always pass.
    static func withoutDeletions(_ messages: [StoredMessage], appId: Int64, userId: String, _ db: Database) throws -> [StoredMessage] {
        let persisted = messages.filter(\.isInHistory)
        guard !persisted.isEmpty else { return messages }
        var cleared: [String: Int64] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: """
            SELECT conv_key, cleared_through FROM cleared_conversations WHERE app_id = ? AND user_id = ?
            """), arguments: [appId, userId]) {
            cleared[row[0]] = row[1]
        }
        let marks = persisted.map { _ in "?" }.joined(separator: ",")
        let hidden = Set(try String.fetchAll(db.cachedStatement(sql: """
            SELECT uid FROM hidden_messages WHERE app_id = ? AND user_id = ? AND uid IN (\(marks))
            """), arguments: StatementArguments([appId, userId] as [any DatabaseValueConvertible] + persisted.map(\.uid))))
        guard !hidden.isEmpty || !cleared.isEmpty else { return messages }
        return messages.filter { message in
            guard message.isInHistory else { return true }
            if hidden.contains(message.uid) { return false }
            if let through = cleared[message.conversationKey], message.sentTime <= through { return false }
            return true
        }
    }

    public func updateExpansion(appId: Int64, uid: String, set: [String: String], remove: [String], now: Int64,
                                maxKeys: Int) async throws -> [String: ExpansionEntry] {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT can_include_expansion, expansion, expansion_times FROM messages WHERE uid = ? AND app_id = ?
                """), arguments: [uid, appId]) else {
                throw StoreRefusal.noSuchMessage(uid: uid)
            }
            guard row[0] as Bool else {
                throw StoreRefusal.messageNotExpandable(uid: uid)
            }
            var entries = try ExpansionEntry.entries(values: row[1], times: row[2])
            for key in remove { entries[key] = nil }
            for (key, value) in set { entries[key] = ExpansionEntry(value: value, time: now) }
            // The check and the write are one transaction of the single writer: concurrent callers
            // cannot together pass the limit.
            guard entries.count <= maxKeys else {
                throw StoreRefusal.tooManyExpansionKeys(uid: uid, count: entries.count, limit: maxKeys)
            }
            let (values, times) = try ExpansionEntry.columns(entries)
            try db.execute(sql: "UPDATE messages SET expansion = ?, expansion_times = ? WHERE uid = ? AND app_id = ?",
                           arguments: [values, times, uid, appId])
            return entries
        }
    }

    public func expansion(appId: Int64, uid: String) async throws -> [String: ExpansionEntry]? {
        try await pool.read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT expansion, expansion_times FROM messages WHERE uid = ? AND app_id = ?
                """), arguments: [uid, appId]) else { return nil }
            return try ExpansionEntry.entries(values: row[0], times: row[1])
        }
    }
}
