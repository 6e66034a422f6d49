import Foundation
import IMCore
import IMStore
import IMWire
import Synchronization

/// One authenticated client connection: who it is, and the queue of frames waiting to be written
/// (`SessionOutbound`).
///
/// Frames are queued without blocking (delivery never waits for a slow reader); a connection whose
/// queue grows past its byte limit is closed as a slow reader. Until the client has pulled its
/// offline messages, live messages are held back and then released in seq order with the ones the
/// sync already returned skipped, so a client sees every message once and in commit order.
///
/// What is held is bounded by bytes too (`maxHeldBytes`). Past it, the held stored messages are
/// let go and the session is marked to sync again: they are in the store, so its sync, told that
/// more is waiting, returns them (nothing is lost, and a session that never finishes its sync holds
/// no more than the bound). Held messages that no sync returns (ultra group and status messages)
/// stay; if they alone pass the bound, the session is closed and its client catches up on
/// reconnecting.
public final class ClientSession: Sendable {
    public let id: String
    public let appId: Int64
    public let userId: String
    public let platform: Platform
    public let deviceId: String
    /// The client's address as `ip:port` (RongCloud's clientIp in callbacks); "" when not known.
    public let clientAddress: String
    /// Sends waiting for the app's message callback, per conversation.
    let sendLanes = SendLanes()
    /// The user's sync and cloud history start after this seq (a reactivated user's; 0 otherwise).
    /// Read at connect: deactivating a user closes their sessions, so it cannot change meanwhile.
    let historyAfterSeq: UInt64

    let outbound: SessionOutbound
    private let maxHeldBytes: Int
    private let state: Mutex<State>

    private struct State {
        var syncing = true
        var syncedThrough: UInt64 = 0
        var held: [(seq: UInt64, frame: OutboundFrame)] = []
        var heldBytes = 0
        /// Held stored messages were let go: the current sync must not end before it returned them.
        var mustSyncAgain = false
        var lastSeen: Int64
        /// The server has let the session go (registry, rosters, rooms); set once.
        var ended = false
        /// Accept times of the latest sends and chatroom joins, for their per-second limits.
        var recentSends = RecentEvents()
        var recentJoins = RecentEvents()
        /// Closed by a graceful shutdown of the server.
        var serverStopping = false
        /// Its online status was taken on for the app's server (so its end is reported too).
        var statusReported = false
        /// Ended by logout or disconnect(receivePush: false): RongCloud's status 2.
        var loggedOut = false
        /// The code the session was kicked with, if it was.
        var kickedWith: ErrorCode?
    }

    /// Why the session ended, as the metrics name it: kicked_<code>, slow_reader,
    /// server_stopping, or client (the client or the network closed it).
    var closeReason: String {
        let (kicked, stopping) = state.withLock { ($0.kickedWith, $0.serverStopping) }
        if let kicked { return "kicked_\(kicked.rawValue)" }
        if stopping { return "server_stopping" }
        return outbound.wasSlowReader ? "slow_reader" : "client"
    }

    package init(id: String, appId: Int64, userId: String, platform: Platform, deviceId: String, now: Int64,
         outbound: SessionOutbound, maxHeldBytes: Int, clientAddress: String = "", historyAfterSeq: UInt64 = 0,
         severalPerClass: Bool = false) {
        self.id = id
        self.loginSlot = severalPerClass ? "\(platform.loginClass.rawValue)/\(id)" : platform.loginClass.rawValue
        self.historyAfterSeq = historyAfterSeq
        self.clientAddress = clientAddress
        self.maxHeldBytes = maxHeldBytes
        self.appId = appId
        self.userId = userId
        self.platform = platform
        self.deviceId = deviceId
        self.outbound = outbound
        self.state = Mutex(State(lastSeen: now))
    }

    /// A session of another node of a cluster that this node stands in for in the chatrooms it
    /// holds: what is sent to it goes to that node (`ChatroomRouting`).
    static func standIn(for remote: RemoteSession, link: RemoteSessionLink, now: Int64) -> ClientSession {
        ClientSession(id: remote.id, appId: remote.appId, userId: remote.userId, platform: Platform(rawValue: remote.platform) ?? .linux,
                      deviceId: remote.deviceId, now: now, outbound: .relayed(to: link), maxHeldBytes: 0)
    }

    /// For a session of another node: the way to it.
    var relayLink: RemoteSessionLink? { outbound.relayLink }

    public var loginClass: LoginClass { platform.loginClass }
    /// What a newer session of the same user displaces this one by: its login class, or for a
    /// Web session of an app with multi-device sync, a slot of its own (several tabs at once).
    public let loginSlot: String

    /// Marks its online status as reported to the app's server.
    func markStatusReported() { state.withLock { $0.statusReported = true } }
    /// Whether its online status was reported, and whether it ended by logging out.
    var statusReport: (reported: Bool, loggedOut: Bool) { state.withLock { ($0.statusReported, $0.loggedOut) } }
    /// The client logged out (or disconnected without push).
    func markLoggedOut() { state.withLock { $0.loggedOut = true } }

    public var isClosed: Bool { outbound.isFinishing }

