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
    /// online member; in a chatroom: the CHATROOM_MESSAGES push carrying it, by each member).
    case delivery
    /// Chatroom: SEND_MESSAGE written → the push read by the message's last recipient, one sample per
    /// message delivered to every member (computed by the coordinator from `ChatroomTally`).
    case lastRecipient
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
    /// Every acknowledgement of a one-to-one or group message, warm-up included: the messages the
    /// server committed for the run (the callback scenarios check each was routed).
    case ackedTotal
    /// Pushes of benchmark messages sent inside the window that reached their recipient.
    case delivered
    /// Every MESSAGE push received, whenever sent, and the ones of them that arrived inside the window.
    case pushes, pushesArrivingInWindow
    /// Group messages sent inside the window that a member received more than once (each extra copy
    /// counts), and that came back to the session that sent them (it should get the reply only).
    case duplicateDeliveries, ownMessagePushed
    /// Chatroom messages sent inside the window that the room's intake quota discarded (the reply
    /// says `discarded`), and CHATROOM_MESSAGES frames received (each carries one or more messages).
    case discarded, chatroomFrames
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
    /// Chatroom messages sent inside the window, and their receipts per message.
    var chatroom = ChatroomTally()
    /// The largest member count a JOIN_CHATROOM reply reported.
    var roomMembersAtJoin = 0

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
        chatroom.add(other.chatroom)
        roomMembersAtJoin = max(roomMembersAtJoin, other.roomMembersAtJoin)
    }

    func summary(_ latency: Latency) -> LatencySummary? {
        latencies[latency].map(\.summary)
    }
}

/// Chatroom receipts of one event loop's members, indexed by message number.
struct ChatroomReceipts {
    private var members: [Int32] = []
    private var sentAt: [UInt64] = []
    private var lastAt: [UInt64] = []

    mutating func received(_ number: UInt64, sentAt sent: UInt64, at now: UInt64) {
        let index = Int(number)
        if index >= members.count {
            let grow = max(index + 1 - members.count, 1024)
            members.append(contentsOf: repeatElement(0, count: grow))
            sentAt.append(contentsOf: repeatElement(0, count: grow))
            lastAt.append(contentsOf: repeatElement(0, count: grow))
        }
        members[index] += 1
        sentAt[index] = sent
        if now > lastAt[index] { lastAt[index] = now }
    }

    func fold(into tally: inout ChatroomTally) {
        for index in members.indices where members[index] > 0 {
            tally.received(UInt64(index), sentAt: sentAt[index], members: Int(members[index]), lastAt: lastAt[index])
        }
    }
}

/// The chatroom messages sent inside the measured window, by message number: what became of each
/// (from its sender) and, summed over the members, how many members received it and when the last
/// of them did. Its size is bounded by the messages of the window, whatever the number of members,
/// and it is exact: the coordinator merges the workers' tallies (counts add up, last receipts take
/// the maximum) and so knows, per message, whether every member got it and when the last one did.
struct ChatroomTally: Codable, Sendable {
    enum Outcome: String, Codable, Sendable {
        /// Sent, not answered (yet, or ever: a timeout).
        case pending
        case acked
        /// Answered, but dropped by the room's intake quota: no member may receive it.
        case discarded
        /// Answered with an error code.
        case refused
    }

    struct Publication: Codable, Sendable {
        var number: UInt64
        var sentAt: UInt64
        var outcome: Outcome
    }

    struct Receipts: Codable, Sendable {
        var number: UInt64
        var sentAt: UInt64
        /// Members that received the message (a second copy to the same member is not counted here
        /// but as a duplicate).
        var members: Int
        /// When the last of them read it (monotonic ns).
        var lastAt: UInt64
    }

    private(set) var publications: [UInt64: Publication] = [:]
    private(set) var receipts: [UInt64: Receipts] = [:]

    init() {}

    mutating func published(_ number: UInt64, at sentAt: UInt64) {
        publications[number] = Publication(number: number, sentAt: sentAt, outcome: .pending)
    }

    mutating func answered(_ number: UInt64, _ outcome: Outcome) {
        publications[number]?.outcome = outcome
    }

    /// Adds `members` receipts of a message, the last of them at `lastAt`.
    mutating func received(_ number: UInt64, sentAt: UInt64, members: Int, lastAt: UInt64) {
        if var entry = receipts[number] {
            entry.members += members
            entry.lastAt = max(entry.lastAt, lastAt)
            receipts[number] = entry
        } else {
            receipts[number] = Receipts(number: number, sentAt: sentAt, members: members, lastAt: lastAt)
        }
    }

    mutating func add(_ other: ChatroomTally) {
        for (number, publication) in other.publications { publications[number] = publication }
        for (number, entry) in other.receipts {
            if var mine = receipts[number] {
                mine.members += entry.members
                mine.lastAt = max(mine.lastAt, entry.lastAt)
                receipts[number] = mine
            } else {
                receipts[number] = entry
            }
        }
    }

    private enum CodingKeys: String, CodingKey { case publications, receipts }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        for publication in try container.decode([Publication].self, forKey: .publications) {
            publications[publication.number] = publication
        }
        for entry in try container.decode([Receipts].self, forKey: .receipts) { receipts[entry.number] = entry }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(publications.values.sorted { $0.number < $1.number }, forKey: .publications)
        try container.encode(receipts.values.sorted { $0.number < $1.number }, forKey: .receipts)
    }
}

func fmt(_ value: Double, _ digits: Int = 2) -> String {
    String(format: "%.\(digits)f", value)
}
