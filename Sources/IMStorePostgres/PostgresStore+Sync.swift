import Foundation
import IMCore
import IMStore
import Logging
import PostgresNIO

/// What a device reads: offline sync pages and cloud history.
extension PostgresStore {
    /// Two statements on one snapshot: the candidate seqs (index range scans, seqs only), then the
    /// rows of the seqs the page takes, in seq order, read until the page's bytes are spent.
    public func syncPage(appId: Int64, userId: String, after: UInt64, minSentTime: Int64, limit: Int, maxBytes: Int) async throws -> SyncPage {
        try await read { connection in
            var floor = Int64(clamping: after)
            var known = Set<UInt64>()
            var candidates: [UInt64] = []
            var groupCandidates: [(seq: UInt64, groupId: String)] = []
            for row in try await connection.rows(SyncCandidates(appId: appId, userId: userId, after: Int64(clamping: after),
                                                                minSentTime: minSentTime, limit: Int64(limit) + 1), logger) {
                switch row {
                case .floor(let seq): floor = seq
                case .direct(let seq): if known.insert(seq).inserted { candidates.append(seq) }
                case .group(let seq, let groupId): groupCandidates.append((seq, groupId))
                }
            }
            // A seq the private and system scans found is theirs; the index matched a group's
            // seqs by target id only, and the row says below whether it is that group's message.
            var groupOf: [UInt64: String] = [:]
            for (seq, groupId) in groupCandidates where !known.contains(seq) {
                guard groupOf.updateValue(groupId, forKey: seq) == nil else { continue }
                candidates.append(seq)
            }
            candidates.sort()
            let hasMore = candidates.count > limit
            let taken = Array(candidates.prefix(limit))
            guard !taken.isEmpty else { return SyncPage(messages: [], watermark: UInt64(max(0, floor)), hasMore: false) }

            // The rows in seq order, read as they arrive until the page's bytes are spent, each
            // with whether the user deleted it from their own view (only messages kept in history
            // can be: commands always pass). A seq without a row (deleted since) only moves the
            // watermark.
            var page: [StoredMessage] = []
            var bytes = 0
            var watermark = UInt64(max(0, floor))
            var next = 0
            var full = false
            try await connection.forEachRow(SyncRows(appId: appId, userId: userId, seqs: taken.map { Int64($0) }), logger) { row in
                let (message, deleted) = row
                while next < taken.count, taken[next] < message.seq {
                    watermark = taken[next]
                    next += 1
                }
                if let groupId = groupOf[message.seq] {
                    // The index matched the group id as a target; the row says whether it is this
                    // group's message and whether this user may see it.
                    guard message.conversationType == .group, message.conversationKey == groupConversationKey(groupId),
                          message.sentTime >= minSentTime, message.isVisible(to: userId),
                          message.includeSender || message.senderId != userId else { return true }
                }
                guard !deleted else { return true }
                let size = message.wireSize
                if !page.isEmpty && bytes + size > maxBytes {
                    full = true
                    return false
                }
                page.append(message)
                bytes += size
                return true
            }
            if full { return SyncPage(messages: page, watermark: watermark, hasMore: true) }
            watermark = taken.last ?? watermark
            return SyncPage(messages: page, watermark: watermark, hasMore: hasMore)
        }
    }

    public func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool,
                        viewer: HistoryViewer?, maxBytes: Int) async throws -> HistoryPage {
        let bound = ascending ? recordTime : (recordTime <= 0 ? Int64.max : recordTime)
        // Rows are decoded as they arrive and reading stops once the page is full, by count or by
        // bytes (after at least one message): sentTimes are strictly increasing in a conversation,
        // so the caller's next page starts after the last message of this one.
        var page: [StoredMessage] = []
        var bytes = 0
        var hasMore = false
        func take(_ message: StoredMessage) -> Bool {
            bytes += message.wireSize
            if page.count == count || (bytes > maxBytes && !page.isEmpty) {
                hasMore = true
                return false
            }
            page.append(message)
            return true
        }
        if let viewer {
            // Messages past the retention count as cleared.
            let query = ViewerHistory(appId: appId, conversationKey: conversationKey, userId: viewer.userId,
                                      afterSeq: Int64(clamping: viewer.afterSeq),
                                      retainedAfter: viewer.minSentTime == Int64.min ? Int64.min : viewer.minSentTime - 1,
                                      bound: bound, limit: Int64(count) + 1)
            if ascending { try await forEachRow(query.ascending, take) } else { try await forEachRow(query, take) }
        } else {
            let query = History(appId: appId, conversationKey: conversationKey, bound: bound, limit: Int64(count) + 1)
            if ascending { try await forEachRow(query.ascending, take) } else { try await forEachRow(query, take) }
        }
        return HistoryPage(messages: page, hasMore: hasMore)
    }
}

