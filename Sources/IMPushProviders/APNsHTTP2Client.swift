import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// An HTTP/2 client for APNs without a channel per stream: one TLS connection per host and TLS
/// identity, requests written as HEADERS and DATA frames straight onto it, and the writes of one
/// event loop tick flushed together (one TLS record run and one `write` for many pushes). A push
/// through async-http-client cost a stream channel with its pipeline and three flushes; this costs
/// two frames. Responses are matched by stream id. A request not answered by its deadline fails
/// with `APNsClientError.timeout`; a connection that closes fails its open requests, and the next
/// request opens a new one.
final class APNsHTTP2Client: Sendable {
    struct Response: Sendable {
        var status: Int
        var headers: HPACKHeaders
        var body: ByteBuffer
    }

    private let host: String
    private let port: Int
    private let authority: String
    private let tls: NIOSSLContext
    private let eventLoop: any EventLoop
    private let connectTimeout: TimeAmount
    private let state = Mutex<State>(State())

    private struct State {
        var channel: EventLoopFuture<APNsStreamHandler>?
        var closed = false
    }

    init(baseURL: String, tls configuration: TLSConfiguration, eventLoop: any EventLoop, connectTimeout: TimeAmount) throws {
        guard let url = URL(string: baseURL), let host = url.host, url.scheme == "https" else {
            throw APNsClientError.badURL(baseURL)
        }
        var configuration = configuration
        configuration.applicationProtocols = ["h2"]
        self.host = host
        self.port = url.port ?? 443
        self.authority = url.port.map { "\(host):\($0)" } ?? host
        self.tls = try NIOSSLContext(configuration: configuration)
        self.eventLoop = eventLoop
        self.connectTimeout = connectTimeout
    }

    /// POSTs `body` to `path` with `headers` (lowercase names), answered by `deadline`.
    func post(path: String, headers: [(String, String)], body: ByteBuffer, deadline: NIODeadline) async throws -> Response {
        let handler = try await connection().get()
        let promise = eventLoop.makePromise(of: Response.self)
        var fields = HPACKHeaders()
        fields.reserveCapacity(headers.count + 5)
        fields.add(name: ":method", value: "POST")
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":path", value: path)
        fields.add(name: ":authority", value: authority)
        for (name, value) in headers { fields.add(name: name, value: value) }
        fields.add(name: "content-length", value: String(body.readableBytes))
        let request = APNsStreamHandler.Request(headers: fields, body: body, deadline: deadline, promise: promise)
        if eventLoop.inEventLoop {
            handler.submit(request)
        } else {
            eventLoop.execute { handler.submit(request) }
        }
        return try await promise.futureResult.get()
    }

    /// Closes the connection; later requests fail.
    func close() async {
        let channel = state.withLock { state -> EventLoopFuture<APNsStreamHandler>? in
            state.closed = true
            defer { state.channel = nil }
            return state.channel
        }
        guard let handler = try? await channel?.get() else { return }
        try? await handler.close(on: eventLoop).get()
    }

    /// The open connection, or a new one when there is none (or it closed, or ran out of stream ids).
    private func connection() -> EventLoopFuture<APNsStreamHandler> {
        state.withLock { state in
            if state.closed { return eventLoop.makeFailedFuture(APNsClientError.closed) }
            if let channel = state.channel { return channel }
            let opened = connect()
            state.channel = opened
            opened.whenFailure { [weak self] _ in self?.forget(opened) }
            opened.whenSuccess { [weak self] handler in
                guard let self else { return }
                handler.onClose = { [weak self] in self?.forget(opened) }
                if !handler.isUsable { forget(opened) }
            }
            return opened
        }
    }

    private func forget(_ channel: EventLoopFuture<APNsStreamHandler>) {
        state.withLock { state in
            if state.channel === channel { state.channel = nil }
        }
    }

    private func connect() -> EventLoopFuture<APNsStreamHandler> {
        let tls = self.tls
        let host = self.host
        let handshakeTimeout = connectTimeout
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            HTTP2Setting(parameter: .enablePush, value: 0),
        ]
        // A stream this side reset (its deadline passed) may still be answered: remember enough
        // of them that such answers are dropped rather than taken for a protocol error.
        configuration.maximumRecentlyResetStreams = 4_096
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                // One handler per channel: a connect may try several addresses, each its own channel.
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: host.first?.isNumber == true ? nil : host))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client, connectionConfiguration: configuration))
                    try sync.addHandler(APNsStreamHandler(handshakeTimeout: handshakeTimeout))
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.handler(type: APNsStreamHandler.self)
                }.flatMap { $0.ready }
            }
    }
}

