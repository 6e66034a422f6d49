import Foundation
import GRDB
import IMCore
import IMStore
import Synchronization

/// The badges of the users the push decisions read, held in memory: a group message to 2,700
/// devices sets 2,700 badges, and writing them to push_badges row by row cost more than the rest of
/// the message's decisions. In memory they are set at once; push_badges gets them every
/// `badgeFlushInterval`, 2 s by default (a device that got ten pushes meanwhile is written once).
///
/// What is not in push_badges yet is never only in memory: each decision's badges go to
/// push_badge_log in the decision's transaction (one row, the list as JSON). A flush writes the
/// held badges that changed and empties the log; the next start applies what the log still has, in
/// order, so a crash loses no badge. Every other badge write (a reset, a new token, a token gone)
/// flushes first, so the log never holds a badge older than one written past it.
///
/// Memory changes only when a transaction on the push file's writer commits
/// (`afterNextTransaction`), and the users not held are loaded on that writer too: what memory
/// holds is what push_badges and the log hold after the last commit, whichever task reads it.
struct PushBadgeMemory {
    struct User: Hashable {
        var appId: Int64
        var userId: String
    }

    /// One token of a device (push_badges' row within a user). User and device ids are ASCII
    /// (`UserID.isValid`, `ConnectLimits.isValidDeviceId`), so these keys' String equality, which
    /// is canonical, is the byte equality push_badges has.
    struct Slot: Hashable {
        var deviceId: String
        var kind: String
    }

    /// Every push_badges row of the users held (a user without any holds an empty table).
    var users: [User: [Slot: Int]] = [:]
    /// The users whose badges changed since the last flush.
    var dirty: Set<User> = []
    var lastFlush = ContinuousClock.now

    /// Sets the badge of every token of the device, as `SQLiteStore.setBadges` does in the file.
    mutating func set(_ badge: PushBadge) {
        let user = User(appId: badge.appId, userId: badge.userId)
        // In place: a copy of the user's table taken out and put back (or iterated while written)
        // is copied whole on write.
        guard let index = users.index(forKey: user) else { return }
        let matching = users.values[index].keys.filter { $0.deviceId == badge.deviceId }
        for slot in matching { users.values[index][slot] = badge.badge }
        dirty.insert(user)
    }
}

extension SQLiteStore {
    /// Migration v3 of the push file.
    static let pushBadgeLogTable = """
        CREATE TABLE push_badge_log (
            id INTEGER PRIMARY KEY, app_id INTEGER NOT NULL, devices TEXT NOT NULL
        );
        """

