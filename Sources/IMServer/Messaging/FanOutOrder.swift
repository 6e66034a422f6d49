import Synchronization

/// Keeps what follows an answered message behind that message's fan-out.
///
/// On one node a committed batch's senders are answered before its fan-out is queued (a push for
/// every recipient session, thousands for a large group), so a sender, or the app's server, can act
/// on the answer while the message is still on its way. Whatever could then overtake the message
/// waits here first (`behindAnswered`): a change of who a fan-out reaches (group and ultra group
/// members, channels), a push that bears on a message (an ultra group edit) and a status message,
/// which skips the log. When nothing answered is still waiting for its fan-out, as almost always,
/// the wait is a lock and no suspension.
public final class FanOutOrder: Sendable {
    private struct State {
        /// Batches answered so far, and of those, the ones whose fan-out is queued (a prefix: batches
        /// are delivered one at a time in commit order).
        var answered: UInt64 = 0
        var delivered: UInt64 = 0
        var waiting: [(batch: UInt64, resume: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Returns once every batch answered before the call has its fan-out queued.
    public func behindAnswered() async {
        if state.withLock({ $0.delivered == $0.answered }) { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                guard state.delivered < state.answered else { return true }
                state.waiting.append((state.answered, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Callers of `behindAnswered` now waiting.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// A batch's senders are about to be answered; returns its number for `delivered`.
    func answering() -> UInt64 {
        state.withLock { state in
            state.answered += 1
            return state.answered
        }
    }

    /// The fan-out of batch `batch` (and of every batch before it) is queued.
    func delivered(_ batch: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.delivered = batch
            guard !state.waiting.isEmpty else { return [] }
            let ready = state.waiting.filter { $0.batch <= batch }.map(\.resume)
            state.waiting.removeAll { $0.batch <= batch }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
}
