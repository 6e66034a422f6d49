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
        include_sender, audience, receipt_requested
        """

    // MARK: commit

    /// One transaction, serialized with every other commit by the `message_seq` counter row:
    ///
    /// 1. the counter is raised by the batch's size, which locks its row until COMMIT: the next
    ///    commit waits here, so seqs commit in their order, and the dedup and sentTime reads below
    ///    see every earlier commit;
    /// 2. the messages whose (app, sender, client message id) is stored already are read (dedup,
    ///    the unique index `messages_by_client_id` behind it);
    /// 3. each conversation's newest sentTime is read: a message not after it is stored 1 ms after
    ///    it, so sentTimes increase in every conversation whichever process committed (history pages
    ///    by sentTime, and the next page starts after the last one's time);
    /// 4. one INSERT of every new message from arrays (`unnest`), which also sets the counter to
    ///    the last seq given (lower than step 1's when some were duplicates: seqs have no gaps).
    public func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome] {
        guard !messages.isEmpty else { return [] }
        return try await write { connection in
            let reserved = try await connection.rows(ReserveMessageSeqs(count: Int64(messages.count)), logger)
            guard let top = reserved.first else { throw IMError(.databaseError, "the message_seq counter is missing") }
            var lastSeq = top - Int64(messages.count)

            // Stored messages with the client message ids of this batch.
            var stored: [ClientMessageKey: StoredMessage] = [:]
            let keys = Set(messages.filter { !$0.clientMessageId.isEmpty }.map(ClientMessageKey.init))
            if !keys.isEmpty {
                for message in try await connection.rows(StoredClientMessages(keys: Array(keys)), logger) {
                    stored[ClientMessageKey(message)] = message
                }
            }
            // The newest sentTime of each conversation of this batch.
            var lastSentTime: [ConversationOfApp: Int64] = [:]
            let conversations = Array(Set(messages.map(ConversationOfApp.init)))
            for (conversation, time) in try await connection.rows(LastSentTimes(conversations: conversations), logger) {
                if let time { lastSentTime[conversation] = time }
            }

            var outcomes: [CommitOutcome] = []
            outcomes.reserveCapacity(messages.count)
            var insert = InsertMessages()
            for var message in messages {
                let key = ClientMessageKey(message)
                if !message.clientMessageId.isEmpty, let first = stored[key] {
                    outcomes.append(.duplicate(first))
                    continue
                }
                let conversation = ConversationOfApp(message)
                if let last = lastSentTime[conversation], message.sentTime <= last {
                    message.sentTime = last + 1
                }
                lastSentTime[conversation] = message.sentTime
                lastSeq += 1
                message.seq = UInt64(lastSeq)
                try insert.append(message)
                outcomes.append(.stored(message))
                // A resend inside the batch gets this message back as a read would return it.
                if !message.clientMessageId.isEmpty { stored[key] = Self.asRead(message) }
            }
            insert.lastSeq = lastSeq
            try await connection.run(insert, logger)
            return outcomes
        }
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
        return StoredMessage(
            seq: seq, appId: appId, conversationType: ConversationType(rawValue: Int(type)) ?? .private, conversationKey: key,
            targetId: target, senderId: sender, objectName: objectName, content: content, uid: uid, sentTime: sentTime,
            flags: PersistentFlag(rawValue: UInt32(truncatingIfNeeded: flags)), clientMessageId: clientMessageId,
            pushContent: pushContent, pushData: pushData, disableNotification: disableNotification,
            canIncludeExpansion: canIncludeExpansion, expansion: expansion, channelId: channelId, includeSender: includeSender,
            directedUserIds: audience.map { $0.split(separator: "\n").map(String.init) } ?? [], receiptRequested: receiptRequested)
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

/// One conversation of one app.
struct ConversationOfApp: Hashable, Sendable {
    let appId: Int64
    let key: String

    init(_ message: StoredMessage) {
        appId = message.appId
        key = message.conversationKey
    }

    init(appId: Int64, key: String) {
        self.appId = appId
        self.key = key
    }
}

// MARK: - the commit's prepared statements

/// Raises the message seq counter by a batch's size and returns it: the lock every commit takes first.
struct ReserveMessageSeqs: PostgresPreparedStatement {
    static let name = "imserver_reserve_message_seqs"
    static let sql = "UPDATE imserver_counters SET value = value + $1 WHERE name = 'message_seq' RETURNING value"
    typealias Row = Int64

    let count: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(count)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Int64 {
        var cells = Cells(row)
        return try cells.int()
    }
}

/// The stored messages of these (app, sender, client message id) keys: one lookup of the unique
/// index `messages_by_client_id` per key (a join the planner may choose would scan the table).
struct StoredClientMessages: PostgresPreparedStatement {
    static let name = "imserver_stored_client_messages"
    static let sql = """
        SELECT m.* FROM unnest($1::bigint[], $2::text[], $3::text[]) AS k(app_id, sender_id, client_msg_id)
        CROSS JOIN LATERAL (
            SELECT \(PostgresStore.columns) FROM messages
            WHERE app_id = k.app_id AND sender_id = k.sender_id AND client_msg_id = k.client_msg_id AND client_msg_id <> ''
            LIMIT 1) AS m
        """
    typealias Row = StoredMessage

    let keys: [ClientMessageKey]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(keys.map(\.appId))
        bindings.append(keys.map(\.senderId))
        bindings.append(keys.map(\.clientMessageId))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> StoredMessage { try PostgresStore.message(row) }
}

/// The newest sentTime of each of these conversations (NULL for one without messages), each one
/// backward step of the (app_id, conv_key, sent_time) index.
struct LastSentTimes: PostgresPreparedStatement {
    static let name = "imserver_last_sent_times"
    static let sql = """
        SELECT c.app_id, c.conv_key,
               (SELECT MAX(m.sent_time) FROM messages m WHERE m.app_id = c.app_id AND m.conv_key = c.conv_key)
        FROM unnest($1::bigint[], $2::text[]) AS c(app_id, conv_key)
        """
    typealias Row = (ConversationOfApp, Int64?)

    let conversations: [ConversationOfApp]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(conversations.map(\.appId))
        bindings.append(conversations.map(\.key))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> (ConversationOfApp, Int64?) {
        var cells = Cells(row)
        return (ConversationOfApp(appId: try cells.int(), key: try cells.string()), try cells.next(Int64?.self))
    }
}

/// Every new message of a commit in one INSERT, column by column as arrays (NULL columns as ""),
/// and the counter set to the last seq given.
struct InsertMessages: PostgresPreparedStatement {
    static let name = "imserver_insert_messages"
    static let sql = """
        WITH inserted AS (
            INSERT INTO messages (seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                can_include_expansion, expansion, channel_id, include_sender, audience, expansion_times, mentioned)
            SELECT seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                can_include_expansion, NULLIF(expansion, ''), channel_id, include_sender, NULLIF(audience, ''),
                NULLIF(expansion_times, ''), NULLIF(mentioned, '')
            FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[],
                        $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[],
                        $16::bigint[], $17::bigint[], $18::text[], $19::text[], $20::bigint[], $21::text[], $22::text[], $23::text[])
                AS t(seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                     sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                     can_include_expansion, expansion, channel_id, include_sender, audience, expansion_times, mentioned)
            RETURNING 1
        )
        UPDATE imserver_counters SET value = $24 WHERE name = 'message_seq'
        """
    typealias Row = ()

    var seq: [Int64] = []
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
    var lastSeq: Int64 = 0

    mutating func append(_ message: StoredMessage) throws {
        seq.append(Int64(message.seq))
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
    }

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 24)
        bindings.append(seq)
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
        bindings.append(lastSeq)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws {}
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
