import Foundation
import GRDB
import IMProcess
import IMStore
import IMStoreConformance
@testable import IMStoreSQLite
import Synchronization
import Testing

/// The store conformance suite against the embedded store: every check opens a `SQLiteStore` in a
/// temporary directory of its own, and each test removes the directories it made when it ends.
@Suite("SQLiteStore conformance")
struct SQLiteStoreConformanceTests {
    @Test func appStore() async throws { try await withSQLiteStores { try await $0.appStore() } }
    @Test func messageStore() async throws { try await withSQLiteStores { try await $0.messageStore() } }
    @Test func syncStore() async throws { try await withSQLiteStores { try await $0.syncStore() } }
    @Test func messageLifecycleStore() async throws { try await withSQLiteStores { try await $0.messageLifecycleStore() } }
    @Test func userStore() async throws { try await withSQLiteStores { try await $0.userStore() } }
    @Test func groupStore() async throws { try await withSQLiteStores { try await $0.groupStore() } }
    @Test func sensitiveWordStore() async throws { try await withSQLiteStores { try await $0.sensitiveWordStore() } }
    @Test func conversationStateStore() async throws { try await withSQLiteStores { try await $0.conversationStateStore() } }
    @Test func chatroomStore() async throws { try await withSQLiteStores { try await $0.chatroomStore() } }
    @Test func ultraGroupStore() async throws { try await withSQLiteStores { try await $0.ultraGroupStore() } }
    @Test func pushStore() async throws { try await withSQLiteStores { try await $0.pushStore() } }
    @Test func callbackStore() async throws { try await withSQLiteStores { try await $0.callbackStore() } }
    @Test func operationsStore() async throws { try await withSQLiteStores { try await $0.operationsStore() } }
    @Test func conversationKeys() async throws { try await withSQLiteStores { try await $0.conversationKeys() } }
    @Test func tenantIsolation() async throws { try await withSQLiteStores { try await $0.tenantIsolation() } }
    @Test func concurrency() async throws { try await withSQLiteStores { try await $0.concurrency() } }

    @Test("the writer's page cache is 64 MiB and stays so across transactions; readers keep SQLite's 2 MiB")
    func writerCache() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        // A negative cache_size is in KiB; SQLite's default is -2000.
        for _ in 0..<2 {
            #expect(try await store.pool.write { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -SQLiteStore.writerCacheKiB)
        }
        #expect(SQLiteStore.writerCacheKiB == 65_536)
        #expect(try await store.pool.read { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -2000)
        #expect(try await store.pushPool.write { try Int.fetchOne($0, sql: "PRAGMA cache_size") } == -SQLiteStore.writerCacheKiB,
                "the push file's writer too")
    }
}

