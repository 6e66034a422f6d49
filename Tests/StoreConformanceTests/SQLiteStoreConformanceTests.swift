import Foundation
import GRDB
import IMCore
import IMProcess
import IMPush
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

@Suite("SQLite: badges and devices held in memory, records sharing their notification")
struct PushMemoryTests {
    static func device(_ app: Int64, _ user: String, _ id: String, _ token: String, kind: PushTokenKind = .apns) -> PushDeviceRecord {
        PushDeviceRecord(appId: app, userId: user, deviceId: id, platform: "iOS", kind: kind, token: token, environment: "production",
                         badge: 0, updatedAt: 1)
    }

    static func badges(_ store: SQLiteStore, _ app: Int64, _ users: [String]) async throws -> [String: Int] {
        Dictionary(try await store.pushDevices(appId: app, userIds: users).map { ("\($0.userId)/\($0.deviceId)/\($0.kind.rawValue)", $0.badge) },
                   uniquingKeysWith: { first, _ in first })
    }

    /// The badges push_badges itself has (not what memory holds).
    static func fileBadges(_ store: SQLiteStore) async throws -> [String: Int] {
        try await store.pushPool.read { db in
            Dictionary(try Row.fetchAll(db, sql: "SELECT user_id, device_id, kind, badge FROM push_badges").map {
                ("\($0[0] as String)/\($0[1] as String)/\($0[2] as String)", $0[3] as Int)
            }, uniquingKeysWith: { first, _ in first })
        }
    }

