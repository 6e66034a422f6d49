/// Who asked for a change: a client's session, the app's server through the Server API, or the
/// server itself (a notification it sends, a sweep). Services act the same for every origin; the
/// origin decides who is told (a session does not get its own change echoed back) and what events
/// and logs say.
public enum Origin: Sendable, Hashable, CustomStringConvertible {
    /// A client session: its id, and the app and user it is signed in as.
    case session(id: String, appId: Int64, userId: String)
    /// The Server API, called by the app's server.
    case serverAPI
    /// The server on its own account.
    case system

    /// The session the change came from, which is not sent the change again.
    public var sessionId: String? {
        if case .session(let id, _, _) = self { return id }
        return nil
    }

    public var description: String {
        switch self {
        case .session(let id, _, let userId): "session \(id) of \(userId)"
        case .serverAPI: "server API"
        case .system: "server"
        }
    }
}

extension ClientSession {
    /// This session as the origin of what it asks for.
    var origin: Origin { .session(id: id, appId: appId, userId: userId) }
}

extension ClientSession {
    /// This session as the server's events name it.
    var presence: SessionPresence {
        SessionPresence(appId: appId, userId: userId, sessionId: id, platform: "\(platform)", deviceId: deviceId)
    }
}
