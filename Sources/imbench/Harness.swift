import ArgumentParser
import Foundation

/// Where the server comes from and how the generator is laid out; shared by every scenario.
struct CommonOptions: ParsableArguments {
    @Option(help: "Drive an imserver that is already running at this URL (e.g. http://127.0.0.1:8080) instead of starting one. Needs --app-key and --app-secret of an app on it.")
    var url: String?

    @Option(help: "Process id of the --url server, to report its RSS and CPU.")
    var serverPid: Int32?

    @Option(help: "The imserver binary to start (default: the one beside imbench, e.g. .build/release/imserver).")
    var imserver: String?

    @Option(help: "Data directory of the server imbench starts (kept afterwards). Default: a new temporary directory, removed after the run.")
    var dataDir: String?

    @Option(help: "App key (and the started server's development app).")
    var appKey: String = "imbench"

    @Option(help: "App secret.")
    var appSecret: String = "imbench-secret"

    @Option(name: .customLong("server-arg"), help: "An extra argument for the imserver imbench starts (repeatable), e.g. --server-arg=--heartbeat-interval-seconds=10.")
    var serverArguments: [String] = []

    @Option(help: "Worker processes (default: one per 15,000 connections; a process may hold at most 20,000 open files).")
    var workers: Int?

    @Option(help: "Event-loop threads per worker.")
    var threads: Int = 1

    @Option(help: "Spread connections over this many source addresses 127.0.0.2… (default: one address per worker, 127.0.0.(2+w)).")
    var sourceAddresses: Int?

    @Option(help: "Connections being opened at once, per worker.")
    var connectConcurrency: Int = 256

    @Option(help: "Bytes of each message's content (a JSON object, RC:TxtMsg).")
    var payloadBytes: Int = 100

    @Option(help: "Seconds a request may stay unanswered before it counts as an error.")
    var requestTimeout: Double = 10

    @Option(help: "Where to write the JSON results (default: bench-results/<scenario>-<time>.json).")
    var output: String?

    @Option(help: "Run the imserver(s) imbench starts on PostgreSQL: imbench creates a fresh database for the run on the server of this URL (postgres://USER[:PASSWORD]@HOST:PORT/DB, DB being where CREATE DATABASE runs; e.g. what scripts/postgres.sh start prints) and drops it afterwards. Without it: SQLite in the data directory.")
    var database: String?

    @Flag(help: "Keep the run's PostgreSQL database afterwards (its name is printed).")
    var keepDatabase = false

    @Option(help: "imserver processes to start on the --database, nodes of one cluster (node1…nodeN, each its own port and data directory). A client's connection goes to node (its index mod N); Server API calls go to node 1.")
    var nodes: Int = 1

    init() {}
}

/// Where a scenario's seed goes before the servers start: the data directory (SQLite), or the
/// run's PostgreSQL database.
struct SeedSite: Sendable {
    var dataDir: String
    /// The run's database (with `--database`), else nil.
    var databaseURL: String?
}

/// One benchmark run's surroundings: the server(s) (started or given), the Server API, the run's
/// PostgreSQL database, and the figures sampled from their processes.
final class Harness {
    let scenario: String
    let options: CommonOptions
    /// Node 1 (or the `--url` server): where Server API calls go.
    let target: ServerTarget
    /// Every node's address, node 1 first.
    let targets: [ServerTarget]
    let servers: [ServerProcess]
    let api: ServerAPI
    let database: BenchDatabase?
    let monitor: DatabaseMonitor?
    private let temporaryDataDir: String?

    /// The first server imbench started (nil with `--url`).
    var server: ServerProcess? { servers.first }
    var nodeCount: Int { targets.count }
    /// "sqlite", "postgres" or "unknown" (a `--url` server).
    var storeKind: String { database != nil ? "postgres" : (servers.isEmpty ? "unknown" : "sqlite") }