// MARK: - prepared statements

/// One row of `SyncCandidates`.
enum SyncCandidate {
    /// Where the page starts: past `after` and past the messages older than the retention.
    case floor(Int64)
    /// A private or system message to or from the user, or a broadcast.
    case direct(UInt64)
    /// A message whose target is a group of the user, sent after they joined.
    case group(UInt64, String)
}

/// The seqs a sync page may take, in one statement.
///
/// Messages older than the retention are skipped by seq: the first messages at or after
/// `minSentTime` bound every scan (seq and sentTime grow together, except that a burst in one
/// conversation runs its sentTimes a few ms ahead of the clock, so the lowest seq among the first
/// thousand by time is taken; without any, the counter's value). Then three index range scans of
/// at most `limit` seqs each (received, sent, broadcast to everyone), and per group of the user the
/// seqs after the later of the floor and their joining, from the (app_id, target_id, seq) index.
struct SyncCandidates: PostgresPreparedStatement {
    static let name = "imserver_sync_candidates"
    static let sql = """
        WITH floor AS (
            SELECT GREATEST($3::bigint, COALESCE(
                (SELECT MIN(seq) - 1 FROM (SELECT seq FROM messages WHERE app_id = $1 AND sent_time >= $4
                                           ORDER BY sent_time LIMIT 1000) AS first_seqs),
                (SELECT value FROM imserver_counters WHERE name = 'message_seq'))) AS seq
        )
        SELECT 0, seq, NULL FROM floor
        UNION ALL
        (SELECT 1, seq, NULL FROM messages
         WHERE app_id = $1 AND target_id = $2 AND seq > (SELECT seq FROM floor) AND sent_time >= $4 AND conv_type IN (1, 6)
         ORDER BY seq LIMIT $5)
        UNION ALL
        (SELECT 1, seq, NULL FROM messages
         WHERE app_id = $1 AND sender_id = $2 AND include_sender = 1 AND seq > (SELECT seq FROM floor) AND sent_time >= $4
             AND conv_type IN (1, 6)
         ORDER BY seq LIMIT $5)
        UNION ALL
        (SELECT 1, seq, NULL FROM messages
         WHERE app_id = $1 AND target_id = '*' AND sender_id <> $2 AND seq > (SELECT seq FROM floor) AND sent_time >= $4
             AND conv_type IN (1, 6)
         ORDER BY seq LIMIT $5)
        UNION ALL
        SELECT 2, s.seq, g.group_id FROM group_members g
        CROSS JOIN LATERAL (
            SELECT seq FROM messages
            WHERE app_id = g.app_id AND target_id = g.group_id AND seq > GREATEST((SELECT seq FROM floor), g.joined_seq)
            ORDER BY seq LIMIT $5) AS s
        WHERE g.app_id = $1 AND g.user_id = $2
        """
    typealias Row = SyncCandidate

    let appId: Int64
    let userId: String
    let after: Int64
    let minSentTime: Int64
    let limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(appId)
        bindings.append(userId)
        bindings.append(after)
        bindings.append(minSentTime)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> SyncCandidate {
        var cells = Cells(row)
        let kind = try cells.next(Int32.self)
        let seq = try cells.int()
        switch kind {
        case 0: return .floor(seq)
        case 1: return .direct(UInt64(seq))
        default: return .group(UInt64(seq), try cells.string())
        }
    }
}

/// The rows of a sync page's seqs, in seq order, and whether the user deleted each from their view
/// (hid it, or cleared its conversation through its time; only messages kept in history).
struct SyncRows: PostgresPreparedStatement {
    static let name = "imserver_sync_rows"
    static let sql = """
        SELECT \(PostgresStore.columns),
            in_history = 1 AND (
                EXISTS (SELECT 1 FROM hidden_messages h WHERE h.app_id = $1 AND h.user_id = $2 AND h.uid = messages.uid)
                OR EXISTS (SELECT 1 FROM cleared_conversations c
                           WHERE c.app_id = $1 AND c.user_id = $2 AND c.conv_key = messages.conv_key
                               AND messages.sent_time <= c.cleared_through))
        FROM messages WHERE seq = ANY($3::bigint[]) ORDER BY seq
        """
    typealias Row = (StoredMessage, Bool)

