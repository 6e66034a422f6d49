import Foundation
import Synchronization

/// Wall-clock time in milliseconds since 1970. Everything that applies rules of time (rate limits,
/// offline retention, heartbeats) reads an injected clock, so tests can move time without sleeping.
public protocol WallClock: Sendable {
    func nowMilliseconds() -> Int64
}

/// The real clock.
public struct SystemClock: WallClock {
    public init() {}
    public func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }
}

/// A clock that moves only when told to: for tests of time rules.
public final class ManualClock: WallClock {
    private let now: Mutex<Int64>

    public init(milliseconds: Int64 = 1_700_000_000_000) {
        self.now = Mutex(milliseconds)
    }

    public func nowMilliseconds() -> Int64 { now.withLock { $0 } }

    public func advance(milliseconds: Int64) { now.withLock { $0 += milliseconds } }

    public func set(milliseconds: Int64) { now.withLock { $0 = milliseconds } }
}
