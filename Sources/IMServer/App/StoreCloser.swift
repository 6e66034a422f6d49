import Logging
import ServiceLifecycle

/// Closes the store on graceful shutdown. First among the server's services, so that a graceful
/// shutdown reaches it last, once nothing else uses the store. Cancelled, it leaves the store open
/// (other services may still be using it); it closes with the process.
struct StoreCloser: Service {
    let close: @Sendable () async throws -> Void
    let logger: Logger

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            return
        }
        try await close()
        logger.notice("store closed")
    }
}
