import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import IMCore
import IMStore
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The first handler of every accepted connection, before any HTTP parsing:
///
/// - refuses a connection past its address's limit (`AddressConnections`), or once a graceful
///   shutdown has begun (`ServerShutdown`), with a 503 and closes it;
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
    private let shutdown: ServerShutdown
    private let firstRequestTimeout: TimeAmount
    private var address: String?
    private var deadline: Scheduled<Void>?
    /// The gateway took the connection over (a WebSocket session).
    private var webSocket = false
    /// Refused (past its address's limit, or during a shutdown): nothing it sends is read any more.
    private var refused = false

    init(addresses: AddressConnections, shutdown: ServerShutdown, firstRequestTimeout: TimeAmount) {
        self.addresses = addresses
        self.shutdown = shutdown
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
        guard address == nil, deadline == nil, !refused else { return }
        if shutdown.isStopping {
            refused = true
            Self.refuse(context, status: "503 Service Unavailable", code: .serverUnavailable, message: ServerShutdown.refusal.message)
            return
        }
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
        context.writeAndFlush(NIOAny(buffer)).assumeIsolated().whenComplete { _ in closeAfterAnswer(context) }
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
