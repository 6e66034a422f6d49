import Foundation
import IMCore
import IMStore
import IMWire
import NIOCore
import NIOWebSocket
import Synchronization

/// One client connection of the gateway, as channel-handler state on its event loop: no Swift task
/// lives as long as the connection.
///
/// - Before CONNECT: a timer on the event loop closes the connection when no CONNECT frame came in
///   `handshakeTimeoutSeconds`; the CONNECT is checked in a task that ends with the check.
/// - Open: a ping is answered here, on the event loop, without leaving it. Other requests go to
///   `GatewayRequests`, which runs them one at a time in arrival order in a task that exists only
///   while requests are waiting (so a client's messages are committed in the order it sent them).
///   Replies and pushes leave through the session's queue (`SessionOutbound`), written on this
///   event loop too.
/// - Every close the server starts (handshake timeout, refused CONNECT, kick, slow reader, the
///   heartbeat sweep, shutdown) gives the peer `closeTimeoutSeconds` to answer the WebSocket close
///   and then drops the TCP connection, so a peer that never answers, or never reads, holds nothing.
///   A close the peer starts is answered and the connection closed.
/// - Heartbeats cost no timer per connection: `HeartbeatSweeper` walks the sessions once per
///   interval.
final class GatewayConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private enum Phase {
        case awaitingConnect
        /// CONNECT is being checked; reading is paused until it is settled.
        case connecting
        case open
        /// The server sent its close; the peer's answer (or the timer) ends the connection.
        case closing
        case closed
    }

    private let gateway: Gateway
    private var phase = Phase.awaitingConnect
    private var context: ChannelHandlerContext?
    private var handshakeTimer: Scheduled<Void>?
    private var session: ClientSession?
    private var requests: GatewayRequests?
    /// Frames that came in the same read as CONNECT, run once it is accepted.
    private var early: [Im_Frame] = []
    /// The graceful shutdown counts this connection from CONNECT to its end.
    private var counted = false
    /// Reading is paused because enough requests wait (`GatewayRequests` resumes it).
    private var pausedForRequests = false
    /// The close code for an open session's end when the server closes it for a protocol error.
    private var closeCode: (code: WebSocketErrorCode, reason: String)?

    private var core: ServerCore { gateway.core }
    private var grace: TimeAmount { .seconds(Int64(core.config.network.closeTimeoutSeconds)) }

    init(gateway: Gateway) {
        self.gateway = gateway
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        try? context.pipeline.syncOperations.handler(type: ConnectionGuardHandler.self).enteredWebSocket()
        let seconds = Int64(core.config.session.handshakeTimeoutSeconds)
        handshakeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(seconds)) { [self] in
            guard phase == .awaitingConnect else { return }
            close(.policyViolation, reason: "no CONNECT frame in time")
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ended()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A message past the size limit or badly fragmented (the aggregator), or any other error:
        // the connection ends.
        guard phase != .closing, phase != .closed, let error = error as? NIOWebSocketFrameAggregator.Error else {
            context.close(promise: nil)
            return
        }
        if case .accumulatedFrameSizeIsTooLarge = error {
            protocolFailure(.messageTooLarge, reason: "a message is larger than \(FrameCodec.maxFrameBytes) bytes")
        } else {
            protocolFailure(.protocolError, reason: "badly fragmented message")
        }
    }

    /// Hummingbird's graceful shutdown asks every connection to end: one still without CONNECT is
    /// closed now (the open sessions are closed by `GatewayCloser`, after their requests).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            if phase == .awaitingConnect {
                handshakeTimer?.cancel()
                close(.goingAway, reason: "the server is shutting down")
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A frame breaking the protocol: an open session ends (its queued frames are written first,
    /// then the close with this code); before that, the close goes at once.
    private func protocolFailure(_ code: WebSocketErrorCode, reason: String) {
        // The first failure names the close; what follows it (the rest of a refused message) does not.
        guard closeCode == nil else { return }
        if phase == .open, let session {
            closeCode = (code, reason)
            session.close()
        } else {
            close(code, reason: reason)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.reservedBits.isEmpty else {
            // No extension is negotiated, so no reserved bit may be set.
            protocolFailure(.protocolError, reason: "reserved bits set without an extension")
            return
        }
        switch frame.opcode {
        case .binary:
            received(frame.unmaskedData)
        case .text:
            if phase == .awaitingConnect { refuseFirstFrame() }
        case .ping:
            guard phase != .closing, phase != .closed else { return }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            peerClosed(frame, context: context)
        default:
            break
        }
    }

    // MARK: frames

    private func received(_ bytes: ByteBuffer) {
        guard let frame = try? FrameCodec.decode(bytes) else {
            if phase == .awaitingConnect { refuseFirstFrame() }
            return
        }
        switch phase {
        case .awaitingConnect:
            handshakeTimer?.cancel()
            handshakeTimer = nil
            phase = .connecting
            connect(frame)
        case .connecting:
            early.append(frame)
        case .open:
            dispatch(frame)
        case .closing, .closed:
            break
        }
    }

    private func refuseFirstFrame() {
        handshakeTimer?.cancel()
        close(.unacceptableData, reason: "expected a binary CONNECT frame")
    }

    /// A request of the open session: a ping is answered at once; the rest run in order.
    private func dispatch(_ frame: Im_Frame) {
        guard let session, let requests else { return }
        if frame.op == .ping {
            let now = core.clock.nowMilliseconds()
            session.touch(now: now)
            session.send(OutboundFrame.pong(to: frame.id, now: now))
            return
        }
        if requests.submit(frame) {
            // Enough requests wait: stop reading until they are run (TCP pushes back on the client).
            pausedForRequests = true
            setReading(false)
        }
    }

    // MARK: CONNECT

    private func connect(_ frame: Im_Frame) {
        guard let context else { return }
        core.shutdown.beginSession()
        counted = true
        // Nothing more is read until the CONNECT is settled.
        setReading(false)
        let channel = context.channel
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        let gateway = self.gateway
        Task {
            do {
                let session = try await gateway.connect(frame, channel: channel)
                me.eventLoop.execute { me.value.opened(session) }
            } catch {
                let imError = (error as? IMError) ?? IMError(.serverUnavailable, "the server could not open the session: retry later")
                me.eventLoop.execute { me.value.refused(frame, imError) }
            }
        }
    }

    private func opened(_ session: ClientSession) {
        guard phase == .connecting, let context else {
            // The connection ended while CONNECT was checked.
            session.close()
            core.sessionEnded(session)
            endCounting()
            return
        }
        phase = .open
        self.session = session
        core.metrics.connect(code: 0)
        core.logger.debug("session opened", metadata: ["user": "\(session.userId)", "session": "\(session.id)", "platform": "\(session.platform)"])
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        requests = GatewayRequests(gateway: gateway, session: session, executor: EventLoopTaskExecutor.of(context.eventLoop), resumeReading: {
            me.eventLoop.execute { me.value.resumeReading() }
        })
        // When the session's queue ends (disconnect, kick, slow reader, heartbeat timeout) and its
        // last frames are written, the session is offline at once (not when the peer answers) and
        // the WebSocket is closed. A slow reader's socket is dropped at once: it reads nothing, not
        // even a close.
        session.outbound.whenFinished { me.value.sessionFinished() }
        for frame in early { dispatch(frame) }
        early = []
        // Reading resumes unless the early requests filled the queue (their drain resumes it) or
        // the connection is already gone.
        if !pausedForRequests { setReading(true) }
    }

    private func resumeReading() {
        pausedForRequests = false
        setReading(true)
    }

    /// Turns reading from the socket on or off (nothing to do once the connection is gone).
    private func setReading(_ on: Bool) {
        guard phase != .closed else { return }
        context?.channel.setOption(ChannelOptions.autoRead, value: on).whenFailure { _ in }
    }

    private func refused(_ frame: Im_Frame, _ error: IMError) {
        core.metrics.connect(code: error.code.rawValue)
        guard phase == .connecting, let context else {
            endCounting()
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeBytes(FrameCodec.errorReply(to: frame, error))
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: buffer)), promise: nil)
        close(core.shutdown.isStopping ? .goingAway : .normalClosure, reason: "connect refused: \(error.code.rawValue)")
        // Reading again, for the peer's answer to the close.
        setReading(true)
    }

    private func sessionFinished() {
        guard let session else { return }
        core.sessionEnded(session)
        if session.outbound.wasSlowReader {
            phase = .closing
            context?.close(promise: nil)
        } else if session.isClosedForShutdown {
            close(.goingAway, reason: "the server is shutting down")
        } else if let closeCode {
            close(closeCode.code, reason: closeCode.reason)
        } else {
            close(.normalClosure, reason: nil)
        }
    }

    // MARK: closing

    /// Sends the server's close and drops the TCP connection once the peer answered, or `grace`
    /// later (but never before the close had half a second to be written, unless `grace` is 0:
    /// then as soon as it is).
    private func close(_ code: WebSocketErrorCode, reason: String?) {
        guard let context, phase != .closing, phase != .closed else { return }
        phase = .closing
        var data = context.channel.allocator.buffer(capacity: 2 + (reason?.utf8.count ?? 0))
        data.write(webSocketErrorCode: code)
        if let reason { data.writeString(reason) }
        let channel = context.channel
        let grace = self.grace
        let backstop = max(grace, .milliseconds(500))
        Gateway.closeSoon(channel, after: backstop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            if grace < backstop { Gateway.closeSoon(channel, after: grace) }
        }
    }

    /// The peer's close: answered with its code (unless it answers ours), then the connection ends.
    private func peerClosed(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        if phase == .closing || phase == .closed {
            context.close(promise: nil)
            return
        }
        phase = .closing
        var data = frame.unmaskedData
        // A code the peer may not send (1005, 1006, 1015, or outside RFC 6455's ranges) is answered
        // with 1002; no code at all with 1000.
        var code = WebSocketErrorCode.normalClosure
        if data.readableBytes >= 2, let raw = data.readInteger(as: UInt16.self) {
            let allowed = (1000...1003).contains(raw) || (1007...1011).contains(raw) || (3000...4999).contains(raw)
            code = allowed ? WebSocketErrorCode(codeNumber: Int(raw)) : .protocolError
        } else if data.readableBytes == 1 {
            code = .protocolError
        }
        var answer = context.channel.allocator.buffer(capacity: 2)
        answer.write(webSocketErrorCode: code)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: answer))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// The connection is gone: the session ends (offline at once) and the shutdown stops counting it.
    private func ended() {
        guard phase != .closed else { return }
        handshakeTimer?.cancel()
        handshakeTimer = nil
        early = []
        let wasConnecting = phase == .connecting
        phase = .closed
        if let session {
            session.close()
            core.sessionEnded(session)
            core.logger.debug("session closed", metadata: ["user": "\(session.userId)", "session": "\(session.id)"])
        }
        // A CONNECT still being checked is counted until its check ends (`opened` or `refused`):
        // the shutdown must not close the store under it.
        if !wasConnecting { endCounting() }
    }

    private func endCounting() {
        if counted {
            counted = false
            core.shutdown.endSession()
        }
    }
}

