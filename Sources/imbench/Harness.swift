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

    init() {}
}

/// One benchmark run's surroundings: the server (started or given), its Server API, and the
/// figures sampled from its process.
final class Harness {
    let scenario: String
    let options: CommonOptions
    let target: ServerTarget
    let server: ServerProcess?
    let api: ServerAPI
    private let temporaryDataDir: String?

    private init(scenario: String, options: CommonOptions, target: ServerTarget, server: ServerProcess?, temporaryDataDir: String?) {
        self.scenario = scenario
        self.options = options
        self.target = target
        self.server = server
        self.api = ServerAPI(target: target)
        self.temporaryDataDir = temporaryDataDir
    }

    /// Starts the server (unless `--url`), after `prepare` has had the data directory (seeding).
    static func start(_ scenario: String, options: CommonOptions, serverArguments: [String] = [],
                      serverEnvironment: [String: String] = [:],
                      prepare: ((String) async throws -> Void)? = nil) async throws -> Harness {
        raiseOpenFileLimit()
        if let url = options.url {
            guard let components = URLComponents(string: url), let host = components.host else {
                throw ValidationError("--url must look like http://127.0.0.1:8080")
            }
            let target = ServerTarget(host: host == "localhost" ? "127.0.0.1" : host, port: components.port ?? 80,
                                      appKey: options.appKey, appSecret: options.appSecret, pid: options.serverPid)
            return Harness(scenario: scenario, options: options, target: target, server: nil, temporaryDataDir: nil)
        }
        let temporary = options.dataDir == nil
        let dataDir = options.dataDir ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("imbench-\(scenario)-\(UUID().uuidString.prefix(8))").path
        if let prepare { try await prepare(dataDir) }
        let server = try await ServerProcess.start(
            binary: options.imserver ?? ServerProcess.defaultBinary(), dataDir: dataDir,
            appKey: options.appKey, appSecret: options.appSecret,
            extraArguments: serverArguments + options.serverArguments, environment: serverEnvironment)
        return Harness(scenario: scenario, options: options, target: server.target, server: server,
                       temporaryDataDir: temporary ? dataDir : nil)
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

    /// The server process's RSS and CPU now (nil when its pid is unknown).
    func sampleServer() -> ProcessSample? {
        target.pid.flatMap(ProcessSample.read(pid:))
    }

    func serverFigures(baseline: ProcessSample?, windowStart: ProcessSample?, windowEnd: ProcessSample?) -> ServerFigures {
        var figures = ServerFigures(url: target.baseURL, startedByImbench: server != nil, binary: server?.binary,
                                    pid: target.pid.map(Int.init))
        figures.rssBaselineKiB = baseline?.rssKiB
        figures.rssLoadedKiB = windowEnd?.rssKiB
        figures.rssPeakKiB = windowEnd?.peakRssKiB
        figures.openFiles = windowEnd?.openFiles
        if let start = windowStart, let end = windowEnd, end.atNanos > start.atNanos {
            let seconds = Double(end.atNanos - start.atNanos) / 1e9
            figures.windowSeconds = rounded(seconds, 2)
            figures.cpuSecondsInWindow = rounded(end.cpuSeconds - start.cpuSeconds, 2)
            figures.cpuPercentOfOneCore = rounded((end.cpuSeconds - start.cpuSeconds) / seconds * 100, 1)
        }
        return figures
    }

    func finish() async {
        await server?.stop()
        if let temporaryDataDir { try? FileManager.default.removeItem(atPath: temporaryDataDir) }
    }

    /// Waits until the monotonic clock reaches `time`.
    static func sleep(until time: UInt64) async {
        let now = monotonicNanos()
        if time > now { try? await Task.sleep(for: .nanoseconds(Int64(time - now))) }
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
    /// CPU time over wall time in the window: 100 = one core busy.
    var cpuPercentOfOneCore: Double?
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
            lines.append(text)
        }
        if let generator {
            lines.append("  generator                      CPU \(fmt(generator.cpuPercentOfOneCore, 1))% of one core (\(generator.workers) worker(s) × \(generator.threadsPerWorker) thread(s), from \(generator.sourceAddresses))")
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
