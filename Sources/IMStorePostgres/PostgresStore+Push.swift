import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// Push notifications: devices, profiles, templates, remarks, app settings and the push records
/// (the SQLite store's `SQLiteStore+Push`).
extension PostgresStore {
    // MARK: devices

    /// Under the token's lock: two users taking one token at once would otherwise both find no
    /// other holder, and the second insert would break the token's unique index.
    public func setPushDevice(_ device: PushDeviceRecord) async throws {
        try await write { connection in
            try await connection.lock(LockKey.pushToken(device.appId, device.kind, device.token), logger)
            try await connection.run("""
                DELETE FROM push_devices WHERE app_id = \(device.appId) AND kind = \(device.kind.rawValue) AND token = \(device.token)
                    AND NOT (user_id = \(device.userId) AND device_id = \(device.deviceId))
                """, logger)
            try await connection.run("""
                INSERT INTO push_devices (app_id, user_id, device_id, kind, token, environment, platform, badge, updated_at)
                VALUES (\(device.appId), \(device.userId), \(device.deviceId), \(device.kind.rawValue), \(device.token),
                        \(device.environment), \(device.platform), \(Int64(device.badge)), \(device.updatedAt))
                ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET
                    token = excluded.token, environment = excluded.environment, platform = excluded.platform,
                    badge = CASE WHEN push_devices.token = excluded.token THEN push_devices.badge ELSE 0 END,
                    updated_at = excluded.updated_at
                """, logger)
        }
    }

    public func removePushDevice(appId: Int64, userId: String, deviceId: String, kind: PushTokenKind?) async throws {
        _ = try await rows("""
            DELETE FROM push_devices WHERE app_id = \(appId) AND user_id = \(userId) AND device_id = \(deviceId)
                AND (\(kind?.rawValue)::text IS NULL OR kind = \(kind?.rawValue))
            """)
    }

    public func removePushToken(appId: Int64, kind: PushTokenKind, token: String) async throws {
        _ = try await rows("DELETE FROM push_devices WHERE app_id = \(appId) AND kind = \(kind.rawValue) AND token = \(token)")
    }

    public func pushDevices(appId: Int64, userIds: [String]) async throws -> [PushDeviceRecord] {
        guard !userIds.isEmpty else { return [] }
        var devices: [PushDeviceRecord] = []
        for row in try await rows("""
            SELECT user_id, device_id, kind, token, environment, platform, badge, updated_at FROM push_devices
            WHERE app_id = \(appId) AND user_id = ANY(\(userIds.uniqued()))
            """) {
            var cells = Cells(row)
            let userId = try cells.string(), deviceId = try cells.string(), kind = try cells.string()
            let token = try cells.string(), environment = try cells.string(), platform = try cells.string()
            let badge = try cells.int(), updatedAt = try cells.int()
            guard let kind = PushTokenKind(rawValue: kind) else { continue }
            devices.append(PushDeviceRecord(appId: appId, userId: userId, deviceId: deviceId, platform: platform, kind: kind, token: token,
                                            environment: environment, badge: Int(badge), updatedAt: updatedAt))
        }
        return devices
    }

    public func pushDeviceUsers(appId: Int64, afterUserId: String, limit: Int) async throws -> [String] {
        var users: [String] = []
        for row in try await rows("""
            SELECT DISTINCT user_id FROM push_devices WHERE app_id = \(appId) AND user_id > \(afterUserId) ORDER BY user_id LIMIT \(Int64(limit))
            """) {
            var cells = Cells(row)
            users.append(try cells.string())
        }
        return users
    }

    public func resetPushBadge(appId: Int64, userId: String, deviceId: String) async throws {
        _ = try await rows("""
            UPDATE push_devices SET badge = 0 WHERE app_id = \(appId) AND user_id = \(userId) AND device_id = \(deviceId) AND badge <> 0
            """)
    }

    // MARK: profiles

