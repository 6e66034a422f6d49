import Foundation
import NIOCore

/// The clients of one event loop, their statistics, and the pacer that issues their load.
///
/// Everything here runs on `loop` only, so nothing needs a lock: a worker reaches a driver through
/// `NIOLoopBound`. The pacer runs every millisecond and issues as many sends (and history queries)
/// as the target rate says are due since the load started, in turn over the loop's clients, so the
/// aggregate rate is exact and each client carries an equal share.
final class LoopDriver {
    let loop: any EventLoop
    let job: WorkerJob
    let serverAddress: SocketAddress
    private let sourceAddresses: [SocketAddress]
    /// The message content every chat client sends: a JSON object of `payloadBytes` bytes.
    let payload: Data

    var stats = WorkerStats()
    /// Chatroom receipts of this loop's members, kept apart from `stats` because there are hundreds
    /// of thousands a second: delivery latencies, and per message number (numbers count from 0 at
    /// the start of the load, so flat arrays) how many members got it and when the last one did.
    var chatroomDeliveries = LatencyHistogram()
    var chatroomReceipts = ChatroomReceipts()
    var loggedConnectErrors = 0
    private(set) var clients: [BenchClient] = []
    private var chatters: [BenchClient] = []
    private var readers: [BenchClient] = []

    /// The measured window (monotonic ns); what is sent outside it is not recorded.
    private(set) var measureFrom = UInt64.max
    private(set) var measureUntil = UInt64.max

    private var pacer: Scheduled<Void>?
    /// Raised by every start and stop of the load; a pacer tick of an older one stops there.
    private var pacerGeneration: UInt64 = 0
    private var sweeper: Scheduled<Void>?
    private var loadStarted: UInt64 = 0
    private var chatIssued = 0
    private var historyIssued = 0
    private var chatTurn = 0
    /// Messages per second each chat client sends (the job's, until a restart changes it).
    private var chatRatePerClient: Double
    private var serverAddresses: [Int: SocketAddress] = [:]
    private var historyTurn = 0

    init(loop: any EventLoop, job: WorkerJob) throws {
        self.loop = loop
        self.job = job
        self.serverAddress = try SocketAddress(ipAddress: job.host, port: job.port)
        self.sourceAddresses = try job.sourceAddresses.map { try SocketAddress(ipAddress: $0, port: 0) }
        self.payload = Self.payload(bytes: job.payloadBytes)
        self.chatRatePerClient = job.chatRatePerClient
        scheduleSweep()
    }

