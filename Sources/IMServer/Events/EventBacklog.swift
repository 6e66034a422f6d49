import Synchronization

/// The events an observer has been given and not yet handled, read ahead of it from its stream so
/// that it can take all of them at once (the push decider decides the messages committed while it
/// was busy in one go, one transaction for several). Up to `limit` are held; past that the reader
/// waits and the stream's own buffer holds the rest.
final class EventBacklog: Sendable {
    private struct State {
        var events: [ServerEvent] = []
        var finished = false
    }

    private let state = Mutex(State())
    private let ready = WakeSignal()
    private let room = WakeSignal()
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Reads `stream` into the backlog until it ends (or its task is cancelled), then finishes.
    func fill(from stream: AsyncStream<ServerEvent>) async {
        for await event in stream {
            while !state.withLock({ state in
                guard state.events.count < limit else { return false }
                state.events.append(event)
                return true
            }) {
                await room.wait(milliseconds: 100)
            }
            ready.signal()
        }
        state.withLock { $0.finished = true }
        ready.signal()
    }

    /// Every event held, in order, waiting for one if none is; nil once the stream has ended and
    /// every event was taken.
    func take() async -> [ServerEvent]? {
        while true {
            let taken = state.withLock { state -> [ServerEvent]? in
                guard !state.events.isEmpty else { return state.finished ? nil : [] }
                var taken: [ServerEvent] = []
                swap(&taken, &state.events)
                return taken
            }
            guard let taken else { return nil }
            if !taken.isEmpty {
                room.signal()
                return taken
            }
            await ready.wait(milliseconds: 1_000)
        }
    }
}