    private init(scenario: String, options: CommonOptions, targets: [ServerTarget], servers: [ServerProcess],
                 database: BenchDatabase?, monitor: DatabaseMonitor?, temporaryDataDir: String?) {
        self.scenario = scenario
        self.options = options
        self.target = targets[0]
        self.targets = targets
        self.servers = servers
        self.api = ServerAPI(target: targets[0])
        self.database = database
        self.monitor = monitor
        self.temporaryDataDir = temporaryDataDir
    }

    /// Starts the server(s) (unless `--url`), after `prepare` has had the data directory or the
    /// run's database (seeding). With `--database` each node runs on a fresh PostgreSQL database;
    /// with `--nodes N` there are N of them, and this returns once each says the cluster has N.
    static func start(_ scenario: String, options: CommonOptions, serverArguments: [String] = [],
                      serverEnvironment: [String: String] = [:],
                      prepare: ((SeedSite) async throws -> Void)? = nil) async throws -> Harness {
        raiseOpenFileLimit()
        guard options.nodes >= 1 else { throw ValidationError("--nodes must be at least 1") }
        if options.nodes > 1 && options.database == nil {
            throw ValidationError("--nodes \(options.nodes) needs --database: the nodes of a cluster share a PostgreSQL database")
        }
        if let url = options.url {
            guard options.database == nil, options.nodes == 1 else {
                throw ValidationError("--database and --nodes are for the servers imbench starts, not for --url")
            }
            guard let components = URLComponents(string: url), let host = components.host else {
                throw ValidationError("--url must look like http://127.0.0.1:8080")
            }
            let target = ServerTarget(host: host == "localhost" ? "127.0.0.1" : host, port: components.port ?? 80,
                                      appKey: options.appKey, appSecret: options.appSecret, pid: options.serverPid)
            return Harness(scenario: scenario, options: options, targets: [target], servers: [], database: nil, monitor: nil,
                           temporaryDataDir: nil)
        }
        let temporary = options.dataDir == nil
        let dataDir = options.dataDir ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("imbench-\(scenario)-\(UUID().uuidString.prefix(8))").path
        var database: BenchDatabase?
        var servers: [ServerProcess] = []
        var monitor: DatabaseMonitor?
        do {
            if let url = options.database {
                database = try await BenchDatabase.create(serverURL: url, scenario: scenario, keep: options.keepDatabase)
            }
            if let prepare { try await prepare(SeedSite(dataDir: dataDir, databaseURL: database?.connectionString)) }
            let binary = options.imserver ?? ServerProcess.defaultBinary()
            for node in 1...options.nodes {
                var arguments = serverArguments + options.serverArguments
                if let database { arguments += ["--database", database.connectionString, "--node-id", "node\(node)"] }
                let nodeDir = options.nodes == 1 ? dataDir : (dataDir as NSString).appendingPathComponent("node\(node)")
                servers.append(try await ServerProcess.start(
                    binary: binary, dataDir: nodeDir, appKey: options.appKey, appSecret: options.appSecret,
                    extraArguments: arguments, environment: serverEnvironment))
            }
            if options.nodes > 1 {
                try await waitForCluster(servers.map(\.target))
                note("cluster: \(options.nodes) nodes on \(database?.name ?? "?"), ports " + servers.map { "\($0.target.port)" }.joined(separator: ", "))
            }
            if let database { monitor = try await DatabaseMonitor.start(database) }
        } catch {
            for server in servers { await server.stop() }
            await monitor?.stop()
            await database?.drop()
            if temporary { try? FileManager.default.removeItem(atPath: dataDir) }
            throw error
        }
        return Harness(scenario: scenario, options: options, targets: servers.map(\.target), servers: servers,
                       database: database, monitor: monitor, temporaryDataDir: temporary ? dataDir : nil)
    }

