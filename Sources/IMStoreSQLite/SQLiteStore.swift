import Foundation
import GRDB
import Synchronization
import IMCore
import IMStore

/// The embedded store: two SQLite databases (WAL, `synchronous=FULL`) in the data directory,
/// `imserver.sqlite` for everything but the push bookkeeping, `imserver-push.sqlite` for that.
///
/// Every write is one transaction that is on disk when the call returns, so a message acknowledged
/// to its sender survives `kill -9` and power loss. Reads run concurrently with the writer (WAL).
///
/// SQLite has one writer per database. The push records (a row per message's batch of up to
/// 65,535 records, rewritten when claimed and when answered), the decide cursors and the devices'
/// badges are in a file of their own, so that a large group's pushes never queue the message log's
/// commits behind them: a 2,700-device message is a row, and a row listing its badges (held in
/// memory, SQLiteStore+PushBadges). Nothing in that file needs a transaction with the other: a
/// crash between them re-decides from the cursor (docs/ARCHITECTURE.md, Decisions).
public final class SQLiteStore: IMStore {
    let pool: DatabasePool
    /// `imserver-push.sqlite`: the push records (push_batches, push_batch_states, push_user_batches), push_cursors, push_badges.
    let pushPool: DatabasePool
    /// Read-only connections to the main file for the push decisions' reads (devices, do-not-disturb
    /// levels, profiles, remarks of thousands of recipients per group message), at the push file's
    /// low priority.
    let pushReader: DatabasePool
    public let path: String
    public let pushPath: String
    /// When push_user_batches was last filled (SQLiteStore+PushRecords).
    let pushUserIndex = Mutex(PushUserIndexState())
    /// The badges of the users the decisions read (SQLiteStore+PushBadges).
    let pushBadges = Mutex(PushBadgeMemory())
    /// The devices of the users the decisions read (SQLiteStore+PushBadges).
    let pushDevices = Mutex(PushDeviceMemory())
    /// Sync's retention floors, per app and minute (`retentionFloor`).
    let syncFloors = Mutex<[SyncFloorKey: Int64]>([:])

    /// How long held badges may wait for push_badges (SQLiteStore+PushBadges).
    let badgeFlushInterval: Duration
    /// How many users' badges and devices are held (SQLiteStore+PushBadges).
    let pushMemoryLimits: PushMemoryLimits

    /// How much of the push file the store holds in memory (SQLiteStore+PushBadges).
    public struct PushMemoryLimits: Sendable {
        /// Users whose badges are held at most; past it, those with nothing to flush are let go.
        public var heldBadgeUsers = 200_000
        /// Users whose changed badges may wait for push_badges (besides `badgeFlushInterval`).
        public var badgeFlushUsers = 20_000
        /// Users whose devices are held at most; past it, they are let go and read again.
        public var heldDeviceUsers = 200_000

        public init() {}
    }