/// The requests of one session, run one at a time in arrival order. A task runs them while any
/// wait and ends with the last: an idle connection holds none. It runs on the connection's event
/// loop (`EventLoopTaskExecutor`), where the requests were read and their replies are written.
final class GatewayRequests: Sendable {
    private let gateway: Gateway
    private let session: ClientSession
    private let executor: EventLoopTaskExecutor
    private let resumeReading: @Sendable () -> Void
    private let state = Mutex(State())

    private struct State {
        var waiting: [Im_Frame] = []
        var running = false
        var paused = false
    }

    /// Reading stops when this many requests wait, and resumes when they are down to `resumeAt`.
    static let pauseAt = 32
    static let resumeAt = 8

    init(gateway: Gateway, session: ClientSession, executor: EventLoopTaskExecutor, resumeReading: @escaping @Sendable () -> Void) {
        self.gateway = gateway
        self.session = session
        self.executor = executor
        self.resumeReading = resumeReading
    }

    /// Queues a request; true when the connection should stop reading for a while.
    func submit(_ frame: Im_Frame) -> Bool {
        let (start, pause) = state.withLock { state -> (Bool, Bool) in
            state.waiting.append(frame)
            let start = !state.running
            state.running = true
            let pause = !state.paused && state.waiting.count >= Self.pauseAt
            if pause { state.paused = true }
            return (start, pause)
        }
        if start { Task(executorPreference: executor) { await self.drain() } }
        return pause
    }

