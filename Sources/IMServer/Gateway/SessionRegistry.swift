import IMCore
import IMStore
import Synchronization

/// The live sessions of every user, by app and user id: where delivery finds recipients.
public final class SessionRegistry: Sendable {
    struct UserKey: Hashable {
        let appId: Int64
        let userId: String
    }

    private struct Table {
        var users: [UserKey: [ClientSession]] = [:]
        /// Sessions per app now, and the most since the statistics last took them.
        var appCounts: [Int64: (now: Int, peak: Int)] = [:]

        mutating func set(_ key: UserKey, _ sessions: [ClientSession]) {
            let change = sessions.count - (users[key]?.count ?? 0)
            users[key] = sessions.isEmpty ? nil : sessions
            guard change != 0 else { return }
            var counts = appCounts[key.appId] ?? (0, 0)
            counts.now += change
            counts.peak = max(counts.peak, counts.now)
            appCounts[key.appId] = counts.now == 0 && counts.peak == 0 ? nil : counts
        }
    }

    private let table = Mutex(Table())

    public init() {}

    /// The most sessions each app had at once since the last call (at least those open now).
    func takePeaks() -> [Int64: Int] {
        table.withLock { table in
            var peaks: [Int64: Int] = [:]
            for (appId, counts) in table.appCounts {
                peaks[appId] = counts.peak
                table.appCounts[appId] = counts.now == 0 ? nil : (counts.now, counts.now)
            }
            return peaks
        }
    }

    /// Gives back peaks taken but not written.
    func restorePeaks(_ peaks: [Int64: Int]) {
        table.withLock { table in
            for (appId, peak) in peaks {
                let counts = table.appCounts[appId] ?? (0, 0)
                table.appCounts[appId] = (counts.now, max(counts.peak, peak))
            }
        }
    }

    /// Adds a session under the login rules: one session per login slot per user, the slot being
    /// the login class (mobile, desktop, web) except for Web sessions of an app with multi-device
    /// sync, which each have their own. The older session of the slot is returned to be kicked
    /// (31010); with `refuseIfClassTaken` the new session is refused with 31023 instead.
    func register(_ session: ClientSession, refuseIfClassTaken: Bool) throws -> [ClientSession] {
        let key = UserKey(appId: session.appId, userId: session.userId)
        return try table.withLock { table in
            var sessions = table.users[key, default: []].filter { !$0.isClosed }
            let sameClass = sessions.filter { Self.displaces(session, $0) }
            if !sameClass.isEmpty && refuseIfClassTaken {
                throw IMError(.otherDeviceLogin, "another \(session.loginClass.rawValue) device of user \(session.userId) is online; this reconnect was refused because reconnect-kick is enabled")
            }
            sessions.removeAll { Self.displaces(session, $0) }
            sessions.append(session)
            table.set(key, sessions)
            return sameClass
        }
    }

    /// Whether a new session displaces an older one of its user: the same slot, or the bare login
    /// class (one session per class) over every slot of that class (Web tabs opened while
    /// multi-device sync was on, before it was turned off).
    static func displaces(_ new: ClientSession, _ old: ClientSession) -> Bool {
        old.loginSlot == new.loginSlot || (new.loginSlot == new.loginClass.rawValue && old.loginClass == new.loginClass)
    }

    /// Removes the session; false when it was not registered (already removed).
    @discardableResult
    func remove(_ session: ClientSession) -> Bool {
        let key = UserKey(appId: session.appId, userId: session.userId)
        return table.withLock { table in
            guard var sessions = table.users[key], let index = sessions.firstIndex(where: { $0 === session }) else { return false }
            sessions.remove(at: index)
            table.set(key, sessions)
            return true
        }
    }

    /// The user's live sessions.
    public func sessions(appId: Int64, userId: String) -> [ClientSession] {
        table.withLock { $0.users[UserKey(appId: appId, userId: userId)] ?? [] }
    }

    /// The live sessions of these users, by user id (users without one are left out), read under
    /// one lock.
    func sessions<Users: Sequence<String>>(appId: Int64, userIds: Users) -> [String: [ClientSession]] {
        table.withLock { table in
            var found: [String: [ClientSession]] = [:]
            for userId in userIds {
                if let sessions = table.users[UserKey(appId: appId, userId: userId)], !sessions.isEmpty { found[userId] = sessions }
            }
            return found
        }
    }

    /// Whether the user has a session that is not closing.
    public func isOnline(appId: Int64, userId: String) -> Bool {
        sessions(appId: appId, userId: userId).contains { !$0.isClosed }
    }

    /// Every live session of one app.
    public func sessions(appId: Int64) -> [ClientSession] {
        table.withLock { table in table.users.filter { $0.key.appId == appId }.values.flatMap { $0 } }
    }

    /// Every live session.
    public func allSessions() -> [ClientSession] {
        table.withLock { $0.users.values.flatMap { $0 } }
    }

    public var sessionCount: Int {
        table.withLock { $0.users.values.reduce(0) { $0 + $1.count } }
    }
}
