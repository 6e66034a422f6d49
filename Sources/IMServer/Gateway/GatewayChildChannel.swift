import Foundation
import HTTPTypes
import HummingbirdCore
import IMCore
import IMWire
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// The server's child channel: HTTP/1 served by Hummingbird (Server API, media, console), and the
/// WebSocket upgrade on `/ws` handed to the gateway as channel handlers on the connection's event
/// loop. Hummingbird runs one task per connection to serve it; for a WebSocket that task ends as
/// soon as the upgrade is done, so an open client connection holds no task (Hummingbird's own
/// WebSocket API keeps two per connection, with their async stacks, for the connection's life).
struct GatewayChildChannel: ServerChildChannel, HTTPChannelHandler {
    enum Negotiated: Sendable {
        /// Upgraded: `GatewayConnectionHandler` has the connection.
        case webSocket
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade asked for and refused (another path, or a shutdown under way).
        case refusedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    /// The path clients connect to.
    static let path = "/ws"

    let responder: HTTPChannelHandler.Responder
    let http1: HTTP1Channel.Configuration
    let gateway: Gateway

    /// - Parameter responder: Hummingbird's, which an upgrade asked for on a connection that
    ///   already served a request never reaches: NIO upgrades only a connection's first request,
    ///   so that one is answered 307 to the same address and closed, and the client upgrades on a
    ///   new connection.
    init(responder: @escaping HTTPChannelHandler.Responder, http1: HTTP1Channel.Configuration, gateway: Gateway) {
        self.http1 = http1
        self.gateway = gateway
        self.responder = { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                return try await responder(request, writer, channel)
            }
            var location = request.uri.path
            if let query = request.uri.query { location += "?\(query)" }
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: location]))
            throw UpgradeOnUsedConnection()
        }
    }

    /// Ends a connection whose upgrade came after another request (its 307 written).
    private struct UpgradeOnUsedConnection: Error {}

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let attempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let gateway = self.gateway
            let upgrader = NIOTypedWebSocketServerUpgrader<Negotiated>(
                maxFrameSize: FrameCodec.maxFrameBytes,
                shouldUpgrade: { channel, head in
                    attempted.value = true
                    let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                    guard path == Self.path, !gateway.core.shutdown.isStopping else {
                        return channel.eventLoop.makeSucceededFuture(nil)
                    }
                    return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        // A message split into fragments arrives as one frame.
                        try channel.pipeline.syncOperations.addHandler(NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1_024,
                            maxAccumulatedFrameSize: FrameCodec.maxFrameBytes))
                        try channel.pipeline.syncOperations.addHandler(GatewayConnectionHandler(gateway: gateway))
                        return Negotiated.webSocket
                    }
                })
            let http1 = self.http1
            let upgradeConfiguration = NIOTypedHTTPServerUpgradeConfiguration<Negotiated>(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return attempted.value ? .refusedUpgrade(asyncChannel) : .http(asyncChannel)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<Negotiated>(upgradeConfiguration: upgradeConfiguration)
            configuration.enablePipelining = false
            configuration.enableErrorHandling = false
            configuration.enableResponseHeaderValidation = false
            configuration.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
            let negotiated = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            return Value(negotiated: negotiated, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .webSocket:
                // The gateway's handlers have the connection: this task ends here.
                return
            case .http(let channel):
                await handleHTTP(asyncChannel: channel, logger: logger)
            case .refusedUpgrade(let channel):
                await refuseUpgrade(channel)
            }
        } catch let error as ChannelError where error == .inputClosed {
            logger.trace("the connection closed before its first request")
        } catch {
            logger.debug("the connection's first request failed", metadata: ["error": "\(error)"])
        }
    }

    /// A WebSocket upgrade not taken: 503 with 31003 while the server shuts down, else 400 naming
    /// the path to connect to.
    private func refuseUpgrade(_ channel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        let stopping = gateway.core.shutdown.isStopping
        let error = stopping
            ? IMError(.serverUnavailable, "the server is shutting down: reconnect in a moment")
            : IMError(.invalidParameter, "WebSocket connections are taken on \(Self.path) only")
        let body = ByteBuffer(bytes: Array(#"{"code":\#(error.code.rawValue),"errorMessage":"\#(error.message)"}"#.utf8))
        let head = HTTPResponse(status: stopping ? .serviceUnavailable : .badRequest, headerFields: [
            .connection: "close", .contentType: "application/json", .contentLength: "\(body.readableBytes)",
        ])
        try? await channel.executeThenClose { _, outbound in
            try await outbound.write(contentsOf: [.head(head), .body(body), .end(nil)])
        }
    }
}
