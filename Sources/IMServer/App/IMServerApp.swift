import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import IMCore
import IMStore
import IMWire
import Logging
import NIOCore
import ServiceLifecycle

/// The running server: Server API and client gateway on one HTTP port.
public struct IMServerApp: Sendable {
    public let core: ServerCore

    public init(core: ServerCore) {
        self.core = core
    }

    /// Connections the kernel queues before the server accepts them. Hummingbird's default, 256,
    /// overflows when a few hundred clients (re)connect at once: the dropped SYNs are retried after
    /// a second. Linux caps the value at net.core.somaxconn (4096 by default).
    static let listenBacklog = 4096

    /// Builds the Hummingbird application. `onListening` receives the bound port (useful with port 0).
    public func application(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router(context: IMRequestContext.self)
        router.add(middleware: JSONErrorMiddleware())
        router.get("/health") { _, _ in APIResponse.success(["sessions": core.registry.sessionCount]) }
        ServerAPI(core: core).register(on: router)
        let gateway = Gateway(core: core)
        let logger = core.logger
        router.ws("/ws") { inbound, outbound, context in
            await gateway.run(inbound: inbound, outbound: outbound, channel: context.requestContext.channel, logger: logger)
        }
        let config = core.config
        let wsConfig = WebSocketServerConfiguration(maxFrameSize: FrameCodec.maxFrameBytes, autoPing: .disabled,
                                                    closeTimeout: .seconds(config.network.closeTimeoutSeconds))
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [HTTPRequestTimeoutHandler(timeout: .seconds(Int64(config.network.httpRequestTimeoutSeconds)))],
            idleTimeout: .seconds(Int64(config.network.httpIdleTimeoutSeconds)))
        let webSocketResponder = router.buildResponder()
        let addresses = core.addressConnections
        // Every connection passes the guard first (per-address limit, first-request deadline).
        let server = HTTPServerBuilder { responder in
            GuardedChildChannel(
                inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                    configuration: .init(http1: http1, ws: wsConfig)),
                addresses: addresses, firstRequestTimeout: .seconds(Int64(config.network.httpIdleTimeoutSeconds)))
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(core.config.network.host, port: core.config.network.port), serverName: "imserver",
                                 backlog: Self.listenBacklog),
            services: [HeartbeatSweeper(core: core), ChatroomSweeper(core: core)],
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }
}
