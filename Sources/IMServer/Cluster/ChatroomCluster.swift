import Foundation
import IMCore
import IMStore
import Logging
import Synchronization

/// A node's side of the chatrooms of a cluster (`ChatroomRouting` decides what runs where):
///
/// - **Owners.** Which node holds a room is recorded by the transport (`chatroomOwner`): the first
///   node that needs a room claims it. Each node remembers the owners it has looked up, and forgets
///   one that answers "not mine" (the room was given up) or leaves the cluster. The rooms this node
///   holds are released once they are gone (`releaseUnused`, after each sweep), unless a call on
///   them is under way.
/// - **Requests.** A call for a room another node holds is sent to it with an id; its answer comes
///   back through that node's relay, or the call fails when the node leaves or after
///   `requestTimeout`.
/// - **Stand-ins.** A client's request from another node runs here for a session standing in for
///   the client's (`ClientSession.standIn`), whose frames and seats go back to the client's node.
///   It lives until that node says the session ended, or leaves.
/// - **Links.** This node's sessions that asked other nodes: which nodes to tell when they end, and
///   the mirrors (rooms of other nodes) they sit in.
final class ChatroomCluster: Sendable {
    enum Owner: Equatable {
        case this
        case node(String)
    }

    private struct Held {
        var claim: Int64
        /// Calls running on the room now; it is not released while there are.
        var inFlight = 0
        /// Calls begun, so that a release notices a call that came and went meanwhile.
        var uses: UInt64 = 0
    }

    private struct Link {
        let session: ClientSession
        /// The nodes the session asked something: told when it ends.
        var nodes: Set<String> = []
        /// The rooms of other nodes it sits in, with their owners.
        var mirrors: [ChatroomRoom.Key: String] = [:]
    }

    private struct Pending {
        let node: String
        let continuation: CheckedContinuation<ChatroomCallResult, Never>
    }

    private struct State {
        var held: [ChatroomRoom.Key: Held] = [:]
        var owners: [ChatroomRoom.Key: String] = [:]
        var pending: [UInt64: Pending] = [:]
        var nextRequest: UInt64 = 0
        var links: [String: Link] = [:]
        var standIns: [String: ClientSession] = [:]
    }

    /// How long a node waits for a room's owner to answer.
    static let requestTimeout: Duration = .seconds(15)
    /// The most owners of other nodes' rooms remembered (past it, they are looked up again).
    static let rememberedOwners = 100_000

    let transport: any ClusterTransport
    let relay: ChatroomRelay
    let chatrooms: ChatroomService
    let clock: any WallClock
    let logger: Logger
    private let state = Mutex(State())

    init(transport: any ClusterTransport, relay: ChatroomRelay, chatrooms: ChatroomService, clock: any WallClock, logger: Logger) {
        self.transport = transport
        self.relay = relay
        self.chatrooms = chatrooms
        self.clock = clock
        self.logger = logger
    }

    var nodeId: String { transport.nodeId }

    // MARK: owners

    /// The node that holds the room; with `claim`, this node when none does. Nil when none does
    /// and `claim` is off.
    func owner(_ key: ChatroomRoom.Key, claim: Bool) async throws -> Owner? {
        let known = state.withLock { state -> Owner? in
            if state.held[key] != nil { return .this }
            return state.owners[key].map(Owner.node)
        }
        if let known { return known }
        let found: ChatroomClaim?
        do {
            found = try await transport.chatroomOwner(appId: key.appId, roomId: key.roomId, claim: claim)
        } catch {
            logger.error("the cluster's chatroom owners could not be read", metadata: ["room": "\(key.roomId)", "error": "\(error)"])
            throw IMError(.serverUnavailable, "the server could not find the node of chatroom \(key.roomId): retry in a moment")
        }
        guard let found else { return nil }
        return state.withLock { state in
            if found.nodeId == nodeId {
                if state.held[key] == nil { state.held[key] = Held(claim: found.claim) }
                return .this
            }
            if state.owners.count >= Self.rememberedOwners { state.owners = [:] }
            state.owners[key] = found.nodeId
            return .node(found.nodeId)
        }
    }

