import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A thread for the server's background work (push decisions and sends, callbacks): on a machine
/// whose cores delivery needs, that work must not take them. The thread runs at a lower scheduling
/// priority (nice 10 where the system allows it), so the kernel gives the cores to the gateway and
/// the message log first and to the background whatever is left. `PushRunner` runs the push
/// decisions on one of these and the push sender on another, `CallbackRunner` its service's
/// background tasks on one (as the task executor preference); the push and callback transports
/// get event loops of their own at the same nice value (`imserver serve`).
final class BackgroundExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    init(name: String, nice: Int32 = 10) {
        let thread = Thread { [self] in run(nice: nice) }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs enqueued so far have run.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run(nice: Int32) {
        #if canImport(Glibc)
        // On Linux the nice value is a thread's own: PRIO_PROCESS with 0 changes the calling thread.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
        #endif
        var batch: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
                condition.unlock()
                return
            }
            swap(&batch, &jobs)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
