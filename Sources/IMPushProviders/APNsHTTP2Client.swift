import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// An HTTP/2 client for APNs that speaks the protocol's frames itself: up to `connections` TLS
/// connections per host and TLS identity, requests written as HEADERS and DATA frames into one
/// buffer per event loop tick (one TLS record run and one `write` for many pushes), answers
/// matched by stream id in a dictionary.
///
/// Why several connections: APNs lets a connection have at most 1,000 streams open (its SETTINGS),
/// so one connection sends at most 1,000 pushes per round trip (with 100 ms to Apple, 10,000 a
/// second). A call with many requests is split evenly over the connections (opened as needed: a
/// call of fewer than `requestsPerConnection` requests uses one), each with its own 1,000; calls
/// in flight at once start on the connections after those the calls before them use, so a sender
/// with several small batches in flight spreads them over the connections too, while one call at
/// a time (a quiet app) keeps to the first.
///
/// Why not NIOHTTP2Handler: with a thousand streams open, each answer cost it a search and a
/// removal from the middle of sorted stream lists (two of them, each shifting the rest with a
/// retain per entry), a stream state machine per request and an HPACK encoder that indexes every
/// field; that was more than a third of the server's CPU per push. APNs needs little of HTTP/2:
/// POSTs with small bodies, one answer each. So a request's header block is written by whoever
/// prepares it, as literals without indexing (`HPACKLiteralBlock`: it changes no table, so it
/// depends on no connection state), and the connection keeps only what RFC 9113 requires of a
/// client: the peer's SETTINGS (concurrency, initial window, frame size) acknowledged and obeyed,
/// the connection's send window (a request waits until its whole body fits), the receive window
/// given back, PING answered, GOAWAY and RST_STREAM honoured, answers' header blocks decoded by
/// NIOHPACK's decoder (the peer's table must be followed even for answers nobody waits for).
///
/// A request not answered by its deadline fails with `APNsClientError.timeout` (its stream is
/// reset). A connection that stops taking requests (GOAWAY, its stream ids used up, closed by the
/// peer) hands the requests it never sent, and those a GOAWAY says were not processed, to the next
/// connection (at most `maxHandovers` times each); the requests it had sent fail, and the next
/// request opens a new one.
final class APNsHTTP2Client: Sendable {
    struct Response: Sendable {
        var status: Int
        var headers: HPACKHeaders
        var body: ByteBuffer
    }

    /// One POST: its header block (`HPACKLiteralBlock`, pseudo-headers first), body and deadline.
    struct Post: Sendable {
        var headerBlock: ByteBuffer
        var body: ByteBuffer
        var deadline: NIODeadline
    }

    private let host: String
    private let port: Int
    /// The `:authority` of requests to this endpoint.
    let authority: String
    private let tls: NIOSSLContext
    /// Where every connection of this client lives (so that a call's answers, coming on several
    /// connections, are gathered on one thread).
    private let eventLoop: any EventLoop
    private let connectTimeout: TimeAmount
    /// Connections at most.
    let connections: Int
    private let state: Mutex<State>

    /// Requests a call has per connection it uses, at least: a call of fewer goes on one.
    static let requestsPerConnection = 200

    private struct State {
        /// Each slot's connection (opening or open; nil: none yet, or it ended).
        var slots: [Slot?]
        /// Connections opened so far (each is numbered with the count it made).
        var opened = 0
        var closed = false
        /// `post` calls waiting for their answers.
        var callsInFlight = 0
    }

    private struct Slot {
        var connection: EventLoopFuture<APNsConnectionHandler>
        var number: Int
    }

    init(baseURL: String, tls configuration: TLSConfiguration, eventLoop: any EventLoop, connectTimeout: TimeAmount,
         connections: Int) throws {
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
        self.connections = max(1, connections)
        state = Mutex(State(slots: Array(repeating: nil, count: self.connections)))
    }