    @Test("decisions' badges are held in memory and logged; a crash before they reach push_badges loses none (the next open applies the log)")
    func heldBadgesSurviveACrash() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let directory = directories.make().path
        // Held until the store closes (no flush by time while the test runs, however slow the machine).
        let store = try SQLiteStore(directory: directory, badgeFlushInterval: .seconds(86_400))
        try await store.setPushDevice(Self.device(1, "ann", "phone", "tok-ann"))
        try await store.setPushDevice(Self.device(1, "ann", "phone", "voip-ann", kind: .apnsVoIP))
        try await store.setPushDevice(Self.device(1, "bob", "tab", "tok-bob"))
        // The decisions read the devices first (that holds ann's and bob's badges), then set them.
        #expect(try await Self.badges(store, 1, ["ann", "bob"]) == ["ann/phone/apns": 0, "ann/phone/apns_voip": 0, "bob/tab/apns": 0])
        for badge in 1...3 {
            try await store.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "ann", deviceId: "phone", badge: badge)],
                                                node: "n", cursor: UInt64(badge))
        }
        try await store.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 7)], node: "n", cursor: 4)
        #expect(try await Self.badges(store, 1, ["ann", "bob"]) == ["ann/phone/apns": 3, "ann/phone/apns_voip": 3, "bob/tab/apns": 7])
        #expect(try await Self.fileBadges(store).values.allSatisfy { $0 == 0 }, "not written to push_badges yet (within the flush interval)")
        #expect(try await store.pushPool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM push_badge_log") } == 4)

        // The process dies: the store is never closed, its memory is gone. The next open applies the log.
        let reopened = try SQLiteStore(directory: directory, badgeFlushInterval: .zero)
        defer { try? reopened.close() }
        #expect(try await Self.fileBadges(reopened) == ["ann/phone/apns": 3, "ann/phone/apns_voip": 3, "bob/tab/apns": 7])
        #expect(try await reopened.pushPool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM push_badge_log") } == 0)
        #expect(try await Self.badges(reopened, 1, ["ann", "bob"]) == ["ann/phone/apns": 3, "ann/phone/apns_voip": 3, "bob/tab/apns": 7])
        _ = store

        // Once the interval has passed (here at once), the next decision writes what changed to
        // push_badges and empties the log.
        try await reopened.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "ann", deviceId: "phone", badge: 4)], node: "n", cursor: 5)
        try await reopened.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 8)], node: "n", cursor: 6)
        #expect(try await Self.fileBadges(reopened) == ["ann/phone/apns": 4, "ann/phone/apns_voip": 4, "bob/tab/apns": 7],
                "ann's flushed by the second decision; bob's 8 is in its log row")
        #expect(try await reopened.pushPool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM push_badge_log") } == 1)
    }

    @Test("past the held-users limits, badges with nothing to flush and devices are let go and read again from the file; a changed badge stays held; a crash after loses none")
    func heldUsersPastTheLimit() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let directory = directories.make().path
        var limits = SQLiteStore.PushMemoryLimits()
        limits.heldBadgeUsers = 2
        limits.heldDeviceUsers = 2
        let store = try SQLiteStore(directory: directory, badgeFlushInterval: .seconds(86_400), pushMemoryLimits: limits)
        func heldBadgeUsers() -> Set<String> { store.pushBadges.withLock { Set($0.users.keys.map(\.userId)) } }
        func heldDeviceUsers() -> Set<String> { store.pushDevices.withLock { Set($0.users.keys.map(\.userId)) } }
        for (user, device) in [("ann", "phone"), ("bob", "tab"), ("cat", "pad")] {
            try await store.setPushDevice(Self.device(1, user, device, "tok-\(user)"))
        }
        try await store.setPushDevice(Self.device(2, "eve", "watch", "tok-eve"))
        #expect(try await Self.badges(store, 1, ["ann", "bob"]) == ["ann/phone/apns": 0, "bob/tab/apns": 0])
        #expect(heldBadgeUsers() == ["ann", "bob"] && heldDeviceUsers() == ["ann", "bob"])
        try await store.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "ann", deviceId: "phone", badge: 5)], node: "n", cursor: 1)

        // A third user: bob (nothing to flush) is let go, ann (5, in memory and the log only) stays.
        #expect(try await Self.badges(store, 1, ["cat"]) == ["cat/pad/apns": 0])
        #expect(heldBadgeUsers() == ["ann", "cat"], "the user with a badge to flush is kept")
        #expect(heldDeviceUsers() == ["cat"], "devices are all in the file: all let go")
        #expect(try await Self.fileBadges(store)["ann/phone/apns"] == 0, "ann's 5 is not in push_badges yet")
        // Decisions for bob, who is not held, go to push_badges at once (with another app's in the same list).
        try await store.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 3),
                                                         PushBadge(appId: 2, userId: "eve", deviceId: "watch", badge: 9),
                                                         PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 4)], node: "n", cursor: 2)
        #expect(try await Self.fileBadges(store)["bob/tab/apns"] == 4, "a device named twice gets its last badge")
        #expect(try await Self.fileBadges(store)["eve/watch/apns"] == 9)
        #expect(try await Self.badges(store, 2, ["eve"]) == ["eve/watch/apns": 9])
        // Read again, every user's badge is the right one, from memory or the file.
        #expect(try await Self.badges(store, 1, ["ann", "bob", "cat"]) == ["ann/phone/apns": 5, "bob/tab/apns": 4, "cat/pad/apns": 0])
        #expect(heldBadgeUsers().contains("ann"))
        // A token changed while its user is not held is what the next read gives.
        try await store.setPushDevice(Self.device(1, "cat", "pad", "tok-cat-2"))
        #expect(try await store.pushDevices(appId: 1, userIds: ["cat"]).map(\.token) == ["tok-cat-2"])

        // The process dies: ann's 5 comes back from the log, bob's 4 was in push_badges.
        let reopened = try SQLiteStore(directory: directory)
        defer { try? reopened.close() }
        #expect(try await Self.badges(reopened, 1, ["ann", "bob", "cat"]) == ["ann/phone/apns": 5, "bob/tab/apns": 4, "cat/pad/apns": 0])
        _ = store
    }

    @Test("a reset, a new token and a removed token write past the held badges: the log never undoes them after a crash")
    func directBadgeWritesFlushFirst() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let directory = directories.make().path
        let store = try SQLiteStore(directory: directory, badgeFlushInterval: .seconds(86_400))
        try await store.setPushDevice(Self.device(1, "ann", "phone", "tok-ann"))
        try await store.setPushDevice(Self.device(1, "bob", "tab", "tok-bob"))
        try await store.setPushDevice(Self.device(1, "cat", "pad", "tok-cat"))
        _ = try await Self.badges(store, 1, ["ann", "bob", "cat"])
        try await store.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "ann", deviceId: "phone", badge: 5),
                                                         PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 6),
                                                         PushBadge(appId: 1, userId: "cat", deviceId: "pad", badge: 2)], node: "n", cursor: 1)
        try await store.resetPushBadge(appId: 1, userId: "ann", deviceId: "phone")
        #expect(try await Self.fileBadges(store) == ["ann/phone/apns": 0, "bob/tab/apns": 6, "cat/pad/apns": 2],
                "the held badges went to push_badges before the reset")
        // A crash right after the reset: the log does not bring ann's 5 back.
        let afterReset = try SQLiteStore(directory: directory, badgeFlushInterval: .seconds(86_400))
        #expect(try await Self.badges(afterReset, 1, ["ann", "bob", "cat"]) == ["ann/phone/apns": 0, "bob/tab/apns": 6, "cat/pad/apns": 2])
        try await afterReset.recordPushDecisions([], badges: [PushBadge(appId: 1, userId: "bob", deviceId: "tab", badge: 7),
                                                              PushBadge(appId: 1, userId: "cat", deviceId: "pad", badge: 3)], node: "n", cursor: 2)
        // The same token again keeps its badge; a new token starts from 0; a removed one is gone.
        try await afterReset.setPushDevice(Self.device(1, "bob", "tab", "tok-bob"))
        try await afterReset.setPushDevice(Self.device(1, "cat", "pad", "tok-cat-2"))
        #expect(try await Self.badges(afterReset, 1, ["ann", "bob", "cat"]) == ["ann/phone/apns": 0, "bob/tab/apns": 7, "cat/pad/apns": 0])
        try await afterReset.removePushToken(appId: 1, kind: .apns, token: "tok-bob")
        #expect(try await Self.badges(afterReset, 1, ["bob"]).isEmpty)

        // And a crash after those: cat's 3 is not brought back over its new token's 0.
        let reopened = try SQLiteStore(directory: directory)
        defer { try? reopened.close() }
        #expect(try await Self.badges(reopened, 1, ["ann", "bob", "cat"]) == ["ann/phone/apns": 0, "cat/pad/apns": 0])
        _ = (store, afterReset)
    }

    @Test("devices read once are held; a token set, moved or removed, a user deleted, is seen by the next read")
    func heldDevicesFollowEveryChange() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        let app = try await store.upsertApp(appKey: "k", appSecret: "s", name: "a", now: 1).id
        func tokens(_ users: [String]) async throws -> [String] {
            try await store.pushDevices(appId: app, userIds: users).map { "\($0.userId):\($0.token)" }.sorted()
        }
        #expect(try await tokens(["ann", "bob"]).isEmpty, "none yet (and none is held as none)")
        try await store.setPushDevice(Self.device(app, "ann", "phone", "T1"))
        #expect(try await tokens(["ann", "bob"]) == ["ann:T1"])
        try await store.setPushDevice(Self.device(app, "ann", "phone", "T2"))
        #expect(try await tokens(["ann", "bob"]) == ["ann:T2"], "a new token replaces the held one")
        try await store.setPushDevice(Self.device(app, "bob", "tab", "T2"))
        #expect(try await tokens(["ann", "bob"]) == ["bob:T2"], "the token moved to bob: ann's held device is gone too")
        try await store.removePushToken(appId: app, kind: .apns, token: "T2")
        #expect(try await tokens(["ann", "bob"]).isEmpty)
        try await store.setPushDevice(Self.device(app, "ann", "phone", "T3"))
        try await store.setPushDevice(Self.device(app, "ann", "watch", "T4", kind: .fcm))
        #expect(try await tokens(["ann"]) == ["ann:T3", "ann:T4"])
        try await store.removePushDevice(appId: app, userId: "ann", deviceId: "watch", kind: nil)
        #expect(try await tokens(["ann"]) == ["ann:T3"])
        try await store.deleteUsers(appId: app, userIds: ["ann"], now: 10)
        #expect(try await tokens(["ann"]).isEmpty, "a deleted user's devices are gone")
    }

    @Test("a message's records keep the part of the notification all recipients share once; every record reads back byte for byte")
    func recordsShareTheirNotification() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        let body = String(repeating: "a long text that every member of the group gets ", count: 8)
        let records = (0..<100).map { index in
            let notification = PushNotification(id: "M1:u\(index):d:apns", title: "Group", body: body, badge: index + 1,
                                                rc: ["cType": "GRP", "fId": "ann", "tId": "g1", "rId": "u\(index)"])
            return PushRecord(appId: 1, messageUid: "M1", userId: "u\(index)", deviceId: "d", kind: .apns, token: "tok-\(index)",
                              environment: "production", notification: notification.stored, status: .pending, createdAt: 5)
        }
        // And a notification in the single form (an earlier build's), and one in no known form.
        let odd = [PushRecord(appId: 1, messageUid: "M1", userId: "x", deviceId: "d", kind: .apns, token: "tok-x", environment: "production",
                              notification: Data([2]), status: .pending, createdAt: 5),
                   PushRecord(appId: 1, messageUid: "M1", userId: "y", status: .suppressed, code: "P16", createdAt: 5)]
        try await store.recordPushDecisions(records + odd, badges: [], node: "n", cursor: 1)
        let size = try await store.pushPool.read { try Int.fetchOne($0, sql: "SELECT length(records) FROM push_batches") } ?? 0
        #expect(size < records.count * 100 + records[0].notification.count, "the shared part once: \(size) bytes")
        let read = try await store.pushRecords(appId: 1, messageUid: "M1", userId: nil, limit: 200)
        #expect(read.reversed().map { var record = $0; record.id = 0; return record } == records + odd)
        #expect(read.compactMap { PushNotification(stored: $0.notification)?.badge }.sorted() == Array(1...100))
    }

    @Test("records are found by user through runs of 256 batches: across a run's end, once indexed, and past the sweep")
    func recordsByUserThroughRuns() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        // 300 messages, ann gets every one, bob every third: batch ids 1...300 cross the run 0/1 boundary.
        for index in 1...300 {
            var records = [PushRecord(appId: 1, messageUid: "M\(index)", userId: "ann", status: .suppressed, code: "P16", createdAt: Int64(index))]
            if index % 3 == 0 {
                records.append(PushRecord(appId: 1, messageUid: "M\(index)", userId: "bob", status: .suppressed, code: "P17", createdAt: Int64(index)))
            }
            try await store.recordPushDecisions(records, badges: [], node: "n", cursor: UInt64(index))
        }
        try await store.pushPool.write { try store.indexUsers($0, adding: UserRuns()) }
        #expect(try await store.pushPool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM push_user_batches") } == 4,
                "a row per user and run, not per batch")
        // Two more messages after the index: found as well (read whole).
        for index in 301...302 {
            try await store.recordPushDecisions([PushRecord(appId: 1, messageUid: "M\(index)", userId: "ann", status: .suppressed, code: "P16",
                                                            createdAt: Int64(index))], badges: [], node: "n", cursor: UInt64(index))
        }
        var ann = try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 1_000)
        #expect(ann.map(\.messageUid) == (1...302).reversed().map { "M\($0)" }, "every one, newest first")
        // The next fill takes those two from memory (what each commit added), not from their batches.
        try await store.pushPool.write { try store.indexUsers($0, adding: UserRuns()) }
        #expect(try await store.pushPool.read { db in
            try String.fetchOne(db, sql: "SELECT batches FROM push_user_batches WHERE user_id = 'ann' AND bucket = 1")
        }?.hasSuffix("2c2d2e") == true, "batches 300 (0x12c), 301 and 302 in ann's second run")
        #expect(try await store.pushPool.read { try Int64.fetchOne($0, sql: "SELECT indexed_through FROM push_batch_index") } == 302)
        ann = try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 1_000)
        #expect(ann.map(\.messageUid) == (1...302).reversed().map { "M\($0)" }, "the same, now all through the index")
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 5).map(\.messageUid) == ["M302", "M301", "M300", "M299", "M298"])
        let bob = try await store.pushRecords(appId: 1, messageUid: nil, userId: "bob", limit: 1_000)
        #expect(bob.map(\.messageUid) == stride(from: 300, through: 3, by: -3).map { "M\($0)" })
        #expect(bob.allSatisfy { $0.userId == "bob" && $0.code == "P17" })
        #expect(try await store.pushRecords(appId: 2, messageUid: nil, userId: "ann", limit: 10).isEmpty, "another app's user")
        // The sweep takes the first 260 messages; the index rows of the first run go with them.
        #expect(try await store.deletePushRecords(createdBefore: 261) == 260 + 86)
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "bob", limit: 1_000).map(\.messageUid)
                == stride(from: 300, through: 261, by: -3).map { "M\($0)" })
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 1_000).count == 42)
        #expect(try await store.pushPool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM push_user_batches WHERE bucket = 0") } == 0)
    }

    @Test("the sweep drops an app's index rows for a run once none of its batches there is left, whatever older batch stays pending")
    func sweepDropsEmptiedRuns() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        // Batch 10: zed's push, still pending (never swept). 300: ann's, old. 600: ann's, new. 301: app 2's ann, old.
        let batches: [(id: Int64, app: Int64, user: String, status: PushStatus, at: Int64)] = [
            (10, 1, "zed", .pending, 5), (300, 1, "ann", .sent, 5), (301, 2, "ann", .sent, 5), (600, 1, "ann", .sent, 50),
        ]
        try await store.pushPool.write { db in
            for batch in batches {
                let records = [PushRecord(appId: batch.app, messageUid: "M\(batch.id)", userId: batch.user, deviceId: "d", kind: .apns,
                                          token: "t", environment: "production", notification: Data([1]), status: batch.status,
                                          nextAttemptAt: batch.status == .pending ? 10_000 : 0, createdAt: batch.at)]
                try db.execute(sql: """
                    INSERT INTO push_batches (id, app_id, message_uid, created_at, records) VALUES (?, ?, ?, ?, ?);
                    INSERT INTO push_batch_states (batch_id, next_attempt_at, states) VALUES (?, ?, ?);
                    """, arguments: [batch.id, batch.app, "M\(batch.id)", batch.at, PushBatchCoding.encodeRecords(records),
                                     batch.id, batch.status == .pending ? 10_000 : nil,
                                     PushBatchCoding.encodeStates(records.map(PushBatchCoding.State.init))])
            }
            try store.indexUsers(db, adding: UserRuns())
        }
        func runs() async throws -> [String] {
            try await store.pushPool.read { db in
                try Row.fetchAll(db, sql: "SELECT app_id, user_id, bucket FROM push_user_batches ORDER BY app_id, user_id, bucket")
                    .map { "\($0[0] as Int64)/\($0[1] as String)/\($0[2] as Int64)" }
            }
        }
        #expect(try await runs() == ["1/ann/1", "1/ann/2", "1/zed/0", "2/ann/1"])
        #expect(try await store.deletePushRecords(createdBefore: 10) == 2)
        #expect(try await runs() == ["1/ann/2", "1/zed/0"], "ann's run 1 went with batch 300, app 2's with 301; zed's pending one stays")
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 10).map(\.messageUid) == ["M600"])
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "zed", limit: 10).map(\.messageUid) == ["M10"])
    }

    @Test("the same user id in two apps: devices and badges held apart, an app's deletion forgets only its own")
    func memoryIsPerApp() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path, badgeFlushInterval: .seconds(86_400))
        defer { try? store.close() }
        let one = try await store.upsertApp(appKey: "k1", appSecret: "s", name: "a", now: 1).id
        let two = try await store.upsertApp(appKey: "k2", appSecret: "s", name: "b", now: 1).id
        try await store.setPushDevice(Self.device(one, "ann", "phone", "T-one"))
        try await store.setPushDevice(Self.device(two, "ann", "phone", "T-two"))
        #expect(try await store.pushDevices(appId: one, userIds: ["ann", "ann"]).map(\.token) == ["T-one"], "once, though named twice")
        #expect(try await store.pushDevices(appId: one, userIds: ["ann", "ann"]).map(\.token) == ["T-one"], "once, from memory too")
        #expect(try await store.pushDevices(appId: two, userIds: ["ann"]).map(\.token) == ["T-two"])
        try await store.recordPushDecisions([], badges: [PushBadge(appId: one, userId: "ann", deviceId: "phone", badge: 4)], node: "n", cursor: 1)
        #expect(try await store.pushDevices(appId: one, userIds: ["ann"]).map(\.badge) == [4])
        #expect(try await store.pushDevices(appId: two, userIds: ["ann"]).map(\.badge) == [0])
        try await store.deleteApp(appId: two, batch: 100)
        #expect(try await store.pushDevices(appId: two, userIds: ["ann"]).isEmpty)
        #expect(try await store.pushDevices(appId: one, userIds: ["ann"]).map { "\($0.token)=\($0.badge)" } == ["T-one=4"])
    }

    @Test("the JSON rows json_each reads: none is [], fields separated, texts escaped, and SQLite reads them back")
    func jsonRows() async throws {
        #expect(SQLiteStore.JSONRows().finished == "[]")
        var rows = SQLiteStore.JSONRows()
        rows.row()
        rows.string("a\"b")
        rows.number(7)
        rows.row()
        rows.string("c")
        rows.number(-1)
        #expect(rows.finished == #"[["a\"b",7],["c",-1]]"#)
        #expect(rows.count == 2)
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        let text = rows.finished
        let read = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT value ->> 0, value ->> 1 FROM json_each(?)", arguments: [text]).map { "\($0[0] as String)=\($0[1] as Int)" }
        }
        #expect(read == [#"a"b=7"#, "c=-1"])
    }

    @Test("malformed records blobs are refused with an error, never trapped on")
    func malformedRecordBlobs() throws {
        let records = (0..<3).map { (index: Int) in
            PushRecord(appId: 1, messageUid: "M", userId: "u\(index)", deviceId: "d", kind: .apns, token: "t", environment: "e",
                       notification: PushNotification(id: "M:u\(index)", body: "hello", badge: index, rc: ["rId": "u\(index)"]).stored,
                       status: .pending, createdAt: 1)
        }
        let blob = PushBatchCoding.encodeRecords(records)
        let good = try PushBatchCoding.Records(blob)
        #expect(try (0..<3).map { try good.record($0, batch: 1, appId: 1, messageUid: "M", state: PushBatchCoding.State(records[$0])).notification }
                == records.map(\.notification))
        // The shared parts' offset past the end; a part number above the count; every cut.
        var farOffset = blob
        farOffset.replaceSubrange(5..<9, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: PushBatchCodingError.self) { try PushBatchCoding.Records(farOffset) }
        // Header: version, count (4), shared parts' offset (4), then the records' offsets.
        let notificationAt = Int(blob[9]) << 24 | Int(blob[10]) << 16 | Int(blob[11]) << 8 | Int(blob[12])
        var badPart = blob
        // The first record's notification number follows its five strings (each one length byte here).
        var at = notificationAt
        for _ in 0..<5 { at += 1 + Int(badPart[at]) }
        badPart[at] = 9
        #expect(throws: PushBatchCodingError.self) {
            try PushBatchCoding.Records(badPart).record(0, batch: 1, appId: 1, messageUid: "M", state: PushBatchCoding.State(records[0]))
        }
        for cut in stride(from: 1, to: blob.count, by: 7) {
            let short = blob.prefix(cut)
            if let partial = try? PushBatchCoding.Records(short) {
                for index in 0..<partial.count {
                    _ = try? partial.record(index, batch: 1, appId: 1, messageUid: "M", state: PushBatchCoding.State(records[0]))
                }
            }
        }
    }

    /// A data directory whose push file an earlier build left at `migration` (the directory, and
    /// the file open for the test to fill and close).
    static func pushFile(in directories: TemporaryDirectories, migratedTo migration: String) throws -> (URL, DatabaseQueue) {
        let directory = directories.make()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pushFile = try DatabaseQueue(path: directory.appendingPathComponent(SQLiteStore.pushFileName).path)
        try SQLiteStore.pushMigrator.migrate(pushFile, upTo: migration)
        return (directory, pushFile)
    }

    @Test("a push file from before the runs: its row per user and batch becomes the runs, and finds the same records")
    func userIndexMigrates() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let (directory, pushFile) = try Self.pushFile(in: directories, migratedTo: "v3-push-badge-log")
        // Batches 255, 256 and 300 for ann (two runs), 256 for bob, indexed the old way.
        try await pushFile.write { db in
            for id: Int64 in [255, 256, 300] {
                let user = id == 256 ? ["ann", "bob"] : ["ann"]
                let records = user.map { PushRecord(appId: 1, messageUid: "M\(id)", userId: $0, status: .suppressed, code: "P16", createdAt: id) }
                try db.execute(sql: """
                    INSERT INTO push_batches (id, app_id, message_uid, created_at, next_attempt_at, records, states) VALUES (?, 1, ?, ?, NULL, ?, ?)
                    """, arguments: [id, "M\(id)", id, PushBatchCoding.encodeRecords(records), PushBatchCoding.encodeStates(records.map(PushBatchCoding.State.init))])
                for userId in user {
                    try db.execute(sql: "INSERT INTO push_batch_users (app_id, user_id, batch_id) VALUES (1, ?, ?)", arguments: [userId, id])
                }
            }
            try db.execute(sql: "UPDATE push_batch_index SET indexed_through = 300")
        }
        try pushFile.close()
        let store = try SQLiteStore(directory: directory.path)
        defer { try? store.close() }
        #expect(try await store.pushPool.read { try $0.tableExists("push_batch_users") } == false)
        #expect(try await store.pushPool.read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, bucket, batches FROM push_user_batches ORDER BY user_id, bucket").map { "\($0[0] as String)/\($0[1] as Int64)/\($0[2] as String)" }
        } == ["ann/0/ff", "ann/1/002c", "bob/1/00"])
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 10).map(\.messageUid) == ["M300", "M256", "M255"])
        #expect(try await store.pushRecords(appId: 1, messageUid: nil, userId: "bob", limit: 10).map(\.messageUid) == ["M256"])
    }

    @Test("a batch written in the first format (each notification whole), its states beside its records as before v5, still reads and is still due")
    func firstFormatBatchesRead() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let (directory, pushFile) = try Self.pushFile(in: directories, migratedTo: "v4-push-user-buckets")
        // Version 1 by hand: version, count, offsets, then user, device, kind, token, environment,
        // notification (length-prefixed) and the creation time (zigzag varint).
        func field(_ bytes: [UInt8]) -> [UInt8] { [UInt8(bytes.count)] + bytes }
        let record = field(Array("ann".utf8)) + field(Array("phone".utf8)) + field(Array("apns".utf8)) + field(Array("tok".utf8))
            + field(Array("production".utf8)) + field([7, 8, 9]) + [UInt8(20 << 1)]
        let blob = Data([1, 0, 0, 0, 1, 0, 0, 0, 9] + record)
        let states = Data([1, 0, 0, 0, 1, 0, 0, 40, 40, 0])
        try await pushFile.write { db in
            try db.execute(sql: """
                INSERT INTO push_batches (app_id, message_uid, created_at, next_attempt_at, records, states) VALUES (1, 'M0', 20, 20, ?, ?)
                """, arguments: [blob, states])
        }
        try pushFile.close()
        let store = try SQLiteStore(directory: directory.path)
        defer { try? store.close() }
        #expect(try await store.pushPool.read { try $0.columns(in: "push_batches").map(\.name) } == ["id", "app_id", "message_uid", "created_at", "records"],
                "the states moved out")
        let read = try await store.pushRecords(appId: 1, messageUid: "M0", userId: nil, limit: 10)
        #expect(read.map { "\($0.userId)/\($0.deviceId)/\($0.token)/\([UInt8]($0.notification))/\($0.createdAt)/\($0.nextAttemptAt)" }
                == ["ann/phone/tok/[7, 8, 9]/20/20"])
        #expect(try await store.duePushes(now: 100, limit: 10).map(\.userId) == ["ann"])
    }

    @Test("a push file from before the batches (a row per record): its records move into batches with their states, ids past the old ones")
    func rowPerRecordPushFileMoves() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let (directory, pushFile) = try Self.pushFile(in: directories, migratedTo: "v1")
        try await pushFile.write { db in
            try db.execute(sql: """
                INSERT INTO push_records (id, app_id, message_uid, user_id, device_id, kind, token, environment, notification,
                    status, code, attempts, next_attempt_at, created_at, updated_at) VALUES
                    (3, 1, 'M1', 'ann', 'phone', 'apns', 'tok-ann', 'production', x'01', 1, 'apns-1', 1, 0, 10, 11),
                    (9, 1, 'M2', 'ann', 'phone', 'apns', 'tok-ann', 'production', x'02', 0, '', 0, 20, 20, 20);
                """)
        }
        try pushFile.close()
        let store = try SQLiteStore(directory: directory.path)
        defer { try? store.close() }
        #expect(try await store.pushPool.read { try $0.tableExists("push_records") } == false)
        let records = try await store.pushRecords(appId: 1, messageUid: nil, userId: "ann", limit: 10)
        #expect(records.map { "\($0.messageUid)/\($0.status)/\($0.code)/\($0.nextAttemptAt)" } == ["M2/pending//20", "M1/sent/apns-1/0"])
        #expect(records.allSatisfy { $0.id > 9 }, "ids past the old ones: \(records.map(\.id))")
        #expect(try await store.duePushes(now: 100, limit: 10).map(\.messageUid) == ["M2"])
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