@Suite("SQLite: the push bookkeeping in a file of its own")
struct PushFileTests {
    @Test("a message commits, and push settings change, while the push file's writer is held")
    func messageLogDoesNotWaitForPushWrites() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        let app = try await store.upsertApp(appKey: "k", appSecret: "s", name: "a", now: 1)
        // A push transaction that does not end until the commit below has returned.
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Task.detached {
            try await store.pushPool.write { db in
                try db.execute(sql: "INSERT INTO push_cursors (node, seq) VALUES ('held', 1)")
                held.signal()
                release.wait()
            }
        }
        await BlockingWait.run { held.wait() }
        let message = StoredMessage(appId: app.id, conversationType: .private, conversationKey: privateConversationKey("ann", "bob"),
                                    targetId: "bob", senderId: "ann", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8),
                                    uid: "UID-HELD-1", sentTime: 1_000, flags: .persistedAndCounted)
        let committed = try await store.commit([message])
        try await store.setPushSettings(appId: app.id, settings: Data("{}".utf8))
        // Still held: the commit did not wait for it.
        #expect(try await store.pushCursor(node: "held") == nil)
        release.signal()
        try await holder.value
        #expect(committed.first?.message.seq ?? 0 > 0)
        #expect(try await store.pushCursor(node: "held") == 1)
    }

    #if os(Linux)
    @Test("the push file's reads and writes, and the decisions' reads of the main file, run at a lower priority than the message log's")
    func pushWorkRunsLow() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        // The calling thread's nice value (on Linux a nice value is a thread's own).
        @Sendable func nice(_ db: Database) -> Int32 {
            errno = 0
            return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        }
        let messageLog = try await store.pool.write(nice)
        #expect(try await store.pushPool.write(nice) > messageLog)
        #expect(try await store.pushPool.read(nice) > messageLog)
        #expect(try await store.pushReader.read(nice) > messageLog)
        #expect(try await store.pushReader.read(nice) > store.pool.read(nice))
    }
    #endif

    @Test("a data directory from before the push file: its records, cursors and badges move there once, into batches, ids go on past the old ones")
    func upgradeMovesPushBookkeeping() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let directory = directories.make()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let mainPath = directory.appendingPathComponent("imserver.sqlite").path
        let old = try DatabaseQueue(path: mainPath)
        try SQLiteStore.migrator.migrate(old, upTo: "v17-media")
        let oldRecords = """
            INSERT INTO push_records (id, app_id, message_uid, user_id, device_id, kind, token, environment, notification,
                status, code, attempts, next_attempt_at, created_at, updated_at) VALUES
                (1, 1, 'M1', 'ann', 'phone', 'apns', 'tok-ann', 'production', x'01', 1, 'apns-1', 1, 0, 10, 11),
                (2, 1, 'M2', 'ann', 'phone', 'apns', 'tok-ann', 'production', x'02', 0, '', 0, 20, 20, 20),
                (7, 1, 'M3', 'bob', '', NULL, '', '', x'', 3, 'P16', 0, 0, 30, 30);
            DELETE FROM push_records WHERE id = 7;
            """
        try await old.write { db in
            try db.execute(sql: """
                INSERT INTO push_devices (app_id, user_id, device_id, kind, token, environment, platform, badge, updated_at) VALUES
                    (1, 'ann', 'phone', 'apns', 'tok-ann', 'production', 'iOS', 4, 1),
                    (1, 'ann', 'phone', 'apns_voip', 'voip-ann', 'production', 'iOS', 4, 1),
                    (1, 'bob', 'tab', 'fcm', 'tok-bob', '', 'Android', 0, 1);
                \(oldRecords)
                INSERT INTO push_cursors (node, seq) VALUES ('node-a', 42);
                """)
        }
        try old.close()

        let expected = [
            PushRecord(appId: 1, messageUid: "M2", userId: "ann", deviceId: "phone", kind: .apns, token: "tok-ann", environment: "production",
                       notification: Data([2]), status: .pending, nextAttemptAt: 20, createdAt: 20, updatedAt: 20),
            PushRecord(appId: 1, messageUid: "M1", userId: "ann", deviceId: "phone", kind: .apns, token: "tok-ann", environment: "production",
                       notification: Data([1]), status: .sent, code: "apns-1", attempts: 1, createdAt: 10, updatedAt: 11),
        ]
        func check(_ store: SQLiteStore) async throws -> [PushRecord] {
            let records = try await store.pushRecords(appId: 1, messageUid: nil, userId: nil, limit: 10)
            #expect(records.map { var record = $0; record.id = 0; return record } == expected, "every field kept, newest first")
            #expect(records.count == 2 && records[0].id > records[1].id && records[1].id > 7,
                    "ids in the old order, past every id given before (7, swept): \(records.map(\.id))")
            #expect(try await store.duePushes(now: 100, limit: 10).map(\.id) == records.prefix(1).map(\.id), "the pending one is still due")
            #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 10).map(\.messageUid) == ["M2", "M1"],
                    "found by user")
            #expect(try await store.pushCursor(node: "node-a") == 42)
            let devices = try await store.pushDevices(appId: 1, userIds: ["ann", "bob"])
            #expect(Set(devices.map { "\($0.userId)/\($0.kind.rawValue)=\($0.badge)" }) == ["ann/apns=4", "ann/apns_voip=4", "bob/fcm=0"])
            #expect(try await store.pool.read { try $0.tableExists("push_records") || $0.tableExists("push_cursors") } == false,
                    "the main file no longer has them")
            #expect(try await store.pushPool.read { try $0.tableExists("push_records") } == false, "nor the push file")
            return records
        }
        let store = try SQLiteStore(directory: directory.path)
        let moved = try await check(store)
        // A crash after the copy and before the main file's tables were dropped: the next start
        // copies again and keeps one of each.
        try store.close()
        let main = try DatabaseQueue(path: mainPath)
        try await main.write { db in
            try db.execute(sql: """
                CREATE TABLE push_records (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id INTEGER NOT NULL, message_uid TEXT NOT NULL, user_id TEXT NOT NULL, device_id TEXT NOT NULL,
                    kind TEXT, token TEXT NOT NULL, environment TEXT NOT NULL, notification BLOB NOT NULL,
                    status INTEGER NOT NULL, code TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL,
                    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
                );
                CREATE TABLE push_cursors (node TEXT PRIMARY KEY, seq INTEGER NOT NULL);
                \(oldRecords)
                INSERT INTO push_cursors (node, seq) VALUES ('node-a', 42);
                UPDATE push_devices SET badge = 4 WHERE user_id = 'ann';
                """)
        }
        try main.close()
        let again = try SQLiteStore(directory: directory.path)
        #expect(try await check(again).map(\.id) == moved.map(\.id), "moved once: the second copy added nothing")
        try await again.recordPushDecisions([PushRecord(appId: 1, messageUid: "M4", userId: "bob", status: .suppressed, code: "P16", createdAt: 40)],
                                            badges: [PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 2)], node: "node-a", cursor: 43)
        #expect(try await again.pushDevices(appId: 1, userIds: ["bob"]).map(\.badge) == [2], "a moved device's badge is set by decisions")
        let newest = try await again.pushRecords(appId: 1, messageUid: "M4", userId: nil, limit: 1)
        #expect((newest.first?.id ?? 0) > moved[0].id, "a new record comes after the moved ones")
        #expect(try await again.pushCursor(node: "node-a") == 43)
        try again.close()
    }
}

