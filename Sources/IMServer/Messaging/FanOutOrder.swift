import Synchronization

/// Keeps what follows a committed message behind that message's fan-out.
///
/// On one node a committed batch's senders are answered before its fan-out is queued (a push for
/// every recipient session, thousands for a large group), so a sender, or the app's server, can act
/// on the answer while the message is still on its way; others can know of a committed message
/// sooner still (a sync or a history page reads it, the message callback named its uid). Whatever
/// could overtake the message waits here first (`behindCommitted`): a change of who a fan-out
/// reaches (group and ultra group members, channels), a kick, a push that bears on a message (an
/// ultra group edit), a status message (it skips the log), and the shutdown's closing of sessions.
/// When no committed batch is still waiting for its fan-out, as almost always, the wait is one lock
/// and no suspension.
public final class FanOutOrder: Sendable {
    /// Batches committed, and those whose fan-out is queued (batches are delivered one at a time
    /// in commit order, so every batch up to the last delivered is).
    private let batches = CountedWaits()

    /// True inside a delivery (the message log's `committed`): a wait there would wait for itself.
    @TaskLocal static var delivering = false

    public init() {}

    /// Returns once every batch committed before the call has its fan-out queued, or once the
    /// calling task is cancelled (a shutdown that ran out of time).
    public func behindCommitted() async {
        assert(!Self.delivering, "a delivery waits for the fan-outs before it: it would wait for its own")
        await batches.wait()
    }

    /// Callers of `behindCommitted` now waiting.
    var waitingCount: Int { batches.waitingCount }

    /// A batch is committed and about to be handed to delivery; returns its number for `delivered`.
    func committing() -> UInt64 { batches.begin() }

    /// The fan-out of batch `batch`, and of every batch before it, is queued.
    func delivered(_ batch: UInt64) { batches.finish(upTo: batch) }
}
