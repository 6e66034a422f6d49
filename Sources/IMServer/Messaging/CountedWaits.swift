import Synchronization

/// Things begun and things through, counted, and the tasks waiting for what was begun before
/// their wait to be through: what `FanOutOrder` (batches committed, their fan-outs queued) and
/// `DeliveryFirst` (messages appended, their frames written) wait on. When nothing is pending, as
/// almost always, a wait is one lock and no suspension.
final class CountedWaits: Sendable {
    private struct State {
        var begun: UInt64 = 0
        var through: UInt64 = 0
        var waiting: [Int: (until: UInt64, resume: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// `count` more are begun; returns how many are begun in all.
    @discardableResult
    func begin(_ count: Int = 1) -> UInt64 {
        state.withLock { state in
            state.begun &+= UInt64(count)
            return state.begun
        }
    }

    /// `count` more are through.
    func finish(_ count: Int) {
        release { $0 &+= UInt64(count) }
    }

    /// Everything up to number `number` (as `begin` returned it) is through.
    func finish(upTo number: UInt64) {
        release { $0 = max($0, number) }
    }

    private func release(_ advance: (inout UInt64) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            advance(&state.through)
            guard !state.waiting.isEmpty else { return [] }
            let done = state.waiting.filter { $0.value.until <= state.through }
            for id in done.keys { state.waiting[id] = nil }
            return done.values.map(\.resume)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Begun and not through yet.
    var pending: Int { state.withLock { Int($0.begun &- $0.through) } }

    /// Callers of `wait` now waiting.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Returns once everything begun before the call is through (at once when nothing is pending),
    /// or once the calling task is cancelled.
    func wait() async {
        guard let (id, until) = state.withLock({ state -> (Int, UInt64)? in
            guard state.through < state.begun else { return nil }
            state.nextWaiter += 1
            return (state.nextWaiter, state.begun)
        }) else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    guard state.through < until, !Task.isCancelled else { return true }
                    state.waiting[id] = (until, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume.resume()
        }
    }
}
