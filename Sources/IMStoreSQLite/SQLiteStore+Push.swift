import Foundation
import GRDB
import IMCore
import IMStore

/// Push notifications: devices, profiles, templates, remarks, app settings and the push records.
extension SQLiteStore {
    /// The tables of migration v11, all in the main file. Since then push_records and push_cursors
    /// live in the push file, and the badges too (push_devices.badge stays 0).
    static func createPushTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE push_devices (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, device_id TEXT NOT NULL, kind TEXT NOT NULL,
                token TEXT NOT NULL, environment TEXT NOT NULL, platform TEXT NOT NULL, badge INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, device_id, kind)
            ) WITHOUT ROWID;
            CREATE UNIQUE INDEX push_devices_by_token ON push_devices (app_id, kind, token);
            CREATE TABLE push_profiles (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, language TEXT, show_content INTEGER NOT NULL,
                receive_web INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id)
            ) WITHOUT ROWID;
            CREATE TABLE push_templates (
                app_id INTEGER NOT NULL, template_id TEXT NOT NULL, name TEXT NOT NULL, entries TEXT NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, template_id)
            ) WITHOUT ROWID;
            CREATE TABLE user_remarks (
                app_id INTEGER NOT NULL, user_id TEXT NOT NULL, target_id TEXT NOT NULL, remark TEXT NOT NULL,
                PRIMARY KEY (app_id, user_id, target_id)
            ) WITHOUT ROWID;
            CREATE TABLE push_settings (
                app_id INTEGER PRIMARY KEY, settings BLOB NOT NULL
            );
            CREATE TABLE push_records (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                app_id INTEGER NOT NULL, message_uid TEXT NOT NULL, user_id TEXT NOT NULL, device_id TEXT NOT NULL,
                kind TEXT, token TEXT NOT NULL, environment TEXT NOT NULL, notification BLOB NOT NULL,
                status INTEGER NOT NULL, code TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL,
                created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
            );
            CREATE UNIQUE INDEX push_records_by_decision ON push_records (app_id, message_uid, user_id, device_id);
            CREATE INDEX push_records_pending ON push_records (next_attempt_at, id) WHERE status = 0;
            CREATE INDEX push_records_by_user ON push_records (app_id, user_id, id);
            CREATE INDEX push_records_by_time ON push_records (created_at);
            CREATE TABLE push_cursors (
                node TEXT PRIMARY KEY, seq INTEGER NOT NULL
            );
            """)
    }

    // MARK: the push file

    public static let pushFileName = "imserver-push.sqlite"

    static var pushMigrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE push_records (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id INTEGER NOT NULL, message_uid TEXT NOT NULL, user_id TEXT NOT NULL, device_id TEXT NOT NULL,
                    kind TEXT, token TEXT NOT NULL, environment TEXT NOT NULL, notification BLOB NOT NULL,
                    status INTEGER NOT NULL, code TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL,
                    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
                );
                CREATE UNIQUE INDEX push_records_by_decision ON push_records (app_id, message_uid, user_id, device_id);
                CREATE INDEX push_records_pending ON push_records (next_attempt_at, id) WHERE status = 0;
                CREATE INDEX push_records_by_user ON push_records (app_id, user_id, id);
                CREATE INDEX push_records_by_time ON push_records (created_at);
                CREATE TABLE push_cursors (
                    node TEXT PRIMARY KEY, seq INTEGER NOT NULL
                );
                CREATE TABLE push_badges (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, device_id TEXT NOT NULL, kind TEXT NOT NULL,
                    badge INTEGER NOT NULL,
                    PRIMARY KEY (app_id, user_id, device_id, kind)
                ) WITHOUT ROWID;
                """)
        }
        // The records packed a message's batch to a row (SQLiteStore+PushRecords); the records of
        // v1's table move into them in v5, once the batches have their present form.
        migrator.registerMigration("v2-push-batches") { db in
            try db.execute(sql: pushBatchTables)
        }
        // The log of the badges held in memory (SQLiteStore+PushBadges).
        migrator.registerMigration("v3-push-badge-log") { db in
            try db.execute(sql: pushBadgeLogTable)
        }
        // The index by user in runs of 256 batches (SQLiteStore+PushRecords).
        migrator.registerMigration("v4-push-user-buckets") { db in
            try db.execute(sql: pushUserBucketTables)
        }
        // The batches' states in a table of their own (SQLiteStore+PushRecords), and v1's records
        // moved into batches.
        migrator.registerMigration("v5-push-batch-states") { db in
            try db.execute(sql: pushBatchStatesTables)
            if try db.tableExists("push_records") {
                let given = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'push_records'") ?? 0
                try moveRecordsIntoBatches(db, from: "push_records", idFloor: given)
                try db.execute(sql: "DROP TABLE push_records")
            }
        }
        return migrator
    }

    /// Moves the push records, the cursors and the badges of a data directory from before the
    /// push file into it, then drops them from the main file. A crash in between moves them again
    /// at the next start (nothing is copied twice).
    static func movePushBookkeeping(from pool: DatabasePool, at mainPath: String, to pushPool: DatabasePool) throws {
        guard try pool.read({ try $0.tableExists("push_records") }) else { return }
        try pushPool.writeWithoutTransaction { db in
            try db.execute(sql: "ATTACH DATABASE ? AS before_split", arguments: [mainPath])
            defer { try? db.execute(sql: "DETACH DATABASE before_split") }
            try db.inTransaction {
                // Ids are never given twice, even those of records swept since.
                let given = try Int64.fetchOne(db, sql: "SELECT seq FROM before_split.sqlite_sequence WHERE name = 'push_records'") ?? 0
                try moveRecordsIntoBatches(db, from: "before_split.push_records", idFloor: given)
                try db.execute(sql: """
                    INSERT INTO push_cursors (node, seq) SELECT node, seq FROM before_split.push_cursors WHERE true
                        ON CONFLICT (node) DO UPDATE SET seq = MAX(push_cursors.seq, excluded.seq);
                    INSERT OR IGNORE INTO push_badges (app_id, user_id, device_id, kind, badge)
                        SELECT app_id, user_id, device_id, kind, badge FROM before_split.push_devices;
                    """)
                return .commit
            }
        }
        try pool.write { db in
            try db.execute(sql: """
                DROP TABLE push_records;
                DROP TABLE push_cursors;
                UPDATE push_devices SET badge = 0 WHERE badge <> 0;
                """)
        }
    }

    /// Forgets the badges of these users' devices (their devices were erased).
    func erasePushBadges(appId: Int64, userIds: [String]) async throws {
        guard !userIds.isEmpty else { return }
        try await pushPool.write { db in
            try flushBadges(db)
            for userId in userIds {
                try db.execute(sql: "DELETE FROM push_badges WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
            }
            db.afterNextTransaction { _ in
                self.pushBadges.withLock { memory in
                    for userId in userIds { memory.users[PushBadgeMemory.User(appId: appId, userId: userId)] = nil }
                }
            }
        }
    }

    /// A device's token of one kind, as push_badges and push_devices key it (within an app).
    struct DeviceKey: Hashable {
        var userId: String
        var deviceId: String
        var kind: String
    }

    /// Forgets the badges of tokens that were deleted.
    private func forgetBadges(appId: Int64, _ keys: [DeviceKey]) async throws {
        guard !keys.isEmpty else { return }
        try await pushPool.write { db in
            try flushBadges(db)
            for key in keys {
                try db.execute(sql: "DELETE FROM push_badges WHERE app_id = ? AND user_id = ? AND device_id = ? AND kind = ?",
                               arguments: [appId, key.userId, key.deviceId, key.kind])
            }
            db.afterNextTransaction { _ in
                self.pushBadges.withLock { memory in
                    for key in keys {
                        memory.users[PushBadgeMemory.User(appId: appId, userId: key.userId)]?[PushBadgeMemory.Slot(deviceId: key.deviceId, kind: key.kind)] = nil
                    }
                }
            }
        }
    }

    // MARK: devices

    /// push_badges has a row for every row of push_devices (the badge a decision sets goes to every
    /// token of the device, as an UPDATE of the rows there are); a row lost to a crash between the
    /// two files' writes reads as 0.
    public func setPushDevice(_ device: PushDeviceRecord) async throws {
        let kind = device.kind.rawValue
        let (moved, previous) = try await pool.write { db -> ([DeviceKey], String?) in
            // Another device holding this token loses it (the token moved to this one).
            let moved = try Row.fetchAll(db, sql: """
                DELETE FROM push_devices WHERE app_id = ? AND kind = ? AND token = ?
                    AND NOT (user_id = ? AND device_id = ?)
                RETURNING user_id, device_id, kind
                """, arguments: [device.appId, kind, device.token, device.userId, device.deviceId])
                .map { DeviceKey(userId: $0[0], deviceId: $0[1], kind: $0[2]) }
            forgetDevices(db, appId: device.appId, userIds: [device.userId] + moved.map(\.userId))
            let previous = try String.fetchOne(db, sql: """
                SELECT token FROM push_devices WHERE app_id = ? AND user_id = ? AND device_id = ? AND kind = ?
                """, arguments: [device.appId, device.userId, device.deviceId, kind])
            try db.execute(sql: """
                INSERT INTO push_devices (app_id, user_id, device_id, kind, token, environment, platform, badge, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)
                ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET
                    token = excluded.token, environment = excluded.environment, platform = excluded.platform,
                    updated_at = excluded.updated_at
                """, arguments: [device.appId, device.userId, device.deviceId, kind, device.token,
                                 device.environment, device.platform, device.updatedAt])
            return (moved, previous)
        }
        try await forgetBadges(appId: device.appId, moved)
        try await pushPool.write { db in
            // A new device takes the badge it is given; the same token again keeps its badge; a new
            // token starts again from 0.
            try flushBadges(db)
            let badge = previous == nil ? device.badge : 0
            let stored = try Int.fetchOne(db, sql: """
                INSERT INTO push_badges (app_id, user_id, device_id, kind, badge) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET badge = CASE WHEN ? THEN push_badges.badge ELSE excluded.badge END
                RETURNING badge
                """, arguments: [device.appId, device.userId, device.deviceId, kind, badge, previous == device.token]) ?? badge
            db.afterNextTransaction { _ in
                self.pushBadges.withLock { memory in
                    memory.users[PushBadgeMemory.User(appId: device.appId, userId: device.userId)]?[
                        PushBadgeMemory.Slot(deviceId: device.deviceId, kind: kind)] = stored
                }
            }
        }
    }

    public func removePushDevice(appId: Int64, userId: String, deviceId: String, kind: PushTokenKind?) async throws {
        let removed = try await pool.write { db -> [DeviceKey] in
            let rows: [Row]
            if let kind {
                rows = try Row.fetchAll(db, sql: """
                    DELETE FROM push_devices WHERE app_id = ? AND user_id = ? AND device_id = ? AND kind = ? RETURNING kind
                    """, arguments: [appId, userId, deviceId, kind.rawValue])
            } else {
                rows = try Row.fetchAll(db, sql: "DELETE FROM push_devices WHERE app_id = ? AND user_id = ? AND device_id = ? RETURNING kind",
                                        arguments: [appId, userId, deviceId])
            }
            forgetDevices(db, appId: appId, userIds: [userId])
            return rows.map { DeviceKey(userId: userId, deviceId: deviceId, kind: $0[0]) }
        }
        try await forgetBadges(appId: appId, removed)
    }

    public func removePushToken(appId: Int64, kind: PushTokenKind, token: String) async throws {
        let removed = try await pool.write { db in
            let removed = try Row.fetchAll(db, sql: """
                DELETE FROM push_devices WHERE app_id = ? AND kind = ? AND token = ?
                RETURNING user_id, device_id, kind
                """, arguments: [appId, kind.rawValue, token])
                .map { DeviceKey(userId: $0[0], deviceId: $0[1], kind: $0[2]) }
            forgetDevices(db, appId: appId, userIds: removed.map(\.userId))
            return removed
        }
        try await forgetBadges(appId: appId, removed)
    }

    public func pushDevices(appId: Int64, userIds: [String]) async throws -> [PushDeviceRecord] {
        guard !userIds.isEmpty else { return [] }
        // The devices and their badges are read at once (each from memory where it has them).
        async let devicesRead = heldDevices(appId: appId, userIds: userIds)
        async let badgesRead = heldBadges(appId: appId, userIds: userIds)
        var devices = try await devicesRead
        let badges = try await badgesRead
        if !badges.isEmpty {
            for index in devices.indices {
                let device = devices[index]
                devices[index].badge = badges[DeviceKey(userId: device.userId, deviceId: device.deviceId, kind: device.kind.rawValue)] ?? 0
            }
        }
        return devices
    }

    public func pushDeviceUsers(appId: Int64, afterUserId: String, limit: Int) async throws -> [String] {
        try await pushReader.read { db in
            try String.fetchAll(db, sql: """
                SELECT DISTINCT user_id FROM push_devices WHERE app_id = ? AND user_id > ? ORDER BY user_id LIMIT ?
                """, arguments: [appId, afterUserId, limit])
        }
    }

    public func resetPushBadge(appId: Int64, userId: String, deviceId: String) async throws {
        let user = PushBadgeMemory.User(appId: appId, userId: userId)
        // Nothing to do for a device whose badges are all known to be 0 (every session's start asks).
        let known = pushBadges.withLock { memory in memory.users[user].map { slots in !slots.contains { $0.key.deviceId == deviceId && $0.value != 0 } } }
        if known == true { return }
        try await pushPool.write { db in
            try flushBadges(db)
            try db.execute(sql: "UPDATE push_badges SET badge = 0 WHERE app_id = ? AND user_id = ? AND device_id = ? AND badge <> 0",
                           arguments: [appId, userId, deviceId])
            db.afterNextTransaction { _ in
                self.pushBadges.withLock { memory in
                    guard var slots = memory.users[user] else { return }
                    for slot in slots.keys where slot.deviceId == deviceId { slots[slot] = 0 }
                    memory.users[user] = slots
                }
            }
        }
    }

    // MARK: profiles

    public func pushProfiles(appId: Int64, userIds: [String]) async throws -> [String: PushProfileRecord] {
        guard !userIds.isEmpty else { return [:] }
        let users = Self.jsonList(userIds)
        return try await pushReader.read { db in
            var profiles: [String: PushProfileRecord] = [:]
            let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT user_id, language, show_content, receive_web FROM push_profiles
                WHERE app_id = ? AND user_id IN (SELECT value FROM json_each(?))
                """), arguments: [appId, users])
            while let row = try rows.next() {
                profiles[row[0]] = PushProfileRecord(language: row[1], showContent: row[2], receiveWhileWebOnline: row[3])
            }
            return profiles
        }
    }

    public func setPushProfile(appId: Int64, userId: String, profile: PushProfileRecord) async throws {
        try await pool.write { db in
            if profile == .default {
                try db.execute(sql: "DELETE FROM push_profiles WHERE app_id = ? AND user_id = ?", arguments: [appId, userId])
            } else {
                try db.execute(sql: """
                    INSERT INTO push_profiles (app_id, user_id, language, show_content, receive_web) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, user_id) DO UPDATE SET language = excluded.language,
                        show_content = excluded.show_content, receive_web = excluded.receive_web
                    """, arguments: [appId, userId, profile.language, profile.showContent, profile.receiveWhileWebOnline])
            }
        }
    }

    // MARK: templates

    public func upsertPushTemplate(appId: Int64, template: PushTemplateRecord, maxTemplates: Int) async throws {
        let entries = String(decoding: try JSONEncoder().encode(template.entries), as: UTF8.self)
        try await pool.write { db in
            let exists = try Bool.fetchOne(db, sql: "SELECT 1 FROM push_templates WHERE app_id = ? AND template_id = ?",
                                           arguments: [appId, template.templateId]) ?? false
            if !exists {
                let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_templates WHERE app_id = ?", arguments: [appId]) ?? 0
                if count >= maxTemplates { throw StoreRefusal.tooManyPushTemplates(limit: maxTemplates) }
            }
            try db.execute(sql: """
                INSERT INTO push_templates (app_id, template_id, name, entries, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (app_id, template_id) DO UPDATE SET name = excluded.name, entries = excluded.entries,
                    updated_at = excluded.updated_at
                """, arguments: [appId, template.templateId, template.name, entries, template.updatedAt])
        }
    }

    public func deletePushTemplate(appId: Int64, templateId: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_templates WHERE app_id = ? AND template_id = ?", arguments: [appId, templateId])
            return db.changesCount > 0
        }
    }

    public func pushTemplates(appId: Int64) async throws -> [PushTemplateRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT template_id, name, entries, updated_at FROM push_templates WHERE app_id = ? ORDER BY template_id
                """, arguments: [appId]).map { row in
                let text: String = row[2]
                return PushTemplateRecord(templateId: row[0], name: row[1],
                                          entries: try JSONDecoder().decode([String: PushTemplateRecord.Entry].self, from: Data(text.utf8)),
                                          updatedAt: row[3])
            }
        }
    }

    // MARK: remarks

    public func setRemarks(appId: Int64, userId: String, remarks: [String: String]) async throws {
        try await pool.write { db in
            for (targetId, remark) in remarks.sorted(by: { $0.key < $1.key }) {
                if remark.isEmpty {
                    try db.execute(sql: "DELETE FROM user_remarks WHERE app_id = ? AND user_id = ? AND target_id = ?",
                                   arguments: [appId, userId, targetId])
                } else {
                    try db.execute(sql: """
                        INSERT INTO user_remarks (app_id, user_id, target_id, remark) VALUES (?, ?, ?, ?)
                        ON CONFLICT (app_id, user_id, target_id) DO UPDATE SET remark = excluded.remark
                        """, arguments: [appId, userId, targetId, remark])
                }
            }
        }
    }

    public func remarks(appId: Int64, userId: String, afterUserId: String, limit: Int) async throws -> [(userId: String, remark: String)] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT target_id, remark FROM user_remarks WHERE app_id = ? AND user_id = ? AND target_id > ?
                ORDER BY target_id LIMIT ?
                """, arguments: [appId, userId, afterUserId, limit]).map { (userId: $0[0], remark: $0[1]) }
        }
    }

    public func setGroupRemark(appId: Int64, groupId: String, userId: String, remark: String) async throws {
        try await pool.write { db in
            if remark.isEmpty {
                try db.execute(sql: "DELETE FROM group_remarks WHERE app_id = ? AND group_id = ? AND user_id = ?",
                               arguments: [appId, groupId, userId])
            } else {
                try db.execute(sql: """
                    INSERT INTO group_remarks (app_id, group_id, user_id, remark) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, group_id, user_id) DO UPDATE SET remark = excluded.remark
                    """, arguments: [appId, groupId, userId, remark])
            }
        }
    }

    public func groupRemark(appId: Int64, groupId: String, userId: String) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT remark FROM group_remarks WHERE app_id = ? AND group_id = ? AND user_id = ?",
                                arguments: [appId, groupId, userId])
        }
    }

    public func remarks(appId: Int64, owners: [String], for targetId: String) async throws -> [String: String] {
        guard !owners.isEmpty else { return [:] }
        let users = Self.jsonList(owners)
        return try await pushReader.read { db in
            var found: [String: String] = [:]
            let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT user_id, remark FROM user_remarks
                WHERE app_id = ? AND target_id = ? AND user_id IN (SELECT value FROM json_each(?))
                """), arguments: [appId, targetId, users])
            while let row = try rows.next() { found[row[0]] = row[1] }
            return found
        }
    }

    // MARK: app settings

    public func pushSettings(appId: Int64) async throws -> Data? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT settings FROM push_settings WHERE app_id = ?", arguments: [appId])
        }
    }

    public func setPushSettings(appId: Int64, settings: Data) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO push_settings (app_id, settings) VALUES (?, ?)
                ON CONFLICT (app_id) DO UPDATE SET settings = excluded.settings
                """, arguments: [appId, settings])
        }
    }

    // MARK: preferences

    public func pushPreferences(appId: Int64, userIds: [String], type: ConversationType, targetId: String,
                                channelId: String) async throws -> [String: PushPreferenceRecord] {
        guard !userIds.isEmpty else { return [:] }
        let users = Self.jsonList(userIds)
        return try await pushReader.read { db in
            var found: [String: PushPreferenceRecord] = [:]
            do {
                let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT user_id, target_id, channel_id, unpush_level FROM conversation_settings
                    WHERE app_id = ? AND conv_type = ? AND unpush_level <> 0 AND user_id IN (SELECT value FROM json_each(?))
                        AND ((target_id = ? AND channel_id IN (?, '')) OR (target_id = '' AND channel_id = ''))
                    """), arguments: [appId, type.rawValue, users, targetId, channelId])
                while let row = try rows.next() {
                    let userId: String = row[0]
                    let target: String = row[1]
                    let channel: String = row[2]
                    let level = PushNotificationLevel(rawValue: row[3]) ?? .default
                    var record = found[userId] ?? PushPreferenceRecord()
                    if target.isEmpty {
                        record.typeLevel = level
                    } else if !channel.isEmpty {
                        record.channelLevel = level
                    } else {
                        record.conversationLevel = level
                    }
                    found[userId] = record
                }
            }
            for (userId, quiet) in try Self.quietHours(db, appId: appId, users: users) {
                found[userId, default: PushPreferenceRecord()].quietHours = quiet
            }
            return found
        }
    }

    // MARK: records

    public func pushCursor(node: String) async throws -> UInt64? {
        try await pushPool.read { db in
            try Int64.fetchOne(db, sql: "SELECT seq FROM push_cursors WHERE node = ?", arguments: [node]).map { UInt64($0) }
        }
    }

    public func committedMessages(afterSeq seq: UInt64, limit: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            try Self.messages(db.cachedStatement(sql: "SELECT \(Self.columns) FROM messages WHERE seq > ? ORDER BY seq LIMIT ?"),
                              arguments: [Int64(clamping: seq), limit])
        }
    }

    public func lastCommittedSeq() async throws -> UInt64 {
        try await pool.read { db in
            UInt64(try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM messages") ?? 0)
        }
    }
}