    /// `{"content":"xxx…"}` of the given size (at least the braces and the key).
    static func payload(bytes: Int) -> Data {
        let frame = #"{"content":""}"#
        let fill = max(0, bytes - frame.utf8.count)
        return Data((#"{"content":""# + String(repeating: "x", count: fill) + #""}"#).utf8)
    }

    func add(_ spec: ClientSpec, index: Int) -> BenchClient {
        let client = BenchClient(spec: spec, index: index, driver: self)
        clients.append(client)
        switch spec.role {
        case .chat, .groupMember(_, sender: true, _), .chatroomMember(_, publisher: _?, _): chatters.append(client)
        case .history: readers.append(client)
        default: break
        }
        return client
    }

    /// Where a client connects: its node's port (a cluster), else the job's address.
    func serverAddress(port: Int?) throws -> SocketAddress {
        guard let port, port != job.port else { return serverAddress }
        if let known = serverAddresses[port] { return known }
        let address = try SocketAddress(ipAddress: job.host, port: port)
        serverAddresses[port] = address
        return address
    }

    /// Forgets what was measured so far and sets the chat rate for the next load.
    func reset(chatRatePerClient rate: Double) {
        stats = WorkerStats()
        chatroomDeliveries = LatencyHistogram()
        chatroomReceipts = ChatroomReceipts()
        chatRatePerClient = rate
    }

    func sourceAddress(for clientIndex: Int) -> SocketAddress? {
        sourceAddresses.isEmpty ? nil : sourceAddresses[clientIndex % sourceAddresses.count]
    }

    func inWindow(_ time: UInt64) -> Bool {
        time >= measureFrom && time < measureUntil
    }

    // MARK: load

    func startLoad(measureFrom: UInt64, measureUntil: UInt64) {
        self.measureFrom = measureFrom
        self.measureUntil = measureUntil
        loadStarted = monotonicNanos()
        chatIssued = 0
        historyIssued = 0
        pacerGeneration &+= 1
        if !chatters.isEmpty || !readers.isEmpty { schedulePacer(pacerGeneration) }
    }

    func stopLoad() {
        // Cancelling is not enough: a pacer tick the loop has already taken off its queue in the
        // same turn as this call still runs, and it would schedule the next one, so the load went
        // on after a stop (until the worker exited). A tick of an older generation does nothing.
        pacerGeneration &+= 1
        pacer?.cancel()
        pacer = nil
    }

    private func schedulePacer(_ generation: UInt64) {
        pacer = loop.assumeIsolated().scheduleTask(in: .milliseconds(1)) {
            guard generation == self.pacerGeneration else { return }
            self.pace()
            self.schedulePacer(generation)
        }
    }

    private func pace() {
        let now = monotonicNanos()
        let elapsed = Double(now - loadStarted) / 1e9
        if !chatters.isEmpty {
            let rate = chatRatePerClient * Double(chatters.count)
            chatIssued += issue(due: Int(elapsed * rate) - chatIssued, rate: rate) { budget in
                var sent = 0
                for _ in 0..<chatters.count where sent < budget {
                    let client = chatters[chatTurn]
                    chatTurn = (chatTurn + 1) % chatters.count
                    if client.state == .ready {
                        client.sendChat(now: now)
                        sent += 1
                    }
                }
                return sent
            }
        }
        if !readers.isEmpty {
            let rate = job.historyRatePerClient * Double(readers.count)
            historyIssued += issue(due: Int(elapsed * rate) - historyIssued, rate: rate) { budget in
                var sent = 0
                for _ in 0..<readers.count where sent < budget {
                    let client = readers[historyTurn]
                    historyTurn = (historyTurn + 1) % readers.count
                    if client.canQueryHistory {
                        client.queryHistory(now: now)
                        sent += 1
                    }
                }
                return sent
            }
        }
    }

    /// Issues what is due; what cannot be issued (no client free, or more than 100 ms behind after a
    /// stall) is skipped and counted. Returns how many were accounted for.
    private func issue(due: Int, rate: Double, _ send: (Int) -> Int) -> Int {
        guard due > 0 else { return 0 }
        let limit = max(1, Int(rate * 0.1))
        let budget = min(due, limit)
        let sent = send(budget)
        let skipped = due - sent
        if skipped > 0 && inWindow(monotonicNanos()) { stats.count(.pacerSkipped, skipped) }
        return due
    }

    private func scheduleSweep() {
        sweeper = loop.assumeIsolated().scheduleTask(in: .seconds(1)) {
            let deadline = monotonicNanos() &- UInt64(self.job.requestTimeoutSeconds * 1e9)
            for client in self.clients { client.expireRequests(olderThan: deadline) }
            self.scheduleSweep()
        }
    }

    /// `stats` with the chatroom receipts folded in.
    func collectedStats() -> WorkerStats {
        var collected = stats
        if chatroomDeliveries.count > 0 {
            collected.latencies[.delivery, default: LatencyHistogram()].add(chatroomDeliveries)
        }
        chatroomReceipts.fold(into: &collected.chatroom)
        return collected
    }

    /// Requests written and not answered yet.
    var outstandingRequests: Int {
        clients.reduce(0) { $0 + $1.outstandingRequests }
    }

    func closeAll() {
        stopLoad()
        sweeper?.cancel()
        for client in clients { client.close() }
    }
}