    public func pushProfiles(appId: Int64, userIds: [String]) async throws -> [String: PushProfileRecord] {
        guard !userIds.isEmpty else { return [:] }
        var profiles: [String: PushProfileRecord] = [:]
        for row in try await rows("""
            SELECT user_id, language, show_content, receive_web FROM push_profiles
            WHERE app_id = \(appId) AND user_id = ANY(\(userIds.uniqued()))
            """) {
            var cells = Cells(row)
            profiles[try cells.string()] = PushProfileRecord(language: try cells.optionalString(), showContent: try cells.bool(),
                                                             receiveWhileWebOnline: try cells.bool())
        }
        return profiles
    }

    /// The default profile is not stored: setting it removes the user's row.
    public func setPushProfile(appId: Int64, userId: String, profile: PushProfileRecord) async throws {
        if profile == .default {
            _ = try await rows("DELETE FROM push_profiles WHERE app_id = \(appId) AND user_id = \(userId)")
        } else {
            _ = try await rows("""
                INSERT INTO push_profiles (app_id, user_id, language, show_content, receive_web)
                VALUES (\(appId), \(userId), \(profile.language), \(profile.showContent.flag), \(profile.receiveWhileWebOnline.flag))
                ON CONFLICT (app_id, user_id) DO UPDATE SET language = excluded.language,
                    show_content = excluded.show_content, receive_web = excluded.receive_web
                """)
        }
    }

    // MARK: templates

    /// Counted under the app's template lock, so concurrent creations never pass `maxTemplates`.
    public func upsertPushTemplate(appId: Int64, template: PushTemplateRecord, maxTemplates: Int) async throws {
        let entries = String(decoding: try JSONEncoder().encode(template.entries), as: UTF8.self)
        try await write { connection in
            try await connection.lock(LockKey.pushTemplates(appId), logger)
            let exists = try await !connection.rows("""
                SELECT 1 FROM push_templates WHERE app_id = \(appId) AND template_id = \(template.templateId)
                """, logger).isEmpty
            if !exists {
                var cells = Cells(try await connection.rows("SELECT COUNT(*) FROM push_templates WHERE app_id = \(appId)", logger)[0])
                if try cells.int() >= Int64(maxTemplates) { throw StoreRefusal.tooManyPushTemplates(limit: maxTemplates) }
            }
            try await connection.run("""
                INSERT INTO push_templates (app_id, template_id, name, entries, updated_at)
                VALUES (\(appId), \(template.templateId), \(template.name), \(entries), \(template.updatedAt))
                ON CONFLICT (app_id, template_id) DO UPDATE SET name = excluded.name, entries = excluded.entries,
                    updated_at = excluded.updated_at
                """, logger)
        }
    }

    public func deletePushTemplate(appId: Int64, templateId: String) async throws -> Bool {
        try await !rows("DELETE FROM push_templates WHERE app_id = \(appId) AND template_id = \(templateId) RETURNING 1").isEmpty
    }

    public func pushTemplates(appId: Int64) async throws -> [PushTemplateRecord] {
        try await rows("""
            SELECT template_id, name, entries, updated_at FROM push_templates WHERE app_id = \(appId) ORDER BY template_id
            """).map { row in
            var cells = Cells(row)
            let templateId = try cells.string(), name = try cells.string(), entries = try cells.string()
            return PushTemplateRecord(templateId: templateId, name: name,
                                      entries: try JSONDecoder().decode([String: PushTemplateRecord.Entry].self, from: Data(entries.utf8)),
                                      updatedAt: try cells.int())
        }
    }

    // MARK: remarks

    public func setRemarks(appId: Int64, userId: String, remarks: [String: String]) async throws {
        guard !remarks.isEmpty else { return }
        let removed = remarks.filter { $0.value.isEmpty }.keys.sorted()
        let set = remarks.filter { !$0.value.isEmpty }.sorted { $0.key < $1.key }
        try await write { connection in
            if !removed.isEmpty {
                try await connection.run("""
                    DELETE FROM user_remarks WHERE app_id = \(appId) AND user_id = \(userId) AND target_id = ANY(\(removed))
                    """, logger)
            }
            if !set.isEmpty {
                try await connection.run("""
                    INSERT INTO user_remarks (app_id, user_id, target_id, remark)
                    SELECT \(appId), \(userId), r.target_id, r.remark
                    FROM unnest(\(set.map(\.key))::text[], \(set.map(\.value))::text[]) AS r(target_id, remark)
                    ON CONFLICT (app_id, user_id, target_id) DO UPDATE SET remark = excluded.remark
                    """, logger)
            }
        }
    }

