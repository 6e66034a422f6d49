import Foundation
import IMStorePostgres
import Logging
import PostgresNIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL database of one run (`--database`): a fresh database on the given server, made
/// for the run and dropped afterwards (unless `--keep-database`).
struct BenchDatabase: Sendable {
    /// The server's URL as given (its database is where `CREATE DATABASE` runs).
    let serverURL: PostgresURL
    /// The run's own database.
    let url: PostgresURL
    let keep: Bool

    var name: String { url.database }

    /// The URL the imserver nodes get (with the password, if the given URL had one).
    var connectionString: String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.user = url.user
        components.password = url.password
        components.host = url.host
        components.port = url.port
        components.path = "/" + url.database
        if url.sslMode != .prefer { components.queryItems = [URLQueryItem(name: "sslmode", value: url.sslMode.rawValue)] }
        return components.string ?? "postgres://\(url.user)@\(url.host):\(url.port)/\(url.database)"
    }

    /// Creates `imbench_<scenario>_<time>_<random>` on the server of `text`.
    static func create(serverURL text: String, scenario: String, keep: Bool) async throws -> BenchDatabase {
        let server: PostgresURL
        do {
            server = try PostgresURL(parsing: text)
        } catch {
            throw BenchError("--database: \(error)")
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyyMMdd_HHmmss"
        formatter.timeZone = TimeZone(identifier: "UTC")
        let slug = scenario.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }
        let name = "imbench_\(String(slug))_\(formatter.string(from: Date()))_\(String(UInt32.random(in: 0..<UInt32.max), radix: 36))"
        try await admin(server) { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        note("database: created \(name) on \(server.host):\(server.port) for this run")
        return BenchDatabase(serverURL: server, url: server.with(database: name), keep: keep)
    }

    /// Drops the run's database (its connections are ended first), unless it is to be kept.
    func drop() async {
        if keep {
            note("database: kept \(url) (--keep-database)")
            return
        }
        do {
            try await Self.admin(serverURL) { connection, logger in
                try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
            }
        } catch {
            note("database: could not drop \(name): \(error)")
        }
    }

    static func admin(_ url: PostgresURL, _ body: (PostgresConnection, Logger) async throws -> Void) async throws {
        let logger = Logger(label: "imbench-postgres")
        let connection = try await PostgresConnector.connect(url, logger: logger)
        do {
            try await body(connection, logger)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

/// What the database side cost and carried at one moment: the CPU time of the PostgreSQL server's
/// processes (read from /proc), its counters for the run's database, and the cluster bus's
/// notifications as a listener of imbench's own counts them.
struct DatabaseSample: Sendable {
    /// CPU seconds of every process of the PostgreSQL server: the postmaster, its children alive now
    /// ("postgres: …": backends, WAL writer, checkpointer, …), and the children it has reaped.
    var cpuSeconds: Double
    /// CPU seconds of the live backends connected to the run's database (the imserver nodes' pools
    /// and bus connections, and imbench's two monitoring connections).
    var backendCpuSeconds: Double
    /// Processes of the server alive now, and how many are backends of the run's database.
    var processes: Int
    var backends: Int
    /// Transactions committed in the run's database (`pg_stat_database.xact_commit`).
    var commits: Int64?
    /// WAL flushes to disk and WAL bytes (`pg_stat_wal`, the whole server).
    var walSyncs: Int64?
    var walBytes: Double?
    /// Notifications on the cluster bus's channel heard so far, their payload bytes, and the bus
    /// messages in them.
    var notifications: Int
    var notificationBytes: Int
    var busMessages: Int
    var atNanos: UInt64
}

/// Counts what goes over the cluster bus's channel (filled by the monitor's listening task).
final class BusCounter: Sendable {
    struct Counts {
        var notifications = 0
        var bytes = 0
        var messages = 0
    }

    private let counts = Mutex(Counts())

    func add(bytes: Int, messages: Int) {
        counts.withLock {
            $0.notifications += 1
            $0.bytes += bytes
            $0.messages += messages
        }
    }

    var current: Counts { counts.withLock { $0 } }
}

/// Watches the run's database: finds the PostgreSQL server's processes on this machine and
/// listens on the cluster bus's channel (`imserver_cluster`), counting what goes over it.
final class DatabaseMonitor: Sendable {
    static let busChannel = "imserver_cluster"

    let database: BenchDatabase
    /// The postmaster's process id, when the server runs on this machine and /proc shows it.
    let postmasterPid: Int32?
    private let query: PostgresConnection
    private let listener: PostgresConnection
    private let counter: BusCounter
    private let listening: Task<Void, Never>
    private let logger: Logger

    private init(database: BenchDatabase, postmasterPid: Int32?, query: PostgresConnection, listener: PostgresConnection,
                 counter: BusCounter, listening: Task<Void, Never>, logger: Logger) {
        self.database = database
        self.postmasterPid = postmasterPid
        self.query = query
        self.listener = listener
        self.counter = counter
        self.listening = listening
        self.logger = logger
    }

    static func start(_ database: BenchDatabase) async throws -> DatabaseMonitor {
        let logger = Logger(label: "imbench-monitor")
        let query = try await PostgresConnector.connect(database.url, logger: logger)
        let listener = try await PostgresConnector.connect(database.url, logger: logger)
        var backend: Int32?
        for try await pid in try await query.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) { backend = pid }
        let postmaster = backend.flatMap(PostgresProcesses.postmaster(ofBackend:))
        if postmaster == nil {
            note("database: the PostgreSQL server's processes are not visible in /proc (another machine?): its CPU is not reported")
        }
        let counter = BusCounter()
        // Counting starts once the listener is subscribed.
        let (subscribed, subscribe) = AsyncStream.makeStream(of: Void.self)
        let listening = Task {
            _ = try? await listener.listen(on: busChannel) { notifications in
                subscribe.finish()
                for try await notification in notifications {
                    let payload = notification.payload
                    counter.add(bytes: payload.utf8.count, messages: countMessages(payload))
                }
            }
            subscribe.finish()
        }
        for await _ in subscribed {}
        return DatabaseMonitor(database: database, postmasterPid: postmaster, query: query, listener: listener,
                               counter: counter, listening: listening, logger: logger)
    }

    /// The bus messages in one notification: `{"n":node,"b":number,"m":[message, …]}` (a reference
    /// to a stored payload, `"r":id`, is one message). Counts the objects directly inside the array,
    /// scanning the bytes (no JSON decoding: the listener must cost the box little).
    static func countMessages(_ payload: String) -> Int {
        var depth = 0
        var inString = false
        var escaped = false
        var arrayDepth = -1
        var count = 0
        for byte in payload.utf8 {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"):
                if arrayDepth >= 0 && depth == arrayDepth + 1 { count += 1 }
                depth += 1
            case UInt8(ascii: "["):
                if depth == 1 && arrayDepth < 0 { arrayDepth = depth }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            default: break
            }
        }
        // A message too large to inline is a reference to a stored payload: {"n":…,"b":…,"r":id}.
        return count == 0 && arrayDepth < 0 && payload.contains("\"r\":") ? 1 : count
    }

    func sample() async -> DatabaseSample {
        let bus = counter.current
        let processes = postmasterPid.map { PostgresProcesses.sample(postmaster: $0, database: database.name) }
        var commits: Int64?
        var walSyncs: Int64?
        var walBytes: Double?
        do {
            let rows = try await query.query("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()", logger: logger)
            for try await value in rows.decode(Int64.self) { commits = value }
            let wal = try await query.query("SELECT wal_sync, wal_bytes::float8 FROM pg_stat_wal", logger: logger)
            for try await (syncs, bytes) in wal.decode((Int64, Double).self) {
                walSyncs = syncs
                walBytes = bytes
            }
        } catch {
            note("database: statistics not read: \(String(reflecting: error).prefix(200))")
        }
        return DatabaseSample(cpuSeconds: processes?.cpuSeconds ?? 0, backendCpuSeconds: processes?.backendCpuSeconds ?? 0,
                              processes: processes?.processes ?? 0, backends: processes?.backends ?? 0,
                              commits: commits, walSyncs: walSyncs, walBytes: walBytes,
                              notifications: bus.notifications, notificationBytes: bus.bytes, busMessages: bus.messages,
                              atNanos: monotonicNanos())
    }

    func stop() async {
        listening.cancel()
        try? await listener.close()
        try? await query.close()
    }
}

/// The processes of a PostgreSQL server on this machine, from /proc.
enum PostgresProcesses {
    /// The parent of a backend, when it is a PostgreSQL postmaster.
    static func postmaster(ofBackend pid: Int32) -> Int32? {
        guard let stat = ProcStat.read(pid), stat.ppid > 1,
              commandLine(pid).hasPrefix("postgres:"),
              commandLine(stat.ppid).contains("postgres") else { return nil }
        return stat.ppid
    }

    struct Figures {
        var cpuSeconds: Double
        var backendCpuSeconds: Double
        var processes: Int
        var backends: Int
    }

    /// The postmaster's own CPU and that of the children it reaped (cutime, cstime), plus every
    /// live child whose command line starts with "postgres:"; backends of `database` apart.
    static func sample(postmaster: Int32, database: String) -> Figures {
        var figures = Figures(cpuSeconds: 0, backendCpuSeconds: 0, processes: 0, backends: 0)
        if let main = ProcStat.read(postmaster) {
            figures.cpuSeconds += main.cpuSeconds + main.childrenCpuSeconds
            figures.processes += 1
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry), pid != postmaster, let stat = ProcStat.read(pid), stat.ppid == postmaster else { continue }
            let command = commandLine(pid)
            guard command.hasPrefix("postgres:") else { continue }
            figures.cpuSeconds += stat.cpuSeconds
            figures.processes += 1
            // A backend's title: "postgres: USER DATABASE HOST(PORT) STATE".
            let words = command.split(separator: " ")
            if words.count >= 3 && words[2] == database {
                figures.backendCpuSeconds += stat.cpuSeconds
                figures.backends += 1
            }
        }
        return figures
    }

    static func commandLine(_ pid: Int32) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return "" }
        return String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            .trimmingCharacters(in: .whitespaces)
    }
}

/// The fields of /proc/<pid>/stat imbench reads.
struct ProcStat {
    var ppid: Int32
    var cpuSeconds: Double
    var childrenCpuSeconds: Double

    static let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func read(_ pid: Int32) -> ProcStat? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return nil }
        // After the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime …
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let ppid = Int32(fields[1]), let utime = Double(fields[11]), let stime = Double(fields[12]),
              let cutime = Double(fields[13]), let cstime = Double(fields[14]) else { return nil }
        return ProcStat(ppid: ppid, cpuSeconds: (utime + stime) / ticks, childrenCpuSeconds: (cutime + cstime) / ticks)
    }
}
