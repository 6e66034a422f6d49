#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A child process started with `posix_spawn`, for the media tools the server runs, the tests and
/// imbench.
///
/// Foundation's `Process.run()` on Linux over-reads a `dirent` while it lists `/proc/self/fd`
/// (swift-corelibs-foundation PR 5472, still in Swift 6.3) and crashes the parent now and then;
/// a test suite that starts many child processes met it. This type does what those callers need
/// (arguments, environment, working directory, standard streams to a pipe, a file or nowhere,
/// signals, the exit status) without that code path. Descriptors other than the three standard
/// ones are not inherited.
public final class ChildProcess: @unchecked Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The parent's own stream.
        case inherit
        /// /dev/null.
        case null
        /// A file, created or truncated.
        case file(String)
        /// A pipe; the parent's end is `standardInput`, `standardOutput` or `standardError`.
        case pipe
        /// For standard error: wherever standard output goes, interleaved in the order written.
        case standardOutput
    }

    /// How the child ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        /// The shell's convention: the exit status, or 128 + the signal.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
        }

        public var description: String {
            switch self {
            case .exited(let code): "exit status \(code)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    public let pid: pid_t
    /// The parent's end of each stream given as `.pipe` (closed when this object goes away).
    public let standardInput: Int32?
    public let standardOutput: Int32?
    public let standardError: Int32?

    /// When `posix_spawn` returned.
    public let startedAt: ContinuousClock.Instant
    private let condition = NSCondition()
    private var ended: Termination?
    private var endedAt: ContinuousClock.Instant?
    private var waiters: [CheckedContinuation<Termination, Never>] = []

    /// Starts `executable` (a path) with `arguments`. `environment` nil passes this process's own.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
                standardInput: Stream = .null, standardOutput: Stream = .inherit, standardError: Stream = .inherit) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // The child starts with default signal handling and an empty mask, whatever the parent set.
        var defaults = sigset_t()
        sigfillset(&defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        #if canImport(Darwin)
        flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #endif
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var parentEnds: [Int32?] = [nil, nil, nil]
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        func closeParentEnds() { for case let descriptor? in parentEnds { close(descriptor) } }
        for (target, stream) in [standardInput, standardOutput, standardError].enumerated() {
            let target = Int32(target)
            switch stream {
            case .inherit:
                #if canImport(Darwin)
                posix_spawn_file_actions_adddup2(&actions, target, target)
                #endif
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .standardOutput:
                precondition(target == 2, "only standard error can follow standard output")
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else {
                    closeParentEnds()
                    throw ChildProcessError("pipe: \(String(cString: strerror(errno)))")
                }
                // [read, write]: the child reads its stdin and writes the others.
                let (parentEnd, childEnd) = target == 0 ? (ends[1], ends[0]) : (ends[0], ends[1])
                _ = fcntl(parentEnd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(childEnd, F_SETFD, FD_CLOEXEC)
                parentEnds[Int(target)] = parentEnd
                childEnds.append(childEnd)
                posix_spawn_file_actions_adddup2(&actions, childEnd, target)
            }
        }
        #if canImport(Glibc)
        // glibc 2.34+: close every other descriptor in the child (not in Swift's Glibc module).
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        #endif
        if let directory {
            #if canImport(Glibc)
            // glibc 2.29+, also missing from Swift's Glibc module.
            guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else {
                closeParentEnds()
                throw ChildProcessError("this C library cannot set a child's working directory")
            }
            typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
            _ = directory.withCString { unsafeBitCast(symbol, to: ChangeDirectory.self)(&actions, $0) }
            #else
            posix_spawn_file_actions_addchdir_np(&actions, directory)
            #endif
        }

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let pairs = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = pairs.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }

        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            closeParentEnds()
            throw ChildProcessError("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        self.startedAt = .now
        self.standardInput = parentEnds[0]
        self.standardOutput = parentEnds[1]
        self.standardError = parentEnds[2]
        // One thread per child waits for it: simple, and children here are few.
        Thread.detachNewThread { [self] in reap() }
    }

    deinit {
        for case let descriptor? in [standardInput, standardOutput, standardError] { close(descriptor) }
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let termination: Termination = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
        let now = ContinuousClock.now
        condition.lock()
        ended = termination
        endedAt = now
        let resumed = waiters
        waiters = []
        condition.broadcast()
        condition.unlock()
        for waiter in resumed { waiter.resume(returning: termination) }
    }

    /// How the child ended; nil while it runs.
    public var termination: Termination? {
        condition.lock()
        defer { condition.unlock() }
        return ended
    }

    public var isRunning: Bool { termination == nil }

    /// How long the child ran, from `posix_spawn` until its own thread saw it end; nil while it
    /// runs. Unlike a clock read by the caller after awaiting `exit()`, this does not include the
    /// time the caller's task waited to be scheduled.
    public var lifetime: Duration? {
        condition.lock()
        defer { condition.unlock() }
        return endedAt.map { $0 - startedAt }
    }

    /// Sends `signal` to the child if it still runs.
    public func signal(_ signal: Int32) {
        condition.lock()
        defer { condition.unlock() }
        if ended == nil { kill(pid, signal) }
    }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// Blocks the calling thread until the child ends.
    @discardableResult
    public func waitUntilExit() -> Termination {
        condition.lock()
        defer { condition.unlock() }
        while ended == nil { condition.wait() }
        return ended!
    }

    /// Suspends until the child ends.
    @discardableResult
    public func exit() async -> Termination {
        await withCheckedContinuation { continuation in
            condition.lock()
            if let ended {
                condition.unlock()
                continuation.resume(returning: ended)
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }

    /// The child's end, or nil if it still runs after `limit`.
    public func exit(within limit: Duration) async -> Termination? {
        let deadline = ContinuousClock.now + limit
        while isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return termination
    }

    /// One `read(2)` from `descriptor`, retried on EINTR: nil on an error, empty at end of file.
    public static func readChunk(_ descriptor: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count >= 0 { return Array(buffer.prefix(count)) }
            if errno != EINTR { return nil }
        }
    }

    /// Everything `descriptor` gives until end of file (blocking).
    public static func readAll(_ descriptor: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        while let chunk = readChunk(descriptor), !chunk.isEmpty { bytes += chunk }
        return bytes
    }

    /// `readChunk`, waited for on a thread of its own. A read from a child's pipe blocks until the
    /// child writes, which may take seconds (a server starting): on a cooperative thread that would
    /// hold up every task of the process meanwhile, and there are as many of those as cores.
    public static func nextChunk(_ descriptor: Int32) async -> [UInt8]? {
        await BlockingWait.run { readChunk(descriptor) }
    }

    /// `readAll`, waited for on a thread of its own (see `nextChunk`).
    public static func readToEnd(_ descriptor: Int32) async -> [UInt8] {
        await BlockingWait.run { readAll(descriptor) }
    }
}

/// Blocking calls (a read that waits for a peer, `poll`) made from async code, each on a thread
/// started for it.
///
/// Not on Swift's cooperative pool: it has a thread per core, and one blocked call would stop every
/// task of the process. Not on Dispatch either: its worker threads on Linux are shared with
/// everything else that uses Dispatch (SQLite through GRDB, every in-process server's and
/// client's database), and when those are busy or blocked in `fsync` it adds threads slowly, so a
/// read queued there may not even start for many seconds. A thread costs tens of microseconds to
/// start, which these callers (tests, tools, child processes) can pay.
public enum BlockingWait {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