    func forgetOwner(_ key: ChatroomRoom.Key) {
        state.withLock { _ = $0.owners.removeValue(forKey: key) }
    }

    /// Runs `body` while this node holds the room (it is not released meanwhile); nil, without
    /// running it, when this node no longer holds it.
    func whileHeld<T>(_ key: ChatroomRoom.Key, _ body: () async throws -> T) async throws -> T? {
        let holding = state.withLock { state -> Bool in
            guard state.held[key] != nil else { return false }
            state.held[key]!.inFlight += 1
            state.held[key]!.uses &+= 1
            return true
        }
        guard holding else { return nil }
        defer { state.withLock { $0.held[key]?.inFlight -= 1 } }
        return try await body()
    }

    /// Gives up the rooms this node holds but no longer has (destroyed, or never created because
    /// the call that claimed one failed), so that another node may claim them.
    func releaseUnused() async {
        let idle = state.withLock { state in state.held.filter { $0.value.inFlight == 0 }.map { ($0.key, $0.value.uses) } }
        guard !idle.isEmpty else { return }
        let live = chatrooms.heldRooms(idle.map(\.0))
        let released = state.withLock { state -> [ChatroomClaim] in
            idle.compactMap { key, uses in
                guard !live.contains(key), let held = state.held[key], held.inFlight == 0, held.uses == uses else { return nil }
                state.held[key] = nil
                return ChatroomClaim(appId: key.appId, roomId: key.roomId, nodeId: nodeId, claim: held.claim)
            }
        }
        guard !released.isEmpty else { return }
        do {
            try await transport.releaseChatrooms(released)
        } catch {
            // They stay recorded as this node's: a call for one comes here and claims it again.
            logger.warning("chatrooms this node gave up are still recorded as its own", metadata: ["rooms": "\(released.count)", "error": "\(error)"])
        }
    }

    /// The ids of the app's rooms held by any node.
    func roomIds(appId: Int64) async throws -> [String] {
        do {
            return try await transport.chatroomIds(appId: appId)
        } catch {
            logger.error("the cluster's chatrooms could not be listed", metadata: ["error": "\(error)"])
            throw IMError(.serverUnavailable, "the server could not list its chatrooms: retry in a moment")
        }
    }

    // MARK: requests to owners

    /// Sends a call to the room's owner and waits for its answer.
    func request(_ call: ChatroomCall, appId: Int64, roomId: String, session: ClientSession?, to node: String) async throws -> ChatroomCallResult {
        let id = try state.withLock { state -> UInt64 in
            if let session {
                // Checked under the lock that `sessionEnded` takes: either the session's end finds
                // this node among those to tell, or the request is not sent.
                guard !session.isClosed else {
                    throw IMError(.connectionUnavailable, "the connection closed during the request: retry once reconnected")
                }
                state.links[session.id, default: Link(session: session)].nodes.insert(node)
            }
            state.nextRequest += 1
            return state.nextRequest
        }
        let remote = session.map {
            RemoteSession(id: $0.id, appId: $0.appId, userId: $0.userId, platform: $0.platform.rawValue, deviceId: $0.deviceId)
        }
        let request = ChatroomRequest(id: id, from: nodeId, appId: appId, roomId: roomId, session: remote, call: call)
        let timer = Task { [weak self] in
            try? await Task.sleep(for: Self.requestTimeout)
            guard !Task.isCancelled, let self else { return }
            // The owner may be gone without the cluster knowing yet: it is looked up again next time.
            self.forgetOwner(ChatroomRoom.Key(appId: appId, roomId: roomId))
            self.answer(id, .failure(code: ErrorCode.serverUnavailable.rawValue,
                                     message: "the server's node holding chatroom \(roomId) did not answer in time: retry in a moment"))
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            state.withLock { $0.pending[id] = Pending(node: node, continuation: continuation) }
            transport.publish(.chatroomRequest(request), to: node)
        }
    }