extension SQLiteStore {
    /// Ids bound in one `IN (...)`: well under SQLite's 32,766 variables.
    static let maxBoundIds = 500

    /// The quiet hours of the users of `users` (a `jsonList`; those without any are left out).
    static func quietHours(_ db: Database, appId: Int64, users: String) throws -> [String: QuietHours] {
        var found: [String: QuietHours] = [:]
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT user_id, quiet_start, quiet_span, quiet_level, quiet_time_zone FROM conversation_state_users
            WHERE app_id = ? AND quiet_start IS NOT NULL AND user_id IN (SELECT value FROM json_each(?))
            """), arguments: [appId, users])
        while let row = try rows.next() {
            let start: String = row[1]
            found[row[0]] = QuietHours(startTime: start, spanMinutes: row[2],
                                       level: PushNotificationLevel(rawValue: row[3]) ?? .blocked, timeZone: row[4])
        }
        return found
    }

    /// Ids as one JSON array, for `IN (SELECT value FROM json_each(?))`: one statement and one
    /// argument for thousands of recipients, rather than a statement per 500 with an argument each.
    static func jsonList(_ ids: some Collection<String>) -> String {
        var text = "["
        text.reserveCapacity(2 + ids.reduce(0) { $0 + $1.utf8.count + 3 })
        var first = true
        for id in ids {
            if !first { text.append(",") }
            first = false
            appendJSONString(id, to: &text)
        }
        text.append("]")
        return text
    }

    /// `value` as a JSON string literal at the end of `text`.
    static func appendJSONString(_ value: String, to text: inout String) {
        text.append("\"")
        // Ids are of RongCloud's charset, which needs no escapes; anything else is escaped.
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C && $0 < 0x80 }) {
            text.append(value)
        } else {
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": text.append("\\\"")
                case "\\": text.append("\\\\")
                case _ where scalar.value < 0x20: text.append(String(format: "\\u%04x", scalar.value))
                default: text.unicodeScalars.append(scalar)
                }
            }
        }
        text.append("\"")
    }

    /// A JSON array of arrays, written a row and a field at a time (the lists of devices, badges and
    /// index runs that one statement reads with `json_each`).
    struct JSONRows {
        private var text = "["
        private var fields = 0
        private(set) var count = 0

        init(reservingRows rows: Int = 0) { text.reserveCapacity(2 + rows * 32) }

        mutating func row() {
            text.append(count == 0 ? "[" : "],[")
            count += 1
            fields = 0
        }

        mutating func string(_ value: String) {
            separate()
            SQLiteStore.appendJSONString(value, to: &text)
        }

        mutating func number(_ value: some BinaryInteger) {
            separate()
            text.append(String(value))
        }

        private mutating func separate() {
            if fields > 0 { text.append(",") }
            fields += 1
        }

        /// The array's text.
        var finished: String { count == 0 ? "[]" : text + "]]" }
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