    /// Waits (up to 60 s) until every node's /health counts all the nodes.
    private static func waitForCluster(_ targets: [ServerTarget]) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        var counts: [Int?] = []
        while ContinuousClock.now < deadline {
            counts = []
            for target in targets { counts.append(await ServerAPI(target: target).health()?.nodes) }
            if counts.allSatisfy({ $0 == targets.count }) { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw BenchError("the cluster did not form within 60 s: the nodes' /health count \(counts.map { $0.map(String.init) ?? "?" }) nodes, expected \(targets.count) each")
    }

    /// The node a client's connection goes to: client `index` to node (index mod N). Nil with one
    /// server (the worker's own address).
    func port(forClient index: Int) -> Int? {
        targets.count > 1 ? targets[index % targets.count].port : nil
    }

    /// The clients with their nodes: client i of the list to node (i mod N).
    func place(_ clients: [ClientSpec]) -> [ClientSpec] {
        guard targets.count > 1 else { return clients }
        return clients.enumerated().map { index, client in
            var placed = client
            placed.port = port(forClient: index)
            return placed
        }
    }

    /// The run's description of where the server runs, for `result.run`.
    var layout: [String: String] {
        var run = ["store": storeKind]
        if targets.count > 1 { run["nodes"] = "\(targets.count)" }
        if let database { run["database"] = database.name }
        return run
    }

    /// Workers for this many connections: `--workers`, or one per 15,000 (at least `minimum`).
    func workerCount(connections: Int, minimum: Int = 1) -> Int {
        options.workers ?? max(minimum, (connections + 14_999) / 15_000)
    }

    func sourceAddressList() -> [String]? {
        options.sourceAddresses.map { count in (0..<max(1, count)).map { "127.0.0.\(2 + $0)" } }
    }

    func jobTemplate(chatRatePerClient: Double = 0, historyRatePerClient: Double = 0, historyCount: Int = 50) -> WorkerJob {
        WorkerJob(workerIndex: 0, host: target.host, port: target.port, appKey: target.appKey, sourceAddresses: [],
                  threads: options.threads, connectConcurrency: options.connectConcurrency, clients: [],
                  chatRatePerClient: chatRatePerClient, historyRatePerClient: historyRatePerClient,
                  historyCount: historyCount, payloadBytes: options.payloadBytes,
                  requestTimeoutSeconds: options.requestTimeout)
    }

    func launchWorkers(_ clients: [ClientSpec], template: WorkerJob, minimumWorkers: Int = 1) throws -> WorkerPool {
        try WorkerPool(clients: clients, count: workerCount(connections: clients.count, minimum: minimumWorkers),
                       template: template, sourceAddresses: sourceAddressList())
    }

    /// Starts a worker per bucket: for scenarios that place clients themselves.
    func launchWorkers(buckets: [[ClientSpec]], template: WorkerJob) throws -> WorkerPool {
        try WorkerPool(buckets: buckets.filter { !$0.isEmpty }, template: template, sourceAddresses: sourceAddressList())
    }

    /// The live sessions every node counts, added up (nil when a node does not answer).
    func sessions() async -> Int? {
        var total = 0
        for target in targets {
            guard let health = await ServerAPI(target: target).health() else { return nil }
            total += health.sessions
        }
        return total
    }

    /// Every node's RSS and CPU now (a node whose pid is unknown is nil), and the database's figures.
    func sampleServer() async -> ServerSample {
        let nodes = targets.map { $0.pid.flatMap(ProcessSample.read(pid:)) }
        let database = await monitor?.sample()
        return ServerSample(nodes: nodes, database: database, machine: MachineCPU.read(), atNanos: monotonicNanos())
    }

    func serverFigures(baseline: ServerSample?, windowStart: ServerSample?, windowEnd: ServerSample?) -> ServerFigures {
        var figures = ServerFigures(url: target.baseURL, startedByImbench: server != nil, binary: server?.binary,
                                    pid: target.pid.map(Int.init))
        figures.store = storeKind
        func seconds(_ start: UInt64, _ end: UInt64) -> Double? { end > start ? Double(end - start) / 1e9 : nil }
        if let end = windowEnd, end.nodes.contains(where: { $0 != nil }) {
            figures.rssLoadedKiB = end.rssKiB
            figures.rssPeakKiB = end.nodes.compactMap { $0?.peakRssKiB }.reduce(0, +)
            figures.openFiles = end.nodes.compactMap { $0?.openFiles }.reduce(0, +)
        }
        if let baseline, baseline.nodes.contains(where: { $0 != nil }) { figures.rssBaselineKiB = baseline.rssKiB }
        if let start = windowStart, let end = windowEnd, let window = seconds(start.atNanos, end.atNanos) {
            figures.windowSeconds = rounded(window, 2)
            if let cpu = end.cpuSeconds(since: start) {
                figures.cpuSecondsInWindow = rounded(cpu, 2)
                figures.cpuPercentOfOneCore = rounded(cpu / window * 100, 1)
            }
            if targets.count > 1 {
                figures.nodes = targets.indices.map { index in
                    var node = NodeFigures(node: "node\(index + 1)", url: targets[index].baseURL, pid: targets[index].pid.map(Int.init))
                    if let a = start.nodes[index], let b = end.nodes[index] {
                        node.cpuSecondsInWindow = rounded(b.cpuSeconds - a.cpuSeconds, 2)
                        node.cpuPercentOfOneCore = rounded((b.cpuSeconds - a.cpuSeconds) / window * 100, 1)
                        node.rssLoadedKiB = b.rssKiB
                        node.rssBaselineKiB = baseline?.nodes[index]?.rssKiB
                    }
                    return node
                }
            }
            if let a = start.database, let b = end.database, let database {
                figures.database = DatabaseFigures(a, b, window: window, name: database.name, url: database.url.description,
                                                   processesVisible: monitor?.postmasterPid != nil)
                if let cpu = figures.cpuSecondsInWindow, monitor?.postmasterPid != nil {
                    figures.serverAndDatabaseCpuPercentOfOneCore = rounded((cpu + b.cpuSeconds - a.cpuSeconds) / window * 100, 1)
                }
            }
            if let a = start.machine, let b = end.machine {
                figures.machineBusyPercentOfOneCore = rounded((b.busySeconds - a.busySeconds) / window * 100, 1)
            }
            figures.loadAverageAtWindowEnd = MachineCPU.loadAverage()
        }
        return figures
    }

    func finish() async {
        await withTaskGroup(of: Void.self) { group in
            for server in servers { group.addTask { await server.stop() } }
        }
        await monitor?.stop()
        await database?.drop()
        if let temporaryDataDir { try? FileManager.default.removeItem(atPath: temporaryDataDir) }
    }

    /// Waits until the monotonic clock reaches `time`.
    static func sleep(until time: UInt64) async {
        let now = monotonicNanos()
        if time > now { try? await Task.sleep(for: .nanoseconds(Int64(time - now))) }
    }
}

/// The servers' processes and the database at one moment.
struct ServerSample: Sendable {
    /// Each node's process figures (nil: pid unknown or gone).
    var nodes: [ProcessSample?]
    var database: DatabaseSample?
    /// The whole machine's CPU time (every process, this run's and others').
    var machine: MachineCPU?
    var atNanos: UInt64