    private func answer(_ id: UInt64, _ result: ChatroomCallResult) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.continuation.resume(returning: result)
    }

    // MARK: requests from other nodes

    /// Runs another node's request (as a task of its own: the bus goes on meanwhile) and answers
    /// it. A room this node does not hold is not claimed here for the asker: the answer is "not
    /// mine", and the asker looks the room up again and claims it itself if no node holds it. (A
    /// room this node gave up but whose release has not reached the database yet is held again.)
    func received(_ request: ChatroomRequest, execute: @escaping @Sendable (ChatroomCall, ClientSession?) async throws -> ChatroomCallResult) {
        // The stand-in exists before the bus goes on, so that the session's end, which its node
        // sends after this request, finds it.
        let session = request.session.map { standIn(for: $0, of: request.from) }
        Task {
            let key = ChatroomRoom.Key(appId: request.appId, roomId: request.roomId)
            let result: ChatroomCallResult
            do {
                if try await owner(key, claim: false) == .this {
                    result = try await whileHeld(key) { try await execute(request.call, session) } ?? .notOwner
                } else {
                    result = .notOwner
                }
            } catch let error as IMError {
                result = .failure(code: error.code.rawValue, message: error.message)
            } catch {
                logger.error("a chatroom request of another node failed", metadata: ["room": "\(request.roomId)", "error": "\(error)"])
                result = .failure(code: ErrorCode.serverUnavailable.rawValue, message: "the server failed to handle the request: retry later")
            }
            relay.respond(request.id, result, to: request.from)
        }
    }

    /// The session standing in here for a session of another node.
    private func standIn(for remote: RemoteSession, of node: String) -> ClientSession {
        state.withLock { state in
            if let existing = state.standIns[remote.id] { return existing }
            let session = ClientSession.standIn(for: remote, link: RemoteSessionLink(node: node, sessionId: remote.id, relay: relay),
                                                now: clock.nowMilliseconds())
            state.standIns[remote.id] = session
            return session
        }
    }

    /// Sessions of another node ended: their stand-ins close and their seats here go offline.
    func remoteSessionsClosed(_ sessionIds: [String]) {
        let ended = state.withLock { state in sessionIds.compactMap { state.standIns.removeValue(forKey: $0) } }
        for session in ended { end(standIn: session) }
    }

    private func end(standIn session: ClientSession) {
        session.close()
        chatrooms.sessionClosed(session)
    }

    // MARK: what owners relay

    /// What the owner `node` relayed about this node's sessions, in order.
    func relayed(_ items: [ChatroomRelayItem], from node: String) {
        for item in items {
            switch item {
            case .seated(let appId, let roomId, let sessionIds):
                let key = ChatroomRoom.Key(appId: appId, roomId: roomId)
                let sessions = state.withLock { state in
                    sessionIds.compactMap { id -> ClientSession? in
                        guard state.links[id] != nil else { return nil }
                        state.links[id]!.mirrors[key] = node
                        return state.links[id]!.session
                    }
                }
                for session in sessions { chatrooms.mirrorSeat(key, session: session) }
            case .unseated(let appId, let roomId, let sessionIds):
                let key = ChatroomRoom.Key(appId: appId, roomId: roomId)
                state.withLock { state in
                    for id in sessionIds where state.links[id]?.mirrors[key] == node { state.links[id]!.mirrors[key] = nil }
                }
                for id in sessionIds { chatrooms.mirrorUnseat(key, sessionId: id) }
            case .pushes(let appId, let roomId, let pushes):
                chatrooms.mirrorPublish(ChatroomRoom.Key(appId: appId, roomId: roomId), pushes)
            case .frame(let frame, let sessionIds):
                let sessions = state.withLock { state in sessionIds.compactMap { state.links[$0]?.session } }
                let shared = OutboundFrame(frame.bytes)
                for session in sessions { session.send(shared) }
            case .response(let id, let result):
                answer(id, result)
            }
        }
    }

    // MARK: this node's sessions

    /// A session of this node ended: out of its mirrors, and the nodes it asked are told.
    func sessionEnded(_ session: ClientSession) {
        guard let link = state.withLock({ $0.links.removeValue(forKey: session.id) }) else { return }
        for key in link.mirrors.keys { chatrooms.mirrorUnseat(key, sessionId: session.id) }
        for node in link.nodes {
            transport.publish(.chatroomSessionsClosed(from: nodeId, sessionIds: [session.id]), to: node)
        }
    }

    // MARK: nodes leaving

    /// Another node left the cluster, or lost what the bus brought it: its stand-ins here go (their
    /// seats offline), this node's sessions in its rooms are closed (their clients reconnect and
    /// rejoin, on whichever node claims each room next), and its pending answers fail.
    func nodeLost(_ node: String) {
        let (pending, standIns, sessions, mirrors) = state.withLock { state in
            state.owners = state.owners.filter { $0.value != node }
            let pending = state.pending.filter { $0.value.node == node }
            for id in pending.keys { state.pending[id] = nil }
            let standIns = state.standIns.values.filter { $0.relayLink?.node == node }
            for session in standIns { state.standIns[session.id] = nil }
            var sessions: [ClientSession] = []
            var mirrors = Set<ChatroomRoom.Key>()
            for (id, link) in state.links {
                state.links[id]!.nodes.remove(node)
                let lost = link.mirrors.filter { $0.value == node }.map(\.key)
                guard !lost.isEmpty else { continue }
                for key in lost { state.links[id]!.mirrors[key] = nil }
                mirrors.formUnion(lost)
                sessions.append(link.session)
            }
            return (Array(pending.values), standIns, sessions, mirrors)
        }
        for request in pending {
            request.continuation.resume(returning: .failure(code: ErrorCode.serverUnavailable.rawValue,
                                                            message: "the server's node holding the chatroom left: retry in a moment"))
        }
        for session in standIns { end(standIn: session) }
        _ = chatrooms.dropMirrors(mirrors)
        if !sessions.isEmpty {
            logger.notice("a node holding chatrooms left: this node's sessions in them reconnect and rejoin",
                          metadata: ["node": "\(node)", "sessions": "\(sessions.count)", "rooms": "\(mirrors.count)"])
        }
        for session in sessions { session.close() }
    }

    /// This node's bus connection broke and it may have missed requests and sessions' ends: the
    /// stand-ins go (their seats offline) and the other nodes are told to drop what they had with
    /// this node, so their sessions in its rooms rejoin; pending answers fail.
    func busInterrupted() {
        let (pending, standIns) = state.withLock { state in
            defer {
                state.pending = [:]
                state.standIns = [:]
                state.owners = [:]
            }
            return (Array(state.pending.values), Array(state.standIns.values))
        }
        for request in pending {
            request.continuation.resume(returning: .failure(code: ErrorCode.serverUnavailable.rawValue,
                                                            message: "the server's connection between its nodes broke: retry in a moment"))
        }
        for session in standIns { end(standIn: session) }
        transport.publish(.chatroomNodeReset(nodeId: nodeId))
    }

    /// The cluster took this node for dead (it stopped beating for too long) and may have given
    /// its rooms to other nodes: every room, mirror and stand-in here is dropped. The caller closes
    /// this node's sessions, whose clients reconnect and rejoin.
    func reset() {
        let (pending, standIns) = state.withLock { state in
            defer { state = State(nextRequest: state.nextRequest) }
            return (Array(state.pending.values), Array(state.standIns.values))
        }
        for request in pending {
            request.continuation.resume(returning: .failure(code: ErrorCode.serverUnavailable.rawValue,
                                                            message: "this node of the server was taken for dead: retry in a moment"))
        }
        for session in standIns { session.close() }
        chatrooms.dropAllRooms()
    }
}