    /// Opens (and creates or migrates) the database in `directory`. `badgeFlushInterval`: how long
    /// the badges decisions set may stay in memory (and the log) before push_badges gets them.
    public init(directory: String, badgeFlushInterval: Duration = .seconds(2), pushMemoryLimits: PushMemoryLimits = PushMemoryLimits()) throws {
        self.badgeFlushInterval = badgeFlushInterval
        self.pushMemoryLimits = pushMemoryLimits
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw IMError(.databaseError, "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("imserver.sqlite")
        pushPath = (directory as NSString).appendingPathComponent(Self.pushFileName)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // The one writer keeps its page cache between transactions (nothing else changes the
            // file), so a large one keeps the index pages that writes land on all over a table
            // (unread counts; in the push file, push records by user) in memory instead of reading
            // them again with pread per transaction. Readers start over whenever the writer commits: theirs stays
            // at SQLite's 2 MiB default.
            if !db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)")
            }
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw IMError(.databaseError, "cannot open the database \(path): \(error)")
        }
        // The push file's work runs on Dispatch's background threads: on Linux Dispatch sets a
        // worker's nice value by its QoS (GRDB's default, user-initiated, is nice -2, above the
        // event loops; background is +4), so a large group's push bookkeeping yields the cores to
        // delivery instead of preempting it.
        var pushConfiguration = configuration
        pushConfiguration.qos = .background
        var readerConfiguration = pushConfiguration
        readerConfiguration.readonly = true
        readerConfiguration.maximumReaderCount = 2
        do {
            pushPool = try DatabasePool(path: pushPath, configuration: pushConfiguration)
            try Self.pushMigrator.migrate(pushPool)
            try Self.movePushBookkeeping(from: pool, at: path, to: pushPool)
            try Self.replayBadgeLog(pushPool)
            pushReader = try DatabasePool(path: path, configuration: readerConfiguration)
        } catch {
            try? pool.close()
            throw IMError(.databaseError, "cannot open the database \(pushPath): \(error)")
        }
    }

    /// The writer's page cache (filled only as pages are used).
    static let writerCacheKiB = 65_536

    /// Closes the database once nothing uses it any more (the server's services have stopped):
    /// every later access fails.
    public func close() throws {
        do {
            try pool.close()
        } catch {
            throw IMError(.databaseError, "cannot close the database \(path): \(error)")
        }
        do {
            try flushBadges()
            try pushReader.close()
            try pushPool.close()
        } catch {
            throw IMError(.databaseError, "cannot close the database \(pushPath): \(error)")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE apps (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_key TEXT NOT NULL UNIQUE,
                    app_secret TEXT NOT NULL,
                    name TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE users (
                    app_id INTEGER NOT NULL REFERENCES apps(id),
                    user_id TEXT NOT NULL,
                    name TEXT NOT NULL DEFAULT '',
                    portrait_uri TEXT NOT NULL DEFAULT '',
                    created_at INTEGER NOT NULL,
                    tokens_valid_after INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (app_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE messages (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id INTEGER NOT NULL,
                    conv_type INTEGER NOT NULL,
                    conv_key TEXT NOT NULL,
                    target_id TEXT NOT NULL,
                    sender_id TEXT NOT NULL,
                    object_name TEXT NOT NULL,
                    content BLOB NOT NULL,
                    uid TEXT NOT NULL UNIQUE,
                    sent_time INTEGER NOT NULL,
                    flags INTEGER NOT NULL,
                    in_history INTEGER NOT NULL,
                    client_msg_id TEXT NOT NULL,
                    push_content TEXT NOT NULL,
                    push_data TEXT NOT NULL,
                    disable_notification INTEGER NOT NULL,
                    can_include_expansion INTEGER NOT NULL,
                    expansion TEXT,
                    channel_id TEXT NOT NULL
                );
                CREATE INDEX messages_by_conversation ON messages (app_id, conv_key, sent_time);
                CREATE INDEX messages_by_target ON messages (app_id, target_id, seq);
                CREATE INDEX messages_by_sender ON messages (app_id, sender_id, seq);
                CREATE UNIQUE INDEX messages_by_client_id ON messages (app_id, sender_id, client_msg_id)
                    WHERE client_msg_id <> '';
                """)
        }
        migrator.registerMigration("v2-directory") { db in
            try db.execute(sql: """
                ALTER TABLE users ADD COLUMN blocked_until INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX users_blocked ON users (app_id, blocked_until) WHERE blocked_until > 0;
                ALTER TABLE messages ADD COLUMN include_sender INTEGER NOT NULL DEFAULT 1;
                CREATE INDEX messages_by_time ON messages (app_id, sent_time);
                CREATE TABLE user_lists (
                    app_id INTEGER NOT NULL, owner TEXT NOT NULL, kind INTEGER NOT NULL, member TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, owner, kind, member)
                ) WITHOUT ROWID;
                CREATE TABLE user_tags (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, tag TEXT NOT NULL,
                    PRIMARY KEY (app_id, user_id, tag)
                ) WITHOUT ROWID;
                CREATE TABLE chat_groups (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id)
                ) WITHOUT ROWID;
                CREATE TABLE group_members (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL, joined_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE INDEX group_members_by_user ON group_members (app_id, user_id);
                CREATE TABLE group_mutes (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                    since INTEGER NOT NULL, until INTEGER NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE muted_groups (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL,
                    PRIMARY KEY (app_id, group_id)
                ) WITHOUT ROWID;
                CREATE TABLE group_mute_whitelist (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE TABLE sensitive_words (
                    app_id INTEGER NOT NULL, word TEXT NOT NULL, replacement TEXT, created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, word)
                ) WITHOUT ROWID;
                CREATE TABLE conversation_settings (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, conv_type INTEGER NOT NULL, target_id TEXT NOT NULL,
                    channel_id TEXT NOT NULL, unpush_level INTEGER NOT NULL,
                    PRIMARY KEY (app_id, user_id, conv_type, target_id, channel_id)
                ) WITHOUT ROWID;
                CREATE TABLE deleted_message_logs (
                    app_id INTEGER NOT NULL, hour TEXT NOT NULL,
                    PRIMARY KEY (app_id, hour)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3-groups") { db in
            try db.execute(sql: """
                ALTER TABLE messages ADD COLUMN audience TEXT;
                ALTER TABLE messages ADD COLUMN receipt_requested INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE chat_groups ADD COLUMN dismissed_at INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE chat_groups ADD COLUMN created_seq INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_members ADD COLUMN joined_seq INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_members ADD COLUMN history_after_seq INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE message_reads (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id INTEGER NOT NULL, uid TEXT NOT NULL, sender_id TEXT NOT NULL, group_id TEXT NOT NULL,
                    reader_id TEXT NOT NULL, read_time INTEGER NOT NULL,
                    UNIQUE (app_id, uid, reader_id)
                );
                CREATE INDEX message_reads_by_sender ON message_reads (app_id, sender_id, seq);
                CREATE INDEX message_reads_by_message ON message_reads (app_id, uid, seq);
                """)
        }
        migrator.registerMigration("v4-conversation-state") { db in
            try Self.createConversationState(db)
        }
        migrator.registerMigration("v5-message-lifecycle") { db in
            try db.execute(sql: """
                ALTER TABLE messages ADD COLUMN expansion_times TEXT;
                CREATE TABLE hidden_messages (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, uid TEXT NOT NULL,
                    PRIMARY KEY (app_id, user_id, uid)
                ) WITHOUT ROWID;
                CREATE TABLE cleared_conversations (
                    app_id INTEGER NOT NULL, user_id TEXT NOT NULL, conv_key TEXT NOT NULL, cleared_through INTEGER NOT NULL,
                    PRIMARY KEY (app_id, user_id, conv_key)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v6-chatrooms") { db in
            try Self.createChatroomTables(db)
        }
        migrator.registerMigration("v7-ultragroups") { db in
            try Self.createUltraGroupTables(db)
        }
        migrator.registerMigration("v8-system-messages") { db in
            // Tag-targeted system messages (/push.json) look users up by tag.
            try db.execute(sql: "CREATE INDEX user_tags_by_tag ON user_tags (app_id, tag, user_id)")
        }
        migrator.registerMigration("v9-ultragroup-unpush-levels") { db in
            try Self.createUltraGroupUnpushLevels(db)
        }
        migrator.registerMigration("v10-unambiguous-conversation-keys") { db in
            try Self.migrateConversationKeys(db)
        }
        migrator.registerMigration("v11-push") { db in
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN push_config BLOB NOT NULL DEFAULT x''")
            try Self.createPushTables(db)
        }
        migrator.registerMigration("v12-callbacks") { db in
            try Self.createCallbackTables(db)
        }
        migrator.registerMigration("v13-accounts") { db in
            try Self.createAccountTables(db)
        }
        migrator.registerMigration("v14-group-remarks") { db in
            try db.execute(sql: """
                CREATE TABLE group_remarks (
                    app_id INTEGER NOT NULL, group_id TEXT NOT NULL, user_id TEXT NOT NULL, remark TEXT NOT NULL,
                    PRIMARY KEY (app_id, group_id, user_id)
                ) WITHOUT ROWID;
                CREATE INDEX group_remarks_by_user ON group_remarks (app_id, user_id);
                """)
        }
        migrator.registerMigration("v15-app-ban") { db in
            try db.execute(sql: "ALTER TABLE apps ADD COLUMN banned INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v16-operations") { db in
            try Self.createOperationsTables(db)
        }
        migrator.registerMigration("v17-media") { db in
            try Self.createMediaTables(db)
        }
        return migrator
    }

    // MARK: apps and users

    public func loadApps() async throws -> [AppRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.appColumns) FROM apps ORDER BY id").map(Self.app)
        }
    }

    static let appColumns = "id, app_key, app_secret, name, created_at, banned, settings"

    static func app(_ row: Row) -> AppRecord {
        let settings: [String: JSONValue]
        if case .object(let object)? = try? JSONValue(data: Data((row["settings"] as String).utf8)) {
            settings = object
        } else {
            settings = [:]
        }
        return AppRecord(id: row["id"], appKey: row["app_key"], appSecret: row["app_secret"], name: row["name"], createdAt: row["created_at"],
                         banned: row["banned"], settings: settings)
    }

    public func deleteApp(appId: Int64, batch: Int) async throws {
        while try await deleteMessages(appId: appId, conversationKey: nil, ultraGroups: true, sentBefore: Int64.max, limit: batch) == batch {}
        try await pool.write { db in
            let tables = try String.fetchAll(db, sql: """
                SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'apps' ORDER BY name
                """)
            db.afterNextTransaction { _ in self.pushDevices.withLock { $0.forget(appId: appId) } }
            for table in tables where try Row.fetchAll(db, sql: "PRAGMA table_info(\"\(table)\")").contains(where: { $0["name"] == "app_id" }) {
                try db.execute(sql: "DELETE FROM \"\(table)\" WHERE app_id = ?", arguments: [appId])
            }
            try db.execute(sql: "DELETE FROM apps WHERE id = ?", arguments: [appId])
        }
        try await pushPool.write { db in
            try flushBadges(db)
            try Self.deletePushRecords(db, appId: appId)
            try db.execute(sql: "DELETE FROM push_badges WHERE app_id = ?", arguments: [appId])
            db.afterNextTransaction { _ in
                self.pushBadges.withLock { memory in memory.users = memory.users.filter { $0.key.appId != appId } }
            }
        }
    }

    public func setAppBanned(appKey: String, banned: Bool) async throws -> AppRecord? {
        try await pool.write { db in
            try db.execute(sql: "UPDATE apps SET banned = ? WHERE app_key = ?", arguments: [banned, appKey])
            return try Row.fetchOne(db, sql: "SELECT \(Self.appColumns) FROM apps WHERE app_key = ?",
                                    arguments: [appKey]).map(Self.app)
        }
    }

    public func upsertApp(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO apps (app_key, app_secret, name, created_at) VALUES (?, ?, ?, ?)
                ON CONFLICT(app_key) DO UPDATE SET app_secret = excluded.app_secret, name = excluded.name
                """, arguments: [appKey, appSecret, name, now])
            return Self.app(try Row.fetchOne(db, sql: "SELECT \(Self.appColumns) FROM apps WHERE app_key = ?",
                                             arguments: [appKey])!)
        }
    }

    // MARK: messages

    static let columns = """
        seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
        client_msg_id, push_content, push_data, disable_notification, can_include_expansion, expansion, channel_id,
        include_sender, audience, receipt_requested, push_config
        """

    /// Stores the new messages in order, each with the next seq. A message whose sentTime is not
    /// after its conversation's newest is stored 1 ms after it (and returned so): sentTimes
    /// increase in every conversation, which history paging by sentTime relies on, whoever
    /// stamped them.
    public func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome] {
        try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO messages (app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                    sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                    can_include_expansion, expansion, channel_id, include_sender, audience, expansion_times, mentioned,
                    push_config)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            // Both run for every message: read through `firstInteger` (the seq of a duplicate; the
            // row itself is read only when there is one).
            let existing = try db.cachedStatement(sql: """
                SELECT seq FROM messages WHERE app_id = ? AND sender_id = ? AND client_msg_id = ? /* commit: duplicate */
                """)
            let newest = try db.cachedStatement(sql: "SELECT MAX(sent_time) FROM messages WHERE app_id = ? AND conv_key = ? /* commit: newest */")
            var lastSentTime: [AppConversation: Int64] = [:]
            var outcomes: [CommitOutcome] = []
            outcomes.reserveCapacity(messages.count)
            for var message in messages {
                if !message.clientMessageId.isEmpty,
                   let seq = try existing.firstInteger(message.appId, message.senderId, message.clientMessageId),
                   let row = try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM messages WHERE seq = ?", arguments: [seq]) {
                    outcomes.append(.duplicate(try Self.message(row)))
                    continue
                }
                let conversation = AppConversation(appId: message.appId, key: message.conversationKey)
                if let last = try lastSentTime[conversation] ?? newest.firstInteger(message.appId, message.conversationKey),
                   message.sentTime <= last {
                    message.sentTime = last + 1
                }
                lastSentTime[conversation] = message.sentTime
                let (expansion, expansionTimes) = try ExpansionEntry.columns(
                    message.expansion.mapValues { ExpansionEntry(value: $0, time: message.sentTime) })
                try insert.execute(arguments: [
                    message.appId, message.conversationType.rawValue, message.conversationKey, message.targetId,
                    message.senderId, message.objectName, message.content, message.uid, message.sentTime,
                    message.flags.rawValue, message.isInHistory, message.clientMessageId, message.pushContent,
                    message.pushData, message.disableNotification, message.canIncludeExpansion, expansion,
                    message.channelId, message.includeSender, Self.audience(message.directedUserIds), expansionTimes,
                    Self.mentioned(message.mentions), message.pushConfig,
                ])
                message.seq = UInt64(db.lastInsertedRowID)
                outcomes.append(.stored(message))
            }
            return outcomes
        }
    }

    public func lastSentTime(appId: Int64, conversationKey: String) async throws -> Int64? {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT MAX(sent_time) FROM messages WHERE app_id = ? AND conv_key = ?",
                               arguments: [appId, conversationKey])
        }
    }

    public func syncPage(appId: Int64, userId: String, after: UInt64, minSentTime: Int64, limit: Int, maxBytes: Int) async throws -> SyncPage {
        try await pool.read { db in
            let floor = max(Int64(clamping: after), try retentionFloor(db, appId: appId, minSentTime: minSentTime))
            // Private and system messages: three index range scans (received, sent, broadcast to
            // everyone), each stopping after `limit + 1`. Only seqs: rows are read below for the
            // seqs this page takes, so a page of large messages never holds more than it sends.
            func scan(_ condition: String, _ id: String) throws -> [Int64] {
                try Int64.fetchAll(db.cachedStatement(sql: """
                    SELECT seq FROM messages
                    WHERE app_id = ? AND \(condition) AND seq > ? AND sent_time >= ? AND conv_type IN (1, 6)
                    ORDER BY seq LIMIT ?
                    """), arguments: [appId, id, floor, minSentTime, limit + 1])
            }
            var known = Set<UInt64>()
            var candidates: [UInt64] = []
            for list in [
                try scan("target_id = ?", userId),
                try scan("sender_id = ? AND include_sender = 1", userId),
                try scan("target_id = '\(StoredMessage.everyone)' AND sender_id <> ?", userId),
            ] {
                for seq in list where known.insert(UInt64(seq)).inserted { candidates.append(UInt64(seq)) }
            }
            // Group messages: per group, the seqs after the later of the watermark and the user's
            // joining, read from the (app_id, target_id, seq) index alone.
            var groupOf: [UInt64: String] = [:]
            let memberships = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT group_id, joined_seq FROM group_members WHERE app_id = ? AND user_id = ?
                """), arguments: [appId, userId])
            let groupSeqs = try db.cachedStatement(sql: """
                SELECT seq FROM messages WHERE app_id = ? AND target_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?
                """)
            // Only the `limit` lowest seqs can be on this page: once that many are known, later
            // groups are scanned only below the highest of them.
            candidates.sort()
            func bound() -> Int64 { candidates.count > limit ? Int64(candidates[limit]) : Int64.max }
            for membership in memberships {
                let groupId: String = membership[0]
                let joined: Int64 = membership[1]
                var added = false
                for seq in try Int64.fetchAll(groupSeqs, arguments: [appId, groupId, max(floor, joined), bound(), limit + 1]) {
                    let key = UInt64(seq)
                    guard !known.contains(key), groupOf.updateValue(groupId, forKey: key) == nil else { continue }
                    candidates.append(key)
                    added = true
                }
                if added { candidates.sort() }
            }
            candidates.sort()
            let hasMore = candidates.count > limit
            let taken = Array(candidates.prefix(limit))

            // The rows, in seq order, a few at a time, until the page's bytes are spent.
            var page: [StoredMessage] = []
            var bytes = 0
            var watermark = UInt64(floor)
            var start = 0
            while start < taken.count {
                let chunk = Array(taken[start..<min(start + Self.syncRowChunk, taken.count)])
                start += chunk.count
                let marks = chunk.map { _ in "?" }.joined(separator: ",")
                var rows: [UInt64: StoredMessage] = [:]
                for message in try Self.messages(db.cachedStatement(sql: "SELECT \(Self.columns) FROM messages WHERE seq IN (\(marks))"),
                                                 arguments: StatementArguments(chunk.map { Int64(clamping: $0) })) {
                    if let groupId = groupOf[message.seq] {
                        // The index matched the group id as a target; the row says whether it is this
                        // group's message and whether this user may see it.
                        guard message.conversationType == .group, message.conversationKey == groupConversationKey(groupId),
                              message.sentTime >= minSentTime, message.isVisible(to: userId),
                              message.includeSender || message.senderId != userId else { continue }
                    }
                    rows[message.seq] = message
                }
                let visible = try Self.withoutDeletions(chunk.compactMap { rows[$0] }, appId: appId, userId: userId, db)
                var bySeq: [UInt64: StoredMessage] = [:]
                for message in visible { bySeq[message.seq] = message }
                for seq in chunk {
                    if let message = bySeq[seq] {
                        let size = message.wireSize
                        if !page.isEmpty && bytes + size > maxBytes {
                            return SyncPage(messages: page, watermark: watermark, hasMore: true)
                        }
                        page.append(message)
                        bytes += size
                    }
                    watermark = seq
                }
            }
            return SyncPage(messages: page, watermark: taken.last ?? UInt64(floor), hasMore: hasMore)
        }
    }

    /// A seq that no message of the app sent at or after `minSentTime` is at or below: sync skips
    /// the messages older than the retention by seq. Seq and sentTime grow together, except that a
    /// burst in one conversation runs its sentTimes a few ms ahead of the clock, so the lowest seq
    /// among the first thousand by time is taken (without any, the newest seq).
    ///
    /// That read steps through a thousand index entries, for every first page of every device that
    /// connects, so it is made for the start of `minSentTime`'s minute and kept for the minute
    /// (`syncFloors`). A floor for an earlier time is lower or the same, so it scans at most a few
    /// seqs more; a message committed later has a seq above every floor; one deleted since only
    /// leaves the floor lower than it could be.
    func retentionFloor(_ db: Database, appId: Int64, minSentTime: Int64) throws -> Int64 {
        func read(_ since: Int64) throws -> Int64 {
            if let first = try Int64.fetchOne(db.cachedStatement(sql: """
                SELECT MIN(seq) FROM (SELECT seq FROM messages WHERE app_id = ? AND sent_time >= ? ORDER BY sent_time LIMIT 1000)
                """), arguments: [appId, since]) {
                return first - 1
            }
            return try Int64.fetchOne(db.cachedStatement(sql: "SELECT COALESCE(MAX(seq), 0) FROM messages")) ?? 0
        }
        guard minSentTime > Int64.min + 60_000 else { return try read(minSentTime) }
        let key = SyncFloorKey(appId: appId, minute: minSentTime - ((minSentTime % 60_000) + 60_000) % 60_000)
        if let floor = syncFloors.withLock({ $0[key] }) { return floor }
        let floor = try read(key.minute)
        syncFloors.withLock { floors in
            if floors.count >= Self.syncFloorLimit { floors.removeAll(keepingCapacity: true) }
            floors[key] = floor
        }
        return floor
    }

    /// An app and the start of a minute, for `syncFloors`.
    struct SyncFloorKey: Hashable {
        var appId: Int64
        var minute: Int64
    }

    /// Floors kept at most (apps times the minutes of their retentions in use, a few each).
    static let syncFloorLimit = 1_024

    /// Rows a sync page reads per query: small enough that a chunk of the largest messages stays a
    /// few megabytes, large enough that a page of small ones takes few queries.
    static let syncRowChunk = 16

    public func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool,
                        viewer: HistoryViewer?, maxBytes: Int) async throws -> HistoryPage {
        try await pool.read { db in
            let range = ascending ? "sent_time > ? ORDER BY sent_time ASC" : "sent_time < ? ORDER BY sent_time DESC"
            let bound = ascending ? recordTime : (recordTime <= 0 ? Int64.max : recordTime)
            let statement: Statement
            let arguments: StatementArguments
            if let viewer {
                // The viewer's own deletions: a cleared conversation's older part, and single messages.
                let clearedThrough = try Int64.fetchOne(db.cachedStatement(sql: """
                    SELECT cleared_through FROM cleared_conversations WHERE app_id = ? AND user_id = ? AND conv_key = ?
                    """), arguments: [appId, viewer.userId, conversationKey]) ?? Int64.min
                // Messages past the retention count as cleared.
                let cleared = max(clearedThrough, viewer.minSentTime == Int64.min ? Int64.min : viewer.minSentTime - 1)
                statement = try db.cachedStatement(sql: """
                    SELECT \(Self.columns) FROM messages
                    WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND seq > ? AND sent_time > ?
                        AND (audience IS NULL OR sender_id = ? OR instr(audience, ?) > 0)
                        AND NOT EXISTS (SELECT 1 FROM hidden_messages h WHERE h.app_id = messages.app_id AND h.user_id = ? AND h.uid = messages.uid)
                        AND \(range) LIMIT ?
                    """)
                arguments = [appId, conversationKey, Int64(clamping: viewer.afterSeq), cleared, viewer.userId,
                             Self.audienceEntry(viewer.userId), viewer.userId, bound, count + 1]
            } else {
                statement = try db.cachedStatement(sql: """
                    SELECT \(Self.columns) FROM messages WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND \(range) LIMIT ?
                    """)
                arguments = [appId, conversationKey, bound, count + 1]
            }
            // Rows are decoded one at a time and reading stops once the page is full, by count or by
            // bytes: sentTimes are strictly increasing in a conversation, so the caller's next page
            // starts after the last message of this one.
            var messages: [StoredMessage] = []
            var bytes = 0
            let cursor = try Row.fetchCursor(statement, arguments: arguments)
            while let row = try cursor.next() {
                let message = try Self.message(row)
                bytes += message.wireSize
                if messages.count == count || (bytes > maxBytes && !messages.isEmpty) {
                    return HistoryPage(messages: messages, hasMore: true)
                }
                messages.append(message)
            }
            return HistoryPage(messages: messages, hasMore: false)
        }
    }

    public func message(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await pool.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.columns) FROM messages WHERE uid = ? AND app_id = ?"),
                             arguments: [uid, appId]).map(Self.message)
        }
    }

    public func messages(appId: Int64, uids: [String]) async throws -> [StoredMessage] {
        guard !uids.isEmpty else { return [] }
        return try await pool.read { db in
            let marks = uids.map { _ in "?" }.joined(separator: ",")
            return try Self.messages(db.makeStatement(sql: "SELECT \(Self.columns) FROM messages WHERE app_id = ? AND uid IN (\(marks))"),
                                     arguments: StatementArguments([appId] + uids))
        }
    }

    public func replaceMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        try await pool.write { db in
            // What stands in a recalled message's place is shown but not counted (ISPERSISTED).
            try db.execute(sql: """
                UPDATE messages SET object_name = ?, content = ?, flags = ?, expansion = NULL, expansion_times = NULL,
                    can_include_expansion = 0
                WHERE uid = ? AND app_id = ?
                """, arguments: [objectName, content, PersistentFlag.isPersisted.rawValue, uid, appId])
        }
    }

    public func deleteMessage(appId: Int64, uid: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM messages WHERE uid = ? AND app_id = ?", arguments: [uid, appId])
        }
    }

    public func deleteMessages(appId: Int64, conversationKey: String?, ultraGroups: Bool, sentBefore before: Int64, limit: Int) async throws -> Int {
        let types = ultraGroups ? "" : "AND conv_type <> \(ConversationType.ultraGroup.rawValue)"
        return try await pool.write { db in
            // Found through messages_by_conversation or messages_by_time, oldest first.
            let rows = try Row.fetchAll(db, sql: conversationKey == nil
                ? "SELECT seq, uid FROM messages WHERE app_id = ? AND sent_time < ? \(types) ORDER BY sent_time LIMIT ?"
                : "SELECT seq, uid FROM messages WHERE app_id = ? AND conv_key = ? AND sent_time < ? ORDER BY sent_time LIMIT ?",
                arguments: conversationKey.map { [appId, $0, before, limit] } ?? [appId, before, limit])
            for row in rows {
                let seq: Int64 = row[0], uid: String = row[1]
                try db.execute(sql: "DELETE FROM messages WHERE seq = ?", arguments: [seq])
                try db.execute(sql: "DELETE FROM message_reads WHERE app_id = ? AND uid = ?", arguments: [appId, uid])
            }
            return rows.count
        }
    }

    public func ultraGroupConversationKeys(appId: Int64) async throws -> [String] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT group_id, channel_id FROM ultra_group_channels WHERE app_id = ? ORDER BY group_id, channel_id",
                             arguments: [appId]).map { ultraGroupConversationKey($0[0], $0[1]) }
        }
    }

    public func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                                     ascending: Bool, limit: Int, senderId: String?) async throws -> [StoredMessage] {
        try await pool.read { db in
            let low = ascending ? (includeStart ? ">=" : ">") : ">="
            let high = ascending ? "<=" : (includeStart ? "<=" : "<")
            let (from, to) = ascending ? (start, end) : (end, start)
            return try Row.fetchAll(db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages
                WHERE app_id = ? AND conv_key = ? AND in_history = 1 AND sent_time \(low) ? AND sent_time \(high) ?
                    AND (? IS NULL OR sender_id = ?)
                ORDER BY sent_time \(ascending ? "ASC" : "DESC") LIMIT ?
                """), arguments: [appId, conversationKey, from, to, senderId, senderId, limit]).map(Self.message)
        }
    }

    public func messages(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage] {
        try await pool.read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT \(Self.columns) FROM messages
                WHERE app_id = ? AND sent_time >= ? AND sent_time < ? AND (sent_time > ? OR seq > ?)
                ORDER BY sent_time, seq LIMIT ?
                """), arguments: [appId, from, to, from, Int64(clamping: afterSeq), limit]).map(Self.message)
        }
    }

    // MARK: read receipts

    public func requestReadReceipts(appId: Int64, uid: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE messages SET receipt_requested = 1 WHERE uid = ? AND app_id = ?", arguments: [uid, appId])
        }
    }

    public func recordReads(_ reads: [ReadReceiptRecord], appId: Int64) async throws -> [ReadReceiptRecord] {
        guard !reads.isEmpty else { return [] }
        return try await pool.write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO message_reads (app_id, uid, sender_id, group_id, reader_id, read_time) VALUES (?, ?, ?, ?, ?, ?)
                """)
            var recorded: [ReadReceiptRecord] = []
            for var read in reads {
                try insert.execute(arguments: [appId, read.uid, read.senderId, read.groupId, read.readerId, read.readTime])
                guard db.changesCount > 0 else { continue }
                read.seq = UInt64(db.lastInsertedRowID)
                recorded.append(read)
            }
            return recorded
        }
    }

    public func readReceipts(appId: Int64, senderId: String, after: UInt64, limit: Int) async throws -> [ReadReceiptRecord] {
        try await pool.read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT seq, uid, sender_id, group_id, reader_id, read_time FROM message_reads
                WHERE app_id = ? AND sender_id = ? AND seq > ? ORDER BY seq LIMIT ?
                """), arguments: [appId, senderId, Int64(clamping: after), limit]).map(Self.read)
        }
    }

    public func readers(appId: Int64, uid: String, after: UInt64, limit: Int) async throws -> (readers: [ReadReceiptRecord], total: Int) {
        try await pool.read { db in
            let readers = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT seq, uid, sender_id, group_id, reader_id, read_time FROM message_reads
                WHERE app_id = ? AND uid = ? AND seq > ? ORDER BY seq LIMIT ?
                """), arguments: [appId, uid, Int64(clamping: after), limit]).map(Self.read)
            let total = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM message_reads WHERE app_id = ? AND uid = ?"),
                                         arguments: [appId, uid]) ?? 0
            return (readers, total)
        }
    }

    private static func read(_ row: Row) -> ReadReceiptRecord {
        let seq: Int64 = row[0]
        return ReadReceiptRecord(seq: UInt64(seq), uid: row[1], senderId: row[2], groupId: row[3], readerId: row[4], readTime: row[5])
    }

    /// The `audience` column of a directional message: its members between newlines, so a member
    /// is found with `instr` (user ids never contain a newline); NULL for the whole conversation.
    static func audience(_ userIds: [String]) -> String? {
        userIds.isEmpty ? nil : "\n" + userIds.joined(separator: "\n") + "\n"
    }

    static func audienceEntry(_ userId: String) -> String { "\n\(userId)\n" }

    public func deleteMessageLog(appId: Int64, hour: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO deleted_message_logs (app_id, hour) VALUES (?, ?)", arguments: [appId, hour])
        }
    }

    public func isMessageLogDeleted(appId: Int64, hour: String) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM deleted_message_logs WHERE app_id = ? AND hour = ?", arguments: [appId, hour]) ?? false
        }
    }

    /// The messages a `SELECT \(columns)` statement returns, decoded straight from the statement
    /// (`Row.fetchAll` copies every row first, and decoding a copied row looks up generic metadata
    /// per column).
    static func messages(_ statement: Statement, arguments: StatementArguments) throws -> [StoredMessage] {
        try Array(Row.fetchCursor(statement, arguments: arguments).map(Self.message))
    }

    /// A row of `SELECT \(columns)`, read by position: looking columns up by name costs a
    /// case-insensitive string comparison per column and was most of a history page's CPU.
    static func message(_ row: Row) throws -> StoredMessage {
        let expansionText: String? = row[16]
        let expansion = try expansionText.map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let seq: Int64 = row[0]
        let type: Int = row[2]
        let flags: Int64 = row[10]
        let audience: String? = row[19]
        var message = StoredMessage(
            seq: UInt64(seq), appId: row[1], conversationType: ConversationType(rawValue: type) ?? .private,
            conversationKey: row[3], targetId: row[4], senderId: row[5],
            objectName: row[6], content: row[7], uid: row[8], sentTime: row[9],
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: row[11],
            pushContent: row[12], pushData: row[13],
            disableNotification: row[14], canIncludeExpansion: row[15],
            expansion: expansion, channelId: row[17], includeSender: row[18],
            directedUserIds: audience.map { $0.split(separator: "\n").map(String.init) } ?? [],
            receiptRequested: row[20])
        message.pushConfig = row[21]
        return message
    }
}
