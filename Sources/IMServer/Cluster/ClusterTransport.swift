import Foundation
import IMCore
import IMStore

/// How the nodes of a cluster reach each other and know who is online where. One implementation
/// ships: `PostgresClusterTransport` (IMClusterPostgres), PostgreSQL's LISTEN/NOTIFY for the bus and
/// a presence table beside the data. A single-node server has no transport.
///
/// The bus is totally ordered: every node receives the messages of every other node in one order,
/// and a node's own messages leave in the order it published them. Deliveries, kicks and cache
/// invalidations therefore reach a node in the order they happened.
public protocol ClusterTransport: Sendable {
    /// This node's id, unique in the cluster.
    var nodeId: String { get }
    /// Queues a message for every other node. Messages leave in the order they were queued; this
    /// never waits (a delivery must not stall on the bus).
    func publish(_ message: ClusterMessage)
    /// Queues a message for one node only, in the same order as `publish` (the other nodes may
    /// receive it on the bus, but skip it without reading it).
    func publish(_ message: ClusterMessage, to node: String)
    /// Returns once everything queued before the call is on the bus (or the bus failed): what the
    /// message log waits for before answering senders.
    func flush() async
    /// What the other nodes publish, in the bus's order. Called once.
    func messages() -> AsyncStream<ClusterBusEvent>

    /// Records a new session in the cluster's presence under the login rule (one session per login
    /// class per user): sessions of the same class on other nodes are removed and returned, to be
    /// kicked by their nodes; with `refuseIfClassTaken`, the new session is refused instead.
    func sessionOpened(_ session: PresenceEntry, refuseIfClassTaken: Bool) async throws -> PresenceOutcome
    /// Removes an ended session of this node from the cluster's presence (queued, never waits).
    func sessionClosed(id: String)
    /// Whether the user has a session on any live node.
    func isOnline(appId: Int64, userId: String) async throws -> Bool
    /// The sessions of these users on every live node (push decides who is away from them).
    func sessions(appId: Int64, userIds: [String]) async throws -> [PresenceEntry]
    /// The nodes alive now (heartbeat within the dead-node timeout), this one included.
    func liveNodes() -> Int

    /// The live node that holds a chatroom. With `claim`, a room no live node holds is claimed for
    /// this node (of two nodes claiming together, one wins and both are told which); without, nil
    /// when no node holds it. The claim names this hold of the room, for `releaseChatrooms`.
    func chatroomOwner(appId: Int64, roomId: String, claim: Bool) async throws -> ChatroomClaim?
    /// This node no longer holds these rooms (each released only if it still holds it under that
    /// claim, not if it claimed it again since).
    func releaseChatrooms(_ claims: [ChatroomClaim]) async throws
    /// The rooms of an app some live node holds.
    func chatroomIds(appId: Int64) async throws -> [String]

    /// Runs the transport until cancelled: listening, this node's heartbeat, and clearing the
    /// presence of nodes that stopped beating (and telling every node, `ClusterMessage.nodeLeft`).
    func run() async throws
}

/// A chatroom held by a node.
public struct ChatroomClaim: Sendable, Equatable, Hashable {
    public var appId: Int64
    public var roomId: String
    public var nodeId: String
    /// Which hold of the room this is: a node that claims a room again gets a new number.
    public var claim: Int64

    public init(appId: Int64, roomId: String, nodeId: String, claim: Int64) {
        self.appId = appId
        self.roomId = roomId
        self.nodeId = nodeId
        self.claim = claim
    }
}

/// What the bus brings a node.
public enum ClusterBusEvent: Sendable {
    /// A message another node published.
    case message(ClusterMessage)
    /// The bus may have lost messages for this node (its connection to the bus broke): its
    /// sessions cannot be trusted to have everything, so the node closes them and their clients
    /// reconnect and sync.
    case interrupted
}

/// One session in the cluster's presence table.
public struct PresenceEntry: Sendable, Equatable, Codable {
    public var nodeId: String
    public var sessionId: String
    public var appId: Int64
    public var userId: String
    /// The session's login slot (`ClientSession.loginSlot`): its login class (mobile, desktop or
    /// web), or a Web session's own slot where several may be online; sessions of one slot
    /// displace each other.
    public var loginClass: String
    public var platform: Int
    public var connectedAt: Int64
    /// The device the session signed in from (its push token is kept under this id).
    public var deviceId: String = ""