    /// Sends every POST (in one turn of the event loop, as far as the peer's concurrency and
    /// window allow; the rest as streams end), split evenly over as many connections as the call
    /// has `requestsPerConnection`, and waits for all the answers at once; each gets its response
    /// or the error that ended it, in `posts`' order.
    func post(_ posts: [Post]) async -> [Result<Response, any Error>] {
        guard !posts.isEmpty else { return [] }
        let used = min(connections, max(1, posts.count / Self.requestsPerConnection))
        // The slots after those of the calls already in flight (each taking as many as this one).
        let first = state.withLock { state in
            defer { state.callsInFlight += 1 }
            return state.callsInFlight * used % connections
        }
        defer { state.withLock { $0.callsInFlight -= 1 } }
        // The requests of the i-th slot used: posts[bounds[i] ..< bounds[i + 1]].
        let bounds = (0...used).map { $0 * posts.count / used }
        // Opened (when they must be) at once, then awaited.
        let opening = (0..<used).map { connection((first + $0) % connections) }
        var handlers: [Result<APNsConnectionHandler, any Error>] = []
        for connection in opening {
            do {
                handlers.append(.success(try await connection.get()))
            } catch {
                handlers.append(.failure(error))
            }
        }
        let eventLoop = self.eventLoop
        return await withCheckedContinuation { continuation in
            let batch = APNsBatch(count: posts.count) { continuation.resume(returning: $0) }
            // The batch is completed on the event loop only (every connection of this client is there).
            eventLoop.execute {
                for (slot, handler) in handlers.enumerated() {
                    let range = bounds[slot]..<bounds[slot + 1]
                    switch handler {
                    case .success(let handler):
                        handler.submit(posts[range], batch, firstIndex: range.lowerBound)
                    case .failure(let error):
                        for index in range { batch.complete(index, .failure(error)) }
                    }
                }
            }
        }
    }

    /// Closes the connections; later requests fail.
    func close() async {
        let channels = state.withLock { state -> [EventLoopFuture<APNsConnectionHandler>] in
            state.closed = true
            defer { state.slots = state.slots.map { _ in nil } }
            return state.slots.compactMap { $0?.connection }
        }
        for channel in channels {
            guard let handler = try? await channel.get() else { continue }
            try? await handler.close(on: eventLoop).get()
        }
    }

    /// The slot's open connection, or a new one when it has none (or it closed, or ran out of
    /// stream ids). The handler is told where to report its end and hand its unsent requests
    /// before the future gives it to anyone, so no request reaches a handler that could not pass
    /// it on.
    private func connection(_ slot: Int) -> EventLoopFuture<APNsConnectionHandler> {
        state.withLock { state in
            if state.closed { return eventLoop.makeFailedFuture(APNsClientError.closed) }
            if let open = state.slots[slot] { return open.connection }
            state.opened += 1
            let number = state.opened
            // NIO's connect never completes within the call (it goes through the event loop), so
            // these callbacks, which take the lock, never run under it.
            let opened = connect().map { [weak self] handler -> APNsConnectionHandler in
                handler.onClose = { [weak self] in self?.forget(slot, number) }
                handler.handOver = { [weak self] requests in
                    guard let self else { return APNsConnectionHandler.fail(requests, APNsClientError.closed) }
                    self.handOver(requests, slot: slot)
                }
                if !handler.isUsable { self?.forget(slot, number) }
                return handler
            }
            opened.whenFailure { [weak self] _ in self?.forget(slot, number) }
            state.slots[slot] = Slot(connection: opened, number: number)
            return opened
        }
    }

    /// Requests a connection let go unsent go on the next connection of its slot (on this
    /// client's event loop, where every connection of it lives); after `close()` they fail.
    private func handOver(_ requests: [APNsConnectionHandler.Waiting], slot: Int) {
        connection(slot).whenComplete { [weak self] result in
            switch result {
            case .success(let handler) where self?.state.withLock({ !$0.closed }) ?? false:
                handler.take(requests)
            case .success:
                APNsConnectionHandler.fail(requests, APNsClientError.closed)
            case .failure(let error):
                APNsConnectionHandler.fail(requests, error)
            }
        }
    }

    private func forget(_ slot: Int, _ number: Int) {
        state.withLock { state in
            if state.slots[slot]?.number == number { state.slots[slot] = nil }
        }
    }

    private func connect() -> EventLoopFuture<APNsConnectionHandler> {
        let tls = self.tls
        let host = self.host
        let handshakeTimeout = connectTimeout
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                // One handler per channel: a connect may try several addresses, each its own channel.
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: host.first?.isNumber == true ? nil : host))
                    try sync.addHandler(APNsConnectionHandler(handshakeTimeout: handshakeTimeout))
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.handler(type: APNsConnectionHandler.self)
                }.flatMap { $0.ready }
            }
    }
}

