import Foundation
import IMCore
import IMStore
import Prometheus
import Synchronization

/// The server's figures in Prometheus's text format (`GET /metrics`): counters kept as things
/// happen, and gauges read from the live state when scraped. One registry per server (tests run
/// several servers in a process), so the global swift-metrics bootstrap is not used.
///
/// Names start with `imserver_`; labels are bounded sets (platforms, conversation types, codes,
/// endpoint paths, close reasons), never ids.
public final class ServerMetrics: Sendable {
    /// Off (`metricsEnabled`), nothing is counted.
    let enabled: Bool
    let registry = PrometheusCollectorRegistry()
    /// Labelled counters made once each, by name and labels.
    private let counters = Mutex<[String: Counter]>([:])

    /// Counters of every message, made once: messages stored, and client messages stored, by
    /// conversation type (the per-message path takes neither a lock nor an allocation).
    private let storedByType: [ConversationType: Counter]
    private let clientStoredByType: [ConversationType: Counter]
    let commitBatch: ValueHistogram
    let commitLatency: DurationHistogram
    /// From a client's message taken up by its connection to the answer (stored or refused).
    let sendLatency: DurationHistogram
    /// Writes to client sessions by the fan-out of messages, by conversation type.
    private let fanOutByType: [ConversationType: Counter]
    /// From a message's sent time to its writes queued to the recipients' sessions on this node.
    let deliveryLatency: DurationHistogram
    private let pushDecisionsByStatus: [PushStatus: Counter]
    private let pushAttemptsByStatus: [PushStatus: Counter]
    let connections: [Platform: Gauge]
    let queuedBytes: Gauge
    let nodes: Gauge

