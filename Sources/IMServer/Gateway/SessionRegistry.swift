import IMCore
import IMStore
import Synchronization

/// The live sessions of every user, by app and user id: where delivery finds recipients.
public final class SessionRegistry: Sendable {
    struct UserKey: Hashable {
        let appId: Int64
        let userId: String
    }

    private let table = Mutex<[UserKey: [ClientSession]]>([:])

    public init() {}

    /// Adds a session under the login rules: one session per login class (mobile, desktop, web) per
    /// user. The older session of the same class is returned to be kicked (31010); with
    /// `refuseIfClassTaken` the new session is refused with 31023 instead.
    func register(_ session: ClientSession, refuseIfClassTaken: Bool) throws -> [ClientSession] {
        let key = UserKey(appId: session.appId, userId: session.userId)
        return try table.withLock { table in
            var sessions = table[key, default: []].filter { !$0.isClosed }
            let sameClass = sessions.filter { $0.loginClass == session.loginClass }
            if !sameClass.isEmpty && refuseIfClassTaken {
                throw IMError(.otherDeviceLogin, "another \(session.loginClass.rawValue) device of user \(session.userId) is online; this reconnect was refused because reconnect-kick is enabled")
            }
            sessions.removeAll { $0.loginClass == session.loginClass }
            sessions.append(session)
            table[key] = sessions
            return sameClass
        }
    }

    /// Removes the session; false when it was not registered (already removed).
    @discardableResult
    func remove(_ session: ClientSession) -> Bool {
        let key = UserKey(appId: session.appId, userId: session.userId)
        return table.withLock { table in
            guard var sessions = table[key], let index = sessions.firstIndex(where: { $0 === session }) else { return false }
            sessions.remove(at: index)
            table[key] = sessions.isEmpty ? nil : sessions
            return true
        }
    }

    /// The user's live sessions.
    public func sessions(appId: Int64, userId: String) -> [ClientSession] {
        table.withLock { $0[UserKey(appId: appId, userId: userId)] ?? [] }
    }

    /// The live sessions of these users, by user id (users without one are left out), read under
    /// one lock.
    func sessions<Users: Sequence<String>>(appId: Int64, userIds: Users) -> [String: [ClientSession]] {
        table.withLock { table in
            var found: [String: [ClientSession]] = [:]
            for userId in userIds {
                if let sessions = table[UserKey(appId: appId, userId: userId)], !sessions.isEmpty { found[userId] = sessions }
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
        table.withLock { table in table.filter { $0.key.appId == appId }.values.flatMap { $0 } }
    }

    /// Every live session.
    public func allSessions() -> [ClientSession] {
        table.withLock { $0.values.flatMap { $0 } }
    }

    public var sessionCount: Int {
        table.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }
}
