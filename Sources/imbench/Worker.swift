import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A worker process: `imbench worker`, started by the coordinator. It reads its job from stdin,
/// opens its clients' connections, reports `ready`, then follows the coordinator's commands
/// (`start`, `stop`, `exit`), writing events as JSON lines to stdout.
final class Worker: Sendable {
    let job: WorkerJob
    private let group: MultiThreadedEventLoopGroup
    private let drivers: [NIOLoopBound<LoopDriver>]
    private let cpuAtWindowStart = Mutex<Double?>(nil)

    init(job: WorkerJob) throws {
        self.job = job
        group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, job.threads))
        var drivers: [NIOLoopBound<LoopDriver>] = []
        for loop in group.makeIterator() {
            drivers.append(try loop.submit { NIOLoopBound(try LoopDriver(loop: loop, job: job), eventLoop: loop) }.wait())
        }
        self.drivers = drivers
        // Client i lives on loop i % threads.
        for (loop, driver) in drivers.enumerated() {
            let mine = stride(from: loop, to: job.clients.count, by: drivers.count).map { ($0, job.clients[$0]) }
            try driver.eventLoop.submit {
                for (index, spec) in mine { _ = driver.value.add(spec, index: index) }
            }.wait()
        }
    }

    static func main() async {
        raiseOpenFileLimit()
        // A coordinator that dies closes our stdin: then we exit too.
        var commands = LineReader.lines(fileDescriptor: 0).makeAsyncIterator()
        guard let first = await commands.next() else { exit(1) }
        do {
            let job = try JSONLines.decode(WorkerJob.self, Substring(first))
            let worker = try Worker(job: job)
            let (connected, failed) = await worker.connect { $0.role != .storm }
            emit(.ready(connected: connected, failed: failed))
            while let line = await commands.next() {
                switch try JSONLines.decode(WorkerCommand.self, Substring(line)) {
                case .start(let from, let until):
                    worker.start(measureFrom: from, measureUntil: until)
                case .restart(let from, let until, let rate):
                    worker.start(measureFrom: from, measureUntil: until, resettingTo: rate)
                case .stop:
                    emit(.result(await worker.stop()))
                case .exit:
                    await worker.shutdown()
                    exit(0)
                }
            }
            await worker.shutdown()
            exit(0)
        } catch {
            emit(.failed("\(error)"))
            exit(1)
        }
    }

    static func emit(_ event: WorkerEvent) {
        FileHandle.standardOutput.write(JSONLines.encode(event))
    }

    /// Connects the clients that match, at most `connectConcurrency` at once. Returns (ready, failed).
    func connect(where include: @escaping @Sendable (ClientSpec) -> Bool) async -> (Int, Int) {
        let indices = job.clients.indices.filter { include(job.clients[$0]) }
        var iterator = indices.makeIterator()
        var connected = 0
        var failed = 0
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<max(1, job.connectConcurrency) {
                guard let index = iterator.next() else { break }
                group.addTask { await self.connect(client: index) }
            }
            for await ok in group {
                if ok { connected += 1 } else { failed += 1 }
                if let index = iterator.next() {
                    group.addTask { await self.connect(client: index) }
                }
            }
        }
        return (connected, failed)
    }

    private func connect(client index: Int) async -> Bool {
        let driver = drivers[index % drivers.count]
        let local = index / drivers.count
        do {
            try await driver.eventLoop.flatSubmit { driver.value.clients[local].connect() }.get()
            return true
        } catch {
            return false
        }
    }

    /// Starts the load; storm clients start connecting now.
    func start(measureFrom: UInt64, measureUntil: UInt64, resettingTo chatRate: Double? = nil) {
        for driver in drivers {
            driver.eventLoop.execute {
                if let chatRate { driver.value.reset(chatRatePerClient: chatRate) }
                driver.value.startLoad(measureFrom: measureFrom, measureUntil: measureUntil)
            }
        }
        let now = monotonicNanos()
        Task {
            if measureFrom > now { try? await Task.sleep(for: .nanoseconds(Int64(measureFrom - now))) }
            let seconds = ProcessSample.current()?.cpuSeconds ?? 0
            self.cpuAtWindowStart.withLock { $0 = seconds }
        }
        if job.clients.contains(where: { $0.role == .storm }) {
            Task {
                _ = await self.connect { $0.role == .storm }
                Self.emit(.stormDone)
            }
        }
    }

    /// Stops the load, waits (up to the request timeout) for the answers still due, and returns the
    /// merged statistics of every loop.
    func stop() async -> WorkerStats {
        let cpuEnd = ProcessSample.current()?.cpuSeconds ?? 0
        for driver in drivers {
            driver.eventLoop.execute { driver.value.stopLoad() }
        }
        let deadline = ContinuousClock.now + .seconds(job.requestTimeoutSeconds)
        while ContinuousClock.now < deadline {
            var outstanding = 0
            for driver in drivers {
                outstanding += (try? await driver.eventLoop.submit { driver.value.outstandingRequests }.get()) ?? 0
            }
            if outstanding == 0 { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        // Pushes of the last acknowledged messages may still be on their way to their recipients
        // (in a group, to hundreds of them, and possibly from senders in other workers whose answers
        // are still due): wait until none has arrived for 300 ms, at most the request timeout.
        let quietDeadline = ContinuousClock.now + .seconds(job.requestTimeoutSeconds)
        var lastPushes = -1
        var quietSince = ContinuousClock.now
        while ContinuousClock.now < quietDeadline {
            try? await Task.sleep(for: .milliseconds(50))
            var pushes = 0
            for driver in drivers {
                pushes += (try? await driver.eventLoop.submit { driver.value.stats[.pushes] }.get()) ?? 0
            }
            if pushes != lastPushes {
                lastPushes = pushes
                quietSince = ContinuousClock.now
            } else if ContinuousClock.now - quietSince >= .milliseconds(300) {
                break
            }
        }
        var total = WorkerStats()
        for driver in drivers {
            if let stats = try? await driver.eventLoop.submit({ driver.value.collectedStats() }).get() {
                total.add(stats)
            }
        }
        total.cpuSeconds = max(0, cpuEnd - (cpuAtWindowStart.withLock { $0 } ?? cpuEnd))
        return total
    }

    func shutdown() async {
        for driver in drivers {
            try? await driver.eventLoop.submit { driver.value.closeAll() }.get()
        }
        try? await Task.sleep(for: .milliseconds(100))
        try? await group.shutdownGracefully()
    }
}
