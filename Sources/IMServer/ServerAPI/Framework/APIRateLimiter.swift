import IMCore
import IMStore
import Synchronization

/// Server API rate limits per app: fixed windows on the injected clock, so the rules are tested
/// without sleeping. A call over a limit is refused whole with 1008 (HTTP 429) and changes nothing.
///
/// In a cluster each node keeps its own windows and admits its share of every limit, the limit
/// divided by the live nodes (rounded up): the app's rate holds for the cluster as a whole when a
/// load balancer spreads its calls, and is stricter than the limit when its calls all reach one
/// node. A single call may still take a whole limit on a node whose window is empty.
public final class APIRateLimiter: Sendable {
    /// One limit: at most `limit` units per `windowMilliseconds`.
    public struct Rule: Sendable, Hashable {
        public var name: String
        public var limit: Int
        public var windowMilliseconds: Int64

        public init(name: String, limit: Int, windowMilliseconds: Int64) {
            self.name = name
            self.limit = limit
            self.windowMilliseconds = windowMilliseconds
        }
    }

    private struct Key: Hashable {
        let appId: Int64
        let rule: Rule
    }
    private struct Window {
        var start: Int64
        var used: Int
    }
    private let clock: any WallClock
    private let windows = Mutex<[Key: Window]>([:])

    /// How many nodes share the limits (1 for a single server).
    private let nodes: @Sendable () -> Int

    init(clock: any WallClock, nodes: @escaping @Sendable () -> Int = { 1 }) {
        self.clock = clock
        self.nodes = nodes
    }

    /// Takes `cost` units from every rule, or none if any rule would go over its limit.
    /// Rules with a limit of 0 are off.
    func admit(appId: Int64, cost: Int, rules: [Rule]) throws {
        let now = clock.nowMilliseconds()
        let active = rules.filter { $0.limit > 0 }
        guard !active.isEmpty else { return }
        let nodes = max(1, self.nodes())
        let refused: Rule? = windows.withLock { windows in
            var updated: [(Key, Window)] = []
            for rule in active {
                let key = Key(appId: appId, rule: rule)
                var window = windows[key] ?? Window(start: now, used: 0)
                if now - window.start >= rule.windowMilliseconds { window = Window(start: now, used: 0) }
                let share = max(1, (rule.limit + nodes - 1) / nodes)
                if cost > rule.limit || (window.used > 0 && window.used + cost > share) { return rule }
                window.used += cost
                updated.append((key, window))
            }
            for (key, window) in updated { windows[key] = window }
            return nil
        }
        if let refused {
            throw APIError(.apiRateLimited, .tooManyRequests,
                           "rate limit exceeded: \(refused.name) allows \(refused.limit) per \(Self.describe(refused.windowMilliseconds)); retry later")
        }
    }

    static func describe(_ milliseconds: Int64) -> String {
        switch milliseconds {
        case 1000: return "second"
        case 60_000: return "minute"
        case 3_600_000: return "hour"
        case 86_400_000: return "day"
        default: return "\(milliseconds) ms"
        }
    }
}