    public func setGroupRemark(appId: Int64, groupId: String, userId: String, remark: String) async throws {
        if remark.isEmpty {
            _ = try await rows("DELETE FROM group_remarks WHERE app_id = \(appId) AND group_id = \(groupId) AND user_id = \(userId)")
        } else {
            _ = try await rows("""
                INSERT INTO group_remarks (app_id, group_id, user_id, remark) VALUES (\(appId), \(groupId), \(userId), \(remark))
                ON CONFLICT (app_id, group_id, user_id) DO UPDATE SET remark = excluded.remark
                """)
        }
    }

    public func groupRemark(appId: Int64, groupId: String, userId: String) async throws -> String? {
        try await rows("""
            SELECT remark FROM group_remarks WHERE app_id = \(appId) AND group_id = \(groupId) AND user_id = \(userId)
            """).first.map { row in var cells = Cells(row); return try cells.string() }
    }

    public func remarks(appId: Int64, userId: String, afterUserId: String, limit: Int) async throws -> [(userId: String, remark: String)] {
        try await rows("""
            SELECT target_id, remark FROM user_remarks WHERE app_id = \(appId) AND user_id = \(userId) AND target_id > \(afterUserId)
            ORDER BY target_id LIMIT \(Int64(limit))
            """).map { row in
            var cells = Cells(row)
            return (userId: try cells.string(), remark: try cells.string())
        }
    }

    public func remarks(appId: Int64, owners: [String], for targetId: String) async throws -> [String: String] {
        guard !owners.isEmpty else { return [:] }
        var found: [String: String] = [:]
        for row in try await rows("""
            SELECT user_id, remark FROM user_remarks WHERE app_id = \(appId) AND target_id = \(targetId) AND user_id = ANY(\(owners.uniqued()))
            """) {
            var cells = Cells(row)
            found[try cells.string()] = try cells.string()
        }
        return found
    }

    // MARK: app settings

    public func pushSettings(appId: Int64) async throws -> Data? {
        guard let row = try await rows("SELECT settings FROM push_settings WHERE app_id = \(appId)").first else { return nil }
        var cells = Cells(row)
        return try cells.next(Data.self)
    }

    public func setPushSettings(appId: Int64, settings: Data) async throws {
        _ = try await rows("""
            INSERT INTO push_settings (app_id, settings) VALUES (\(appId), \(ByteBuffer(bytes: settings)))
            ON CONFLICT (app_id) DO UPDATE SET settings = excluded.settings
            """)
    }

    // MARK: preferences

