import Foundation
import GRDB
import IMStore

/// The do-not-disturb level an ultra group sets for all its members, per channel ("" for the whole
/// group); a member's own level (conversation state) overrides it.
extension SQLiteStore {
    static func createUltraGroupUnpushLevels(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE ultra_group_unpush_levels (
                app_id INTEGER NOT NULL, group_id TEXT NOT NULL, channel_id TEXT NOT NULL, level INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, channel_id)
            ) WITHOUT ROWID;
            """)
    }

    public func setUltraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String, level: Int) async throws {
        try await pool.write { db in
            if level == 0 {
                try db.execute(sql: "DELETE FROM ultra_group_unpush_levels WHERE app_id = ? AND group_id = ? AND channel_id = ?",
                               arguments: [appId, groupId, channelId])
            } else {
                try db.execute(sql: """
                    INSERT INTO ultra_group_unpush_levels (app_id, group_id, channel_id, level) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, group_id, channel_id) DO UPDATE SET level = excluded.level
                    """, arguments: [appId, groupId, channelId, level])
            }
        }
    }

    public func ultraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String) async throws -> Int {
        try await pool.read { db in
            try Int.fetchOne(db, sql: "SELECT level FROM ultra_group_unpush_levels WHERE app_id = ? AND group_id = ? AND channel_id = ?",
                             arguments: [appId, groupId, channelId]) ?? 0
        }
    }
}
