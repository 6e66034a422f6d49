import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import IMCore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The connections each source address holds open, against `maxConnectionsPerAddress`.
final class AddressConnections: Sendable {
    private let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection from `address`; false (and nothing counted) when the address
    /// already holds `limit` connections.
    func open(_ address: String) -> Bool {
        guard limit > 0 else { return true }
        return counts.withLock { counts in
            let current = counts[address, default: 0]
            guard current < limit else { return false }
            counts[address] = current + 1
            return true
        }
    }

    func close(_ address: String) {
        guard limit > 0 else { return }
        counts.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    /// Connections open from `address` (for tests and the console).
    func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }

    /// What connections are counted under: the IPv4 address, or the /64 network of an IPv6 one
    /// (one IPv6 host commonly holds a whole /64, so its single addresses would be no limit).
    static func key(of address: SocketAddress?) -> String {
        guard let address else { return "unknown" }
        if case .v6(let v6) = address {
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // An IPv4-mapped address (::ffff:a.b.c.d) is its IPv4 address.
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            return bytes[0..<8].map { String(format: "%02x", $0) }.joined() + "::/64"
        }
        return address.ipAddress ?? "unknown"
    }
}

/// The first handler of every accepted connection, before any HTTP parsing:
///
/// - refuses a connection past its address's limit (`AddressConnections`) with a 503 and closes it;
/// - closes a connection that has not presented a whole first request within
///   `firstRequestTimeout` (a trickled or half-sent request head holds nothing for long). Once the
///   first request has arrived, HTTP connections are watched by Hummingbird's idle timeout and
///   `HTTPRequestTimeoutHandler`, and WebSocket sessions by the gateway (handshake and heartbeat
///   timeouts).
///
/// Bytes pass through unchanged. Used on the channel's event loop only.
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let addresses: AddressConnections
    private let firstRequestTimeout: TimeAmount
    private var address: String?
    private var deadline: Scheduled<Void>?
    /// The gateway took the connection over (a WebSocket session).
    private var webSocket = false
    /// Refused (past its address's limit): nothing it sends is read any more.
    private var refused = false

    init(addresses: AddressConnections, firstRequestTimeout: TimeAmount) {
        self.addresses = addresses
        self.firstRequestTimeout = firstRequestTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard address == nil, deadline == nil else { return }
        let remote = AddressConnections.key(of: context.channel.remoteAddress)
        guard addresses.open(remote) else {
            refused = true
            Self.refuse(context, status: "503 Service Unavailable", code: .apiRateLimited,
                        message: "too many connections from \(AddressConnections.key(of: context.channel.remoteAddress)): close some before opening more")
            return
        }
        address = remote
        let loop = context.eventLoop.assumeIsolated()
        deadline = loop.scheduleTask(in: firstRequestTimeout) { [self] in
            deadline = nil
            // A first request that arrived put Hummingbird's HTTP handlers (and ours) in the pipeline.
            let hasRequest = (try? context.pipeline.syncOperations.handler(type: HTTPRequestTimeoutHandler.self)) != nil
            if !hasRequest && !webSocket { context.close(promise: nil) }
        }
    }

    /// The gateway has the connection (a WebSocket upgrade happened): its own timeouts apply.
    func enteredWebSocket() {
        webSocket = true
        deadline?.cancel()
        deadline = nil
    }

    /// A refused connection's requests are never parsed, so none of them runs.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    private func release() {
        deadline?.cancel()
        deadline = nil
        if let address {
            addresses.close(address)
            self.address = nil
        }
    }

    /// Answers with a JSON error in RongCloud's envelope, written as raw HTTP/1.1 (no request was
    /// parsed yet), and closes the connection.
    static func refuse(_ context: ChannelHandlerContext, status: String, code: ErrorCode, message: String) {
        let body = (try? JSONSerialization.data(withJSONObject: ["code": code.rawValue, "errorMessage": message], options: [.sortedKeys])) ?? Data()
        var buffer = context.channel.allocator.buffer(capacity: body.count + 160)
        buffer.writeString("HTTP/1.1 \(status)\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n")
        buffer.writeBytes(body)
        context.writeAndFlush(NIOAny(buffer)).whenComplete { _ in closeAfterAnswer(context) }
    }
}

/// Ends a connection the server has answered without reading all the client sent: the write side
/// first (the answer is followed by a FIN), the rest a second later. Closing at once would make the
/// kernel answer the unread bytes with a reset, which can discard the answer at the client.
func closeAfterAnswer(_ context: ChannelHandlerContext) {
    context.close(mode: .output, promise: nil)
    let loop = context.eventLoop.assumeIsolated()
    loop.scheduleTask(in: .seconds(1)) { context.close(promise: nil) }
}

/// Bounds the time a request may take to arrive: from its head to the end of its body, at most
/// `timeout`. A request past it is answered 408 (when no response has started) and its connection
/// closed, whatever route it was for, so a body trickled a byte at a time holds nothing for long.
/// (Hummingbird's idle timeout restarts on every body chunk; this one does not.)
final class HTTPRequestTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var responded = false
    /// The request ran out of time: the rest of it is never read, so its handler never runs.
    private var expired = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !expired else { return }
        switch unwrapInboundIn(data) {
        case .head:
            responded = false
            deadline?.cancel()
            let loop = context.eventLoop.assumeIsolated()
            let timeout = self.timeout
            deadline = loop.scheduleTask(in: timeout) { [self] in
                deadline = nil
                expire(context, after: timeout)
            }
        case .body:
            break
        case .end:
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head = unwrapOutboundIn(data) { responded = true }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    private func expire(_ context: ChannelHandlerContext, after timeout: TimeAmount) {
        expired = true
        guard !responded else {
            context.close(promise: nil)
            return
        }
        responded = true
        let seconds = timeout.nanoseconds / 1_000_000_000
        let body = (try? JSONSerialization.data(withJSONObject: [
            "code": ErrorCode.apiNoPostData.rawValue,
            "errorMessage": "the request did not arrive within \(seconds) s: send the whole body at once",
        ], options: [.sortedKeys])) ?? Data()
        let head = HTTPResponse(status: .requestTimeout, headerFields: [
            .contentType: "application/json; charset=utf-8", .connection: "close", .contentLength: "\(body.count)",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in closeAfterAnswer(context) }
    }
}

/// Hummingbird's HTTP/1 + WebSocket child channel with `ConnectionGuardHandler` in front.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value

    let inner: Inner
    let addresses: AddressConnections
    let firstRequestTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuardHandler(addresses: addresses, firstRequestTimeout: firstRequestTimeout))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension Channel {
    /// Tells the connection's guard that the gateway has taken the connection over.
    func markWebSocketSession() {
        eventLoop.execute {
            try? self.pipeline.syncOperations.handler(type: ConnectionGuardHandler.self).enteredWebSocket()
        }
    }
}