    /// The levels set for the conversation's type (target ''), the conversation (channel '') and
    /// its channel, and the users' quiet hours, from one snapshot.
    public func pushPreferences(appId: Int64, userIds: [String], type: ConversationType, targetId: String,
                                channelId: String) async throws -> [String: PushPreferenceRecord] {
        guard !userIds.isEmpty else { return [:] }
        let users = userIds.uniqued()
        return try await read { connection in
            var found: [String: PushPreferenceRecord] = [:]
            for row in try await connection.rows("""
                SELECT user_id, target_id, channel_id, unpush_level FROM conversation_settings
                WHERE app_id = \(appId) AND conv_type = \(Int64(type.rawValue)) AND unpush_level <> 0 AND user_id = ANY(\(users))
                    AND ((target_id = \(targetId) AND channel_id IN (\(channelId), '')) OR (target_id = '' AND channel_id = ''))
                """, logger) {
                var cells = Cells(row)
                let userId = try cells.string(), target = try cells.string(), channel = try cells.string()
                let level = PushNotificationLevel(rawValue: Int(try cells.int())) ?? .default
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
            for row in try await connection.rows("""
                SELECT user_id, quiet_start, quiet_span, quiet_level, quiet_time_zone FROM conversation_state_users
                WHERE app_id = \(appId) AND quiet_start IS NOT NULL AND user_id = ANY(\(users))
                """, logger) {
                var cells = Cells(row)
                let userId = try cells.string(), start = try cells.string(), span = try cells.int(), level = try cells.int()
                found[userId, default: PushPreferenceRecord()].quietHours = QuietHours(
                    startTime: start, spanMinutes: Int(span), level: PushNotificationLevel(rawValue: Int(level)) ?? .blocked,
                    timeZone: try cells.optionalString())
            }
            return found
        }
    }

    // MARK: records

    /// One transaction: the records (in their order; one already there for the same app, message,
    /// user and device is kept), the badges (the devices' rows locked in one order, so that two
    /// nodes setting badges of the same devices never wait for each other) and the node's cursor,
    /// which only rises.
    @discardableResult
    public func recordPushDecisions(_ records: [PushRecord], badges: [PushBadge], node: String, cursor: UInt64?) async throws -> [Int64] {
        // A device named twice gets its last badge, as when they are set one after another.
        var lastBadge: [PushBadgeKey: Int] = [:]
        for entry in badges { lastBadge[PushBadgeKey(appId: entry.appId, userId: entry.userId, deviceId: entry.deviceId)] = entry.badge }
        let badgeKeys = lastBadge.keys.sorted()
        guard !records.isEmpty || !badgeKeys.isEmpty || cursor != nil else { return [] }
        return try await write { connection in
            var ids = [Int64](repeating: 0, count: records.count)
            if !records.isEmpty {
                let inserted = try await connection.rows("""
                    INSERT INTO push_records (app_id, message_uid, user_id, device_id, kind, token, environment, notification,
                        status, code, attempts, next_attempt_at, created_at, updated_at)
                    SELECT r.app_id, r.message_uid, r.user_id, r.device_id, NULLIF(r.kind, ''), r.token, r.environment, r.notification,
                        r.status, r.code, r.attempts, r.next_attempt_at, r.created_at, r.updated_at
                    FROM unnest(\(records.map(\.appId))::bigint[], \(records.map(\.messageUid))::text[], \(records.map(\.userId))::text[],
                                \(records.map(\.deviceId))::text[], \(records.map { $0.kind?.rawValue ?? "" })::text[],
                                \(records.map(\.token))::text[], \(records.map(\.environment))::text[],
                                \(records.map { ByteBuffer(bytes: $0.notification) })::bytea[],
                                \(records.map { Int64($0.status.rawValue) })::bigint[], \(records.map(\.code))::text[],
                                \(records.map { Int64($0.attempts) })::bigint[], \(records.map(\.nextAttemptAt))::bigint[],
                                \(records.map(\.createdAt))::bigint[], \(records.map(\.updatedAt))::bigint[]) WITH ORDINALITY
                        AS r(app_id, message_uid, user_id, device_id, kind, token, environment, notification, status, code, attempts,
                             next_attempt_at, created_at, updated_at, ord)
                    ORDER BY r.ord
                    ON CONFLICT (app_id, message_uid, user_id, device_id) DO NOTHING
                    RETURNING id, app_id, message_uid, user_id, device_id
                    """, logger)
                // Each id to the first record of its key (a later one of the same key was left out).
                var places: [PushRecordKey: Int] = [:]
                for (place, record) in records.enumerated() {
                    let key = PushRecordKey(appId: record.appId, messageUid: record.messageUid, userId: record.userId, deviceId: record.deviceId)
                    if places[key] == nil { places[key] = place }
                }
                for row in inserted {
                    var cells = Cells(row)
                    let id = try cells.int()
                    let key = PushRecordKey(appId: try cells.int(), messageUid: try cells.string(), userId: try cells.string(),
                                            deviceId: try cells.string())
                    if let place = places[key] { ids[place] = id }
                }
            }
            if !badgeKeys.isEmpty {
                try await connection.run("""
                    WITH wanted AS (
                        SELECT * FROM unnest(\(badgeKeys.map(\.appId))::bigint[], \(badgeKeys.map(\.userId))::text[],
                                             \(badgeKeys.map(\.deviceId))::text[], \(badgeKeys.map { Int64(lastBadge[$0]!) })::bigint[])
                            AS w(app_id, user_id, device_id, badge)
                    ), locked AS (
                        SELECT d.app_id, d.user_id, d.device_id, d.kind FROM push_devices d
                        JOIN wanted w ON d.app_id = w.app_id AND d.user_id = w.user_id AND d.device_id = w.device_id
                        ORDER BY d.app_id, d.user_id, d.device_id, d.kind
                        FOR UPDATE OF d
                    )
                    UPDATE push_devices d SET badge = w.badge
                    FROM locked l JOIN wanted w ON w.app_id = l.app_id AND w.user_id = l.user_id AND w.device_id = l.device_id
                    WHERE d.app_id = l.app_id AND d.user_id = l.user_id AND d.device_id = l.device_id AND d.kind = l.kind
                    """, logger)
            }
            if let cursor {
                try await connection.run("""
                    INSERT INTO push_cursors (node, seq) VALUES (\(node), \(Int64(clamping: cursor)))
                    ON CONFLICT (node) DO UPDATE SET seq = GREATEST(push_cursors.seq, excluded.seq)
                    """, logger)
            }
            return ids
        }
    }

    /// What makes a push record one of a kind: its app, message, user and device.
    private struct PushRecordKey: Hashable {
        var appId: Int64
        var messageUid: String
        var userId: String
        var deviceId: String
    }

    public func pushCursor(node: String) async throws -> UInt64? {
        guard let row = try await rows("SELECT seq FROM push_cursors WHERE node = \(node)").first else { return nil }
        var cells = Cells(row)
        return try cells.seq()
    }

    /// By seq: seqs commit in their order (`commit`), so nothing appears later below a seq read.
    public func committedMessages(afterSeq seq: UInt64, limit: Int) async throws -> [StoredMessage] {
        try await rows(CommittedMessages(afterSeq: Int64(clamping: seq), limit: Int64(limit)))
    }

    public func lastCommittedSeq() async throws -> UInt64 {
        var cells = Cells(try await rows("SELECT MAX(seq) FROM messages")[0])
        return UInt64(max(0, try cells.next(Int64?.self) ?? 0))
    }

    static let pushRecordColumns = """
        id, app_id, message_uid, user_id, device_id, kind, token, environment, notification, status, code, attempts,
        next_attempt_at, created_at, updated_at
        """

    static func pushRecord(_ row: PostgresRow) throws -> PushRecord {
        var cells = Cells(row)
        let id = try cells.int(), appId = try cells.int(), messageUid = try cells.string(), userId = try cells.string()
        let deviceId = try cells.string(), kind = try cells.optionalString(), token = try cells.string()
        let environment = try cells.string(), notification = try cells.next(Data.self), status = try cells.int()
        return PushRecord(id: id, appId: appId, messageUid: messageUid, userId: userId, deviceId: deviceId,
                          kind: kind.flatMap(PushTokenKind.init(rawValue:)), token: token, environment: environment,
                          notification: notification, status: PushStatus(rawValue: Int(status)) ?? .failed, code: try cells.string(),
                          attempts: Int(try cells.int()), nextAttemptAt: try cells.int(), createdAt: try cells.int(),
                          updatedAt: try cells.int())
    }

    public func duePushes(now: Int64, limit: Int) async throws -> [PushRecord] {
        try await rows(DuePushes(now: now, limit: Int64(limit)))
    }

    public func nextPushAttempt() async throws -> Int64? {
        for row in try await rows("SELECT MIN(next_attempt_at) FROM push_records WHERE status = 0") {
            var cells = Cells(row)
            return try cells.next(Int64?.self)
        }
        return nil
    }

    /// One statement: a row another node claimed first no longer matches when its lock is released.
    public func claimPushes(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        var claimed: [Int64] = []
        for row in try await rows("""
            UPDATE push_records SET next_attempt_at = \(leaseUntil)
            WHERE id = ANY(\(ids)::bigint[]) AND status = 0 AND next_attempt_at <= \(now)
            RETURNING id
            """) {
            var cells = Cells(row)
            claimed.append(try cells.int())
        }
        return claimed
    }

    /// In one statement; a record named twice takes the attempts in their order while it is
    /// pending: the first that ends it, or else the last.
    public func recordPushAttempts(_ attempts: [PushAttempt]) async throws {
        guard !attempts.isEmpty else { return }
        var effective: [Int64: PushAttempt] = [:]
        for attempt in attempts where effective[attempt.id].map({ $0.status == .pending }) ?? true {
            effective[attempt.id] = attempt
        }
        let applied = effective.keys.sorted().map { effective[$0]! }
        _ = try await rows("""
            UPDATE push_records r SET status = a.status, code = a.code, attempts = a.attempts, next_attempt_at = a.next_attempt_at,
                updated_at = a.now
            FROM unnest(\(applied.map(\.id))::bigint[], \(applied.map { Int64($0.status.rawValue) })::bigint[],
                        \(applied.map(\.code))::text[], \(applied.map { Int64($0.attempts) })::bigint[],
                        \(applied.map(\.nextAttemptAt))::bigint[], \(applied.map(\.now))::bigint[])
                AS a(id, status, code, attempts, next_attempt_at, now)
            WHERE r.id = a.id AND r.status = 0
            """)
    }

    public func pushRecords(appId: Int64, messageUid: String?, userId: String?, limit: Int) async throws -> [PushRecord] {
        try await rows("""
            SELECT \(unescaped: Self.pushRecordColumns) FROM push_records
            WHERE app_id = \(appId) AND (\(messageUid)::text IS NULL OR message_uid = \(messageUid))
                AND (\(userId)::text IS NULL OR user_id = \(userId))
            ORDER BY id DESC LIMIT \(Int64(limit))
            """).map(Self.pushRecord)
    }

    public func deletePushRecords(createdBefore before: Int64) async throws -> Int {
        var cells = Cells(try await rows("""
            WITH gone AS (DELETE FROM push_records WHERE created_at < \(before) AND status <> 0 RETURNING 1)
            SELECT COUNT(*) FROM gone
            """)[0])
        return Int(try cells.int())
    }
}

/// A device whose badge a decision sets, ordered as its rows are locked.
struct PushBadgeKey: Hashable, Comparable {
    let appId: Int64
    let userId: String
    let deviceId: String