    init(enabled: Bool = true) {
        self.enabled = enabled
        var stored: [ConversationType: Counter] = [:], clientStored: [ConversationType: Counter] = [:]
        for type in ConversationType.allCases {
            stored[type] = registry.makeCounter(name: Self.storedName, labels: [("conversation_type", String(type.rawValue))],
                                                help: Self.storedHelp)
            clientStored[type] = registry.makeCounter(name: Self.clientMessagesName,
                                                      labels: [("conversation_type", String(type.rawValue)), ("outcome", "stored")],
                                                      help: Self.clientMessagesHelp)
        }
        storedByType = stored
        clientStoredByType = clientStored
        var fanOut: [ConversationType: Counter] = [:]
        for type in ConversationType.allCases {
            fanOut[type] = registry.makeCounter(name: "imserver_fanout_writes_total", labels: [("conversation_type", String(type.rawValue))],
                                                help: "Writes to client sessions delivering messages online, by conversation type (a chatroom write may carry several messages)")
        }
        fanOutByType = fanOut
        deliveryLatency = registry.makeDurationHistogram(
            name: "imserver_delivery_seconds",
            buckets: [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5)],
            help: "From a message's sent time to its delivery queued to the recipients' sessions on this node (private, group, system and ultra group messages)")
        var decisions: [PushStatus: Counter] = [:], attempts: [PushStatus: Counter] = [:]
        for status in PushStatus.allCases {
            decisions[status] = registry.makeCounter(name: "imserver_push_decisions_total", labels: [("status", Self.label(status))],
                                                     help: "Push decisions per device: pending (to be sent) or suppressed by a rule")
            attempts[status] = registry.makeCounter(name: "imserver_push_attempts_total", labels: [("status", Self.label(status))],
                                                    help: "Answers of the push providers: sent, failed, invalid_token, or pending (to be tried again)")
        }
        pushDecisionsByStatus = decisions
        pushAttemptsByStatus = attempts
        commitBatch = registry.makeValueHistogram(
            name: "imserver_commit_batch_messages", buckets: [1, 2, 5, 10, 20, 50, 100, 200, 512],
            help: "Messages written by one group commit of the message log")
        commitLatency = registry.makeDurationHistogram(
            name: "imserver_commit_seconds",
            buckets: Self.shortLatencyBuckets,
            help: "Time one group commit of the message log took, fsync included")
        sendLatency = registry.makeDurationHistogram(
            name: "imserver_send_seconds",
            buckets: Self.shortLatencyBuckets,
            help: "Time from a client's message taken up by its connection to the answer (the checks, the message callback if any, the commit)")
        var connections: [Platform: Gauge] = [:]
        for platform in Platform.allCases {
            connections[platform] = registry.makeGauge(name: "imserver_connections", labels: [("platform", Self.label(platform))],
                                                       help: "Authenticated client connections open on this node")
        }
        self.connections = connections
        queuedBytes = registry.makeGauge(name: "imserver_outbound_queued_bytes", help: "Bytes waiting in the connections' outbound queues")
        nodes = registry.makeGauge(name: "imserver_cluster_nodes", help: "Live nodes of the cluster (1 without one)")
    }

    static func label(_ platform: Platform) -> String {
        switch platform {
        case .iOS: "iOS"
        case .android: "Android"
        case .harmonyOS: "HarmonyOS"
        case .web: "Web"
        case .miniProgram: "MiniProgram"
        case .windows: "Windows"
        case .macOS: "macOS"
        case .linux: "Linux"
        case .electron: "Electron"
        }
    }

    static func label(_ status: PushStatus) -> String {
        switch status {
        case .pending: "pending"
        case .sent: "sent"
        case .failed: "failed"
        case .invalidToken: "invalid_token"
        case .suppressed: "suppressed"
        }
    }

    /// The counter of this name and labels, made on first use.
    func counter(_ name: String, _ labels: [(String, String)] = [], help: String) -> Counter {
        let key = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
        if let counter = counters.withLock({ $0[key] }) { return counter }
        let counter = labels.isEmpty ? registry.makeCounter(name: name, help: help)
            : registry.makeCounter(name: name, labels: labels, help: help)
        counters.withLock { $0[key] = counter }
        return counter
    }

    // MARK: what the server reports

    /// A connect answered: `code` 0 when it succeeded, RongCloud's refusal code otherwise.
    func connect(code: Int) {
        guard enabled else { return }
        counter("imserver_connects_total", [("code", String(code))], help: "Connect attempts answered, by result code (0: connected)").increment()
    }

    /// A session ended: closed by the client or the network, kicked (with its code), closed as a
    /// slow reader, or for shutdown.
    func sessionEnded(reason: String) {
        guard enabled else { return }
        counter("imserver_sessions_closed_total", [("reason", reason)],
                help: "Client sessions ended, by reason (client, kicked_<code>, slow_reader, server_stopping)").increment()
    }

    /// A message a client sent: `outcome` "stored" or the refusal code; a type the server does not
    /// know counts as "invalid" (labels stay a bounded set whatever a client sends).
    func clientMessage(type: ConversationType?, outcome: String) {
        guard enabled else { return }
        if outcome == "stored", let type, let counter = clientStoredByType[type] { return counter.increment() }
        counter(Self.clientMessagesName, [("conversation_type", type.map { String($0.rawValue) } ?? "invalid"), ("outcome", outcome)],
                help: Self.clientMessagesHelp).increment()
    }

    /// The buckets of the message log's commits and of a client's message to its answer.
    private static let shortLatencyBuckets: [Duration] = [.microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
                                                          .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                                                          .milliseconds(250), .seconds(1)]

    /// A client's message answered, `took` after its connection took it up.
    func clientMessageAnswered(took: Duration) {
        guard enabled else { return }
        sendLatency.record(took)
    }

    private static let clientMessagesName = "imserver_client_messages_total"
    private static let clientMessagesHelp = "Messages clients sent, by conversation type and outcome (stored or the refusal code)"
    private static let storedName = "imserver_messages_stored_total"
    private static let storedHelp = "Messages committed to the message log, by conversation type"

    func syncPage(messages: Int) {
        guard enabled else { return }
        counter("imserver_sync_pages_total", help: "Offline sync pages served").increment()
        counter("imserver_sync_messages_total", help: "Messages served in offline sync pages").increment(by: Int64(messages))
    }

    /// A Server API call answered, by path and RongCloud code (200 for success).
    func apiCall(path: String, code: Int) {
        guard enabled else { return }
        counter("imserver_api_calls_total", [("endpoint", path), ("code", String(code))],
                help: "Server API calls answered, by endpoint and code").increment()
    }

    func committed(batch: Int, took: Duration) {
        guard enabled else { return }
        commitBatch.record(Double(batch))
        commitLatency.record(took)
    }

    /// Messages stored, by conversation type (each recipient's copy of a publish counts).
    func stored(type: ConversationType) {
        guard enabled else { return }
        storedByType[type]?.increment()
    }

    /// Writes of one message (or one chatroom sweep step) to `sessions` sessions.
    func fannedOut(_ type: ConversationType, sessions: Int) {
        guard enabled, sessions > 0 else { return }
        fanOutByType[type]?.increment(by: Int64(sessions))
    }

    /// A message's delivery queued, `milliseconds` after it was sent.
    func delivered(afterMilliseconds milliseconds: Int64) {
        guard enabled else { return }
        deliveryLatency.record(.milliseconds(max(0, milliseconds)))
    }

    func pushDecided(_ status: PushStatus) {
        guard enabled else { return }
        pushDecisionsByStatus[status]?.increment()
    }

    func pushAnswered(_ status: PushStatus) {
        guard enabled else { return }
        pushAttemptsByStatus[status]?.increment()
    }

    /// The text exposition, gauges read from `core` first.
    func render(_ core: ServerCore) async -> [UInt8] {
        var counts: [Platform: Int] = [:]
        var queued = 0
        for session in core.registry.allSessions() {
            counts[session.platform, default: 0] += 1
            queued += session.outbound.queuedBytes
        }
        for (platform, gauge) in connections { gauge.set(Double(counts[platform] ?? 0)) }
        queuedBytes.set(Double(queued))
        nodes.set(Double(core.cluster?.liveNodes() ?? 1))
        var text = registry.emitToBuffer()
        if let callbacks = core.callbacks {
            text += Self.callbackLines(callbacks, apps: core.apps.all.map(\.id))
        }
        return text
    }

    /// The callback service's counters, summed over the apps.
    private static func callbackLines(_ callbacks: CallbackService, apps: [Int64]) -> [UInt8] {
        var delivered = 0, failed = 0, dropped = 0
        for app in apps {
            let counters = callbacks.counters(appId: app)
            delivered += counters.delivered
            failed += counters.failedAttempts
            dropped += counters.dropped
        }
        let lines = """
            # HELP imserver_callbacks_delivered_total Callbacks the app servers took (HTTP 200)
            # TYPE imserver_callbacks_delivered_total counter
            imserver_callbacks_delivered_total \(delivered)
            # HELP imserver_callbacks_failed_attempts_total Callback attempts that failed and are tried again
            # TYPE imserver_callbacks_failed_attempts_total counter
            imserver_callbacks_failed_attempts_total \(failed)
            # HELP imserver_callbacks_dropped_total Callbacks given up (past their retention or backlog)
            # TYPE imserver_callbacks_dropped_total counter
            imserver_callbacks_dropped_total \(dropped)

            """
        return Array(lines.utf8)
    }
}
