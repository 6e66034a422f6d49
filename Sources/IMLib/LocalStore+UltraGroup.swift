import Foundation
import GRDB
import IMCore

/// Ultra group channels on this device: messages pulled from channel history, the server's unread
/// and mention counts, and modified contents.
extension LocalStore {
    /// The times up to which this device holds every message of these ultra group channels, in one
    /// read; a channel this device never caught up with is left out. Live messages stored before
    /// a catch-up do not move a channel's time. The meta key names the group and the channel;
    /// channel ids never contain `|` (letters and digits only), so the key is split unambiguously
    /// at its last `|`.
    func ultraGroupThroughs(_ keys: [UltraGroupChannelKey]) async throws -> [UltraGroupChannelKey: Int64] {
        try await read { db in
            var found: [UltraGroupChannelKey: Int64] = [:]
            for key in keys {
                let value = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?",
                                                arguments: ["ultra_through|\(key.groupId)|\(key.channelId)"]).flatMap(Int64.init) ?? 0
                if value != 0 { found[key] = value }
            }
            return found
        }
    }

    /// A catch-up's outcome in one transaction: the channels' new positions (raised, never
    /// lowered) and the server's unread and mention counts as of `asOf`.
    func applyUltraGroupCatchUp(reached: [UltraGroupChannelKey: Int64], counts: [(UltraGroupChannelKey, unread: Int, mentioned: Int)],
                                asOf: Int64) async throws {
        try await write { [self] db in
            try Self.raiseUltraGroupThroughs(reached, db)
            for (key, unread, mentioned) in counts {
                try setCounts(type: .ultraGroup, targetId: key.groupId, channelId: key.channelId, unread: unread, mentioned: mentioned,
                              asOf: asOf, db)
            }
        }
    }

    /// Raises channels' caught-up times inside a write.
    static func raiseUltraGroupThroughs(_ throughs: [UltraGroupChannelKey: Int64], _ db: Database) throws {
        for (key, time) in throughs {
            try raise("ultra_through|\(key.groupId)|\(key.channelId)", to: UInt64(max(time, 1)), db)
        }
    }

    /// Where this device is in the server's order of ultra group modifications: a time (ms) and a
    /// seq inside that millisecond (0: all of it).
    func ultraModifiedCursor() async throws -> (time: Int64, seq: UInt64) {
        await (Int64(clamping: try meta("ultra_modified_since")), try meta("ultra_modified_seq"))
    }

    /// Moves the modification cursor forward (never back); seq 0 stands after every seq of its millisecond.
    func advanceUltraModifiedCursor(time: Int64, seq: UInt64) async throws {
        try await write { db in
            let held: (Int64, UInt64) = (
                try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'ultra_modified_since'").flatMap(Int64.init) ?? 0,
                try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'ultra_modified_seq'").flatMap(UInt64.init) ?? 0)
            func rank(_ seq: UInt64) -> UInt64 { seq == 0 ? UInt64.max : seq }
            guard (time, rank(seq)) > (held.0, rank(held.1)) else { return }
            for (key, value) in [("ultra_modified_since", String(max(time, 0))), ("ultra_modified_seq", String(seq))] {
                try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               arguments: [key, value])
            }
        }
    }

    /// Stores messages read from channel history that this device lacks. They do not count as
    /// unread here: the server's counts are applied with `setCounts`. Returns the stored ones.
    func storeFetched(_ messages: [Message]) async throws -> [Message] {
        try await write { [self] db in
            var stored: [Message] = []
            for var message in messages where message.flags.contains(.isPersisted) {
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM messages WHERE uid = ?", arguments: [message.messageUId]) == true { continue }
                message.isRead = message.direction == .send
                try insert(message, db)
                message.messageId = db.lastInsertedRowID
                try touchConversation(message, counted: false, db)
                stored.append(message)
            }
            return stored
        }
    }

    /// Sets a conversation's unread and mention counts to the server's as of `asOf` (server time),
    /// plus the unread messages received here since then (live while the catch-up ran).
    func setCounts(type: ConversationType, targetId: String, channelId: String, unread: Int, mentioned: Int, asOf: Int64,
                   _ db: Database) throws {
        let later = try Data.fetchAll(db, sql: """
            SELECT content FROM messages WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND direction = ?
                AND is_read = 0 AND (flags & ?) != 0 AND sent_time > ?
            """, arguments: [type.rawValue, targetId, channelId, MessageDirection.receive.rawValue,
                             Int64(PersistentFlag.isCounted.rawValue), asOf])
        let laterMentions = later.count(where: { MentionedInfo.of(content: $0)?.mentions(userId) == true })
        try db.execute(sql: """
            UPDATE conversations SET unread_count = ?, mentioned_count = ? WHERE conv_type = ? AND target_id = ? AND channel_id = ?
            """, arguments: [unread + later.count, mentioned + laterMentions, type.rawValue, targetId, channelId])
        if unread == 0 {
            try db.execute(sql: "UPDATE messages SET is_read = 1 WHERE conv_type = ? AND target_id = ? AND channel_id = ? AND is_read = 0",
                           arguments: [type.rawValue, targetId, channelId])
        }
    }

    /// Replaces the content of stored messages by uid; returns the messages that changed.
    func replaceContents(_ messages: [Message]) async throws -> [Message] {
        try await write { [self] db in
            var changed: [Message] = []
            for message in messages {
                try db.execute(sql: "UPDATE messages SET content = ? WHERE uid = ? AND content <> ?",
                               arguments: [message.contentData, message.messageUId, message.contentData])
                guard db.changesCount > 0,
                      let row = try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE uid = ?",
                                                 arguments: [message.messageUId]) else { continue }
                changed.append(self.message(row))
            }
            return changed
        }
    }

    /// Unread and mention counts summed over conversations of a type, optionally of one target.
    func unreadSums(type: ConversationType, targetId: String?) async throws -> (unread: Int, mentioned: Int) {
        try await read { db in
            var sql = "SELECT COALESCE(SUM(unread_count), 0), COALESCE(SUM(mentioned_count), 0) FROM conversations WHERE conv_type = ?"
            var arguments: [any DatabaseValueConvertible] = [type.rawValue]
            if let targetId {
                sql += " AND target_id = ?"
                arguments.append(targetId)
            }
            let row = try Row.fetchOne(db, sql: sql, arguments: StatementArguments(arguments))
            return (row?[0] ?? 0, row?[1] ?? 0)
        }
    }
}
