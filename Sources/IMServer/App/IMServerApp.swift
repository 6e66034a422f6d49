import Foundation
import Hummingbird
import HummingbirdCore
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

    /// The server as one `ServiceGroup` of ServiceLifecycle services. Run it; a graceful shutdown
    /// (SIGTERM or SIGINT when `handlesSignals`, or `triggerGracefulShutdown()`) stops the services
    /// one at a time, in the reverse of their order in the group:
    ///
    /// 1. `GatewayCloser` (last in the group): new connections are refused (503), Server API
    ///    requests get 503, client requests and connects 31003; the client requests under way
    ///    finish (a send's acknowledgement, and its message's fan-out, are queued before anything
    ///    closes); every client session
    ///    is closed with WebSocket close 1001 (going away) once what is queued for it is written,
    ///    and the step ends when every gateway has ended (at most `closeTimeoutSeconds` after).
    /// 2. The Hummingbird application: stops listening, lets the Server API requests under way
    ///    finish and closes the remaining connections.
    /// 3. `HeartbeatSweeper` and `ChatroomSweeper` stop.
    /// 4. `ChatroomDeliveryService`: no room delivery starts; those running finish what their
    ///    rooms queued (chatroom history stored, its senders answered) and end.
    /// 5. `MessageLogService`: the message log is drained: everything appended is committed and
    ///    its senders answered, later appends are refused (31003).
    /// 6. `ClusterNode` (a node of a cluster only): the last deliveries are on the bus; the node
    ///    stops listening and leaves the cluster's presence table.
    /// 7. `StoreCloser` (first in the group): `closeStore` closes the store.
    ///
    /// `run()` then returns. A shutdown that takes longer than `shutdownTimeoutSeconds` is cut
    /// short: the services still running are cancelled (connections dropped; messages not yet
    /// committed are answered with an error, never acknowledged).
    ///
    /// - Parameters:
    ///   - closeStore: closes the store `core` was built on.
    ///   - sweepsIdleSessions: false leaves the dropping of silent sessions to whoever calls
    ///     `ServerCore.sweepIdleSessions()` (tests on a manual clock, where the sweeper's real-time
    ///     timer would judge sessions by a clock the test moves).
    ///   - onListening: receives the bound port (useful with port 0).
    public func serviceGroup(handlesSignals: Bool, sweepsIdleSessions: Bool = true, closeStore: @escaping @Sendable () async throws -> Void,
                             onListening: @escaping @Sendable (Int) async -> Void = { _ in }) -> ServiceGroup {
        var services: [any Service] = [
            StoreCloser(close: closeStore, logger: core.logger),
        ]
        if let cluster = core.cluster { services.append(ClusterNode(core: core, transport: cluster)) }
        // Stops after the message log has drained and before the store closes: a decision cut
        // short is made at the next start (the push cursor).
        if let push = core.push, let events = core.pushEvents { services.append(PushRunner(push: push, events: events)) }
        if let callbacks = core.callbacks, let events = core.callbackEvents {
            services.append(CallbackRunner(callbacks: callbacks, events: events))
        }
        services += [
            MessageLogService(log: core.log, logger: core.logger),
            ChatroomDeliveryService(chatrooms: core.chatrooms),
            ChatroomSweeper(core: core),
            RetentionSweeper(core: core),
            StatisticsRecorder(core: core),
            application(onListening: onListening),
            GatewayCloser(core: core),
        ]
        if sweepsIdleSessions { services.insert(HeartbeatSweeper(core: core), at: services.count - 2) }
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: handlesSignals ? [.sigterm, .sigint] : [],
                                                      logger: core.logger)
        configuration.maximumGracefulShutdownDuration = .seconds(core.config.network.shutdownTimeoutSeconds)
        return ServiceGroup(configuration: configuration)
    }

    /// Runs the server until SIGTERM or SIGINT, then shuts it down gracefully (see `serviceGroup`).
    public func run(closeStore: @escaping @Sendable () async throws -> Void, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await serviceGroup(handlesSignals: true, closeStore: closeStore, onListening: onListening).run()
    }

    /// The Hummingbird application: the HTTP server (Server API and the client gateway).
    func application(onListening: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router(context: IMRequestContext.self)
        router.add(middleware: JSONErrorMiddleware())
        router.add(middleware: ShutdownMiddleware(shutdown: core.shutdown))
        router.get("/health") { _, _ in
            APIResponse.success(["sessions": core.registry.sessionCount, "nodes": core.cluster?.liveNodes() ?? 1])
        }
        // Ready: the store answers and the server is not stopping (a balancer sends no new work otherwise).
        router.get("/ready") { _, _ in
            guard !core.shutdown.isStopping else {
                return APIResponse.failure(APIError(.serverUnavailable, .serviceUnavailable, "the server is stopping"))
            }
            do {
                _ = try await core.store.loadApps()
            } catch {
                core.logger.warning("not ready: the store does not answer", metadata: ["error": "\(error)"])
                return APIResponse.failure(APIError(.serverUnavailable, .serviceUnavailable, "the store does not answer"))
            }
            return APIResponse.success(["ready": true])
        }
        router.get("/metrics") { _, _ in
            guard core.metrics.enabled else {
                return APIResponse.failure(APIError(.apiNotFound, .notFound, "metrics are off on this server: its operator can set metricsEnabled"))
            }
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(bytes: await core.metrics.render(core))))
        }
        ServerAPI(core: core).register(on: router)
        ConsoleRoutes(core: core).register(on: router)
        MediaRoutes(core: core).register(on: router)
        let gateway = Gateway(core: core)
        let logger = core.logger
        let config = core.config
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [HTTPRequestTimeoutHandler(timeout: .seconds(Int64(config.network.httpRequestTimeoutSeconds)))],
            idleTimeout: .seconds(Int64(config.network.httpIdleTimeoutSeconds)))
        let addresses = core.addressConnections
        // Every connection passes the guard first (per-address limit, first-request deadline, shutdown).
        let server = HTTPServerBuilder { responder in
            GuardedChildChannel(
                inner: GatewayChildChannel(responder: responder, http1: http1, gateway: gateway),
                addresses: addresses, shutdown: core.shutdown, firstRequestTimeout: .seconds(Int64(config.network.httpIdleTimeoutSeconds)))
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(core.config.network.host, port: core.config.network.port), serverName: "imserver",
                                 backlog: Self.listenBacklog),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }
}

/// Once a graceful shutdown has begun, answers every HTTP request (Server API, health, WebSocket
/// upgrade) with 503 and 31003 instead of running it.
struct ShutdownMiddleware<Context: RequestContext>: RouterMiddleware {
    let shutdown: ServerShutdown

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard shutdown.isStopping else { return try await next(request, context) }
        return APIResponse.failure(APIError(.serverUnavailable, .serviceUnavailable, "the server is shutting down: retry the call later"))
    }
}