    /// Queues a frame for the connection. Returns false if the session is closed (or is being
    /// closed now as a slow reader).
    @discardableResult
    func send(_ frame: [UInt8]) -> Bool {
        send(OutboundFrame(frame))
    }

    /// Queues a frame for the connection; a frame for many sessions is encoded once and shared.
    @discardableResult
    func send(_ frame: OutboundFrame) -> Bool {
        outbound.enqueue(frame) == .queued
    }

    /// Delivers a push frame, holding it back while the client is still syncing. `seq` is the
    /// message's position in the log, or 0 for one no sync returns.
    package func deliver(seq: UInt64, frame: OutboundFrame) {
        enum Action { case send, none, overflow }
        let action = state.withLock { state -> Action in
            guard state.syncing else {
                // A message the sync already returned is not sent twice.
                return seq == 0 || seq > state.syncedThrough ? .send : .none
            }
            let size = frame.bytes.readableBytes + SessionOutbound.frameOverheadBytes
            if state.heldBytes + size > maxHeldBytes {
                // Let the stored ones go: the sync returns them. Keep the others.
                state.held.removeAll { $0.seq != 0 }
                state.heldBytes = state.held.reduce(0) { $0 + $1.frame.bytes.readableBytes + SessionOutbound.frameOverheadBytes }
                state.mustSyncAgain = true
                if seq != 0 { return .none }
                if state.heldBytes + size > maxHeldBytes { return .overflow }
            } else if seq != 0 && state.mustSyncAgain {
                // Held ones were let go: this one comes through the sync as well.
                return .none
            }
            state.held.append((seq, frame))
            state.heldBytes += size
            return .none
        }
        switch action {
        case .send: send(frame)
        case .none: break
        case .overflow:
            state.withLock { state in
                state.held = []
                state.heldBytes = 0
            }
            close()
        }
    }

    /// Whether a sync page read as the last may tell the client so: not when held messages were
    /// let go since (they come with the next page). Called before the page is sent.
    func syncPageMayEnd(_ last: Bool) -> Bool {
        state.withLock { state in
            guard last, state.mustSyncAgain else { return last }
            state.mustSyncAgain = false
            return false
        }
    }

    /// The client has been sent offline messages up to `watermark`; when it has all of them, the
    /// held live messages newer than the watermark are released. Held messages let go after the
    /// last page was sent would be missed, so then the session is closed instead and its client
    /// syncs them on reconnecting (this needs a flood of messages between two lines of code).
    package func syncProgressed(watermark: UInt64, complete: Bool) {
        let (release, lost) = state.withLock { state -> ([OutboundFrame], Bool) in
            state.syncedThrough = max(state.syncedThrough, watermark)
            guard complete, state.syncing else { return ([], false) }
            state.syncing = false
            let through = state.syncedThrough
            let frames = state.held.filter { $0.seq == 0 || $0.seq > through }.map(\.frame)
            state.held = []
            state.heldBytes = 0
            return (frames, state.mustSyncAgain)
        }
        if lost {
            close()
            return
        }
        for frame in release { send(frame) }
    }

    /// The bytes held back while the client syncs.
    var heldBytes: Int { state.withLock { $0.heldBytes } }

    /// Marks the session as let go by the server; true the first time only.
    func markEnded() -> Bool {
        state.withLock { state in
            defer { state.ended = true }
            return !state.ended
        }
    }

    /// Records activity for the heartbeat timeout.
    func touch(now: Int64) {
        state.withLock { $0.lastSeen = now }
    }

    func lastSeen() -> Int64 { state.withLock { $0.lastSeen } }

    /// Admits one more send under the per-second limit, or refuses it (20604).
    func admitSend(now: Int64, perSecond: Int) -> Bool {
        state.withLock { $0.recentSends.admit(now: now, perSecond: perSecond) }
    }

    /// Admits one more chatroom join under the per-second limit, or refuses it (20607).
    func admitChatroomJoin(now: Int64, perSecond: Int) -> Bool {
        state.withLock { $0.recentJoins.admit(now: now, perSecond: perSecond) }
    }

    /// Tells the client why it is being dropped, then closes the connection.
    func kick(code: ErrorCode, reason: String) {
        state.withLock { $0.kickedWith = $0.kickedWith ?? code }
        var kicked = Im_Kicked()
        kicked.code = Int32(code.rawValue)
        kicked.reason = reason
        if let frame = try? FrameCodec.push(op: .kicked, kicked) { send(frame) }
        close()
    }

    /// Closes the session because the server is shutting down: what is queued is still written,
    /// then the gateway closes the WebSocket with 1001 (going away), and the client reconnects
    /// later by itself.
    func closeForShutdown() {
        state.withLock { $0.serverStopping = true }
        close()
    }

    /// Whether the session was closed by the server's shutdown.
    var isClosedForShutdown: Bool { state.withLock { $0.serverStopping } }

    /// Ends the outbound queue: what is queued is still written, then the gateway closes the
    /// WebSocket. What was held for the sync is let go.
    func close() {
        outbound.finish()
        state.withLock { state in
            // Nothing more is held: what arrives now goes to the finished queue, which drops it.
            state.syncing = false
            state.held = []
            state.heldBytes = 0
        }
    }
}