    private func drain() async {
        while let frame = next() {
            await run(frame)
            if session.isClosed {
                // Disconnected, kicked or closed: what still waits is not run.
                let resume = state.withLock { state -> Bool in
                    state.waiting = []
                    state.running = false
                    defer { state.paused = false }
                    return state.paused
                }
                if resume { resumeReading() }
                return
            }
        }
    }

    private func next() -> Im_Frame? {
        let (frame, resume) = state.withLock { state -> (Im_Frame?, Bool) in
            var resume = false
            if state.paused && state.waiting.count <= Self.resumeAt {
                state.paused = false
                resume = true
            }
            guard !state.waiting.isEmpty else {
                state.running = false
                return (nil, resume)
            }
            return (state.waiting.removeFirst(), resume)
        }
        if resume { resumeReading() }
        return frame
    }

    private func run(_ frame: Im_Frame) async {
        let core = gateway.core
        // Kicked, disconnected or closed meanwhile: nothing more of this session runs.
        guard !session.isClosed else { return }
        // Once a graceful shutdown has begun, requests are answered without being run (but a
        // client may still say goodbye).
        let alwaysAnswered = frame.op == .disconnect
        guard alwaysAnswered || core.shutdown.beginRequest() else {
            session.send(FrameCodec.errorReply(to: frame, ServerShutdown.refusal))
            return
        }
        // A send that may wait for the app's message callback runs in its conversation's lane.
        if frame.op == .sendMessage, let callbacks = core.callbacks {
            let lane = SendLanes.lane(of: frame)
            if callbacks.mayReview(appId: session.appId) || session.sendLanes.isBusy(lane) {
                let session = self.session
                let gateway = self.gateway
                session.sendLanes.run(lane) {
                    await gateway.handle(frame, session: session)
                    core.shutdown.endRequest()
                }
                return
            }
        }
        await gateway.handle(frame, session: session)
        if !alwaysAnswered { core.shutdown.endRequest() }
    }
}
