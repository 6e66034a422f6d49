import Foundation
import IMCore
import IMStore
import PostgresNIO

/// What happens to stored messages after they are sent: a user's own deletions, and extensions.
extension PostgresStore {
    public func hideMessages(appId: Int64, userId: String, uids: [String]) async throws {
        guard !uids.isEmpty else { return }
        _ = try await rows("""
            INSERT INTO hidden_messages (app_id, user_id, uid) SELECT \(appId), \(userId), uid FROM unnest(\(uids)::text[]) AS h(uid)
            ON CONFLICT DO NOTHING
            """)
    }

    public func clearConversation(appId: Int64, userId: String, conversationKey: String, through: Int64) async throws {
        _ = try await rows("""
            INSERT INTO cleared_conversations (app_id, user_id, conv_key, cleared_through) VALUES (\(appId), \(userId), \(conversationKey), \(through))
            ON CONFLICT (app_id, user_id, conv_key) DO UPDATE SET
                cleared_through = GREATEST(cleared_conversations.cleared_through, excluded.cleared_through)
            """)
    }

    public func updateExpansion(appId: Int64, uid: String, set: [String: String], remove: [String], now: Int64,
                                maxKeys: Int) async throws -> [String: ExpansionEntry] {
        try await write { connection in
            // The message's row stays locked until COMMIT: concurrent updates are counted one after
            // another and cannot together pass the limit.
            guard let row = try await connection.rows("""
                SELECT can_include_expansion, expansion, expansion_times FROM messages WHERE uid = \(uid) AND app_id = \(appId) FOR UPDATE
                """, logger).first else {
                throw StoreRefusal.noSuchMessage(uid: uid)
            }
            var cells = Cells(row)
            guard try cells.bool() else {
                throw StoreRefusal.messageNotExpandable(uid: uid)
            }
            var entries = try ExpansionEntry.entries(values: try cells.optionalString(), times: try cells.optionalString())
            for key in remove { entries[key] = nil }
            for (key, value) in set { entries[key] = ExpansionEntry(value: value, time: now) }
            guard entries.count <= maxKeys else {
                throw StoreRefusal.tooManyExpansionKeys(uid: uid, count: entries.count, limit: maxKeys)
            }
            let (values, times) = try ExpansionEntry.columns(entries)
            try await connection.run("""
                UPDATE messages SET expansion = \(values), expansion_times = \(times) WHERE uid = \(uid) AND app_id = \(appId)
                """, logger)
            return entries
        }
    }

    public func expansion(appId: Int64, uid: String) async throws -> [String: ExpansionEntry]? {
        guard let row = try await rows("""
            SELECT expansion, expansion_times FROM messages WHERE uid = \(uid) AND app_id = \(appId)
            """).first else { return nil }
        var cells = Cells(row)
        return try ExpansionEntry.entries(values: try cells.optionalString(), times: try cells.optionalString())
    }
}
