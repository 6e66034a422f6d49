import Synchronization

/// Receives server events in order, and is awaited: the event's publisher goes on only once every
/// handler has had it (delivery queues a batch's pushes before the next batch is delivered).
public protocol ServerEventHandler: Sendable {
    func handle(_ event: ServerEvent) async
}

/// The server's event seam. Handlers given at construction are awaited in order for each event;
/// observers (`subscribe()`) get every event later through a stream of their own and never slow
/// the publisher. With no observer, publishing an event costs a lock and nothing else.
public final class ServerEvents: Sendable {
    private let handlers: [any ServerEventHandler]
    private let observers = Mutex<[Int: AsyncStream<ServerEvent>.Continuation]>([:])
    private let nextObserver = Atomic<Int>(0)

    public init(handlers: [any ServerEventHandler]) {
        self.handlers = handlers
    }

    /// Tells the handlers, then the observers.
    public func publish(_ event: ServerEvent) async {
        for handler in handlers { await handler.handle(event) }
        observe(event)
    }

    /// Tells the observers only: for events that no handler acts on, from code that cannot wait.
    public func observe(_ event: ServerEvent) {
        observers.withLock { observers in
            for continuation in observers.values { continuation.yield(event) }
        }
    }

    /// Every event from now on, until the stream is dropped or cancelled. An observer that falls
    /// more than `buffer` events behind loses the oldest (it must not hold the server up).
    public func subscribe(buffer: Int = 10_000) -> AsyncStream<ServerEvent> {
        let id = nextObserver.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: ServerEvent.self, bufferingPolicy: .bufferingNewest(buffer))
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        observers.withLock { $0[id] = continuation }
        return stream
    }
}

extension ServerEvents {
    /// Publishes who joined or left a group or ultra group through the Server API.
    func membershipChanged(_ kind: MembershipChange.Kind, appId: Int64, groupId: String, joined: [String] = [],
                           left: [String] = [], dismissed: Bool = false) async {
        await publish(.membershipChanged(MembershipChange(kind: kind, appId: appId, groupId: groupId, joined: joined, left: left,
                                                          dismissed: dismissed, origin: .serverAPI)))
    }
}