    let appId: Int64
    let userId: String
    let seqs: [Int64]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(appId)
        bindings.append(userId)
        bindings.append(seqs)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> (StoredMessage, Bool) {
        var cells = Cells(row)
        return (try PostgresStore.message(&cells), try cells.next(Bool.self))
    }
}

/// Which way a history page reads.
protocol HistoryOrder {
    /// The sentTime condition and the order: before the bound, newest first; or after it, oldest first.
    static var range: String { get }
}

enum NewestFirst: HistoryOrder {
    static let range = "sent_time < $3 ORDER BY sent_time DESC"
}

enum OldestFirst: HistoryOrder {
    static let range = "sent_time > $3 ORDER BY sent_time ASC"
}

/// A conversation's cloud history as a whole (the Server API's reads).
struct History<Order: HistoryOrder>: PostgresPreparedStatement {
    static var sql: String {
        "SELECT \(PostgresStore.columns) FROM messages WHERE app_id = $1 AND conv_key = $2 AND in_history = 1 AND \(Order.range) LIMIT $4"
    }
    typealias Row = StoredMessage

    let appId: Int64
    let conversationKey: String
    let bound: Int64
    let limit: Int64

    var ascending: History<OldestFirst> {
        History<OldestFirst>(appId: appId, conversationKey: conversationKey, bound: bound, limit: limit)
    }

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(appId)
        bindings.append(conversationKey)
        bindings.append(bound)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> StoredMessage { try PostgresStore.message(row) }
}

extension History where Order == NewestFirst {
    init(appId: Int64, conversationKey: String, bound: Int64, limit: Int64) {
        self.appId = appId
        self.conversationKey = conversationKey
        self.bound = bound
        self.limit = limit
    }
}

/// A conversation's cloud history as one user may see it: after their `afterSeq`, after what they
/// cleared and the retention, directional messages only when theirs, less what they hid.
struct ViewerHistory<Order: HistoryOrder>: PostgresPreparedStatement {
    static var sql: String {
        """
        SELECT \(PostgresStore.columns) FROM messages
        WHERE app_id = $1 AND conv_key = $2 AND in_history = 1 AND seq > $5
            AND sent_time > GREATEST($6::bigint, COALESCE((SELECT cleared_through FROM cleared_conversations
                                                     WHERE app_id = $1 AND user_id = $4 AND conv_key = $2), $6::bigint))
            AND (audience IS NULL OR sender_id = $4 OR strpos(audience, $7) > 0)
            AND NOT EXISTS (SELECT 1 FROM hidden_messages h WHERE h.app_id = messages.app_id AND h.user_id = $4 AND h.uid = messages.uid)
            AND \(Order.range) LIMIT $8
        """
    }
    typealias Row = StoredMessage

    let appId: Int64
    let conversationKey: String
    let userId: String
    let afterSeq: Int64
    /// Messages sent at or before this are past the retention.
    let retainedAfter: Int64
    let bound: Int64
    let limit: Int64

    var ascending: ViewerHistory<OldestFirst> {
        ViewerHistory<OldestFirst>(appId: appId, conversationKey: conversationKey, userId: userId, afterSeq: afterSeq,
                                   retainedAfter: retainedAfter, bound: bound, limit: limit)
    }

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 8)
        bindings.append(appId)
        bindings.append(conversationKey)
        bindings.append(bound)
        bindings.append(userId)
        bindings.append(afterSeq)
        bindings.append(retainedAfter)
        bindings.append(PostgresStore.audienceEntry(userId))
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> StoredMessage { try PostgresStore.message(row) }
}

extension ViewerHistory where Order == NewestFirst {
    init(appId: Int64, conversationKey: String, userId: String, afterSeq: Int64, retainedAfter: Int64, bound: Int64, limit: Int64) {
        self.appId = appId
        self.conversationKey = conversationKey
        self.userId = userId
        self.afterSeq = afterSeq
        self.retainedAfter = retainedAfter
        self.bound = bound
        self.limit = limit
    }
}
