import Foundation
import Synchronization

/// Wall-clock time in milliseconds since 1970. Everything that applies rules of time (rate limits,
/// offline retention, heartbeats, callback timeouts) reads an injected clock, so tests can move
/// time without sleeping.
public protocol WallClock: Sendable {
    func nowMilliseconds() -> Int64
    /// Returns once the clock reads `deadline` or later (throws when the task is cancelled).
    func sleep(untilMilliseconds deadline: Int64) async throws
}

extension WallClock {
    /// Sleeps in real time until the clock reads `deadline`.
    public func sleep(untilMilliseconds deadline: Int64) async throws {
        while true {
            let left = deadline - nowMilliseconds()
            if left <= 0 { return }
            try await Task.sleep(for: .milliseconds(left))
        }
    }
}

/// The real clock.
public struct SystemClock: WallClock {
    public init() {}
    public func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }
}

/// A clock that moves only when told to: for tests of time rules. A sleep on it ends when the
/// clock is moved to or past its deadline.
public final class ManualClock: WallClock {
    private struct State {
        var now: Int64
        var sleepers: [Int: (deadline: Int64, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextSleeper = 0
    }

    private let state: Mutex<State>

    public init(milliseconds: Int64 = 1_700_000_000_000) {
        self.state = Mutex(State(now: milliseconds))
    }

    public func nowMilliseconds() -> Int64 { state.withLock { $0.now } }

    public func advance(milliseconds: Int64) { move { $0 += milliseconds } }

    public func set(milliseconds: Int64) { move { $0 = milliseconds } }

    /// How many sleeps are waiting for the clock to move.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    private func move(_ change: (inout Int64) -> Void) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            change(&state.now)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for key in due.keys { state.sleepers[key] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    public func sleep(untilMilliseconds deadline: Int64) async throws {
        let id = state.withLock { state -> Int in
            state.nextSleeper += 1
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.now >= deadline || Task.isCancelled { return true }
                    state.sleepers[id] = (deadline, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { $0.sleepers.removeValue(forKey: id)?.continuation }
            continuation?.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }
}