    public init(nodeId: String, sessionId: String, appId: Int64, userId: String, loginClass: String, platform: Int, connectedAt: Int64,
                deviceId: String = "") {
        self.deviceId = deviceId
        self.nodeId = nodeId
        self.sessionId = sessionId
        self.appId = appId
        self.userId = userId
        self.loginClass = loginClass
        self.platform = platform
        self.connectedAt = connectedAt
    }
}

/// What the presence table said to a new session.
public enum PresenceOutcome: Sendable, Equatable {
    /// Recorded; these sessions of the same login class on other nodes were removed.
    case registered(displaced: [PresenceEntry])
    /// Refused: another node has a session of this login class and the client asked to be refused
    /// rather than to kick it.
    case classTaken
}

/// What one node tells the others.
public enum ClusterMessage: Sendable, Equatable, Codable {
    /// A committed message: each node writes it to its own live sessions that should see it.
    case deliver(StoredMessage, origin: ClusterOrigin)
    /// An ultra group message's new content: each node writes it to its own live sessions of the
    /// channel that got the message.
    case modified(StoredMessage, origin: ClusterOrigin)
    /// A frame for every session of these users on each node, except one session.
    case send(frame: Data, appId: Int64, userIds: [String], exceptSession: String?)
    /// These sessions lost their place to a newer login on another node: kick them (31010).
    case kickSessions(appId: Int64, userId: String, sessionIds: [String], code: Int, reason: String)
    /// Every session of these users is to go: kicked with `code`, or closed without a kick when nil
    /// (as a network failure would; the client reconnects).
    case disconnectUsers(appId: Int64, userIds: [String], code: Int?, reason: String)
    /// Every session of the app is to be kicked with `code` (a banned app).
    case disconnectApp(appId: Int64, code: Int, reason: String)
    /// A node changed what other nodes may hold in a cache.
    case invalidate(CacheInvalidation)
    /// A node asks every node to say when it has applied everything published before this.
    case barrier(id: String, from: String)
    /// A node has applied everything published before the barrier `id` of node `to`.
    case barrierAck(id: String, to: String, from: String)

    /// The node left the cluster (it stopped, or stopped beating and was removed), or started
    /// again under its id: whatever a node had with it, or with its earlier run, is gone. Published
    /// by the transport, also to the node itself when it had been removed while still running.
    case nodeLeft(nodeId: String)

    // Chatrooms (ChatroomRouting).
    /// To a room's owner: a request about the room.
    case chatroomRequest(ChatroomRequest)
    /// From a room's owner to one node: what concerns that node's sessions, in order.
    case chatroomRelay(from: String, items: [ChatroomRelayItem])
    /// To a room's owner: these sessions of the sending node ended.
    case chatroomSessionsClosed(from: String, sessionIds: [String])
    /// A chatroom moderation setting changed (every node reloads and applies it to its rooms).
    case chatroomSettingsChanged(ChatroomSettingsChange)
    /// A user joined a room on this node while rooms hold one user at a time: every other node
    /// takes the user out of its rooms.
    case chatroomUserJoined(appId: Int64, userId: String, roomId: String)
    /// The node may have lost messages of the bus: it dropped the sessions of other nodes from its
    /// rooms, and the other nodes drop what they had with it.
    case chatroomNodeReset(nodeId: String)
}

/// `Origin` on the bus (session ids are unique across the cluster).
public enum ClusterOrigin: Sendable, Equatable, Codable {
    case session(id: String, appId: Int64, userId: String)
    case serverAPI
    case system

    init(_ origin: Origin) {
        switch origin {
        case .session(let id, let appId, let userId): self = .session(id: id, appId: appId, userId: userId)
        case .serverAPI: self = .serverAPI
        case .system: self = .system
        }
    }

    var origin: Origin {
        switch self {
        case .session(let id, let appId, let userId): .session(id: id, appId: appId, userId: userId)
        case .serverAPI: .serverAPI
        case .system: .system
        }
    }
}

/// A cache entry one node changed in the store, which every other node drops.
public enum CacheInvalidation: Sendable, Equatable, Codable {
    /// Group records and rosters (nil: the mutes that hold in every group of the app).
    case groups(appId: Int64, groupIds: [String]?)
    /// Ultra group records, rosters and channels.
    case ultraGroups(appId: Int64, groupIds: [String])
    /// The app's sensitive words.
    case sensitiveWords(appId: Int64)
    /// Black and white lists of these owners.
    case userLists(appId: Int64, owners: [String])
    /// The app's users muted in one-to-one chat.
    case privateChatMutes(appId: Int64)
    /// The app's chatroom moderation settings (mutes, bans, blocks, whitelists).
    case chatroomSettings(appId: Int64)
    /// The apps (a new app, a changed secret).
    case apps
}
