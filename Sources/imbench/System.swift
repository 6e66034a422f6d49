import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Nanoseconds of CLOCK_MONOTONIC. The clock is system-wide, so a timestamp taken in one process
/// (a sender in one worker) can be compared with one taken in another (its recipient in another).
@inline(__always)
func monotonicNanos() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// A process's memory and CPU time, read from /proc/<pid>/status and /proc/<pid>/stat.
struct ProcessSample: Codable, Sendable {
    /// Resident set size, KiB (VmRSS).
    var rssKiB: Int
    /// Peak resident set size, KiB (VmHWM).
    var peakRssKiB: Int
    /// User + system CPU time, seconds.
    var cpuSeconds: Double
    /// Open file descriptors (entries of /proc/<pid>/fd); -1 when not readable.
    var openFiles: Int
    /// When the sample was taken (monotonic ns).
    var atNanos: UInt64

    /// Reads the process's figures; nil when the process is gone or /proc is not there.
    static func read(pid: Int32) -> ProcessSample? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        func kib(_ field: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
                return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
            }
            return 0
        }
        // Fields after the command name (which may hold spaces) start at ") "; utime and stime are
        // fields 14 and 15 of the line, 12 and 13 after the name.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        return ProcessSample(rssKiB: kib("VmRSS"), peakRssKiB: kib("VmHWM"), cpuSeconds: (utime + stime) / ticks,
                             openFiles: files, atNanos: monotonicNanos())
    }

    static func current() -> ProcessSample? { read(pid: getpid()) }
}

/// What the benchmark ran on, for the results file.
struct MachineInfo: Codable, Sendable {
    var cpuModel: String
    var cpus: Int
    var memoryGiB: Double
    var kernel: String
    var openFilesLimit: Int

    static func current() -> MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown"
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let memKiB = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        var name = utsname()
        uname(&name)
        let kernel = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return MachineInfo(cpuModel: model, cpus: ProcessInfo.processInfo.activeProcessorCount,
                           memoryGiB: (memKiB / 1_048_576 * 10).rounded() / 10, kernel: kernel,
                           openFilesLimit: Int(limit.rlim_cur))
    }
}

/// Raises this process's open-file limit to its hard limit (the machine allows 20,000).
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// The path of the running imbench binary (workers are this binary re-executed).
func currentExecutablePath() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

/// Writes a line to standard error at once (progress; standard output carries results).
func note(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// The whole machine's CPU time so far (every process, from the "cpu" line of /proc/stat): busy
/// (user, nice, system, irq, softirq, steal) and idle (idle, iowait) seconds, all cores added up.
struct MachineCPU: Codable, Sendable {
    var busySeconds: Double
    var idleSeconds: Double

    static func read() -> MachineCPU? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 8 else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        // user nice system idle iowait irq softirq steal
        let busy = values[0] + values[1] + values[2] + values[5] + values[6] + values[7]
        return MachineCPU(busySeconds: busy / ticks, idleSeconds: (values[3] + values[4]) / ticks)
    }

    /// The 1-minute load average.
    static func loadAverage() -> Double? {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.flatMap { Double($0) }
    }
}
