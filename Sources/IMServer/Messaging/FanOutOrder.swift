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
    private struct State {
        /// Batches committed so far, and the highest whose fan-out is queued (batches are
        /// delivered one at a time in commit order, so every batch up to it is delivered).
        var committed: UInt64 = 0
        var delivered: UInt64 = 0
        var waiting: [Int: (batch: UInt64, resume: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// True inside a delivery (the message log's `committed`): a wait there would wait for itself.
    @TaskLocal static var delivering = false

    public init() {}

    /// Returns once every batch committed before the call has its fan-out queued, or once the
    /// calling task is cancelled (a shutdown that ran out of time).
    public func behindCommitted() async {
        assert(!Self.delivering, "a delivery waits for the fan-outs before it: it would wait for its own")
        // Nothing on its way (the common case), or else a number for this wait, under one lock.
        guard let id = state.withLock({ state -> Int? in
            guard state.delivered < state.committed else { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }) else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    guard state.delivered < state.committed, !Task.isCancelled else { return true }
                    state.waiting[id] = (state.committed, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume.resume()
        }
    }

    /// Callers of `behindCommitted` now waiting.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// A batch is committed and about to be handed to delivery; returns its number for `delivered`.
    func committing() -> UInt64 {
        state.withLock { state in
            state.committed += 1
            return state.committed
        }
    }

    /// The fan-out of batch `batch`, and of every batch before it, is queued.
    func delivered(_ batch: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.delivered = max(state.delivered, batch)
            guard !state.waiting.isEmpty else { return [] }
            let done = state.waiting.filter { $0.value.batch <= state.delivered }
            for id in done.keys { state.waiting[id] = nil }
            return done.values.map(\.resume)
        }
        for continuation in ready { continuation.resume() }
    }
}