    /// RSS of every node, added up.
    var rssKiB: Int { nodes.compactMap { $0?.rssKiB }.reduce(0, +) }

    /// CPU seconds every node used since `earlier`; nil unless both know every node.
    func cpuSeconds(since earlier: ServerSample) -> Double? {
        var total = 0.0
        for (a, b) in zip(earlier.nodes, nodes) {
            guard let a, let b else { return nil }
            total += b.cpuSeconds - a.cpuSeconds
        }
        return nodes.isEmpty ? nil : total
    }
}

/// One node's figures in the window.
struct NodeFigures: Codable, Sendable {
    var node: String
    var url: String
    var pid: Int?
    var rssBaselineKiB: Int?
    var rssLoadedKiB: Int?
    var cpuSecondsInWindow: Double?
    var cpuPercentOfOneCore: Double?
}

/// The PostgreSQL side in the window.
struct DatabaseFigures: Codable, Sendable {
    var name: String
    var url: String
    /// Whether the PostgreSQL server's processes were found in /proc (else no CPU figures).
    var processesVisible: Bool
    /// Every process of the PostgreSQL server (postmaster and its "postgres:" children, reaped ones
    /// included): CPU seconds and % of one core in the window.
    var cpuSecondsInWindow: Double?
    var cpuPercentOfOneCore: Double?
    /// The backends connected to the run's database (the nodes' pools and bus listeners, imbench's
    /// two monitoring connections), alive at the end of the window.
    var backendCpuPercentOfOneCore: Double?
    var processes: Int
    var backends: Int
    var commitsPerSecond: Double?
    var walSyncsPerSecond: Double?
    var walMiBPerSecond: Double?
    /// Heard by imbench's own LISTEN on the bus channel (one more listener than the nodes).
    var notificationsPerSecond: Double
    var notificationKiBPerSecond: Double
    var busMessagesPerSecond: Double
    var busMessagesPerNotification: Double?

