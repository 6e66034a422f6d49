import Foundation
import Histogram

/// Latencies in microseconds, 1 µs to 120 s, three significant digits (HdrHistogram).
struct LatencyHistogram: Codable, Sendable {
    private(set) var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000,
                                                   numberOfSignificantValueDigits: .three)

    mutating func record(nanos: UInt64) {
        _ = histogram.record(min(max(nanos / 1000, 1), 120_000_000))
    }

    mutating func add(_ other: LatencyHistogram) {
        histogram.add(other.histogram)
    }

    var count: UInt64 { histogram.totalCount }

    var summary: LatencySummary {
        let count = histogram.totalCount
        func ms(_ micros: UInt64) -> Double { (Double(micros) / 1000 * 1000).rounded() / 1000 }
        guard count > 0 else { return LatencySummary(count: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0) }
        return LatencySummary(
            count: count, p50: ms(histogram.valueAtPercentile(50)), p90: ms(histogram.valueAtPercentile(90)),
            p99: ms(histogram.valueAtPercentile(99)), p999: ms(histogram.valueAtPercentile(99.9)),
            max: ms(histogram.max), mean: (histogram.mean / 1000 * 1000).rounded() / 1000)
    }
}

/// Percentiles of one latency, in milliseconds.
struct LatencySummary: Codable, Sendable {
    var count: UInt64
    var p50: Double
    var p90: Double
    var p99: Double
    var p999: Double
    var max: Double
    var mean: Double

    var line: String {
        count == 0 ? "no samples"
            : "p50 \(fmt(p50)) ms  p99 \(fmt(p99)) ms  p99.9 \(fmt(p999)) ms  max \(fmt(max)) ms  (\(count) samples)"
    }
}

/// The latencies a worker records, by name.
enum Latency: String, Codable, CodingKeyRepresentable, CaseIterable, Sendable {
    /// SEND_MESSAGE written → its reply (the message is committed).
    case ack
    /// SEND_MESSAGE written by the sender → MESSAGE push read by the recipient (in a group: by each
    /// online member).
    case delivery
    /// PING written → its reply.
    case ping
    /// HISTORY written → its reply.
    case history
    /// TCP connect started → CONNECT reply (WebSocket upgrade and authentication included).
    case connect
    /// TCP connect started → last SYNC page (offline messages pulled).
    case synced
}

/// Counts a worker keeps, by name.
enum Counter: String, Codable, CodingKeyRepresentable, CaseIterable, Sendable {
    /// Connections authenticated and synced.
    case connected
    /// Messages sent inside the measured window, and the ones of them acknowledged.
    case sent, acked
    /// Acknowledgements that arrived inside the window, whenever their message was sent: the rate
    /// the server actually commits at when the offered rate is more than it can take.
    case ackedArrivingInWindow
    /// Pushes of benchmark messages sent inside the window that reached their recipient.
    case delivered
    /// Every MESSAGE push received, whenever sent, and the ones of them that arrived inside the window.
    case pushes, pushesArrivingInWindow
    /// Group messages sent inside the window that a member received more than once (each extra copy
    /// counts), and that came back to the session that sent them (it should get the reply only).
    case duplicateDeliveries, ownMessagePushed
    /// Messages received through SYNC pages.
    case syncedMessages
    case historyPages, historyMessages
    case pings
    /// Sends or queries the pacer wanted but could not issue (no ready connection free).
    case pacerSkipped
    /// Messages the mailer stored for connect-storm clients before the storm.
    case mailed
}

/// Everything one worker measured; merged by the coordinator.
struct WorkerStats: Codable, Sendable {
    var latencies: [Latency: LatencyHistogram] = [:]
    var counters: [Counter: Int] = [:]
    /// Errors by kind: a RongCloud code ("20604") or a word ("timeout", "disconnected", "connect-failed").
    var errors: [String: Int] = [:]
    /// First connect started and last sync finished by the storm clients (monotonic ns).
    var stormFirstStart: UInt64 = .max
    var stormLastDone: UInt64 = 0
    /// CPU seconds the worker process used inside the measured window.
    var cpuSeconds: Double = 0

    mutating func record(_ latency: Latency, nanos: UInt64) {
        latencies[latency, default: LatencyHistogram()].record(nanos: nanos)
    }

    mutating func count(_ counter: Counter, _ amount: Int = 1) {
        counters[counter, default: 0] += amount
    }

    mutating func error(_ kind: String) {
        errors[kind, default: 0] += 1
    }

    subscript(counter: Counter) -> Int { counters[counter] ?? 0 }

    mutating func add(_ other: WorkerStats) {
        for (name, histogram) in other.latencies { latencies[name, default: LatencyHistogram()].add(histogram) }
        for (name, value) in other.counters { counters[name, default: 0] += value }
        for (name, value) in other.errors { errors[name, default: 0] += value }
        stormFirstStart = min(stormFirstStart, other.stormFirstStart)
        stormLastDone = max(stormLastDone, other.stormLastDone)
        cpuSeconds += other.cpuSeconds
    }

    func summary(_ latency: Latency) -> LatencySummary? {
        latencies[latency].map(\.summary)
    }
}

func fmt(_ value: Double, _ digits: Int = 2) -> String {
    String(format: "%.\(digits)f", value)
}
