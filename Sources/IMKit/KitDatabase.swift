import Foundation
import GRDB
import IMCore

/// The kit's own small database beside IMLib's, one per user: the persistent user and group
/// cache, and the texts of recalled messages for re-edit (RongCloud keeps those on the sender's
/// device only: gone with a reinstall), and the uids of messages seen recalled (a quote of one shows
/// that it was recalled).
final class KitDatabase: Sendable {
    private let queue: DatabaseQueue

    init(path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        queue = try DatabaseQueue(path: path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE users (user_id TEXT PRIMARY KEY, name TEXT NOT NULL, portrait TEXT, extra TEXT);
                CREATE TABLE groups (group_id TEXT PRIMARY KEY, name TEXT NOT NULL, portrait TEXT);
                CREATE TABLE reedits (message_id INTEGER PRIMARY KEY, text TEXT NOT NULL, recalled_at INTEGER NOT NULL);
                """)
        }
        migrator.registerMigration("v2") { db in
            // The uids of messages seen recalled: a quote of one shows the recall, not its snapshot.
            try db.execute(sql: "CREATE TABLE recalled (uid TEXT PRIMARY KEY)")
        }
        try migrator.migrate(queue)
    }

    func noteRecalled(uid: String) throws {
        guard !uid.isEmpty else { return }
        try queue.write { try $0.execute(sql: "INSERT OR IGNORE INTO recalled (uid) VALUES (?)", arguments: [uid]) }
    }

    func isRecalled(uid: String) throws -> Bool {
        guard !uid.isEmpty else { return false }
        return try queue.read { try Bool.fetchOne($0, sql: "SELECT 1 FROM recalled WHERE uid = ?", arguments: [uid]) ?? false }
    }

    func cachedUsers() throws -> [UserInfo] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, name, portrait, extra FROM users").map {
                UserInfo(userId: $0["user_id"], name: $0["name"], portraitUri: $0["portrait"], extra: $0["extra"])
            }
        }
    }

    func cache(_ user: UserInfo) throws {
        try queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO users (user_id, name, portrait, extra) VALUES (?, ?, ?, ?)",
                           arguments: [user.userId, user.name, user.portraitUri, user.extra])
        }
    }

    func clearUsers() throws {
        try queue.write { try $0.execute(sql: "DELETE FROM users") }
    }

    func cachedGroups() throws -> [GroupInfo] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT group_id, name, portrait FROM groups").map {
                GroupInfo(groupId: $0["group_id"], name: $0["name"], portraitUri: $0["portrait"])
            }
        }
    }

    func cache(_ group: GroupInfo) throws {
        try queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO groups (group_id, name, portrait) VALUES (?, ?, ?)",
                           arguments: [group.groupId, group.name, group.portraitUri])
        }
    }

    func clearGroups() throws {
        try queue.write { try $0.execute(sql: "DELETE FROM groups") }
    }

    func saveReedit(messageId: Int64, text: String, recalledAt: Int64) throws {
        try queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO reedits (message_id, text, recalled_at) VALUES (?, ?, ?)",
                           arguments: [messageId, text, recalledAt])
        }
    }

    func reedits(messageIds: [Int64]) throws -> [Int64: (text: String, recalledAt: Int64)] {
        guard !messageIds.isEmpty else { return [:] }
        return try queue.read { db in
            var found: [Int64: (String, Int64)] = [:]
            let marks = Array(repeating: "?", count: messageIds.count).joined(separator: ",")
            for row in try Row.fetchAll(db, sql: "SELECT message_id, text, recalled_at FROM reedits WHERE message_id IN (\(marks))",
                                        arguments: StatementArguments(messageIds)) {
                found[row["message_id"]] = (row["text"], row["recalled_at"])
            }
            return found
        }
    }

    /// Forgets re-edit texts older than `before` (ms): they can no longer be used.
    func pruneReedits(before: Int64) throws {
        try queue.write { try $0.execute(sql: "DELETE FROM reedits WHERE recalled_at < ?", arguments: [before]) }
    }
}
