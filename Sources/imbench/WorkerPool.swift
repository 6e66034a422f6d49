import Foundation
import IMProcess

/// The worker processes of one run, seen from the coordinator: imbench re-executed as
/// `imbench worker`, one job each, driven by commands on their stdin.
final class WorkerPool {
    private struct Handle {
        var process: ChildProcess
        var input: FileHandle
        var events: AsyncStream<String>.AsyncIterator
    }

    private var workers: [Handle] = []

    /// Spreads the clients over `count` workers (client i to worker i % count) and starts them.
    /// Worker w binds its connections to 127.0.0.(2+w) unless `sourceAddresses` lists addresses to
    /// share, so each worker has an address's 28,000 ephemeral ports to itself.
    convenience init(clients: [ClientSpec], count: Int, template: WorkerJob, sourceAddresses: [String]?) throws {
        let count = max(1, min(count, max(1, clients.count)))
        var buckets = [[ClientSpec]](repeating: [], count: count)
        for (index, client) in clients.enumerated() { buckets[index % count].append(client) }
        try self.init(buckets: buckets, template: template, sourceAddresses: sourceAddresses)
    }

    /// Starts one worker per bucket of clients (worker w gets bucket w).
    init(buckets: [[ClientSpec]], template: WorkerJob, sourceAddresses: [String]?) throws {
        for (index, bucket) in buckets.enumerated() {
            var job = template
            job.workerIndex = index
            job.clients = bucket
            job.sourceAddresses = sourceAddresses ?? ["127.0.0.\(2 + index)"]
            let process = try ChildProcess(currentExecutablePath(), ["worker"], standardInput: .pipe, standardOutput: .pipe)
            let events = LineReader.lines(fileDescriptor: process.standardOutput!).makeAsyncIterator()
            let handle = Handle(process: process, input: FileHandle(fileDescriptor: process.standardInput!, closeOnDealloc: false),
                                events: events)
            handle.input.write(JSONLines.encode(job))
            workers.append(handle)
        }
    }

    var count: Int { workers.count }

    /// Worker process ids, to sample their CPU.
    var pids: [Int32] { workers.map { $0.process.pid } }

    private func next(_ index: Int) async throws -> WorkerEvent {
        guard let line = await workers[index].events.next() else {
            throw BenchError("worker \(index) ended (\(workers[index].process.termination.map { "\($0)" } ?? "its output closed"))")
        }
        let event = try JSONLines.decode(WorkerEvent.self, Substring(line))
        if case .failed(let reason) = event { throw BenchError("worker \(index) failed: \(reason)") }
        return event
    }

    /// Waits until every worker has connected its clients; returns (connected, failed).
    func waitReady() async throws -> (connected: Int, failed: Int) {
        var connected = 0
        var failed = 0
        for index in workers.indices {
            if case .ready(let ok, let bad) = try await next(index) {
                connected += ok
                failed += bad
            }
        }
        return (connected, failed)
    }

    func send(_ command: WorkerCommand) {
        for worker in workers { worker.input.write(JSONLines.encode(command)) }
    }

    /// Waits for every worker's `stormDone`.
    func waitStormDone() async throws {
        for index in workers.indices {
            while true {
                if case .stormDone = try await next(index) { break }
            }
        }
    }

    /// Stops the load and returns every worker's statistics merged.
    func stop() async throws -> WorkerStats {
        send(.stop)
        var total = WorkerStats()
        for index in workers.indices {
            while true {
                if case .result(let stats) = try await next(index) {
                    total.add(stats)
                    break
                }
            }
        }
        return total
    }

    /// Tells every worker to close its connections and exit, and waits for them.
    func exit() async {
        send(.exit)
        let deadline = ContinuousClock.now + .seconds(20)
        for worker in workers {
            if await worker.process.exit(within: deadline - ContinuousClock.now) == nil { worker.process.terminate() }
        }
    }
}
