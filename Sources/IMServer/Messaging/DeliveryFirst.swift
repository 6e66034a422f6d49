import NIOCore
import Synchronization

/// Lets background work (push decisions, push sends) step aside while messages are on their way.
///
/// The message log counts each message appended and each one whose fan-out is out (or whose
/// commit failed). A fan-out is out once the gateway's event loops have written what it queued:
/// each loop runs a marker after the writes queued before it, so the push work resumes after the
/// recipients' frames are on their sockets, not while they are being written. Work that can wait
/// calls `stepAside()` between its pieces: with no message on its way, as most of the time, that
/// is one lock; otherwise it returns once the messages on
/// their way at the call are through, not later ones, so a steady stream of messages holds it up
/// for one message's way at a time and never starves it.
public final class DeliveryFirst: Sendable {
    /// Messages appended, and those through.
    private let messages = CountedWaits()
    /// The gateway's event loops (none: a fan-out is out once it is queued).
    private let loops: [any EventLoop]

    /// - Parameter loops: the event loops the sessions' frames are written on.
    public init(loops: [any EventLoop] = []) {
        self.loops = loops
    }

    /// Messages were appended to the log.
    func appended(_ count: Int) { messages.begin(count) }

    /// Messages appended before have their fan-out queued: they are through once the event loops
    /// have written it.
    func fannedOut(_ count: Int) {
        guard !loops.isEmpty else { return finished(count) }
        let left = Atomic(loops.count)
        for loop in loops {
            loop.execute {
                if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { self.finished(count) }
            }
        }
    }

    /// Messages appended before are through: their fan-out is out, or their commit failed.
    func finished(_ count: Int) { messages.finish(count) }

    /// Callers of `stepAside` now waiting.
    var waitingCount: Int { messages.waitingCount }

    /// The messages on their way.
    var onTheirWay: Int { messages.pending }

    /// Returns once the messages on their way now are through (at once when there are none), or
    /// once the calling task is cancelled.
    func stepAside() async { await messages.wait() }
}
