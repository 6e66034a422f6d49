import Foundation
import GRDB
import IMCore
import IMStore

extension SQLiteStore {
    /// Rewrites conversation keys written before their parts were escaped (`ConversationKey`).
    ///
    /// Only keys whose ids hold `|` or `%` change. A message's key is rebuilt from its own columns
    /// (type, sender, target, channel). A cleared-conversation row names its key and its user: a
    /// private key `p|…` read with the old, ambiguous joining may fit more than one peer (user
    /// `a|b|a` clearing `p|a|b|a|b|a` with `b|a` or with `a|b`), so a row is written for each peer it
    /// fits, which clears exactly what the old row cleared.
    static func migrateConversationKeys(_ db: Database) throws {
        let update = try db.makeStatement(sql: "UPDATE messages SET conv_key = ? WHERE seq = ?")
        let rows = try Row.fetchAll(db, sql: """
            SELECT seq, conv_type, sender_id, target_id, channel_id FROM messages
            WHERE conv_type IN (1, 3, 6, 10)
              AND (instr(sender_id, '|') > 0 OR instr(target_id, '|') > 0 OR instr(channel_id, '|') > 0
                   OR instr(sender_id, '%') > 0 OR instr(target_id, '%') > 0 OR instr(channel_id, '%') > 0)
            """)
        for row in rows {
            let seq: Int64 = row[0]
            let type: Int = row[1]
            let sender: String = row[2], target: String = row[3], channel: String = row[4]
            let key: String
            switch ConversationType(rawValue: type) {
            case .private: key = privateConversationKey(sender, target)
            case .group: key = groupConversationKey(target)
            case .system: key = systemConversationKey(sender: sender, recipient: target)
            case .ultraGroup: key = ultraGroupConversationKey(target, channel)
            default: continue
            }
            try update.execute(arguments: [key, seq])
        }

        let cleared = try Row.fetchAll(db, sql: "SELECT app_id, user_id, conv_key, cleared_through FROM cleared_conversations")
        for row in cleared {
            let appId: Int64 = row[0]
            let userId: String = row[1], oldKey: String = row[2]
            let through: Int64 = row[3]
            let newKeys = Self.unambiguousKeys(forOldKey: oldKey, userId: userId)
            guard newKeys != [oldKey] else { continue }
            try db.execute(sql: "DELETE FROM cleared_conversations WHERE app_id = ? AND user_id = ? AND conv_key = ?",
                           arguments: [appId, userId, oldKey])
            for key in newKeys {
                try db.execute(sql: """
                    INSERT INTO cleared_conversations (app_id, user_id, conv_key, cleared_through) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, user_id, conv_key) DO UPDATE SET cleared_through = MAX(cleared_through, excluded.cleared_through)
                    """, arguments: [appId, userId, key, through])
            }
        }
    }

    /// The escaped keys an old, plainly joined key of `userId`'s conversation stood for.
    static func unambiguousKeys(forOldKey key: String, userId: String) -> [String] {
        guard key.count >= 2, let kind = key.first, key.dropFirst().first == "|" else { return [key] }
        let rest = String(key.dropFirst(2))
        switch kind {
        case "g":
            return [groupConversationKey(rest)]
        case "u":
            // Channel ids never contain `|`: the group id is everything before the last one.
            guard let split = rest.lastIndex(of: "|") else { return [key] }
            return [ultraGroupConversationKey(String(rest[..<split]), String(rest[rest.index(after: split)...]))]
        case "s":
            // A user clears a system conversation under the key of their own messages and the
            // key of its broadcasts; either way the recipient ends the key.
            for recipient in [userId, StoredMessage.everyone] where rest.hasSuffix("|" + recipient) {
                return [systemConversationKey(sender: String(rest.dropLast(recipient.count + 1)), recipient: recipient)]
            }
            return [key]
        case "p":
            var peers: [String] = []
            if rest.hasPrefix(userId + "|") {
                let peer = String(rest.dropFirst(userId.count + 1))
                if userId <= peer { peers.append(peer) }
            }
            if rest.hasSuffix("|" + userId) {
                let peer = String(rest.dropLast(userId.count + 1))
                if peer <= userId, !peers.contains(peer) { peers.append(peer) }
            }
            return peers.isEmpty ? [key] : peers.map { privateConversationKey(userId, $0) }
        default:
            return [key]
        }
    }
}
