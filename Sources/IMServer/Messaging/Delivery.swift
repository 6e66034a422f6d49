import IMCore
import IMStore

/// Online delivery: hands every committed message to the session bus, which writes it to the live
/// sessions that should see it now. It is the first handler of the server's events, so a message's
/// pushes are queued as soon as its batch is committed and its senders answered (in a cluster,
/// before they are answered).
public final class Delivery: ServerEventHandler {
    let bus: any SessionBus
    let clock: any WallClock
    let metrics: ServerMetrics?

    init(bus: any SessionBus, clock: any WallClock = SystemClock(), metrics: ServerMetrics? = nil) {
        self.bus = bus
        self.clock = clock
        self.metrics = metrics
    }

    public func handle(_ event: ServerEvent) async {
        guard case .messageCommitted(let committed) = event else { return }
        await bus.deliver(committed.message, origin: committed.origin)
        metrics?.delivered(afterMilliseconds: clock.nowMilliseconds() - committed.message.sentTime)
    }
}
