import Foundation
import GRDB
import IMCore
import IMStore

/// Push notifications: devices, profiles, templates, remarks, app settings and the push records.
extension SQLiteStore {
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

    // MARK: devices

    public func setPushDevice(_ device: PushDeviceRecord) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                DELETE FROM push_devices WHERE app_id = ? AND kind = ? AND token = ?
                    AND NOT (user_id = ? AND device_id = ?)
                """, arguments: [device.appId, device.kind.rawValue, device.token, device.userId, device.deviceId])
            try db.execute(sql: """
                INSERT INTO push_devices (app_id, user_id, device_id, kind, token, environment, platform, badge, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET
                    token = excluded.token, environment = excluded.environment, platform = excluded.platform,
                    badge = CASE WHEN push_devices.token = excluded.token THEN push_devices.badge ELSE 0 END,
                    updated_at = excluded.updated_at
                """, arguments: [device.appId, device.userId, device.deviceId, device.kind.rawValue, device.token,
                                 device.environment, device.platform, device.badge, device.updatedAt])
        }
    }

    public func removePushDevice(appId: Int64, userId: String, deviceId: String, kind: PushTokenKind?) async throws {
        try await pool.write { db in
            if let kind {
                try db.execute(sql: "DELETE FROM push_devices WHERE app_id = ? AND user_id = ? AND device_id = ? AND kind = ?",
                               arguments: [appId, userId, deviceId, kind.rawValue])
            } else {
                try db.execute(sql: "DELETE FROM push_devices WHERE app_id = ? AND user_id = ? AND device_id = ?",
                               arguments: [appId, userId, deviceId])
            }
        }
    }

    public func removePushToken(appId: Int64, kind: PushTokenKind, token: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_devices WHERE app_id = ? AND kind = ? AND token = ?",
                           arguments: [appId, kind.rawValue, token])
        }
    }

    public func pushDevices(appId: Int64, userIds: [String]) async throws -> [PushDeviceRecord] {
        guard !userIds.isEmpty else { return [] }
        return try await pool.read { db in
            var devices: [PushDeviceRecord] = []
            for chunk in userIds.uniqued().chunked(Self.maxBoundIds) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let rows = try Row.fetchAll(db, sql: """
                    SELECT user_id, device_id, kind, token, environment, platform, badge, updated_at FROM push_devices
                    WHERE app_id = ? AND user_id IN (\(marks))
                    """, arguments: Self.arguments([appId], chunk))
                for row in rows {
                    guard let kind = PushTokenKind(rawValue: row[2]) else { continue }
                    devices.append(PushDeviceRecord(appId: appId, userId: row[0], deviceId: row[1], platform: row[5], kind: kind,
                                                    token: row[3], environment: row[4], badge: row[6], updatedAt: row[7]))
                }
            }
            return devices
        }
    }

    public func pushDeviceUsers(appId: Int64, afterUserId: String, limit: Int) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(db, sql: """
                SELECT DISTINCT user_id FROM push_devices WHERE app_id = ? AND user_id > ? ORDER BY user_id LIMIT ?
                """, arguments: [appId, afterUserId, limit])
        }
    }

    public func resetPushBadge(appId: Int64, userId: String, deviceId: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE push_devices SET badge = 0 WHERE app_id = ? AND user_id = ? AND device_id = ? AND badge <> 0",
                           arguments: [appId, userId, deviceId])
        }
    }

    // MARK: profiles

    public func pushProfiles(appId: Int64, userIds: [String]) async throws -> [String: PushProfileRecord] {
        guard !userIds.isEmpty else { return [:] }
        return try await pool.read { db in
            var profiles: [String: PushProfileRecord] = [:]
            for chunk in userIds.uniqued().chunked(Self.maxBoundIds) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                for row in try Row.fetchAll(db, sql: """
                    SELECT user_id, language, show_content, receive_web FROM push_profiles WHERE app_id = ? AND user_id IN (\(marks))
                    """, arguments: Self.arguments([appId], chunk)) {
                    profiles[row[0]] = PushProfileRecord(language: row[1], showContent: row[2], receiveWhileWebOnline: row[3])
                }
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
        return try await pool.read { db in
            var found: [String: String] = [:]
            for chunk in owners.uniqued().chunked(Self.maxBoundIds) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                for row in try Row.fetchAll(db, sql: """
                    SELECT user_id, remark FROM user_remarks WHERE app_id = ? AND target_id = ? AND user_id IN (\(marks))
                    """, arguments: Self.arguments([appId, targetId], chunk)) {
                    found[row[0]] = row[1]
                }
            }
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
        return try await pool.read { db in
            var found: [String: PushPreferenceRecord] = [:]
            for chunk in userIds.uniqued().chunked(Self.maxBoundIds) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                for row in try Row.fetchAll(db, sql: """
                    SELECT user_id, target_id, channel_id, unpush_level FROM conversation_settings
                    WHERE app_id = ? AND conv_type = ? AND unpush_level <> 0 AND user_id IN (\(marks))
                        AND ((target_id = ? AND channel_id IN (?, '')) OR (target_id = '' AND channel_id = ''))
                    """, arguments: Self.arguments([appId, type.rawValue], chunk, [targetId, channelId])) {
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
                for (userId, quiet) in try Self.quietHours(db, appId: appId, userIds: chunk) {
                    found[userId, default: PushPreferenceRecord()].quietHours = quiet
                }
            }
            return found
        }
    }

    // MARK: records

    public func recordPushDecisions(_ records: [PushRecord], badges: [PushBadge], node: String, cursor: UInt64?) async throws {
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO push_records (app_id, message_uid, user_id, device_id, kind, token, environment, notification,
                    status, code, attempts, next_attempt_at, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_id, message_uid, user_id, device_id) DO NOTHING
                """)
            for record in records {
                try insert.execute(arguments: [
                    record.appId, record.messageUid, record.userId, record.deviceId, record.kind?.rawValue, record.token,
                    record.environment, record.notification, record.status.rawValue, record.code, record.attempts,
                    record.nextAttemptAt, record.createdAt, record.updatedAt,
                ])
            }
            let badge = try db.cachedStatement(sql: "UPDATE push_devices SET badge = ? WHERE app_id = ? AND user_id = ? AND device_id = ?")
            for entry in badges {
                try badge.execute(arguments: [entry.badge, entry.appId, entry.userId, entry.deviceId])
            }
            if let cursor {
                try db.execute(sql: """
                    INSERT INTO push_cursors (node, seq) VALUES (?, ?)
                    ON CONFLICT (node) DO UPDATE SET seq = MAX(push_cursors.seq, excluded.seq)
                    """, arguments: [node, Int64(clamping: cursor)])
            }
        }
    }

    public func pushCursor(node: String) async throws -> UInt64? {
        try await pool.read { db in
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

    static let pushRecordColumns = """
        id, app_id, message_uid, user_id, device_id, kind, token, environment, notification, status, code, attempts,
        next_attempt_at, created_at, updated_at
        """

    static func pushRecord(_ row: Row) -> PushRecord {
        let kind: String? = row[5]
        let status: Int = row[9]
        return PushRecord(id: row[0], appId: row[1], messageUid: row[2], userId: row[3], deviceId: row[4],
                          kind: kind.flatMap(PushTokenKind.init(rawValue:)), token: row[6], environment: row[7],
                          notification: row[8], status: PushStatus(rawValue: status) ?? .failed, code: row[10],
                          attempts: row[11], nextAttemptAt: row[12], createdAt: row[13], updatedAt: row[14])
    }

    public func duePushes(now: Int64, limit: Int) async throws -> [PushRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Self.pushRecordColumns) FROM push_records WHERE status = 0 AND next_attempt_at <= ?
                ORDER BY next_attempt_at, id LIMIT ?
                """, arguments: [now, limit]).map(Self.pushRecord)
        }
    }

    public func claimPushes(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return try await pool.write { db in
            var claimed: [Int64] = []
            for chunk in ids.uniqued().chunked(Self.maxBoundIds - 2) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                claimed += try Int64.fetchAll(db, sql: """
                    UPDATE push_records SET next_attempt_at = ? WHERE id IN (\(marks)) AND status = 0 AND next_attempt_at <= ?
                    RETURNING id
                    """, arguments: StatementArguments([leaseUntil] + chunk.map { $0 as any DatabaseValueConvertible } + [now]))
            }
            return claimed
        }
    }

    public func recordPushAttempts(_ attempts: [PushAttempt]) async throws {
        guard !attempts.isEmpty else { return }
        try await pool.write { db in
            let update = try db.cachedStatement(sql: """
                UPDATE push_records SET status = ?, code = ?, attempts = ?, next_attempt_at = ?, updated_at = ?
                WHERE id = ? AND status = 0
                """)
            for attempt in attempts {
                try update.execute(arguments: [attempt.status.rawValue, attempt.code, attempt.attempts, attempt.nextAttemptAt,
                                               attempt.now, attempt.id])
            }
        }
    }

    public func pushRecords(appId: Int64, messageUid: String?, userId: String?, limit: Int) async throws -> [PushRecord] {
        try await pool.read { db in
            var conditions = ["app_id = ?"]
            var arguments: [any DatabaseValueConvertible] = [appId]
            if let messageUid {
                conditions.append("message_uid = ?")
                arguments.append(messageUid)
            }
            if let userId {
                conditions.append("user_id = ?")
                arguments.append(userId)
            }
            arguments.append(limit)
            return try Row.fetchAll(db, sql: """
                SELECT \(Self.pushRecordColumns) FROM push_records WHERE \(conditions.joined(separator: " AND "))
                ORDER BY id DESC LIMIT ?
                """, arguments: StatementArguments(arguments)).map(Self.pushRecord)
        }
    }

    public func deletePushRecords(createdBefore before: Int64) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_records WHERE created_at < ? AND status <> 0", arguments: [before])
            return db.changesCount
        }
    }
}

extension SQLiteStore {
    /// Ids bound in one `IN (...)`: well under SQLite's 32,766 variables.
    static let maxBoundIds = 500

    /// Statement arguments: `head`, then the ids, then `tail`.
    static func arguments(_ head: [any DatabaseValueConvertible], _ ids: some Collection<String>,
                          _ tail: [any DatabaseValueConvertible] = []) -> StatementArguments {
        StatementArguments(head + ids.map { $0 as any DatabaseValueConvertible } + tail)
    }

    /// The quiet hours of these users (those without any are left out).
    static func quietHours(_ db: Database, appId: Int64, userIds: some Collection<String>) throws -> [String: QuietHours] {
        let marks = Array(repeating: "?", count: userIds.count).joined(separator: ",")
        var found: [String: QuietHours] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT user_id, quiet_start, quiet_span, quiet_level, quiet_time_zone FROM conversation_state_users
            WHERE app_id = ? AND quiet_start IS NOT NULL AND user_id IN (\(marks))
            """, arguments: Self.arguments([appId], userIds)) {
            let start: String = row[1]
            found[row[0]] = QuietHours(startTime: start, spanMinutes: row[2],
                                       level: PushNotificationLevel(rawValue: row[3]) ?? .blocked, timeZone: row[4])
        }
        return found
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
