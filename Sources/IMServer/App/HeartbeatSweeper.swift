import ServiceLifecycle
import IMStore

/// Drops dead connections: runs `sweepIdleSessions` once per heartbeat interval.
struct HeartbeatSweeper: Service {
    let core: ServerCore

    func run() async throws {
        let interval = Duration.seconds(core.config.session.heartbeatIntervalSeconds)
        // Stops at once on graceful shutdown instead of finishing its sleep (up to one interval).
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                core.sweepIdleSessions()
            }
        }
    }
}
