import Synchronization

/// Wakes a background loop (push's sender, the callbacks' sender and intake): `signal` ends the
/// current (or the next) `wait` at once; a wait ends by itself after its timeout.
final class WakeSignal: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, Never>?
        var signalled = false
    }

    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait(milliseconds: Int64) async {
        let timer = Task {
            try? await Task.sleep(for: .milliseconds(milliseconds))
            if !Task.isCancelled { self.signal() }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.signalled {
                    state.signalled = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if ready { continuation.resume() }
        }
        timer.cancel()
    }
}
