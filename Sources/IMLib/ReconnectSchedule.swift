/// RongCloud's reconnect intervals: 0, 0.25, 0.5, 1, 2, 4, 8, 16, 32 s, then every 64 s
/// (spec/imlib-core.md §7.3).
public enum ReconnectSchedule {
    public static let delaysInMilliseconds: [Int64] = [0, 250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000]
    public static let capInMilliseconds: Int64 = 64_000

    /// The wait before reconnect attempt `attempt` (0 = the first), an attempt being one round over
    /// the client's server URLs.
    public static func delay(attempt: Int) -> Duration {
        let millis = attempt < delaysInMilliseconds.count ? delaysInMilliseconds[max(0, attempt)] : capInMilliseconds
        return .milliseconds(millis)
    }
}

/// One wait of the reconnect schedule: `delay` before connect round `round` (1 = the first
/// retry after a round that failed on every server URL).
public struct ReconnectWait: Sendable, Equatable {
    public var round: Int
    public var delay: Duration

    public init(round: Int, delay: Duration) {
        self.round = round
        self.delay = delay
    }
}
