import Foundation
import IMCore
import IMWire
import Synchronization

/// One authenticated client connection: who it is, and the queue of frames waiting to be written
/// (`SessionOutbound`).
///
/// Frames are queued without blocking (delivery never waits for a slow reader); a connection whose
/// queue grows past its limit is closed as a slow reader. Until the client has pulled its offline
/// messages, live messages are held back and then released in seq order with the ones the sync
/// already returned skipped, so a client sees every message once and in commit order.
public final class ClientSession: Sendable {
    public let id: String
    public let appId: Int64
    public let userId: String
    public let platform: Platform
    public let deviceId: String

    let outbound: SessionOutbound
    private let state: Mutex<State>

    private struct State {
        var syncing = true
        var syncedThrough: UInt64 = 0
        var held: [(seq: UInt64, frame: OutboundFrame)] = []
        var lastSeen: Int64
        /// Accept times of the latest sends, oldest first, for the per-second send limit.
        var recentSends: [Int64] = []
    }

    /// The reason a session ended, for the log.
    public enum CloseReason: Sendable, Equatable {
        case clientDisconnected, kicked(ErrorCode), slowReader, heartbeatTimeout, serverStopping
    }

    init(id: String, appId: Int64, userId: String, platform: Platform, deviceId: String, now: Int64,
         outbound: SessionOutbound) {
        self.id = id
        self.appId = appId
        self.userId = userId
        self.platform = platform
        self.deviceId = deviceId
        self.outbound = outbound
        self.state = Mutex(State(lastSeen: now))
    }

    public var loginClass: LoginClass { platform.loginClass }

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

    /// Delivers a stored message's push frame, holding it back while the client is still syncing.
    func deliver(seq: UInt64, frame: OutboundFrame) {
        let sendNow = state.withLock { state -> Bool in
            if state.syncing {
                state.held.append((seq, frame))
                return false
            }
            return seq == 0 || seq > state.syncedThrough
        }
        if sendNow { send(frame) }
    }

    /// The client has pulled offline messages up to `watermark`; when it has pulled all of them,
    /// the held live messages newer than the watermark are released.
    func syncProgressed(watermark: UInt64, complete: Bool) {
        let release = state.withLock { state -> [OutboundFrame] in
            state.syncedThrough = max(state.syncedThrough, watermark)
            guard complete, state.syncing else { return [] }
            state.syncing = false
            let through = state.syncedThrough
            let frames = state.held.filter { $0.seq == 0 || $0.seq > through }.map(\.frame)
            state.held = []
            return frames
        }
        for frame in release { send(frame) }
    }

    /// Records activity for the heartbeat timeout.
    func touch(now: Int64) {
        state.withLock { $0.lastSeen = now }
    }

    func lastSeen() -> Int64 { state.withLock { $0.lastSeen } }

    /// Admits one more send under the per-second limit, or refuses it (20604).
    func admitSend(now: Int64, perSecond: Int) -> Bool {
        state.withLock { state in
            state.recentSends.removeAll { now - $0 >= 1000 }
            guard state.recentSends.count < perSecond else { return false }
            state.recentSends.append(now)
            return true
        }
    }

    /// Tells the client why it is being dropped, then closes the connection.
    func kick(code: ErrorCode, reason: String) {
        var kicked = Im_Kicked()
        kicked.code = Int32(code.rawValue)
        kicked.reason = reason
        if let frame = try? FrameCodec.push(op: .kicked, kicked) { send(frame) }
        close()
    }

    /// Ends the outbound queue: what is queued is still written, then the gateway closes the
    /// WebSocket.
    func close() {
        outbound.finish()
    }
}
