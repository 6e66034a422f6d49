import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// The message log: commit (the hot path), reads by uid, conversation and time, read receipts.
extension PostgresStore {
    /// The columns `message(_:)` reads, in its order (the SQLite store's `columns`).
    static let columns = """
        seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
        client_msg_id, push_content, push_data, disable_notification, can_include_expansion, expansion, channel_id,
        include_sender, audience, receipt_requested, push_config
        """

    // MARK: commit

    /// One statement, its own transaction, serialized with every other commit by the `message_seq`
    /// counter row: `imserver_commit_messages` (PostgresMigrations) locks the row, which every
    /// commit takes first and holds until its COMMIT, so seqs commit in their order and its reads
    /// see every earlier commit; it skips the messages whose (app, sender, client message id) is
    /// stored already (the unique index `messages_by_client_id` behind it), moves a sentTime that
    /// is not after its conversation's newest 1 ms past it (so sentTimes increase in every
    /// conversation whichever process committed), inserts the rest with the next seqs (no gaps)
    /// and raises the counter. A resend inside the batch gets the first message back, as does a
    /// resend of a stored one (read after the commit).
    public func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome] {
        guard !messages.isEmpty else { return [] }
        // Resends inside the batch are not sent: each refers to its first.
        var firstWithKey: [ClientMessageKey: Int] = [:]
        var sent: [Int] = []
        var resendOf: [Int: Int] = [:]
        var statement = CommitMessages()
        for (index, message) in messages.enumerated() {
            if !message.clientMessageId.isEmpty {
                let key = ClientMessageKey(message)
                if let first = firstWithKey[key] {
                    resendOf[index] = first
                    continue
                }
                firstWithKey[key] = index
            }
            sent.append(index)
            try statement.append(message)
        }
        var placed: [Int: (seq: Int64, sentTime: Int64)] = [:]
        var storedUid: [Int: String] = [:]
        for row in try await rows(statement) {
            let index = sent[Int(row.ordinal) - 1]
            if let uid = row.storedUid {
                storedUid[index] = uid
            } else if let seq = row.seq, let sentTime = row.sentTime {
                placed[index] = (seq, sentTime)
            }
        }
        var outcomes: [CommitOutcome] = []
        outcomes.reserveCapacity(messages.count)
        for (index, message) in messages.enumerated() {
            let first = resendOf[index] ?? index
            if let (seq, sentTime) = placed[first] {
                var stored = message
                if first != index { stored = messages[first] }
                stored.seq = UInt64(seq)
                stored.sentTime = sentTime
                outcomes.append(first == index ? .stored(stored) : .duplicate(Self.asRead(stored)))
            } else if let uid = storedUid[first] {
                guard let stored = try await self.message(appId: message.appId, uid: uid) else {
                    throw IMError(.databaseError, "the message \(uid) stored under client message id \(message.clientMessageId) was deleted meanwhile")
                }
                outcomes.append(.duplicate(stored))
            } else {
                throw IMError(.databaseError, "PostgreSQL: the commit returned no outcome for message \(first + 1) of \(messages.count)")
            }
        }
        return outcomes
    }

    /// A committed message as reading it back returns it: the store keeps neither the receipt
    /// request given at commit (it is set by `requestReadReceipts`) nor the mentions (counted, not
    /// returned), as the SQLite store.
    static func asRead(_ message: StoredMessage) -> StoredMessage {
        var read = message
        read.receiptRequested = false
        read.mentions = nil
        return read
    }

    /// The `audience` column of a directional message: its members between newlines, so a member
    /// is found with `strpos` (user ids never contain a newline); NULL for the whole conversation.
    static func audience(_ userIds: [String]) -> String? {
        userIds.isEmpty ? nil : "\n" + userIds.joined(separator: "\n") + "\n"
    }

    static func audienceEntry(_ userId: String) -> String { "\n\(userId)\n" }

    /// The `mentioned` column: `*` for everyone and the user ids, between newlines; NULL when
    /// nothing is mentioned. Only valid user ids are kept: an entry holding a newline or "*" would
    /// otherwise read as other users, or as @all.
    static func mentioned(_ mentions: MentionedInfo?) -> String? {
        guard let mentions else { return nil }
        let entries = (mentions.type == .all ? ["*"] : []) + mentions.userIdList.filter(UserID.isValid)
        return entries.isEmpty ? nil : audience(entries)
    }

    // MARK: reads

    public func lastSentTime(appId: Int64, conversationKey: String) async throws -> Int64? {
        let rows = try await rows("SELECT MAX(sent_time) FROM messages WHERE app_id = \(appId) AND conv_key = \(conversationKey)")
        var cells = Cells(rows[0])
        return try cells.next(Int64?.self)
    }

    public func message(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await rows(MessageByUID(appId: appId, uid: uid)).first
    }

    public func messages(appId: Int64, uids: [String]) async throws -> [StoredMessage] {
        guard !uids.isEmpty else { return [] }
        return try await rows("SELECT \(unescaped: Self.columns) FROM messages WHERE app_id = \(appId) AND uid = ANY(\(uids))")
            .map(Self.message)
    }

    public func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                                     ascending: Bool, limit: Int, senderId: String?) async throws -> [StoredMessage] {
        // Both ends as inclusive bounds: `end` always is, `start` when asked.
        let (low, high) = ascending
            ? (includeStart ? start : start.addingReportingOverflow(1).partialValue, end)
            : (end, includeStart ? start : start.subtractingReportingOverflow(1).partialValue)
        return try await rows("""
            SELECT \(unescaped: Self.columns) FROM messages
            WHERE app_id = \(appId) AND conv_key = \(conversationKey) AND in_history = 1
                AND sent_time >= \(low) AND sent_time <= \(high) AND (\(senderId)::text IS NULL OR sender_id = \(senderId))
            ORDER BY sent_time \(unescaped: ascending ? "ASC" : "DESC") LIMIT \(Int64(limit))
            """).map(Self.message)
    }

    public func messages(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage] {
        try await rows("""
            SELECT \(unescaped: Self.columns) FROM messages
            WHERE app_id = \(appId) AND sent_time >= \(from) AND sent_time < \(to) AND (sent_time > \(from) OR seq > \(Int64(clamping: afterSeq)))
            ORDER BY sent_time, seq LIMIT \(Int64(limit))
            """).map(Self.message)
    }

    public func replaceMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        // What stands in a recalled message's place is shown but not counted (ISPERSISTED).
        _ = try await rows("""
            UPDATE messages SET object_name = \(objectName), content = \(content), flags = \(Int64(PersistentFlag.isPersisted.rawValue)),
                expansion = NULL, expansion_times = NULL, can_include_expansion = 0
            WHERE uid = \(uid) AND app_id = \(appId)
            """)
    }

    public func deleteMessage(appId: Int64, uid: String) async throws {
        _ = try await rows("DELETE FROM messages WHERE uid = \(uid) AND app_id = \(appId)")
    }

    public func deleteMessages(appId: Int64, conversationKey: String?, ultraGroups: Bool, sentBefore before: Int64, limit: Int) async throws -> Int {
        let types = ultraGroups ? "" : "AND conv_type <> \(ConversationType.ultraGroup.rawValue)"
        return try await write { connection in
            let found = try await connection.rows(conversationKey.map { key in """
                SELECT seq, uid FROM messages WHERE app_id = \(appId) AND conv_key = \(key) AND sent_time < \(before)
                ORDER BY sent_time LIMIT \(Int64(limit))
                """ } ?? """
                SELECT seq, uid FROM messages WHERE app_id = \(appId) AND sent_time < \(before) \(unescaped: types)
                ORDER BY sent_time LIMIT \(Int64(limit))
                """, logger)
            var seqs: [Int64] = [], uids: [String] = []
            for row in found {
                var cells = Cells(row)
                seqs.append(try cells.int())
                uids.append(try cells.string())
            }
            guard !seqs.isEmpty else { return 0 }
            try await connection.run("DELETE FROM messages WHERE seq = ANY(\(seqs))", logger)
            try await connection.run("DELETE FROM message_reads WHERE app_id = \(appId) AND uid = ANY(\(uids))", logger)
            return seqs.count
        }
    }

    public func ultraGroupConversationKeys(appId: Int64) async throws -> [String] {
        try await rows("SELECT group_id, channel_id FROM ultra_group_channels WHERE app_id = \(appId) ORDER BY group_id, channel_id")
            .map { row in
                var cells = Cells(row)
                return ultraGroupConversationKey(try cells.string(), try cells.string())
            }
    }

    public func deleteMessageLog(appId: Int64, hour: String) async throws {
        _ = try await rows("INSERT INTO deleted_message_logs (app_id, hour) VALUES (\(appId), \(hour)) ON CONFLICT DO NOTHING")
    }

    public func isMessageLogDeleted(appId: Int64, hour: String) async throws -> Bool {
        try await !rows("SELECT 1 FROM deleted_message_logs WHERE app_id = \(appId) AND hour = \(hour)").isEmpty
    }

    // MARK: read receipts

    public func requestReadReceipts(appId: Int64, uid: String) async throws {
        _ = try await rows("UPDATE messages SET receipt_requested = 1 WHERE uid = \(uid) AND app_id = \(appId)")
    }

    /// Seqs of reads are a watermark too (`readReceipts(after:)`): they come from the `read_seq`
    /// counter, locked first, so they commit in their order.
    public func recordReads(_ reads: [ReadReceiptRecord], appId: Int64) async throws -> [ReadReceiptRecord] {
        guard !reads.isEmpty else { return [] }
        return try await write { connection in
            var cells = Cells(try await connection.rows(
                "UPDATE imserver_counters SET value = value WHERE name = 'read_seq' RETURNING value", logger)[0])
            var seq = try cells.int()
            var recorded: [ReadReceiptRecord] = []
            for var read in reads {
                let inserted = try await connection.rows("""
                    INSERT INTO message_reads (seq, app_id, uid, sender_id, group_id, reader_id, read_time)
                    VALUES (\(seq + 1), \(appId), \(read.uid), \(read.senderId), \(read.groupId), \(read.readerId), \(read.readTime))
                    ON CONFLICT (app_id, uid, reader_id) DO NOTHING RETURNING seq
                    """, logger)
                guard !inserted.isEmpty else { continue }
                seq += 1
                read.seq = UInt64(seq)
                recorded.append(read)
            }
            try await connection.run("UPDATE imserver_counters SET value = \(seq) WHERE name = 'read_seq'", logger)
            return recorded
        }
    }

    public func readReceipts(appId: Int64, senderId: String, after: UInt64, limit: Int) async throws -> [ReadReceiptRecord] {
        try await rows("""
            SELECT seq, uid, sender_id, group_id, reader_id, read_time FROM message_reads
            WHERE app_id = \(appId) AND sender_id = \(senderId) AND seq > \(Int64(clamping: after)) ORDER BY seq LIMIT \(Int64(limit))
            """).map(Self.read)
    }

    public func readers(appId: Int64, uid: String, after: UInt64, limit: Int) async throws -> (readers: [ReadReceiptRecord], total: Int) {
        try await read { connection in
            let readers = try await connection.rows("""
                SELECT seq, uid, sender_id, group_id, reader_id, read_time FROM message_reads
                WHERE app_id = \(appId) AND uid = \(uid) AND seq > \(Int64(clamping: after)) ORDER BY seq LIMIT \(Int64(limit))
                """, logger).map(Self.read)
            var cells = Cells(try await connection.rows("SELECT COUNT(*) FROM message_reads WHERE app_id = \(appId) AND uid = \(uid)", logger)[0])
            return (readers, Int(try cells.int()))
        }
    }

    private static func read(_ row: PostgresRow) throws -> ReadReceiptRecord {
        var cells = Cells(row)
        return ReadReceiptRecord(seq: try cells.seq(), uid: try cells.string(), senderId: try cells.string(), groupId: try cells.string(),
                                 readerId: try cells.string(), readTime: try cells.int())
    }

    // MARK: rows

    /// A row of `SELECT \(columns)`, read by position; columns after them are left to the caller
    /// (pass `cells` to go on reading).
    static func message(_ row: PostgresRow) throws -> StoredMessage {
        var cells = Cells(row)
        return try message(&cells)
    }

    static func message(_ cells: inout Cells) throws -> StoredMessage {
        let seq = try cells.seq()
        let appId = try cells.int()
        let type = try cells.int()
        let key = try cells.string()
        let target = try cells.string()
        let sender = try cells.string()
        let objectName = try cells.string()
        let content = try cells.next(Data.self)
        let uid = try cells.string()
        let sentTime = try cells.int()
        let flags = try cells.int()
        let clientMessageId = try cells.string()
        let pushContent = try cells.string()
        let pushData = try cells.string()
        let disableNotification = try cells.bool()
        let canIncludeExpansion = try cells.bool()
        let expansion = try cells.optionalString().map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let channelId = try cells.string()
        let includeSender = try cells.bool()
        let audience = try cells.optionalString()
        let receiptRequested = try cells.bool()
        let pushConfig = try cells.next(Data.self)
        var message = StoredMessage(
            seq: seq, appId: appId, conversationType: ConversationType(rawValue: Int(type)) ?? .private, conversationKey: key,
            targetId: target, senderId: sender, objectName: objectName, content: content, uid: uid, sentTime: sentTime,
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: clientMessageId,
            pushContent: pushContent, pushData: pushData, disableNotification: disableNotification,
            canIncludeExpansion: canIncludeExpansion, expansion: expansion, channelId: channelId, includeSender: includeSender,
            directedUserIds: audience.map { $0.split(separator: "\n").map(String.init) } ?? [], receiptRequested: receiptRequested)
        message.pushConfig = pushConfig
        return message
    }
}