    /// The badges of these users' devices that are not 0, by device token.
    func heldBadges(appId: Int64, userIds: [String]) async throws -> [DeviceKey: Int] {
        var found: [(String, [PushBadgeMemory.Slot: Int])] = []
        var missing: [String] = []
        pushBadges.withLock { memory in
            for userId in userIds.uniqued() {
                if let slots = memory.users[PushBadgeMemory.User(appId: appId, userId: userId)] {
                    found.append((userId, slots))
                } else {
                    missing.append(userId)
                }
            }
        }
        if !missing.isEmpty {
            let missingUsers = missing
            found += try await pushPool.writeWithoutTransaction { db -> [(String, [PushBadgeMemory.Slot: Int])] in
                var read: [String: [PushBadgeMemory.Slot: Int]] = [:]
                for userId in missingUsers { read[userId] = [:] }
                let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT user_id, device_id, kind, badge FROM push_badges WHERE app_id = ? AND user_id IN (SELECT value FROM json_each(?))
                    """), arguments: [appId, Self.jsonList(missingUsers)])
                while let row = try rows.next() {
                    read[row[0], default: [:]][PushBadgeMemory.Slot(deviceId: row[1], kind: row[2])] = row[3]
                }
                // A user another read loaded meanwhile keeps what memory has (it may be ahead of the file).
                // Past the limit, the users whose badges are all in the file go first (here, outside any
                // transaction, no commit can be about to change them).
                return pushBadges.withLock { memory in
                    if memory.users.count + read.count > pushMemoryLimits.heldBadgeUsers {
                        memory.users = memory.users.filter { memory.dirty.contains($0.key) }
                    }
                    return read.map { userId, slots in
                        let user = PushBadgeMemory.User(appId: appId, userId: userId)
                        if let held = memory.users[user] { return (userId, held) }
                        memory.users[user] = slots
                        return (userId, slots)
                    }
                }
            }
        }
        var badges: [DeviceKey: Int] = [:]
        for (userId, slots) in found {
            for (slot, badge) in slots where badge != 0 {
                badges[DeviceKey(userId: userId, deviceId: slot.deviceId, kind: slot.kind)] = badge
            }
        }
        return badges
    }

    /// Whether the held badges are due for push_badges.
    var badgeFlushDue: Bool {
        pushBadges.withLock { memory in
            !memory.dirty.isEmpty && (memory.dirty.count >= pushMemoryLimits.badgeFlushUsers || ContinuousClock.now - memory.lastFlush >= badgeFlushInterval)
        }
    }

    /// Writes the decisions' badges: those of held users into memory at commit, with the list in
    /// push_badge_log; the others into push_badges now.
    func writeBadges(_ db: Database, _ badges: [PushBadge]) throws {
        guard !badges.isEmpty else { return }
        var held: [PushBadge] = []
        var direct: [PushBadge] = []
        pushBadges.withLock { memory in
            for badge in badges {
                if memory.users[PushBadgeMemory.User(appId: badge.appId, userId: badge.userId)] != nil {
                    held.append(badge)
                } else {
                    direct.append(badge)
                }
            }
        }
        try Self.setBadges(db, direct)
        guard !held.isEmpty else { return }
        let insert = try db.cachedStatement(sql: "INSERT INTO push_badge_log (app_id, devices) VALUES (?, ?)")
        for (appId, list) in Self.badgeLists(held) { try insert.execute(arguments: [appId, list]) }
        let written = held
        db.afterNextTransaction { _ in
            self.pushBadges.withLock { memory in
                for badge in written { memory.set(badge) }
            }
        }
    }

    /// Writes the held badges that changed to push_badges and empties push_badge_log (in `db`'s
    /// transaction; memory counts them written when it commits).
    func flushBadges(_ db: Database) throws {
        let changed: [PushBadgeMemory.User: [PushBadgeMemory.Slot: Int]] = pushBadges.withLock { memory in
            var changed: [PushBadgeMemory.User: [PushBadgeMemory.Slot: Int]] = [:]
            for user in memory.dirty { changed[user] = memory.users[user] ?? [:] }
            return changed
        }
        guard !changed.isEmpty else { return }
        var byApp: [Int64: [(userId: String, slots: [PushBadgeMemory.Slot: Int])]] = [:]
        for (user, slots) in changed { byApp[user.appId, default: []].append((user.userId, slots)) }
        // Every slot held is a row of push_badges (memory follows each delete at its commit).
        let update = try db.cachedStatement(sql: """
            INSERT INTO push_badges (app_id, user_id, device_id, kind, badge)
            SELECT ?, value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?) WHERE true
            ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET badge = excluded.badge
            """)
        for (appId, users) in byApp {
            var rows = JSONRows(reservingRows: users.count)
            for (userId, slots) in users {
                for (slot, badge) in slots {
                    rows.row()
                    rows.string(userId)
                    rows.string(slot.deviceId)
                    rows.string(slot.kind)
                    rows.number(badge)
                }
            }
            try update.execute(arguments: [appId, rows.finished])
        }
        try db.execute(sql: "DELETE FROM push_badge_log")
        db.afterNextTransaction { _ in
            self.pushBadges.withLock { memory in
                // Only what was written is clean: a user changed by a commit since is not (none can
                // be: commits are serial on this writer, and this one wrote what memory had).
                for user in changed.keys { memory.dirty.remove(user) }
                memory.lastFlush = .now
            }
        }
    }

    /// Flushes the held badges in a transaction of its own (the store is closing).
    func flushBadges() throws {
        try pushPool.write { db in try flushBadges(db) }
    }

    /// Applies what push_badge_log holds (badges a crash kept from push_badges), in order, and
    /// empties it: at open, before anything is held.
    static func replayBadgeLog(_ pushPool: DatabasePool) throws {
        try pushPool.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT app_id, devices FROM push_badge_log ORDER BY id")
            guard !rows.isEmpty else { return }
            let update = try badgeStatement(db)
            for row in rows { try update.execute(arguments: [row[1] as String, row[0] as Int64]) }
            try db.execute(sql: "DELETE FROM push_badge_log")
        }
    }

    /// The lists of devices and badges `badgeStatement` takes, one per app; a device named twice
    /// gets its last badge.
    static func badgeLists(_ badges: [PushBadge]) -> [(appId: Int64, list: String)] {
        struct Device: Hashable {
            var userId: String
            var deviceId: String
        }
        // Per app (a batch is nearly always of one), each device's last badge, keyed by its
        // strings as they are: no joined String per entry.
        var apps: [(appId: Int64, last: [Device: Int])] = []
        for entry in badges {
            let index: Int
            if let found = apps.firstIndex(where: { $0.appId == entry.appId }) {
                index = found
            } else {
                index = apps.count
                apps.append((entry.appId, [:]))
                apps[index].last.reserveCapacity(apps.count == 1 ? badges.count : 16)
            }
            apps[index].last[Device(userId: entry.userId, deviceId: entry.deviceId)] = entry.badge
        }
        return apps.map { app in
            var rows = JSONRows(reservingRows: app.last.count)
            for (device, badge) in app.last {
                rows.row()
                rows.string(device.userId)
                rows.string(device.deviceId)
                rows.number(badge)
            }
            return (app.appId, rows.finished)
        }
    }

    /// Sets the badges of a list of devices of one app (`badgeLists`; every token of each). The
    /// devices' rows are found from the list (CROSS JOIN keeps the list the outer loop: an UPDATE
    /// ... FROM scanned every badge of the app for each entry), then set by the upsert.
    static func badgeStatement(_ db: Database) throws -> Statement {
        try db.cachedStatement(sql: """
            INSERT INTO push_badges (app_id, user_id, device_id, kind, badge)
            SELECT device.app_id, device.user_id, device.device_id, device.kind, wanted.badge
            FROM (SELECT value ->> 0 AS user_id, value ->> 1 AS device_id, value ->> 2 AS badge FROM json_each(?)) AS wanted
            CROSS JOIN push_badges AS device
                ON device.app_id = ? AND device.user_id = wanted.user_id AND device.device_id = wanted.device_id
            WHERE true
            ON CONFLICT (app_id, user_id, device_id, kind) DO UPDATE SET badge = excluded.badge
            """)
    }

    /// Sets the badges of devices in push_badges now.
    static func setBadges(_ db: Database, _ badges: [PushBadge]) throws {
        guard !badges.isEmpty else { return }
        let update = try badgeStatement(db)
        for (appId, list) in badgeLists(badges) { try update.execute(arguments: [list, appId]) }
    }
}

/// The push devices of the users the decisions read, held in memory: a group message reads the
/// devices of every offline member, and they change only when a token is set or removed. A read
/// from the file is kept only when no device write committed while it ran (`generation`), and every
/// such write lets its users go when it commits, so what is held is what the file holds.
struct PushDeviceMemory {
    var users: [PushBadgeMemory.User: [PushDeviceRecord]] = [:]
    /// Counts the commits that changed devices.
    var generation: UInt64 = 0

    mutating func forget(appId: Int64, userIds: some Sequence<String>) {
        generation &+= 1
        for userId in userIds { users[PushBadgeMemory.User(appId: appId, userId: userId)] = nil }
    }

    mutating func forget(appId: Int64) {
        generation &+= 1
        users = users.filter { $0.key.appId != appId }
    }
}

extension SQLiteStore {
    /// The devices of these users (badge 0), from memory or the file; each once, a user named
    /// twice included.
    func heldDevices(appId: Int64, userIds: [String]) async throws -> [PushDeviceRecord] {
        var devices: [PushDeviceRecord] = []
        var missing: [String] = []
        let generation = pushDevices.withLock { memory in
            for userId in userIds.uniqued() {
                if let held = memory.users[PushBadgeMemory.User(appId: appId, userId: userId)] {
                    devices += held
                } else {
                    missing.append(userId)
                }
            }
            return memory.generation
        }
        guard !missing.isEmpty else { return devices }
        let users = Self.jsonList(missing)
        let read = try await pushReader.read { db in
            var devices: [PushDeviceRecord] = []
            let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT user_id, device_id, kind, token, environment, platform, updated_at FROM push_devices
                WHERE app_id = ? AND user_id IN (SELECT value FROM json_each(?))
                """), arguments: [appId, users])
            while let row = try rows.next() {
                guard let kind = PushTokenKind(rawValue: row[2]) else { continue }
                devices.append(PushDeviceRecord(appId: appId, userId: row[0], deviceId: row[1], platform: row[5], kind: kind,
                                                token: row[3], environment: row[4], badge: 0, updatedAt: row[6]))
            }
            return devices
        }
        let missingUsers = missing
        pushDevices.withLock { memory in
            guard memory.generation == generation else { return }
            if memory.users.count + missingUsers.count > pushMemoryLimits.heldDeviceUsers { memory.users.removeAll() }
            var byUser: [String: [PushDeviceRecord]] = [:]
            for userId in missingUsers { byUser[userId] = [] }
            for device in read { byUser[device.userId, default: []].append(device) }
            for (userId, held) in byUser { memory.users[PushBadgeMemory.User(appId: appId, userId: userId)] = held }
        }
        return devices + read
    }

    /// Lets the devices of these users go when `db`'s transaction commits (it changes them).
    func forgetDevices(_ db: Database, appId: Int64, userIds: [String]) {
        db.afterNextTransaction { _ in
            self.pushDevices.withLock { $0.forget(appId: appId, userIds: userIds) }
        }
    }
}