@Suite("SQLite: sync's retention floor kept per minute")
struct SyncFloorTests {
    static func message(_ to: String, at time: Int64, _ uid: String) -> StoredMessage {
        StoredMessage(appId: 1, conversationType: .private, conversationKey: privateConversationKey("alice", to),
                      targetId: to, senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8),
                      uid: uid, sentTime: time, flags: .persistedAndCounted, clientMessageId: "", includeSender: true)
    }

    static func sync(_ store: SQLiteStore, since minSentTime: Int64) async throws -> [String] {
        try await store.syncPage(appId: 1, userId: "bob", after: 0, minSentTime: minSentTime, limit: 100, maxBytes: 1 << 20).messages.map(\.uid)
    }

    @Test("a sync in the same minute finds what was committed after the floor was kept, and what an earlier time in the minute lets in; older messages stay out")
    func keptFloor() async throws {
        let directories = TemporaryDirectories()
        defer { directories.removeAll() }
        let store = try SQLiteStore(directory: directories.make().path)
        defer { try? store.close() }
        _ = try await store.commit([Self.message("bob", at: 1_000, "old"), Self.message("bob", at: 60_700, "mid"),
                                    Self.message("bob", at: 60_950, "late")])
        // The first sync keeps the floor of minute 60,000 (below "mid"), not of 60,900 (below "late").
        #expect(try await Self.sync(store, since: 60_900) == ["late"])
        #expect(store.syncFloors.withLock { $0.count } == 1)
        #expect(try await Self.sync(store, since: 60_500) == ["mid", "late"], "a floor made for 60,900 itself would have left out mid")
        _ = try await store.commit([Self.message("bob", at: 60_990, "after")])
        #expect(try await Self.sync(store, since: 60_900) == ["late", "after"], "committed after the floor was kept")
        #expect(try await Self.sync(store, since: 0) == ["old", "mid", "late", "after"])
        // A later minute reads its own floor: the older messages are below it.
        #expect(try await Self.sync(store, since: 120_001).isEmpty)
        #expect(store.syncFloors.withLock { $0.count } == 3)
    }
}