enum APNsClientError: Error, Equatable {
    case badURL(String)
    case timeout
    case connectionClosed
    case streamReset
    /// The body is larger than the peer's stream window: it could never be sent.
    case bodyTooLarge
    case closed
    /// The server did not agree to HTTP/2 (ALPN), so it is no APNs.
    case notHTTP2
}

/// The answers of one `post` call, filled in on the connection's event loop as they come; the
/// last one hands them all over.
final class APNsBatch: @unchecked Sendable {
    // @unchecked: used on the connection's event loop only.
    private var results: [Result<APNsHTTP2Client.Response, any Error>?]
    private var remaining: Int
    private let done: ([Result<APNsHTTP2Client.Response, any Error>]) -> Void

    init(count: Int, done: @escaping ([Result<APNsHTTP2Client.Response, any Error>]) -> Void) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.done = done
    }

    func complete(_ index: Int, _ result: Result<APNsHTTP2Client.Response, any Error>) {
        guard results[index] == nil else { return }
        results[index] = result
        remaining -= 1
        if remaining == 0 { done(results.map { $0! }) }
    }
}

/// One connection's HTTP/2, between NIOSSL and the client: writes requests as frames, flushes once
/// per event loop tick, reads answers' frames and matches them to requests by stream id.
/// Confined to its channel's event loop.
final class APNsConnectionHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Never
    typealias OutboundOut = ByteBuffer

    /// A request not on the wire yet.
    struct Waiting {
        var post: APNsHTTP2Client.Post
        var batch: APNsBatch
        var index: Int
        /// How many connections have handed it over already.
        var handovers = 0
    }

    private struct Open {
        /// Kept for a GOAWAY that says the stream was not processed: it goes on the next connection.
        var request: Waiting
        var status: Int?
        var headers = HPACKHeaders()
        var body: ByteBuffer?
    }

    /// A header block whose CONTINUATION frames are still to come.
    private struct PartialHeaders {
        var stream: UInt32
        var block: ByteBuffer
        var endStream: Bool
    }

    /// The last client stream id HTTP/2 allows (2^31 - 1); the connection retires before it.
    private static let lastStreamId: UInt32 = UInt32(Int32.max) - 2
    /// What this side asks of the peer: no server push, room for answers' bodies.
    private static let localSettings: [(HTTP2Wire.Setting, UInt32)] = [
        (.enablePush, 0), (.maxConcurrentStreams, 100), (.initialWindowSize, 1 << 20),
    ]
    /// Receive window given back to the peer once this much DATA has arrived unacknowledged.
    private static let windowRefill = 32_768
    /// How many times a request may be handed to another connection before it fails.
    static let maxHandovers = 3

    private var context: ChannelHandlerContext?
    private var inbound: ByteBuffer?
    private var outbound: ByteBuffer?
    private var flushPending = false
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var partial: PartialHeaders?

    // What the peer's SETTINGS said (RFC 9113 §6.5.2 initial values until then).
    private var peerMaxConcurrentStreams = 100
    private var peerInitialWindow = HTTP2Wire.defaultWindow
    private var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    private var peerSettingsSeen = false

    private var connectionSendWindow = HTTP2Wire.defaultWindow
    private var unacknowledgedBytes = 0
    private var nextStreamId: UInt32 = 1
    private var open: [UInt32: Open] = [:]
    private var waiting = CircularBuffer<Waiting>()
    private var sweep: RepeatedTask?

    /// The handshake's promise until it is kept or broken, and its future.
    private let readyPromise = Mutex<EventLoopPromise<APNsConnectionHandler>?>(nil)
    private let readyFuture = Mutex<EventLoopFuture<APNsConnectionHandler>?>(nil)
    /// Told once when the connection stops taking requests (the client then opens a new one).
    var onClose: (@Sendable () -> Void)? {
        get { closeCallback.withLock { $0 } }
        set { closeCallback.withLock { $0 = newValue } }
    }
    private let closeCallback = Mutex<(@Sendable () -> Void)?>(nil)
    /// Takes the requests this connection lets go unsent (set by the client, on the event loop).
    var handOver: (([Waiting]) -> Void)?
    private let usable = Atomic<Bool>(true)
    private let handshakeTimeout: TimeAmount
    private var handshakeDeadline: Scheduled<Void>?

    init(handshakeTimeout: TimeAmount) {
        self.handshakeTimeout = handshakeTimeout
    }

    /// Whether new requests may go on this connection.
    var isUsable: Bool { usable.load(ordering: .relaxed) }

    /// Succeeds when the TLS handshake agreed on HTTP/2 and the peer's first SETTINGS arrived.
    var ready: EventLoopFuture<APNsConnectionHandler> {
        readyFuture.withLock { $0 } ?? MultiThreadedEventLoopGroup.singleton.any().makeFailedFuture(APNsClientError.connectionClosed)
    }

    private func takeReadyPromise() -> EventLoopPromise<APNsConnectionHandler>? {
        readyPromise.withLock { promise in
            defer { promise = nil }
            return promise
        }
    }

    // MARK: the channel

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        outbound = context.channel.allocator.buffer(capacity: 16_384)
        let promise = context.eventLoop.makePromise(of: APNsConnectionHandler.self)
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
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event {
            guard negotiated == "h2" else {
                handshakeDeadline?.cancel()
                takeReadyPromise()?.fail(APNsClientError.notHTTP2)
                failAll(APNsClientError.notHTTP2)
                context.close(promise: nil)
                return
            }
            // The connection preface, then this side's SETTINGS; ready once the peer's arrive.
            outbound?.writeBytes(HTTP2Wire.preface)
            write { HTTP2Wire.writeSettings(&$0, Self.localSettings) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var held = inbound, held.readableBytes > 0 {
            held.writeBuffer(&bytes)
            inbound = nil
            bytes = held
        }
        while let header = HTTP2Wire.peekFrameHeader(bytes) {
            guard header.length <= HTTP2Wire.defaultMaxFrameSize else {
                return connectionError(.frameSizeError)
            }
            guard bytes.readableBytes >= HTTP2Wire.frameHeaderLength + header.length else { break }
            bytes.moveReaderIndex(forwardBy: HTTP2Wire.frameHeaderLength)
            var payload = bytes.readSlice(length: header.length)!
            guard frame(header, &payload) else { return }
        }
        if bytes.readableBytes > 0 {
            bytes.discardReadBytes()
            inbound = bytes
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(APNsClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
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
        // The closures and the ready future hold this handler (through the client's future of it).
        onClose = nil
        handOver = nil
        readyFuture.withLock { $0 = nil }
    }

    func close(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute { [self] in
            retire()
            if let context { context.close(promise: promise) } else { promise.succeed() }
        }
        return promise.futureResult
    }

    // MARK: requests

    /// Queues `posts`, whose answers are `batch`'s from `firstIndex` on.
    func submit(_ posts: ArraySlice<APNsHTTP2Client.Post>, _ batch: APNsBatch, firstIndex: Int) {
        take(posts.enumerated().map { Waiting(post: $1, batch: batch, index: firstIndex + $0) })
    }

    /// Queues requests (new ones, or those another connection handed over); on the event loop.
    func take(_ requests: [Waiting]) {
        guard context != nil, isUsable else {
            letGo(requests)
            return
        }
        // A handed-over request waited for this connection's handshake: one past its deadline
        // fails here rather than go out to be reset (and perhaps delivered, then tried again).
        let now = NIODeadline.now()
        for request in requests {
            if request.post.deadline <= now {
                request.batch.complete(request.index, .failure(APNsClientError.timeout))
            } else {
                waiting.append(request)
            }
        }
        startWaiting()
    }

    static func fail(_ requests: [Waiting], _ error: any Error) {
        for request in requests { request.batch.complete(request.index, .failure(error)) }
    }

    /// Requests that never reached the peer: to the next connection while they may go on, else failed.
    private func letGo(_ requests: [Waiting]) {
        guard !requests.isEmpty else { return }
        var moving: [Waiting] = []
        moving.reserveCapacity(requests.count)
        let now = NIODeadline.now()
        for var request in requests {
            if request.post.deadline <= now {
                request.batch.complete(request.index, .failure(APNsClientError.timeout))
            } else if request.handovers < Self.maxHandovers, handOver != nil {
                request.handovers += 1
                moving.append(request)
            } else {
                request.batch.complete(request.index, .failure(APNsClientError.connectionClosed))
            }
        }
        if !moving.isEmpty, let handOver { handOver(moving) }
    }

    /// Opens streams for waiting requests while the peer's concurrency and the connection's send
    /// window allow: a request's HEADERS and whole body go out together.
    private func startWaiting() {
        while let next = waiting.first, open.count < peerMaxConcurrentStreams, isUsable {
            let length = next.post.body.readableBytes
            // A body past the stream's window would wait for ever (stream windows are never
            // waited on), holding up every request behind it: it fails at once.
            if length > peerInitialWindow {
                waiting.removeFirst()
                next.batch.complete(next.index, .failure(APNsClientError.bodyTooLarge))
                continue
            }
            guard length <= connectionSendWindow else { return }
            waiting.removeFirst()
            let id = nextStreamId
            nextStreamId += 2
            write { buffer in
                self.writeHeaders(&buffer, stream: id, block: next.post.headerBlock, endStream: length == 0)
                if length > 0 { self.writeData(&buffer, stream: id, body: next.post.body) }
            }
            connectionSendWindow -= length
            open[id] = Open(request: next)
            if nextStreamId >= Self.lastStreamId {
                // Out of stream ids: what waits goes on a new connection; this one ends with its streams.
                retire()
                handOverWaiting()
                closeIfDrained()
            }
        }
    }

    /// HEADERS, and CONTINUATION frames when the block is larger than the peer takes in one frame.
    private func writeHeaders(_ buffer: inout ByteBuffer, stream: UInt32, block: ByteBuffer, endStream: Bool) {
        var block = block
        var first = true
        repeat {
            let length = min(block.readableBytes, peerMaxFrameSize)
            var slice = block.readSlice(length: length)!
            let last = block.readableBytes == 0
            let flags = (last ? HTTP2Wire.Flag.endHeaders : 0) | (first && endStream ? HTTP2Wire.Flag.endStream : 0)
            HTTP2Wire.writeFrameHeader(&buffer, length: length, type: first ? .headers : .continuation, flags: flags, stream: stream)
            buffer.writeBuffer(&slice)
            first = false
        } while block.readableBytes > 0
    }

    private func writeData(_ buffer: inout ByteBuffer, stream: UInt32, body: ByteBuffer) {
        var body = body
        while body.readableBytes > 0 {
            let length = min(body.readableBytes, peerMaxFrameSize)
            var slice = body.readSlice(length: length)!
            HTTP2Wire.writeFrameHeader(&buffer, length: length, type: .data,
                                       flags: body.readableBytes == 0 ? HTTP2Wire.Flag.endStream : 0, stream: stream)
            buffer.writeBuffer(&slice)
        }
    }

    /// Writes into this tick's outbound buffer and has it flushed at the tick's end.
    private func write(_ body: (inout ByteBuffer) -> Void) {
        guard var buffer = outbound else { return }
        outbound = nil
        body(&buffer)
        outbound = buffer
        guard !flushPending, let context else { return }
        flushPending = true
        context.eventLoop.execute { [self] in
            flushPending = false
            guard let context = self.context, let buffer = outbound, buffer.readableBytes > 0 else { return }
            outbound = context.channel.allocator.buffer(capacity: max(16_384, buffer.readableBytes))
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
    }

    // MARK: frames

    /// Handles one frame; false when it ended the connection.
    private func frame(_ header: HTTP2Wire.FrameHeader, _ payload: inout ByteBuffer) -> Bool {
        if let partial, header.type != HTTP2Wire.FrameType.continuation.rawValue || header.stream != partial.stream {
            connectionError(.protocolError)
            return false
        }
        switch HTTP2Wire.FrameType(rawValue: header.type) {
        case .data:
            guard header.stream != 0 else { connectionError(.protocolError); return false }
            // Padding counts against the window too.
            unacknowledgedBytes += header.length
            if unacknowledgedBytes >= Self.windowRefill {
                let increment = unacknowledgedBytes
                unacknowledgedBytes = 0
                write { HTTP2Wire.writeWindowUpdate(&$0, stream: 0, increment: increment) }
            }
            guard var body = unpadded(header, &payload) else { connectionError(.protocolError); return false }
            if var stream = open[header.stream] {
                if stream.body == nil { stream.body = body } else { stream.body!.writeBuffer(&body) }
                open[header.stream] = stream
            }
            if header.flags & HTTP2Wire.Flag.endStream != 0 { finish(header.stream) }
        case .headers:
            guard header.stream != 0, var fragment = unpadded(header, &payload) else { connectionError(.protocolError); return false }
            if header.flags & HTTP2Wire.Flag.priority != 0 {
                guard fragment.readableBytes >= 5 else { connectionError(.protocolError); return false }
                fragment.moveReaderIndex(forwardBy: 5)
            }
            let endStream = header.flags & HTTP2Wire.Flag.endStream != 0
            if header.flags & HTTP2Wire.Flag.endHeaders != 0 {
                return headerBlock(&fragment, stream: header.stream, endStream: endStream)
            }
            partial = PartialHeaders(stream: header.stream, block: fragment, endStream: endStream)
        case .continuation:
            guard var pending = partial else { connectionError(.protocolError); return false }
            pending.block.writeBuffer(&payload)
            guard pending.block.readableBytes <= 262_144 else { connectionError(.protocolError); return false }
            if header.flags & HTTP2Wire.Flag.endHeaders != 0 {
                partial = nil
                return headerBlock(&pending.block, stream: pending.stream, endStream: pending.endStream)
            }
            partial = pending
        case .rstStream:
            guard header.stream != 0 else { connectionError(.protocolError); return false }
            guard header.length == 4 else { connectionError(.frameSizeError); return false }
            if let stream = open.removeValue(forKey: header.stream) {
                stream.request.batch.complete(stream.request.index, .failure(APNsClientError.streamReset))
                startWaiting()
                closeIfDrained()
            }
        case .settings:
            guard header.stream == 0 else { connectionError(.protocolError); return false }
            if header.flags & HTTP2Wire.Flag.ack != 0 {
                guard header.length == 0 else { connectionError(.frameSizeError); return false }
                return true
            }
            guard header.length % 6 == 0 else { connectionError(.frameSizeError); return false }
            return settings(&payload)
        case .pushPromise:
            // This side disabled server push.
            connectionError(.protocolError)
            return false
        case .ping:
            guard header.stream == 0 else { connectionError(.protocolError); return false }
            guard header.length == 8 else { connectionError(.frameSizeError); return false }
            if header.flags & HTTP2Wire.Flag.ack == 0 {
                write { buffer in
                    HTTP2Wire.writeFrameHeader(&buffer, length: 8, type: .ping, flags: HTTP2Wire.Flag.ack, stream: 0)
                    buffer.writeBuffer(&payload)
                }
            }
        case .goAway:
            guard header.stream == 0, header.length >= 8, let last = payload.readInteger(as: UInt32.self) else {
                connectionError(.protocolError)
                return false
            }
            goAway(lastStream: last & 0x7FFF_FFFF)
        case .windowUpdate:
            guard header.length == 4, let value = payload.readInteger(as: UInt32.self) else { connectionError(.frameSizeError); return false }
            let increment = Int(value & 0x7FFF_FFFF)
            // Streams send their whole body when they open, so only the connection's window matters here.
            guard header.stream == 0 else { return true }
            guard increment > 0, connectionSendWindow + increment <= HTTP2Wire.maxWindow else {
                connectionError(increment == 0 ? .protocolError : .flowControlError)
                return false
            }
            connectionSendWindow += increment
            startWaiting()
        case .priority, nil:
            break   // PRIORITY is advice; unknown frame types are ignored (RFC 9113 §4.1)
        }
        return true
    }

    /// The frame's payload without its padding; nil when the padding claims more than there is.
    private func unpadded(_ header: HTTP2Wire.FrameHeader, _ payload: inout ByteBuffer) -> ByteBuffer? {
        guard header.flags & HTTP2Wire.Flag.padded != 0 else { return payload }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else { return nil }
        return payload.readSlice(length: payload.readableBytes - Int(padding))
    }

    /// A whole header block of an answer (or trailers): decoded whatever stream it is for, since
    /// the peer's HPACK table goes on from it.
    private func headerBlock(_ block: inout ByteBuffer, stream id: UInt32, endStream: Bool) -> Bool {
        let headers: HPACKHeaders
        do {
            headers = try decoder.decodeHeaders(from: &block)
        } catch {
            connectionError(.compressionError)
            return false
        }
        if var stream = open[id], stream.status == nil {
            stream.status = headers.first(name: ":status").flatMap { Int($0) }
            for (name, value, _) in headers where !name.hasPrefix(":") { stream.headers.add(name: name, value: value) }
            open[id] = stream
        }
        if endStream { finish(id) }
        return true
    }

    private func settings(_ payload: inout ByteBuffer) -> Bool {
        while let key = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch HTTP2Wire.Setting(rawValue: key) {
            case .maxConcurrentStreams:
                peerMaxConcurrentStreams = Int(value)
            case .initialWindowSize:
                guard value <= UInt32(HTTP2Wire.maxWindow) else { connectionError(.flowControlError); return false }
                peerInitialWindow = Int(value)
            case .maxFrameSize:
                guard value >= 16_384, value <= 16_777_215 else { connectionError(.protocolError); return false }
                peerMaxFrameSize = Int(value)
            case .enablePush where value > 1:
                connectionError(.protocolError)
                return false
            default:
                break   // the header table size does not matter to literals without indexing
            }
        }
        write { HTTP2Wire.writeFrameHeader(&$0, length: 0, type: .settings, flags: HTTP2Wire.Flag.ack, stream: 0) }
        if !peerSettingsSeen {
            peerSettingsSeen = true
            handshakeDeadline?.cancel()
            takeReadyPromise()?.succeed(self)
        }
        startWaiting()
        return true
    }

    /// GOAWAY: no new streams here. Those past `lastStream` were not processed (RFC 9113 §6.8):
    /// they go on a new connection, before the waiting ones, in the order they were opened.
    private func goAway(lastStream: UInt32) {
        retire()
        var unprocessed: [(UInt32, Waiting)] = []
        for (id, stream) in open where id > lastStream { unprocessed.append((id, stream.request)) }
        for (id, _) in unprocessed { open[id] = nil }
        unprocessed.sort { $0.0 < $1.0 }
        for (_, request) in unprocessed.reversed() { waiting.prepend(request) }
        handOverWaiting()
        closeIfDrained()
    }

    private func finish(_ id: UInt32) {
        guard let stream = open.removeValue(forKey: id) else { return }
        stream.request.batch.complete(stream.request.index, .success(APNsHTTP2Client.Response(status: stream.status ?? 0, headers: stream.headers,
                                                                               body: stream.body ?? ByteBuffer())))
        startWaiting()
        closeIfDrained()
    }

    /// A retired connection (GOAWAY, or out of stream ids) closes once its last request ends.
    private func closeIfDrained() {
        if !isUsable && open.isEmpty && waiting.isEmpty { context?.close(promise: nil) }
    }

    /// Fails the requests past their deadline; open ones have their streams reset.
    private func expire() {
        let now = NIODeadline.now()
        var reset = false
        for (id, stream) in open where stream.request.post.deadline <= now {
            open.removeValue(forKey: id)
            stream.request.batch.complete(stream.request.index, .failure(APNsClientError.timeout))
            write { HTTP2Wire.writeRstStream(&$0, stream: id, code: .cancel) }
            reset = true
        }
        if waiting.contains(where: { $0.post.deadline <= now }) {
            var kept = CircularBuffer<Waiting>(initialCapacity: waiting.count)
            for request in waiting {
                if request.post.deadline <= now {
                    request.batch.complete(request.index, .failure(APNsClientError.timeout))
                } else {
                    kept.append(request)
                }
            }
            waiting = kept
        }
        if reset {
            startWaiting()
            closeIfDrained()
        }
    }

    /// A connection error (RFC 9113 §5.4.1): GOAWAY with its code, then the connection closes.
    private func connectionError(_ code: HTTP2Wire.ErrorCode) {
        guard let context else { return }
        write { HTTP2Wire.writeGoAway(&$0, lastStream: 0, code: code) }
        if let buffer = outbound, buffer.readableBytes > 0 {
            outbound = nil
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        failAll(APNsClientError.connectionClosed)
        context.close(promise: nil)
    }

    private func retire() {
        guard usable.exchange(false, ordering: .relaxed) else { return }
        onClose?()
    }

    /// The waiting requests, never sent, go to the next connection (the client's `handOver`).
    private func handOverWaiting() {
        let requests = Array(waiting)
        waiting.removeAll()
        letGo(requests)
    }

    /// The connection is gone: its open requests fail (the peer may have acted on them), the
    /// waiting ones go on.
    private func failAll(_ error: any Error) {
        retire()
        let streams = open
        open = [:]
        for stream in streams.values { stream.request.batch.complete(stream.request.index, .failure(error)) }
        handOverWaiting()
    }
}
