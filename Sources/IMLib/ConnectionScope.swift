/// One established connection and the work that belongs to it: the heartbeat, the offline sync,
/// rejoining chatrooms and the other catch-up after a connect run as children of one task group,
/// and ending the scope (disconnect, a lost connection, a kick) cancels them all at once. A job
/// checks `Task.isCancelled` after each suspension instead of comparing connection counters, and
/// its requests on the connection end with `CancellationError`.
final class ConnectionScope: Sendable {
    typealias Job = @Sendable () async -> Void

    let connection: WireConnection
    /// The index in the client's `serverURLs` of this connection's server.
    let serverIndex: Int
    private let jobs: AsyncStream<Job>.Continuation
    private let group: Task<Void, Never>

    init(connection: WireConnection, serverIndex: Int) {
        self.connection = connection
        self.serverIndex = serverIndex
        let (stream, jobs) = AsyncStream.makeStream(of: Job.self)
        self.jobs = jobs
        group = Task {
            await withDiscardingTaskGroup { group in
                for await job in stream {
                    group.addTask { await job() }
                }
            }
        }
    }

    /// Runs `job` as a child of this connection's task group (at once, concurrently with the
    /// others); a job given after `end()` never runs.
    func run(_ job: @escaping Job) {
        jobs.yield(job)
    }

    private func stop() {
        jobs.finish()
        group.cancel()
    }

    /// Cancels every job of this connection and closes the socket.
    func end() async {
        stop()
        await connection.close()
    }

    /// Cancels every job of this connection and closes the socket in the background (for a
    /// client that is going away).
    func cancel() {
        stop()
        let connection = connection
        Task { await connection.close() }
    }
}
