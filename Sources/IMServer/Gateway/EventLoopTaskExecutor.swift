import NIOCore
import Synchronization

/// A connection's event loop as the task executor its requests run on.
///
/// A request read on the event loop used to go to Swift's global pool to run, and its reply came
/// back to the event loop to be written: two thread hand-offs, each a futex wake-up and a context
/// switch on an idle core, for every request (one-to-one sends at 5,000/s: ten thousand hand-offs a
/// second). With the loop as the task's preferred executor the request runs where it was read,
/// and its reply is queued where it is written; only what must leave the loop does (the store's
/// queries on their own threads, the message log's writer). A request's code must therefore not
/// block: every wait in it is an `await`, as it was on the global pool, whose two threads here
/// would have stalled just the same.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// One executor per event loop, made at its first use (a server has a loop per core).
    private static let executors = Mutex<[ObjectIdentifier: EventLoopTaskExecutor]>([:])

    static func of(_ eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        executors.withLock { executors in
            let id = ObjectIdentifier(eventLoop)
            if let executor = executors[id] { return executor }
            let executor = EventLoopTaskExecutor(eventLoop: eventLoop)
            executors[id] = executor
            return executor
        }
    }
}
