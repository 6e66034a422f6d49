import IMCore
import Synchronization

/// What the gateway and the connection guard need to know of a graceful shutdown: whether it has
/// begun (no new connections, requests or sessions are taken from then on), and the client
/// requests and gateway connections still under way, which `GatewayCloser` waits for.
public final class ServerShutdown: Sendable {
    enum Activity: Sendable {
        /// A client request being handled.
        case request
        /// A gateway connection that sent CONNECT: from then until its gateway ends.
        case session
    }

    private struct State {
        var stopping = false
        var requests = 0
        var sessions = 0
        var waiters: [(Activity, CheckedContinuation<Void, Never>)] = []

        func count(_ activity: Activity) -> Int {
            switch activity {
            case .request: requests
            case .session: sessions
            }
        }
    }

    private let state = Mutex(State())

    init() {}

    /// The error a client request or connect gets once the shutdown has begun.
    static let refusal = IMError(.serverUnavailable, "the server is shutting down: send the request again once reconnected")

    /// Whether the shutdown has begun.
    public var isStopping: Bool { state.withLock { $0.stopping } }

    /// Begins the shutdown: from now on `beginRequest` refuses.
    func stop() {
        state.withLock { $0.stopping = true }
    }

    /// Counts a client request as under way; false (and nothing counted) once the shutdown has begun.
    func beginRequest() -> Bool {
        state.withLock { state in
            guard !state.stopping else { return false }
            state.requests += 1
            return true
        }
    }

    func endRequest() {
        end(.request)
    }

    /// Counts a gateway connection from its CONNECT until its gateway ends. Counted even while
    /// stopping: a connect that began just before the shutdown is refused once it has registered
    /// its session, and the shutdown waits for it to end.
    func beginSession() {
        state.withLock { $0.sessions += 1 }
    }

    func endSession() {
        end(.session)
    }

    private func end(_ activity: Activity) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            switch activity {
            case .request: state.requests -= 1
            case .session: state.sessions -= 1
            }
            guard state.count(activity) == 0 else { return [] }
            return takeWaiters(for: activity, in: &state)
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns once nothing of the kind is under way, or the task is cancelled.
    func finished(_ activity: Activity) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    // Checked under the lock that the cancellation handler takes too.
                    if state.count(activity) == 0 || Task.isCancelled { return true }
                    state.waiters.append((activity, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let ready = state.withLock { takeWaiters(for: activity, in: &$0) }
            for waiter in ready { waiter.resume() }
        }
    }

    private func takeWaiters(for activity: Activity, in state: inout State) -> [CheckedContinuation<Void, Never>] {
        var ready: [CheckedContinuation<Void, Never>] = []
        state.waiters.removeAll { waiter in
            guard waiter.0 == activity else { return false }
            ready.append(waiter.1)
            return true
        }
        return ready
    }

    /// Requests and gateway connections under way (for the log).
    var counts: (requests: Int, sessions: Int) { state.withLock { ($0.requests, $0.sessions) } }
}
