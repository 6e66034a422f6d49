import Foundation
import GRDB
import IMCore
import IMPush
import IMStore
import Synchronization

/// The push records, packed: a row of push_batches holds up to 65,535 records of one message
/// (`PushBatchCoding`), so deciding a group message for 2,700 devices writes one row, and a claim or
/// the answers to a send rewrite that batch's row of push_batch_states. A row per record wrote
/// every record into four indexes; the one by user put each of a message's records on another
/// page, so a message's decisions wrote thousands of pages to the WAL (Decisions).
///
/// The states have a table of their own because SQLite rewrites a whole row when one column
/// changes: with the states beside the records, each claim and each send's answers wrote the
/// batch's records again (about 700 KB for 2,700 devices), and reading the states walked the
/// records' overflow pages. Apart, a claim or an answer writes the states only (about 20 bytes a
/// record).
///
/// The records of a user are found through push_user_batches: a row per app, user and run of 256
/// batch ids (`bucket`, the id >> 8) listing the user's batches in it (two hex digits each, the
/// id's low byte), filled every few seconds for all batches written meanwhile (`indexUsers`). A
/// row per user and batch (push_batch_users, before) made indexing a second of a 2,700-member
/// group's messages 86,000 inserts, a third of a second that every claim, answer and decision
/// queued behind; now it is an append to one row per user. Batches after the last one indexed are
/// read whole by a query by user, so the answer is always complete.
extension SQLiteStore {
    /// The push file's tables for the packed records (migration v2 of the push file).
    static let pushBatchTables = """
        CREATE TABLE push_batches (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            app_id INTEGER NOT NULL, message_uid TEXT NOT NULL,
            created_at INTEGER NOT NULL, next_attempt_at INTEGER,
            records BLOB NOT NULL, states BLOB NOT NULL
        );
        CREATE INDEX push_batches_by_message ON push_batches (app_id, message_uid);
        CREATE INDEX push_batches_pending ON push_batches (next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;
        CREATE INDEX push_batches_by_time ON push_batches (created_at);
        CREATE INDEX push_batches_by_app ON push_batches (app_id, id);
        CREATE TABLE push_batch_users (
            app_id INTEGER NOT NULL, user_id TEXT NOT NULL, batch_id INTEGER NOT NULL,
            PRIMARY KEY (app_id, user_id, batch_id)
        ) WITHOUT ROWID;
        CREATE INDEX push_batch_users_by_batch ON push_batch_users (batch_id);
        CREATE TABLE push_batch_index (
            id INTEGER PRIMARY KEY CHECK (id = 1), indexed_through INTEGER NOT NULL
        );
        INSERT INTO push_batch_index (id, indexed_through) VALUES (1, 0);
        """

    /// Batches written since push_user_batches was last filled, and when that was; the next write
    /// fills it once either is reached.
    static let userIndexBatches = 256
    static let userIndexInterval: Duration = .seconds(2)

    // MARK: writing decisions

    @discardableResult
    public func recordPushDecisions(_ records: [PushRecord], badges: [PushBadge], node: String, cursor: UInt64?) async throws -> [Int64] {
        let indexDue = pushUserIndex.withLock { state in
            let pending = state.held.batches
            return pending >= Self.userIndexBatches || (pending > 0 && ContinuousClock.now - state.lastRun >= Self.userIndexInterval)
        }
        let flushBadgesDue = badgeFlushDue
        return try await pushPool.write { db in
            if flushBadgesDue { try flushBadges(db) }
            var runs = UserRuns()
            let inserted = try Self.insertPushRecords(db, records)
            for batch in inserted.batches { runs.add(batch: batch.id, appId: batch.appId, users: batch.users) }
            try writeBadges(db, badges)
            if let cursor {
                try db.execute(sql: """
                    INSERT INTO push_cursors (node, seq) VALUES (?, ?)
                    ON CONFLICT (node) DO UPDATE SET seq = MAX(push_cursors.seq, excluded.seq)
                    """, arguments: [node, Int64(clamping: cursor)])
            }
            if indexDue {
                try indexUsers(db, adding: runs)
            } else if runs.batches > 0 {
                let written = runs
                db.afterNextTransaction { _ in self.pushUserIndex.withLock { $0.held.merge(written) } }
            }
            return inserted.ids
        }
    }

