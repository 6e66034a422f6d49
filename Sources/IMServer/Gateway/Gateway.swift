import Foundation
import HummingbirdWebSocket
import IMCore
import IMStore
import IMWire
import Logging
import NIOCore
import SwiftProtobuf
import Synchronization

/// The client gateway: one WebSocket connection from CONNECT to close.
///
/// The first frame must be CONNECT (within `handshakeTimeoutSeconds`). After it, requests are
/// handled one at a time in arrival order, so a client's messages are committed in the order it
/// sent them; replies and pushes leave through the session's queue (`SessionOutbound`), which
/// writes them to the connection's channel on its event loop.
struct Gateway: Sendable {
    let core: ServerCore

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, channel: any Channel, logger: Logger) async {
        // Memory per connection: a task keeps the most memory its async frames ever needed (in
        // slabs of about 1 KB) until it ends. So this long-lived task runs the deep one-off work
        // (authentication, sync and history pages, which read the store) in child tasks; the
        // helper tasks are detached, because an inherited copy of the task-local values costs
        // each of them a slab of its own; and the handshake timer ends as soon as CONNECT arrives
        // instead of sleeping out its time. Frames are written by the session's outbound queue on the
        // channel's event loop, with no task of their own.
        //
        // Every close the server starts (handshake timeout, refused CONNECT, kick, slow reader,
        // heartbeat timeout) gives the peer `closeTimeoutSeconds` to answer the WebSocket close and
        // then drops the TCP connection (`closeSoon`), so a peer that never answers, or never
        // reads, holds nothing.
        channel.markWebSocketSession()
        let grace = TimeAmount.seconds(Int64(core.config.network.closeTimeoutSeconds))
        let handshake = HandshakeGuard()
        let timeout = Task.detached { [core] in
            try await Task.sleep(for: .seconds(core.config.session.handshakeTimeoutSeconds))
            if handshake.expire() {
                await Self.closing(channel, grace: grace) {
                    try? await outbound.close(.policyViolation, reason: "no CONNECT frame in time")
                }
            }
        }
        defer { timeout.cancel() }

        var messages = inbound.messages(maxSize: FrameCodec.maxFrameBytes).makeAsyncIterator()
        guard let first = try? await messages.next(), handshake.complete() else { return }
        timeout.cancel()
        guard case .binary(let buffer) = first, let frame = try? FrameCodec.decode(buffer.readableBytesView) else {
            await Self.closing(channel, grace: grace) {
                try? await outbound.close(.unacceptableData, reason: "expected a binary CONNECT frame")
            }
            return
        }
        // A graceful shutdown waits for this connection from here until it ends.
        core.shutdown.beginSession()
        defer { core.shutdown.endSession() }
        let session: ClientSession
        do {
            async let opened = connect(frame, channel: channel)
            session = try await opened
        } catch {
            let imError = (error as? IMError) ?? IMError(.serverUnavailable, "the server could not open the session: retry later")
            core.metrics.connect(code: imError.code.rawValue)
            var buffer = ByteBufferAllocator().buffer(capacity: 64)
            buffer.writeBytes(FrameCodec.errorReply(to: frame, imError))
            let stopping = core.shutdown.isStopping
            await Self.closing(channel, grace: grace) {
                try? await outbound.write(.binary(buffer))
                try? await outbound.close(stopping ? .goingAway : .normalClosure, reason: "connect refused: \(imError.code.rawValue)")
            }
            return
        }
        core.metrics.connect(code: 0)
        logger.debug("session opened", metadata: ["user": "\(session.userId)", "session": "\(session.id)", "platform": "\(session.platform)"])

        // When the session's queue ends (disconnect, kick, slow reader, heartbeat timeout) and its
        // last frames are written, the session is offline at once (not when the peer answers) and
        // the WebSocket is closed, which ends the reader loop below too. A slow reader's socket is
        // dropped at once: it reads nothing, not even a close.
        let closer = Task.detached { [core] in
            await session.outbound.finished()
            core.sessionEnded(session)
            if session.outbound.wasSlowReader {
                channel.close(promise: nil)
            } else if session.isClosedForShutdown {
                await Self.closing(channel, grace: grace) { try? await outbound.close(.goingAway, reason: "the server is shutting down") }
            } else {
                await Self.closing(channel, grace: grace) { try? await outbound.close(.normalClosure, reason: nil) }
            }
        }
        while let message = try? await messages.next() {
            guard case .binary(let buffer) = message, let frame = try? FrameCodec.decode(buffer.readableBytesView) else {
                continue
            }
            // Once a graceful shutdown has begun, requests are answered without being run (but a
            // client may still say goodbye, and a ping still gets its pong).
            let alwaysAnswered = frame.op == .disconnect || frame.op == .ping
            guard alwaysAnswered || core.shutdown.beginRequest() else {
                session.send(FrameCodec.errorReply(to: frame, ServerShutdown.refusal))
                continue
            }
            // A send that may wait for the app's message callback runs in its conversation's lane.
            if frame.op == .sendMessage, let callbacks = core.callbacks {
                let lane = SendLanes.lane(of: frame)
                if callbacks.mayReview(appId: session.appId) || session.sendLanes.isBusy(lane) {
                    session.sendLanes.run(lane) { [core] in
                        await self.handle(frame, session: session)
                        core.shutdown.endRequest()
                    }
                    continue
                }
            }
            await handle(frame, session: session)
            if !alwaysAnswered { core.shutdown.endRequest() }
            if session.isClosed { break }
        }
        session.close()
        await closer.value
        core.sessionEnded(session)
        logger.debug("session closed", metadata: ["user": "\(session.userId)", "session": "\(session.id)"])
    }

    /// Runs the last writes of a close the server starts, then drops the TCP connection `grace`
    /// later unless the peer has closed it by then. The timer is armed before the writes, since a
    /// write to a peer that reads nothing waits for ever, but never fires before the writes had
    /// half a second.
    static func closing(_ channel: any Channel, grace: TimeAmount, _ writes: () async -> Void) async {
        let backstop = max(grace, .milliseconds(500))
        closeSoon(channel, after: backstop)
        await writes()
        if grace < backstop { closeSoon(channel, after: grace) }
    }

    /// Drops the TCP connection after `delay` unless it has closed by then.
    static func closeSoon(_ channel: any Channel, after delay: TimeAmount) {
        guard delay > .zero else {
            channel.close(promise: nil)
            return
        }
        channel.eventLoop.scheduleTask(in: delay) { channel.close(promise: nil) }
    }

    /// Authenticates CONNECT and registers the session under the login rules.
    private func connect(_ frame: Im_Frame, channel: any Channel) async throws -> ClientSession {
        guard frame.op == .connect, let request = try? frame.body(Im_ConnectRequest.self) else {
            throw IMError(.invalidParameter, "the first frame of a connection must be CONNECT")
        }
        guard !core.shutdown.isStopping else { throw ServerShutdown.refusal }
        guard !request.token.isEmpty else { throw IMError(.invalidParameter, "token is empty: pass the token your app server got from /user/getToken.json") }
        guard request.token.utf8.count <= ConnectLimits.maxTokenBytes else {
            throw IMError(.tokenIncorrect, "the token is longer than any token this server issues (\(ConnectLimits.maxTokenBytes) bytes): pass the token your app server got from /user/getToken.json")
        }
        guard request.appKey.utf8.count <= ConnectLimits.maxAppKeyBytes else {
            throw IMError(.wrongAppKey, "the app key is longer than \(ConnectLimits.maxAppKeyBytes) bytes: check the app key the client was initialised with")
        }
        guard request.deviceID.utf8.count <= ConnectLimits.maxDeviceIdBytes else {
            throw IMError(.invalidParameter, "the device id is longer than \(ConnectLimits.maxDeviceIdBytes) bytes")
        }
        guard let platform = Platform(wire: request.platform) else {
            throw IMError(.invalidParameter, "platform is missing or unknown")
        }
        guard let app = await core.apps.find(key: request.appKey) else {
            throw IMError(.wrongAppKey, "app key '\(request.appKey)' does not exist on this server: check the app key the client was initialised with")
        }
        guard !app.banned else {
            throw IMError(.appBlockedOrDeleted, "app \(app.appKey) is banned by the server's operator: no client of it can connect")
        }
        let claims = try core.tokens.verify(request.token, app: app)
        let access = try await core.directory.checkConnect(appId: app.id, userId: claims.userId, tokenIssuedAt: claims.issuedAt,
                                                           now: core.clock.nowMilliseconds())
        let session = ClientSession(
            id: UUID().uuidString, appId: app.id, userId: claims.userId, platform: platform,
            deviceId: request.deviceID, now: core.clock.nowMilliseconds(),
            outbound: try await SessionOutbound.attach(to: channel, maxQueuedBytes: core.config.network.maxQueuedBytesPerConnection),
            maxHeldBytes: ConnectionLimits.heldBytes(forQueue: core.config.network.maxQueuedBytesPerConnection),
            clientAddress: channel.remoteAddress.map { "\($0.ipAddress ?? ""):\($0.port ?? 0)" } ?? "",
            historyAfterSeq: access.historyAfterSeq,
            severalPerClass: platform.loginClass == .web && core.apps.settings(appId: app.id).messaging.multiDeviceSyncEnabled)
        let displaced = try await core.sessionStarted(session, refuseIfClassTaken: request.reconnectKickRefuse)
        // A block or a deactivation committed while this connect was being checked must not leave
        // the user online.
        let refusal: IMError?
        do {
            refusal = try await core.directory.accessRefusal(appId: app.id, userId: claims.userId, now: core.clock.nowMilliseconds())
        } catch {
            core.sessionEnded(session)
            throw error
        }
        // Likewise a ban (or deletion) of the app.
        if refusal == nil, core.apps.app(key: app.appKey)?.banned ?? true {
            core.sessionEnded(session)
            throw IMError(.appBlockedOrDeleted, "app \(app.appKey) is banned or deleted by the server's operator")
        }
        if let refusal {
            core.sessionEnded(session)
            for old in displaced {
                old.kick(code: refusal.code == .userBlocked ? .bannedWhileOnline : refusal.code, reason: refusal.message)
            }
            throw refusal
        }
        // A shutdown that began meanwhile may have closed the sessions it found before this one
        // was registered: refused, and what it displaced is closed as the shutdown would have.
        if core.shutdown.isStopping {
            core.sessionEnded(session)
            for old in displaced { old.closeForShutdown() }
            throw ServerShutdown.refusal
        }
        for old in displaced {
            old.kick(code: .kickedByOtherClient, reason: "user \(claims.userId) logged in on another \(platform.loginClass.rawValue) device")
        }
        // The app's server hears of the device coming online before the device does.
        do {
            try await core.callbacks?.sessionOnline(session)
        } catch {
            core.sessionEnded(session)
            core.logger.error("the online status callback could not be taken on", metadata: ["error": "\(error)"])
            throw IMError(.serverUnavailable, "the server could not record the connection: reconnect in a moment")
        }
        // Counted once the connect has passed every check.
        core.statistics.active(appId: app.id, userId: claims.userId)
        var reply = Im_ConnectReply()
        reply.userID = claims.userId
        reply.serverTime = core.clock.nowMilliseconds()
        reply.sessionID = session.id
        reply.heartbeatIntervalMs = Int32(core.config.session.heartbeatIntervalSeconds * 1000)
        session.send(try FrameCodec.reply(to: frame, reply))
        return session
    }

    /// Handles one request of an open session through the op table and queues its reply.
    private func handle(_ frame: Im_Frame, session: ClientSession) async {
        session.touch(now: core.clock.nowMilliseconds())
        do {
            guard let op = GatewayOps.table[frame.op] else {
                throw IMError(.invalidParameter, "unknown request op \(frame.op.rawValue)")
            }
            if let reply = try await op.run(core, frame, session) { session.send(reply) }
        } catch let error as IMError {
            session.send(FrameCodec.errorReply(to: frame, error))
        } catch {
            core.logger.error("request failed", metadata: ["op": "\(frame.op)", "error": "\(error)"])
            session.send(FrameCodec.errorReply(to: frame, IMError(.serverUnavailable, "the server failed to handle the request: retry later")))
        }
    }
}

/// Decides the race between the first frame and the handshake timeout.
private final class HandshakeGuard: Sendable {
    private let state = Mutex<Int>(0)   // 0 waiting, 1 connected, 2 expired

    func complete() -> Bool { state.withLock { if $0 == 0 { $0 = 1; return true }; return false } }
    func expire() -> Bool { state.withLock { if $0 == 0 { $0 = 2; return true }; return false } }
}