    /// Bytewise, as the "C" collation orders the ids.
    static func < (a: Self, b: Self) -> Bool {
        if a.appId != b.appId { return a.appId < b.appId }
        if a.userId != b.userId { return a.userId.utf8.lexicographicallyPrecedes(b.userId.utf8) }
        return a.deviceId.utf8.lexicographicallyPrecedes(b.deviceId.utf8)
    }
}

// MARK: - the push sender's prepared statements

/// Messages of every app committed after a seq, in seq order.
struct CommittedMessages: PostgresPreparedStatement {
    static let name = "imserver_committed_messages"
    static let sql = "SELECT \(PostgresStore.columns) FROM messages WHERE seq > $1 ORDER BY seq LIMIT $2"
    typealias Row = StoredMessage

    let afterSeq: Int64
    let limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(afterSeq)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> StoredMessage { try PostgresStore.message(row) }
}

/// Pending pushes due at a time, oldest first (the partial index `push_records_pending`).
struct DuePushes: PostgresPreparedStatement {
    static let name = "imserver_due_pushes"
    static let sql = """
        SELECT \(PostgresStore.pushRecordColumns) FROM push_records WHERE status = 0 AND next_attempt_at <= $1
        ORDER BY next_attempt_at, id LIMIT $2
        """
    typealias Row = PushRecord

    let now: Int64
    let limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(now)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PushRecord { try PostgresStore.pushRecord(row) }
}