    init(_ a: DatabaseSample, _ b: DatabaseSample, window: Double, name: String, url: String, processesVisible: Bool) {
        self.name = name
        self.url = url
        self.processesVisible = processesVisible
        if processesVisible {
            cpuSecondsInWindow = rounded(b.cpuSeconds - a.cpuSeconds, 2)
            cpuPercentOfOneCore = rounded((b.cpuSeconds - a.cpuSeconds) / window * 100, 1)
            // Backends alive at both ends (a backend that ended is in the reaped total only).
            backendCpuPercentOfOneCore = rounded(max(0, b.backendCpuSeconds - a.backendCpuSeconds) / window * 100, 1)
        }
        processes = b.processes
        backends = b.backends
        if let x = a.commits, let y = b.commits { commitsPerSecond = rounded(Double(y - x) / window, 1) }
        if let x = a.walSyncs, let y = b.walSyncs { walSyncsPerSecond = rounded(Double(y - x) / window, 1) }
        if let x = a.walBytes, let y = b.walBytes { walMiBPerSecond = rounded((y - x) / 1_048_576 / window, 2) }
        notificationsPerSecond = rounded(Double(b.notifications - a.notifications) / window, 1)
        notificationKiBPerSecond = rounded(Double(b.notificationBytes - a.notificationBytes) / 1024 / window, 1)
        busMessagesPerSecond = rounded(Double(b.busMessages - a.busMessages) / window, 1)
        if b.notifications > a.notifications {
            busMessagesPerNotification = rounded(Double(b.busMessages - a.busMessages) / Double(b.notifications - a.notifications), 1)
        }
    }
}

/// The server's figures in a result.
struct ServerFigures: Codable, Sendable {
    var url: String
    var startedByImbench: Bool
    var binary: String?
    var pid: Int?
    /// RSS before the benchmark's connections were opened (after its users were created).
    var rssBaselineKiB: Int?
    /// RSS at the end of the measured window.
    var rssLoadedKiB: Int?
    /// Peak RSS of the process so far (VmHWM).
    var rssPeakKiB: Int?
    var openFiles: Int?
    var windowSeconds: Double?
    var cpuSecondsInWindow: Double?
    /// CPU time over wall time in the window: 100 = one core busy. With several nodes, RSS and CPU
    /// are the nodes' added up; `nodes` has each.
    var cpuPercentOfOneCore: Double?
    /// "sqlite", "postgres", or "unknown" (a --url server).
    var store: String?
    var nodes: [NodeFigures]?
    /// The PostgreSQL server's share (with --database).
    var database: DatabaseFigures?
    /// The nodes' CPU and the PostgreSQL server's, added up: the server's whole cost on this box.
    var serverAndDatabaseCpuPercentOfOneCore: Double?
    /// The whole machine's busy CPU in the window (every process: this run's and anything else
    /// running beside it), and the 1-minute load average at its end.
    var machineBusyPercentOfOneCore: Double?
    var loadAverageAtWindowEnd: Double?
}

/// The generator's own figures in a result.
struct GeneratorFigures: Codable, Sendable {
    var workers: Int
    var threadsPerWorker: Int
    var sourceAddresses: String
    var cpuSecondsInWindow: Double
    var cpuPercentOfOneCore: Double
}

/// What one scenario run produced: written as JSON and printed.
struct ScenarioResult: Codable, Sendable {
    var scenario: String
    /// "ok", or "failed" (a check of --quick failed, or the run broke).
    var status = "ok"
    var date = ISO8601DateFormatter().string(from: Date())
    var quick = false
    var machine = MachineInfo.current()
    /// What was run: counts, rates, durations.
    var run: [String: String] = [:]
    /// The headline numbers (throughput, per-connection memory, ...).
    var figures: [String: Double] = [:]
    var latencies: [String: LatencySummary] = [:]
    var counters: [String: Int] = [:]
    var errors: [String: Int] = [:]
    var server: ServerFigures?
    var generator: GeneratorFigures?
    var notes: [String] = []
    /// Checks that failed (counts that do not add up, errors, no samples).
    var problems: [String] = []
    /// A stepped run's figures per step (bus-probe).
    var steps: [[String: Double]]?