    /// Inserts records as batches: a run of records of one message is one batch (a new one where
    /// the message changes, so ids follow the order given). A record whose (app, message, user,
    /// device) is stored already, or came earlier in `records`, is left out. Returns the batches
    /// written, with their users, and each record's id (0: left out).
    static func insertPushRecords(_ db: Database, _ records: [PushRecord])
        throws -> (batches: [(id: Int64, appId: Int64, users: Set<String>)], ids: [Int64]) {
        guard !records.isEmpty else { return ([], []) }
        var ids = [Int64](repeating: 0, count: records.count)
        // The place in `records` of each record of `run`.
        var places: [Int] = []
        struct Message: Hashable {
            var appId: Int64
            var uid: String
        }
        // The (user, device) keys stored or met of each message; the current message's at hand
        // (a message's records come together).
        var known: [Message: Set<String>] = [:]
        var message: Message?
        var keys: Set<String> = []
        var batches: [(id: Int64, appId: Int64, users: Set<String>)] = []
        var run: [PushRecord] = []
        func flush() throws {
            guard let first = run.first else { return }
            let states = run.map(PushBatchCoding.State.init)
            try db.cachedStatement(sql: "INSERT INTO push_batches (app_id, message_uid, created_at, records) VALUES (?, ?, ?, ?)")
                .execute(arguments: [first.appId, first.messageUid, run.map(\.createdAt).min() ?? first.createdAt,
                                     PushBatchCoding.encodeRecords(run)])
            let id = db.lastInsertedRowID
            try db.cachedStatement(sql: "INSERT INTO push_batch_states (batch_id, next_attempt_at, states) VALUES (?, ?, ?)")
                .execute(arguments: [id, PushBatchCoding.nextAttempt(states), PushBatchCoding.encodeStates(states)])
            batches.append((id, first.appId, Set(run.map(\.userId))))
            for (index, place) in places.enumerated() { ids[place] = PushBatchCoding.recordId(batch: id, index: index) }
            run.removeAll(keepingCapacity: true)
            places.removeAll(keepingCapacity: true)
        }
        for (place, record) in records.enumerated() {
            if message?.appId != record.appId || message?.uid != record.messageUid {
                if let message { known[message] = keys }
                let next = Message(appId: record.appId, uid: record.messageUid)
                keys = try known[next] ?? storedKeys(db, appId: record.appId, messageUid: record.messageUid)
                message = next
            }
            guard keys.insert(PushBatchCoding.key(userId: record.userId, deviceId: record.deviceId)).inserted else { continue }
            if let last = run.last, last.appId != record.appId || last.messageUid != record.messageUid || run.count == PushBatchCoding.maxRecords {
                try flush()
            }
            run.append(record)
            places.append(place)
        }
        try flush()
        return (batches, ids)
    }