enum APNsClientError: Error, Equatable {
    case badURL(String)
    case timeout
    case connectionClosed
    case streamReset
    case closed
}

/// The connection's end: writes requests as frames, flushes once per event loop tick, and matches
/// answers to requests by stream id. Confined to its channel's event loop.
final class APNsStreamHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = Never
    typealias OutboundOut = HTTP2Frame

    struct Request {
        var headers: HPACKHeaders
        var body: ByteBuffer
        var deadline: NIODeadline
        var promise: EventLoopPromise<APNsHTTP2Client.Response>
    }

    private struct Open {
        var promise: EventLoopPromise<APNsHTTP2Client.Response>
        var deadline: NIODeadline
        var status: Int?
        var headers = HPACKHeaders()
        var body: ByteBuffer?
    }

    /// Stream ids left before the connection is retired (HTTP/2 allows 2^31 - 1).
    private static let lastStreamId: Int32 = Int32.max - 2
    private var context: ChannelHandlerContext?
    private var nextStreamId: Int32 = 1
    private var open: [Int32: Open] = [:]
    private var flushPending = false
    private var goingAway = false
    private var sweep: RepeatedTask?
    /// The handshake's promise until it is kept or broken, and its future.
    private let readyPromise = Mutex<EventLoopPromise<APNsStreamHandler>?>(nil)
    private let readyFuture = Mutex<EventLoopFuture<APNsStreamHandler>?>(nil)
    /// Told once when the connection closes (the client then opens a new one for later requests).
    var onClose: (@Sendable () -> Void)? {
        get { closeCallback.withLock { $0 } }
        set { closeCallback.withLock { $0 = newValue } }
    }
    private let closeCallback = Mutex<(@Sendable () -> Void)?>(nil)
    private let usable = Atomic<Bool>(true)
    private let handshakeTimeout: TimeAmount
    private var handshakeDeadline: Scheduled<Void>?
    /// DATA bytes received since the connection's window was last given back.
    private var unacknowledgedBytes = 0

    init(handshakeTimeout: TimeAmount) {
        self.handshakeTimeout = handshakeTimeout
    }

    /// Whether new requests may go on this connection.
    var isUsable: Bool { usable.load(ordering: .relaxed) }

    /// Succeeds when the handler is in a pipeline whose TLS handshake is done.
    var ready: EventLoopFuture<APNsStreamHandler> {
        readyFuture.withLock { $0 } ?? MultiThreadedEventLoopGroup.singleton.any().makeFailedFuture(APNsClientError.connectionClosed)
    }

    private func takeReadyPromise() -> EventLoopPromise<APNsStreamHandler>? {
        readyPromise.withLock { promise in
            defer { promise = nil }
            return promise
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let promise = context.eventLoop.makePromise(of: APNsStreamHandler.self)
        readyPromise.withLock { $0 = promise }
        readyFuture.withLock { $0 = promise.futureResult }
        sweep = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { [weak self] _ in
            self?.expire()
        }
        // TLS has no deadline of its own: a peer that accepts and says nothing is given up on.
        handshakeDeadline = context.eventLoop.scheduleTask(in: handshakeTimeout) { [weak self] in
            guard let self, let promise = takeReadyPromise() else { return }
            promise.fail(APNsClientError.timeout)
            self.context?.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            handshakeDeadline?.cancel()
            takeReadyPromise()?.succeed(self)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func submit(_ request: Request) {
        guard let context, isUsable, !goingAway else {
            request.promise.fail(APNsClientError.connectionClosed)
            return
        }
        let id = nextStreamId
        nextStreamId += 2
        if nextStreamId >= Self.lastStreamId { retire() }
        let streamId = HTTP2StreamID(id)
        open[id] = Open(promise: request.promise, deadline: request.deadline)
        let hasBody = request.body.readableBytes > 0
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamId, payload: .headers(.init(headers: request.headers, endStream: !hasBody)))),
                      promise: nil)
        if hasBody {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamId, payload: .data(.init(data: .byteBuffer(request.body), endStream: true)))),
                          promise: nil)
        }
        scheduleFlush(context)
    }

    /// Flushes once at the end of this event loop tick, whatever was written in it.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        guard !flushPending else { return }
        flushPending = true
        context.eventLoop.execute { [self] in
            flushPending = false
            self.context?.flush()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = Int32(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            guard var stream = open[id] else { return }
            if let status = headers.headers.first(name: ":status").flatMap(Int.init) {
                stream.status = status
                for (name, value, _) in headers.headers where !name.hasPrefix(":") { stream.headers.add(name: name, value: value) }
            }
            open[id] = stream
            if headers.endStream { finish(id) }
        case .data(let data):
            // Without a stream multiplexer nothing gives the connection's receive window back:
            // this side does, or after 64 KB of answers the peer could send no more.
            unacknowledgedBytes += data.data.readableBytes + (data.paddingBytes ?? 0)
            if unacknowledgedBytes >= 32_768 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))),
                              promise: nil)
                unacknowledgedBytes = 0
                scheduleFlush(context)
            }
            guard var stream = open[id] else { return }
            if case .byteBuffer(var bytes) = data.data {
                if stream.body == nil { stream.body = bytes } else { stream.body!.writeBuffer(&bytes) }
            }
            open[id] = stream
            if data.endStream { finish(id) }
        case .rstStream:
            open.removeValue(forKey: id)?.promise.fail(APNsClientError.streamReset)
            closeIfDrained()
        case .goAway(let lastStreamID, _, _):
            goingAway = true
            retire()
            let last = Int32(lastStreamID)
            for streamId in open.keys where streamId > last {
                open.removeValue(forKey: streamId)?.promise.fail(APNsClientError.connectionClosed)
            }
            closeIfDrained()
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(APNsClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // One stream's error ends that stream, not the connection.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            open.removeValue(forKey: Int32(streamError.streamID))?.promise.fail(APNsClientError.streamReset)
            closeIfDrained()
            return
        }
        // The handshake's own error says what went wrong with it (e.g. an untrusted certificate);
        // requests already on an established connection failed because it dropped.
        handshakeDeadline?.cancel()
        takeReadyPromise()?.fail(error)
        failAll(APNsClientError.connectionClosed)
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sweep?.cancel()
        handshakeDeadline?.cancel()
        takeReadyPromise()?.fail(APNsClientError.connectionClosed)
        failAll(APNsClientError.connectionClosed)
        self.context = nil
    }

    func close(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute { [self] in
            retire()
            if let context { context.close(promise: promise) } else { promise.succeed() }
        }
        return promise.futureResult
    }

    private func finish(_ id: Int32) {
        guard let stream = open.removeValue(forKey: id) else { return }
        stream.promise.succeed(APNsHTTP2Client.Response(status: stream.status ?? 0, headers: stream.headers,
                                                       body: stream.body ?? ByteBuffer()))
        closeIfDrained()
    }

    /// A retired connection (GOAWAY, or out of stream ids) closes once its last request ends.
    private func closeIfDrained() {
        if !isUsable && open.isEmpty { context?.close(promise: nil) }
    }

    /// Fails the requests past their deadline and resets their streams.
    private func expire() {
        let now = NIODeadline.now()
        var reset = false
        for (id, stream) in open where stream.deadline <= now {
            open.removeValue(forKey: id)
            stream.promise.fail(APNsClientError.timeout)
            context?.write(wrapOutboundOut(HTTP2Frame(streamID: HTTP2StreamID(id), payload: .rstStream(.cancel))), promise: nil)
            reset = true
        }
        if reset {
            context?.flush()
            closeIfDrained()
        }
    }

    private func retire() {
        guard usable.exchange(false, ordering: .relaxed) else { return }
        onClose?()
    }

    private func failAll(_ error: any Error) {
        retire()
        let streams = open
        open = [:]
        for stream in streams.values { stream.promise.fail(error) }
    }
}