    init(scenario: String) {
        self.scenario = scenario
    }

    mutating func take(_ stats: WorkerStats) {
        for latency in Latency.allCases {
            if let summary = stats.summary(latency), summary.count > 0 { latencies[latency.rawValue] = summary }
        }
        for (counter, value) in stats.counters { counters[counter.rawValue] = value }
        errors = stats.errors
    }

    /// Prints the result for a reader.
    func printSummary() {
        var lines = ["", "== \(scenario)\(quick ? " (quick)" : ""): \(status) =="]
        lines.append("run        " + run.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "  "))
        for (name, value) in figures.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : fmt(value))")
        }
        for (name, summary) in latencies.sorted(by: { $0.key < $1.key }) {
            lines.append("  latency \(name.padding(toLength: 22, withPad: " ", startingAt: 0)) \(summary.line)")
        }
        if let server {
            var text = "  server                         "
            if let cpu = server.cpuPercentOfOneCore { text += "CPU \(fmt(cpu, 1))% of one core  " }
            if let rss = server.rssLoadedKiB { text += "RSS \(fmt(Double(rss) / 1024, 1)) MiB  " }
            if let peak = server.rssPeakKiB { text += "peak \(fmt(Double(peak) / 1024, 1)) MiB  " }
            if let base = server.rssBaselineKiB { text += "baseline \(fmt(Double(base) / 1024, 1)) MiB" }
            if server.pid == nil { text += "(pid unknown: pass --server-pid for RSS and CPU)" }
            if let nodes = server.nodes { text += " (\(nodes.count) nodes added up)" }
            lines.append(text)
            for node in server.nodes ?? [] {
                lines.append("    \(node.node.padding(toLength: 29, withPad: " ", startingAt: 0)) CPU \(node.cpuPercentOfOneCore.map { fmt($0, 1) } ?? "?")% of one core  RSS \(node.rssLoadedKiB.map { fmt(Double($0) / 1024, 1) } ?? "?") MiB  (\(node.url))")
            }
            if let db = server.database {
                var text = "  postgres                       "
                if let cpu = db.cpuPercentOfOneCore {
                    text += "CPU \(fmt(cpu, 1))% of one core (\(db.processes) processes; backends of \(db.name): \(fmt(db.backendCpuPercentOfOneCore ?? 0, 1))%)  "
                } else {
                    text += "CPU not visible (server not on this machine)  "
                }
                if let commits = db.commitsPerSecond { text += "commits \(fmt(commits, 0))/s  " }
                if let syncs = db.walSyncsPerSecond { text += "WAL fsyncs \(fmt(syncs, 0))/s  " }
                if let wal = db.walMiBPerSecond { text += "WAL \(fmt(wal, 2)) MiB/s" }
                lines.append(text)
                lines.append("  cluster bus                    \(fmt(db.notificationsPerSecond, 1)) NOTIFY/s, \(fmt(db.busMessagesPerSecond, 0)) messages/s (\(db.busMessagesPerNotification.map { fmt($0, 1) } ?? "-") per notification), \(fmt(db.notificationKiBPerSecond, 0)) KiB/s, heard by imbench's own LISTEN")
                if let total = server.serverAndDatabaseCpuPercentOfOneCore {
                    lines.append("  server + postgres              CPU \(fmt(total, 1))% of one core")
                }
            }
        }
        if let busy = server?.machineBusyPercentOfOneCore {
            var text = "  machine                        CPU \(fmt(busy, 1))% of one core busy in the window (all \(machine.cpus) cores: \(machine.cpus * 100)%)"
            if let ours = server?.serverAndDatabaseCpuPercentOfOneCore ?? server?.cpuPercentOfOneCore {
                let others = busy - ours - (generator?.cpuPercentOfOneCore ?? 0)
                text += "; outside the server\(server?.database != nil ? ", PostgreSQL" : "") and the generator's workers: \(fmt(others, 1))%"
            }
            if let load = server?.loadAverageAtWindowEnd { text += "; load average \(fmt(load, 2))" }
            lines.append(text)
        }
        if let generator {
            lines.append("  generator                      CPU \(fmt(generator.cpuPercentOfOneCore, 1))% of one core (\(generator.workers) worker(s) × \(generator.threadsPerWorker) thread(s), from \(generator.sourceAddresses))")
        }
        if let steps, !steps.isEmpty {
            let columns: [(String, String)] = [("offeredPerSecond", "offered/s"), ("deliveredPerSecond", "delivered/s"),
                                               ("deliveryP50Ms", "dlv p50 ms"), ("deliveryP99Ms", "dlv p99 ms"), ("ackP99Ms", "ack p99 ms"),
                                               ("nodesCpuPercent", "nodes CPU%"), ("postgresCpuPercent", "pg CPU%"),
                                               ("notificationsPerSecond", "NOTIFY/s"), ("busMessagesPerNotification", "msg/NOTIFY"),
                                               ("postgresCommitsPerSecond", "commits/s"), ("generatorCpuPercent", "gen CPU%"),
                                               ("outsideRunCpuPercent", "other CPU%"), ("errors", "errors")]
            lines.append("  " + columns.map { $0.1.padding(toLength: 12, withPad: " ", startingAt: 0) }.joined())
            for step in steps {
                lines.append("  " + columns.map { column in
                    (step[column.0].map { fmt($0, $0 >= 100 ? 0 : 1) } ?? "-").padding(toLength: 12, withPad: " ", startingAt: 0)
                }.joined())
            }
        }
        lines.append("  errors                         " + (errors.isEmpty ? "none" : errors.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")))
        for note in notes { lines.append("  note: \(note)") }
        for problem in problems { lines.append("  PROBLEM: \(problem)") }
        print(lines.joined(separator: "\n"))
    }
}

/// Writes results as pretty JSON (a single result, or the list of a --quick run).
func writeResults<T: Encodable>(_ value: T, to path: String?, name: String) throws -> String {
    let formatter = DateFormatter()
    formatter.dateFormat = "yyyyMMdd-HHmmss"
    let file = path ?? "bench-results/\(name)-\(formatter.string(from: Date())).json"
    let directory = (file as NSString).deletingLastPathComponent
    if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(value).write(to: URL(fileURLWithPath: file))
    return file
}

func rounded(_ value: Double, _ digits: Int) -> Double {
    let scale = pow(10, Double(digits))
    return (value * scale).rounded() / scale
}
