import Logging
import ServiceLifecycle

/// The first step of a graceful shutdown: ends the client gateway while the message log and
/// the chatroom deliveries still run. Does nothing until then.
///
/// 1. From now on, new connections are answered 503 and closed (`ConnectionGuardHandler`), Server
///    API requests get 503, and client requests and connects are answered with 31003.
/// 2. The client requests under way finish: their replies (a send's acknowledgement among them)
///    are queued before anything else happens.
/// 3. Every session is closed: what is queued is written, then the WebSocket is closed with 1001
///    (going away). Clients reconnect by themselves (a KICKED frame would stop them).
/// 4. Returns once every gateway has ended (its peer answered the close, or its connection was
///    dropped `closeTimeoutSeconds` after it).
struct GatewayCloser: Service {
    let core: ServerCore

    func run() async throws {
        // Cancelled (the group failed or the shutdown took too long): nothing is waited for.
        do {
            try await gracefulShutdown()
        } catch {
            return
        }
        let shutdown = core.shutdown
        shutdown.stop()
        let logger = core.logger
        logger.notice("shutting down: no new connections or requests", metadata: ["requests": "\(shutdown.counts.requests)"])
        await shutdown.finished(.request)
        // The requests answered include sends whose fan-out may still be on its way.
        await core.log.fanOut.behindCommitted()
        let sessions = core.registry.allSessions()
        logger.notice("shutting down: closing the client sessions", metadata: ["sessions": "\(sessions.count)"])
        for session in sessions { session.closeForShutdown() }
        await shutdown.finished(.session)
        logger.notice("shutting down: client sessions closed")
    }
}