/// What dedup looks a message up by.
struct ClientMessageKey: Hashable, Sendable {
    let appId: Int64
    let senderId: String
    let clientMessageId: String

    init(_ message: StoredMessage) {
        appId = message.appId
        senderId = message.senderId
        clientMessageId = message.clientMessageId
    }
}

// MARK: - the commit's prepared statements

/// A commit's messages, column by column as arrays (NULL columns as ""), to
/// `imserver_commit_messages` (PostgresMigrations), which stores them.
struct CommitMessages: PostgresPreparedStatement {
    static let name = "imserver_commit_messages"
    static let sql = """
        SELECT r_ord, r_seq, r_sent_time, r_stored_uid FROM imserver_commit_messages(
            $1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[],
            $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::bigint[],
            $16::bigint[], $17::text[], $18::text[], $19::bigint[], $20::text[], $21::text[], $22::text[], $23::bytea[])
        """
    /// The outcome of the message at `ordinal` (from 1) of the batch: placed (seq and sentTime) or
    /// stored already (`storedUid`).
    struct Row {
        var ordinal: Int64
        var seq: Int64?
        var sentTime: Int64?
        var storedUid: String?
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        let (ordinal, seq, sentTime, uid) = try row.decode((Int64, Int64?, Int64?, String?).self)
        return Row(ordinal: ordinal, seq: seq, sentTime: sentTime, storedUid: uid)
    }


