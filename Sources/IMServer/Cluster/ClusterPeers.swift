import IMCore

/// How a service reaches the other nodes of a cluster: to say it changed something they may hold
/// in a cache, or that some users' sessions must go wherever they are. A single-node server has no
/// peers and these calls do nothing; a node of a cluster puts them on the cluster bus, ordered with
/// the deliveries around them, so a node drops a stale roster before it delivers a message sent
/// after the change.
public final class ClusterPeers: Sendable {
    let transport: (any ClusterTransport)?

    init(transport: (any ClusterTransport)?) {
        self.transport = transport
    }

    /// Tells the other nodes to drop what they cached of this.
    func announce(_ invalidation: CacheInvalidation) {
        transport?.publish(.invalidate(invalidation))
    }

    /// Tells the other nodes that a chatroom moderation setting changed: each reads the app's
    /// settings again and applies the change to the rooms it holds.
    func chatroomSettingsChanged(_ change: ChatroomSettingsChange) {
        transport?.publish(.chatroomSettingsChanged(change))
    }

    /// Returns once what was published before is on the bus: a change the caller is answered
    /// for then comes before anything the caller does next, on any node.
    func flush() async {
        await transport?.flush()
    }

    /// Tells the other nodes that the user joined this room while rooms hold one user at a time.
    func chatroomUserJoined(appId: Int64, userId: String, roomId: String) {
        transport?.publish(.chatroomUserJoined(appId: appId, userId: userId, roomId: roomId))
    }

    /// Has the other nodes kick these users' sessions with `code` (or close them without a kick
    /// when nil, as a network failure would).
    func disconnect(appId: Int64, userIds: [String], code: ErrorCode?, reason: String) {
        transport?.publish(.disconnectUsers(appId: appId, userIds: userIds, code: code.map { $0.rawValue }, reason: reason))
    }
}