/// Runs `body` with a suite whose stores are SQLite databases in fresh temporary directories,
/// and removes those directories afterwards.
func withSQLiteStores(_ body: (StoreConformance) async throws -> Void) async throws {
    let directories = TemporaryDirectories()
    defer { directories.removeAll() }
    try await body(StoreConformance {
        try SQLiteStore(directory: directories.make().path)
    })
}

/// The temporary directories a test's stores live in.
final class TemporaryDirectories: Sendable {
    private let made = Mutex<[URL]>([])

    func make() -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-conformance-\(UUID().uuidString)")
        made.withLock { $0.append(directory) }
        return directory
    }

    func removeAll() {
        for directory in made.withLock({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}

@Suite("SQLite: the commit's lookups on the statement's handle")
struct FirstIntegerTests {
    @Test("one and two texts bound in place, an empty text as '' (not NULL), no row and NULL as nil, the statement reusable at once")
    func firstInteger() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        try await store.pool.write { db in
            try db.execute(sql: "CREATE TEMP TABLE t (app INTEGER, a TEXT, b TEXT, v INTEGER)")
            try db.execute(sql: "INSERT INTO t VALUES (1, '', 'x', 7), (1, 'p', 'q', 8), (2, 'p', 'q', 9), (1, 'n', 'n', NULL)")
            let two = try db.cachedStatement(sql: "SELECT v FROM t WHERE app = ? AND a = ? AND b = ?")
            #expect(try two.firstInteger(1, "", "x") == 7, "an empty text bound as NULL would match nothing")
            #expect(try two.firstInteger(1, "p", "q") == 8)
            #expect(try two.firstInteger(2, "p", "q") == 9, "the app id is bound too")
            #expect(try two.firstInteger(1, "p", "x") == nil, "no row")
            #expect(try two.firstInteger(1, "n", "n") == nil, "a NULL value")
            let one = try db.cachedStatement(sql: "SELECT MAX(v) FROM t WHERE app = ? AND a = ?")
            #expect(try one.firstInteger(1, "p") == 8)
            #expect(try one.firstInteger(3, "p") == nil, "MAX over no rows is NULL")
            // A long text (stored out of the string's inline form) and the same statement again.
            let long = String(repeating: "k", count: 300)
            try db.execute(sql: "INSERT INTO t VALUES (1, ?, 'y', 11)", arguments: [long])
            #expect(try two.firstInteger(1, long, "y") == 11)
            #expect(try two.firstInteger(1, long, "y") == 11)
        }
    }
}