    var appId: [Int64] = []
    var type: [Int64] = []
    var key: [String] = []
    var target: [String] = []
    var sender: [String] = []
    var objectName: [String] = []
    var content: [ByteBuffer] = []
    var uid: [String] = []
    var sentTime: [Int64] = []
    var flags: [Int64] = []
    var inHistory: [Int64] = []
    var clientMessageId: [String] = []
    var pushContent: [String] = []
    var pushData: [String] = []
    var disableNotification: [Int64] = []
    var canIncludeExpansion: [Int64] = []
    var expansion: [String] = []
    var channelId: [String] = []
    var includeSender: [Int64] = []
    var audience: [String] = []
    var expansionTimes: [String] = []
    var mentioned: [String] = []
    var pushConfig: [ByteBuffer] = []

    mutating func append(_ message: StoredMessage) throws {
        appId.append(message.appId)
        type.append(Int64(message.conversationType.rawValue))
        key.append(message.conversationKey)
        target.append(message.targetId)
        sender.append(message.senderId)
        objectName.append(message.objectName)
        content.append(ByteBuffer(bytes: message.content))
        uid.append(message.uid)
        sentTime.append(message.sentTime)
        flags.append(Int64(message.flags.rawValue))
        inHistory.append(message.isInHistory.flag)
        clientMessageId.append(message.clientMessageId)
        pushContent.append(message.pushContent)
        pushData.append(message.pushData)
        disableNotification.append(message.disableNotification.flag)
        canIncludeExpansion.append(message.canIncludeExpansion.flag)
        let columns = try ExpansionEntry.columns(message.expansion.mapValues { ExpansionEntry(value: $0, time: message.sentTime) })
        expansion.append(columns.values ?? "")
        channelId.append(message.channelId)
        includeSender.append(message.includeSender.flag)
        audience.append(PostgresStore.audience(message.directedUserIds) ?? "")
        expansionTimes.append(columns.times ?? "")
        mentioned.append(PostgresStore.mentioned(message.mentions) ?? "")
        pushConfig.append(ByteBuffer(bytes: message.pushConfig))
    }

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 23)
        bindings.append(appId)
        bindings.append(type)
        bindings.append(key)
        bindings.append(target)
        bindings.append(sender)
        bindings.append(objectName)
        bindings.append(content)
        bindings.append(uid)
        bindings.append(sentTime)
        bindings.append(flags)
        bindings.append(inHistory)
        bindings.append(clientMessageId)
        bindings.append(pushContent)
        bindings.append(pushData)
        bindings.append(disableNotification)
        bindings.append(canIncludeExpansion)
        bindings.append(expansion)
        bindings.append(channelId)
        bindings.append(includeSender)
        bindings.append(audience)
        bindings.append(expansionTimes)
        bindings.append(mentioned)
        bindings.append(pushConfig)
        return bindings
    }
}

/// One message by uid.
struct MessageByUID: PostgresPreparedStatement {
    static let name = "imserver_message_by_uid"
    static let sql = "SELECT \(PostgresStore.columns) FROM messages WHERE uid = $1 AND app_id = $2"
    typealias Row = StoredMessage

    let appId: Int64
    let uid: String

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(uid)
        bindings.append(appId)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> StoredMessage { try PostgresStore.message(row) }
}

extension PostgresConnection {
    /// Runs a prepared statement that returns no rows.
    func run<Statement: PostgresPreparedStatement>(_ statement: Statement, _ logger: Logger) async throws where Statement.Row == () {
        _ = try await execute(statement, logger: logger)
    }
}