    /// The (user, device) keys of a message's stored records.
    private static func storedKeys(_ db: Database, appId: Int64, messageUid: String) throws -> Set<String> {
        var keys: Set<String> = []
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT b.records, s.states FROM push_batches b JOIN push_batch_states s ON s.batch_id = b.id
            WHERE b.app_id = ? AND b.message_uid = ?
            """), arguments: [appId, messageUid])
        while let row = try rows.next() {
            let records = try PushBatchCoding.Records(row[0])
            let states = try PushBatchCoding.decodeStates(row[1])
            for index in 0..<records.count where index < states.count && states[index].exists {
                keys.insert(try records.key(index).key)
            }
        }
        return keys
    }

    /// Migration v5 of the push file: the states out of push_batches, into a table of their own.
    static let pushBatchStatesTables = """
        CREATE TABLE push_batch_states (
            batch_id INTEGER PRIMARY KEY,
            next_attempt_at INTEGER,
            states BLOB NOT NULL
        );
        CREATE INDEX push_batch_states_pending ON push_batch_states (next_attempt_at, batch_id) WHERE next_attempt_at IS NOT NULL;
        INSERT INTO push_batch_states (batch_id, next_attempt_at, states) SELECT id, next_attempt_at, states FROM push_batches;
        DROP INDEX push_batches_pending;
        ALTER TABLE push_batches DROP COLUMN next_attempt_at;
        ALTER TABLE push_batches DROP COLUMN states;
        """

    /// Migration v4 of the push file: the index by user in runs of batches, from the row per batch.
    static let pushUserBucketTables = """
        CREATE TABLE push_user_batches (
            app_id INTEGER NOT NULL, user_id TEXT NOT NULL, bucket INTEGER NOT NULL, batches TEXT NOT NULL,
            PRIMARY KEY (app_id, user_id, bucket)
        ) WITHOUT ROWID;
        CREATE INDEX push_user_batches_by_run ON push_user_batches (app_id, bucket);
        INSERT INTO push_user_batches (app_id, user_id, bucket, batches)
            SELECT app_id, user_id, batch_id >> 8, group_concat(printf('%02x', batch_id & 255), '')
            FROM (SELECT app_id, user_id, batch_id FROM push_batch_users ORDER BY app_id, user_id, batch_id)
            GROUP BY app_id, user_id, batch_id >> 8;
        DROP TABLE push_batch_users;
        """

    /// Adds the users of every batch written since the last time to push_user_batches: from
    /// memory (the batches each commit added, and `own`, those of this transaction) once a run since
    /// the start has covered the file's; else from the batches themselves.
    func indexUsers(_ db: Database, adding own: UserRuns) throws {
        let through = try Int64.fetchOne(db, sql: "SELECT indexed_through FROM push_batch_index WHERE id = 1") ?? 0
        var runs = UserRuns()
        let held = pushUserIndex.withLock { $0.covered ? $0.held : nil }
        if let held {
            runs = held
            runs.merge(own)
        } else {
            let rows = try Row.fetchCursor(db, sql: "SELECT id, app_id, records FROM push_batches WHERE id > ? ORDER BY id", arguments: [through])
            while let row = try rows.next() {
                let records = try PushBatchCoding.Records(row[2])
                var users: Set<String> = []
                for index in 0..<records.count { users.insert(try records.userId(index)) }
                runs.add(batch: row[0], appId: row[1], users: users)
            }
        }
        let append = try db.cachedStatement(sql: """
            INSERT INTO push_user_batches (app_id, user_id, bucket, batches)
            SELECT ?, value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true
            ON CONFLICT (app_id, user_id, bucket) DO UPDATE SET batches = push_user_batches.batches || excluded.batches
            """)
        for (appId, byRun) in runs.byApp {
            var rows = JSONRows(reservingRows: byRun.count)
            for (run, batches) in byRun {
                rows.row()
                rows.string(run.userId)
                rows.number(run.bucket)
                rows.string(batches)
            }
            try append.execute(arguments: [appId, rows.finished])
        }
        if runs.highest > through {
            try db.execute(sql: "UPDATE push_batch_index SET indexed_through = ? WHERE id = 1", arguments: [runs.highest])
        }
        db.afterNextTransaction { _ in
            self.pushUserIndex.withLock { state in
                state.held = UserRuns()
                state.covered = true
                state.lastRun = .now
            }
        }
    }

    /// The batch ids a row of push_user_batches lists, newest first.
    static func batchIds(bucket: Int64, _ batches: String) -> [Int64] {
        func nibble(_ digit: UInt8) -> Int64? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): Int64(digit - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): Int64(digit - UInt8(ascii: "a") + 10)
            default: nil
            }
        }
        var ids: [Int64] = []
        var digits = batches.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            if let high = nibble(high), let low = nibble(low) { ids.append(bucket << 8 | high << 4 | low) }
        }
        return ids.sorted(by: >)
    }

    // MARK: sending

    public func duePushes(now: Int64, limit: Int) async throws -> [PushRecord] {
        guard limit > 0 else { return [] }
        return try await pushPool.read { db in
            var due: [PushRecord] = []
            let rows = try Row.fetchCursor(db, sql: """
                SELECT s.batch_id, b.app_id, b.message_uid, s.next_attempt_at, b.records, s.states
                FROM push_batch_states s JOIN push_batches b ON b.id = s.batch_id
                WHERE s.next_attempt_at IS NOT NULL AND s.next_attempt_at <= ? ORDER BY s.next_attempt_at, s.batch_id
                """, arguments: [now])
            while let row = try rows.next() {
                // Batches come by their earliest pending record: once `limit` records are due no
                // later than this batch's earliest, no record of it or of later batches comes first.
                let earliest: Int64 = row[3]
                if due.count >= limit, let last = due.last, last.nextAttemptAt < earliest { break }
                let batch: Int64 = row[0], appId: Int64 = row[1], messageUid: String = row[2]
                let records = try PushBatchCoding.Records(row[4])
                let states = try PushBatchCoding.decodeStates(row[5])
                for (index, state) in states.enumerated() where state.isPending && state.nextAttemptAt <= now && index < records.count {
                    due.append(try records.record(index, batch: batch, appId: appId, messageUid: messageUid, state: state))
                }
                if due.count >= limit {
                    due.sort { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
                    due.removeLast(due.count - limit)
                }
            }
            due.sort { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
            return due
        }
    }

    public func nextPushAttempt() async throws -> Int64? {
        try await pushPool.read { db in
            // A batch's next_attempt_at is its earliest pending record's (NULL when none is).
            try Int64.fetchOne(db, sql: "SELECT MIN(next_attempt_at) FROM push_batch_states WHERE next_attempt_at IS NOT NULL")
        }
    }

    public func claimPushes(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return try await pushPool.write { db in
            var claimed: [Int64] = []
            try Self.changeStates(db, ids: ids.uniqued()) { states, id in
                let index = PushBatchCoding.index(ofRecord: id)
                guard index < states.count, states[index].isPending, states[index].nextAttemptAt <= now else { return }
                states[index].nextAttemptAt = leaseUntil
                claimed.append(id)
            }
            return claimed
        }
    }

    public func recordPushAttempts(_ attempts: [PushAttempt]) async throws {
        guard !attempts.isEmpty else { return }
        let byId = Dictionary(grouping: attempts, by: \.id)
        try await pushPool.write { db in
            // Each record's attempts in the order given; one that ended it is the last applied.
            try Self.changeStates(db, ids: attempts.map(\.id).uniqued()) { states, id in
                let index = PushBatchCoding.index(ofRecord: id)
                guard index < states.count else { return }
                for attempt in byId[id] ?? [] where states[index].isPending {
                    states[index] = PushBatchCoding.State(status: UInt8(attempt.status.rawValue), attempts: attempt.attempts,
                                                          nextAttemptAt: attempt.nextAttemptAt, updatedAt: attempt.now, code: attempt.code)
                }
            }
        }
    }

    /// Reads the states of the batches of `ids`, lets `change` alter them record by record, and
    /// writes back those it changed with their new next_attempt_at.
    private static func changeStates(_ db: Database, ids: [Int64], _ change: (inout [PushBatchCoding.State], Int64) -> Void) throws {
        var byBatch: [Int64: [Int64]] = [:]
        var order: [Int64] = []
        for id in ids {
            let batch = PushBatchCoding.batch(ofRecord: id)
            if byBatch[batch] == nil { order.append(batch) }
            byBatch[batch, default: []].append(id)
        }
        let read = try db.cachedStatement(sql: "SELECT states FROM push_batch_states WHERE batch_id = ?")
        let write = try db.cachedStatement(sql: "UPDATE push_batch_states SET states = ?, next_attempt_at = ? WHERE batch_id = ?")
        for batch in order {
            guard let data = try Data.fetchOne(read, arguments: [batch]) else { continue }
            var states = try PushBatchCoding.decodeStates(data)
            let before = states
            for id in byBatch[batch] ?? [] { change(&states, id) }
            guard states != before else { continue }
            try write.execute(arguments: [PushBatchCoding.encodeStates(states), PushBatchCoding.nextAttempt(states), batch])
        }
    }

    // MARK: the troubleshooting view

    public func pushRecords(appId: Int64, messageUid: String?, userId: String?, limit: Int) async throws -> [PushRecord] {
        guard limit > 0 else { return [] }
        return try await pushPool.read { db in
            var found: [PushRecord] = []
            /// Adds a batch's records (of `userId` when given), newest first; false once `limit` are found.
            func take(_ row: Row) throws -> Bool {
                let batch: Int64 = row[0], message: String = row[1]
                let records = try PushBatchCoding.Records(row[2])
                let states = try PushBatchCoding.decodeStates(row[3])
                for index in stride(from: min(records.count, states.count) - 1, through: 0, by: -1) where states[index].exists {
                    if let userId, try records.userId(index) != userId { continue }
                    found.append(try records.record(index, batch: batch, appId: appId, messageUid: message, state: states[index]))
                    if found.count >= limit { return false }
                }
                return true
            }
            let columns = "b.id, b.message_uid, b.records, s.states FROM push_batches b JOIN push_batch_states s ON s.batch_id = b.id"
            if let messageUid {
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT \(columns) WHERE b.app_id = ? AND b.message_uid = ? ORDER BY b.id DESC
                    """, arguments: [appId, messageUid])
                while let row = try rows.next(), try take(row) {}
            } else if let userId {
                // The batches not indexed yet (the newest), then those push_user_batches names.
                let through = try Int64.fetchOne(db, sql: "SELECT indexed_through FROM push_batch_index WHERE id = 1") ?? 0
                let recent = try Row.fetchCursor(db, sql: """
                    SELECT \(columns) WHERE b.app_id = ? AND b.id > ? ORDER BY b.id DESC
                    """, arguments: [appId, through])
                var more = true
                while more, let row = try recent.next() { more = try take(row) }
                guard more else { return found }
                let buckets = try Row.fetchCursor(db, sql: """
                    SELECT bucket, batches FROM push_user_batches WHERE app_id = ? AND user_id = ? AND bucket <= ? ORDER BY bucket DESC
                    """, arguments: [appId, userId, through >> 8])
                let batch = try db.cachedStatement(sql: "SELECT \(columns) WHERE b.id = ? AND b.app_id = ?")
                var seen: Set<Int64> = []
                while more, let bucket = try buckets.next() {
                    for id in Self.batchIds(bucket: bucket[0], bucket[1]) where id <= through && seen.insert(id).inserted {
                        // A batch the sweep removed is no longer there.
                        guard let row = try Row.fetchOne(batch, arguments: [id, appId]) else { continue }
                        more = try take(row)
                        if !more { break }
                    }
                }
            } else {
                let rows = try Row.fetchCursor(db, sql: "SELECT \(columns) WHERE b.app_id = ? ORDER BY b.id DESC", arguments: [appId])
                while let row = try rows.next(), try take(row) {}
            }
            return found
        }
    }

    // MARK: copying into another store

    /// The records of the batches after `afterBatch`, for `imserver migrate`: those of up to
    /// `batches` batches in id order (a swept record left out), and the last batch read (nil once
    /// there is none after `afterBatch`). `schema` names the push file as `db` has it attached.
    public static func pushRecordsToCopy(_ db: Database, schema: String, afterBatch: Int64,
                                         batches: Int) throws -> (records: [PushRecord], lastBatch: Int64?) {
        var records: [PushRecord] = []
        var last: Int64?
        let rows = try Row.fetchCursor(db, sql: """
            SELECT b.id, b.app_id, b.message_uid, b.records, s.states
            FROM \(schema).push_batches b JOIN \(schema).push_batch_states s ON s.batch_id = b.id WHERE b.id > ? ORDER BY b.id LIMIT ?
            """, arguments: [afterBatch, batches])
        while let row = try rows.next() {
            let batch: Int64 = row[0]
            let packed = try PushBatchCoding.Records(row[3])
            let states = try PushBatchCoding.decodeStates(row[4])
            for index in 0..<min(packed.count, states.count) where states[index].exists {
                records.append(try packed.record(index, batch: batch, appId: row[1], messageUid: row[2], state: states[index]))
            }
            last = batch
        }
        return (records, last)
    }

    /// The highest record id this store has given or may still give to a batch already begun:
    /// the last batch's whole id range (a record id is its batch's id × 2^16 + its index).
    public static func highestPushRecordId(_ db: Database, schema: String) throws -> Int64 {
        let batch = max(try Int64.fetchOne(db, sql: "SELECT seq FROM \(schema).sqlite_sequence WHERE name = 'push_batches'") ?? 0,
                        try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM \(schema).push_batches") ?? 0)
        return batch == 0 ? 0 : PushBatchCoding.recordId(batch: batch, index: PushBatchCoding.maxRecords)
    }

    // MARK: the sweep

    public func deletePushRecords(createdBefore before: Int64) async throws -> Int {
        try await pushPool.write { db in
            var deleted = 0
            struct Run: Hashable {
                var appId: Int64
                var bucket: Int64
            }
            var emptied: Set<Run> = []
            let read = try db.cachedStatement(sql: """
                SELECT b.records, s.states FROM push_batches b JOIN push_batch_states s ON s.batch_id = b.id WHERE b.id = ?
                """)
            for old in try Row.fetchAll(db, sql: "SELECT id, app_id FROM push_batches WHERE created_at < ?", arguments: [before]) {
                let batch: Int64 = old[0]
                guard let row = try Row.fetchOne(read, arguments: [batch]) else { continue }
                let records = try PushBatchCoding.Records(row[0])
                var states = try PushBatchCoding.decodeStates(row[1])
                var oldestKept: Int64?
                for index in states.indices where states[index].exists && index < records.count {
                    let createdAt = try records.key(index).createdAt
                    if !states[index].isPending && createdAt < before {
                        states[index].status = PushBatchCoding.swept
                        deleted += 1
                    } else {
                        oldestKept = min(oldestKept ?? createdAt, createdAt)
                    }
                }
                if let oldestKept {
                    try db.execute(sql: "UPDATE push_batch_states SET states = ? WHERE batch_id = ?",
                                   arguments: [PushBatchCoding.encodeStates(states), batch])
                    try db.execute(sql: "UPDATE push_batches SET created_at = ? WHERE id = ?", arguments: [oldestKept, batch])
                } else {
                    try db.execute(sql: "DELETE FROM push_batch_states WHERE batch_id = ?", arguments: [batch])
                    try db.execute(sql: "DELETE FROM push_batches WHERE id = ?", arguments: [batch])
                    emptied.insert(Run(appId: old[1], bucket: batch >> 8))
                }
            }
            // An app's rows of the index for a run of 256 batch ids go once none of its batches in
            // that run is left (a batch written there later adds a row again).
            let left = try db.cachedStatement(sql: "SELECT 1 FROM push_batches WHERE id BETWEEN ? AND ? AND app_id = ? LIMIT 1")
            let drop = try db.cachedStatement(sql: "DELETE FROM push_user_batches WHERE app_id = ? AND bucket = ?")
            for run in emptied where try Row.fetchOne(left, arguments: [run.bucket << 8, run.bucket << 8 | 255, run.appId]) == nil {
                try drop.execute(arguments: [run.appId, run.bucket])
            }
            return deleted
        }
    }

    /// Forgets every push record of an app (the app was deleted).
    static func deletePushRecords(_ db: Database, appId: Int64) throws {
        try db.execute(sql: "DELETE FROM push_user_batches WHERE app_id = ?", arguments: [appId])
        try db.execute(sql: "DELETE FROM push_batch_states WHERE batch_id IN (SELECT id FROM push_batches WHERE app_id = ?)", arguments: [appId])
        try db.execute(sql: "DELETE FROM push_batches WHERE app_id = ?", arguments: [appId])
    }

    // MARK: records from before the batches

    /// Moves the rows of a per-record push_records table (`table`: the push file's own from before
    /// migration v2, or the main file's from before the push file) into batches, in id order, and
    /// makes every later record's id larger than `idFloor` and those rows' ids. A record already in
    /// a batch is kept, so moving again after a crash adds nothing twice.
    static func moveRecordsIntoBatches(_ db: Database, from table: String, idFloor: Int64) throws {
        let highest = max(idFloor, try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM \(table)") ?? 0)
        let floor = PushBatchCoding.batch(ofRecord: highest)
        let current = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'push_batches'")
        if current == nil {
            try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('push_batches', ?)", arguments: [floor])
        } else if let current, current < floor {
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'push_batches'", arguments: [floor])
        }
        let rows = try Row.fetchCursor(db, sql: "SELECT \(pushRecordColumns) FROM \(table) ORDER BY id")
        var chunk: [PushRecord] = []
        while let row = try rows.next() {
            chunk.append(pushRecord(row))
            if chunk.count >= 10_000 {
                _ = try insertPushRecords(db, chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        _ = try insertPushRecords(db, chunk)
    }

    static let pushRecordColumns = """
        id, app_id, message_uid, user_id, device_id, kind, token, environment, notification, status, code, attempts,
        next_attempt_at, created_at, updated_at
        """

    /// A row of a per-record push_records table.
    static func pushRecord(_ row: Row) -> PushRecord {
        let kind: String? = row[5]
        let status: Int = row[9]
        return PushRecord(id: row[0], appId: row[1], messageUid: row[2], userId: row[3], deviceId: row[4],
                          kind: kind.flatMap(PushTokenKind.init(rawValue:)), token: row[6], environment: row[7],
                          notification: row[8], status: PushStatus(rawValue: status) ?? .failed, code: row[10],
                          attempts: row[11], nextAttemptAt: row[12], createdAt: row[13], updatedAt: row[14])
    }
}

/// When push_user_batches was last filled, and the batches committed since with their users (in
/// memory: a restart only makes the next fill come sooner, and read the batches back).
struct PushUserIndexState {
    var lastRun = ContinuousClock.now
    /// Used by the next fill once `covered` (a fill since the start read the file's), so that it
    /// reads no batch back.
    var held = UserRuns()
    var covered = false
}

/// Users and the batches they have records in, as push_user_batches keeps them: by app, user and
/// run of 256 batch ids, the ids' low bytes as hex digits.
struct UserRuns {
    struct Run: Hashable {
        var userId: String
        var bucket: Int64
    }

    var byApp: [Int64: [Run: String]] = [:]
    /// The highest batch id added.
    var highest: Int64 = 0
    var batches = 0

    mutating func add(batch id: Int64, appId: Int64, users: Set<String>) {
        let low = hexString(CollectionOfOne(UInt8(truncatingIfNeeded: id)))
        for userId in users { byApp[appId, default: [:]][Run(userId: userId, bucket: id >> 8), default: ""] += low }
        highest = max(highest, id)
        batches += 1
    }

    /// Adds `later`'s (batches after these).
    mutating func merge(_ later: UserRuns) {
        for (appId, runs) in later.byApp {
            byApp[appId, default: [:]].merge(runs) { $0 + $1 }
        }
        highest = max(highest, later.highest)
        batches += later.batches
    }
}
