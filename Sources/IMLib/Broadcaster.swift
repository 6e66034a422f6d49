import Foundation
import Synchronization

/// Fans events out to every subscriber's AsyncStream (IMKit's models use it too: package access).
package final class Broadcaster<Element: Sendable>: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<Element>.Continuation]>([:])
    private let yields = Atomic<Int>(0)

    /// How many events were yielded so far: a subscriber from the start has been given exactly this
    /// many, which lets a reader of one stream know it has caught up with an event of another.
    package var yieldedCount: Int { yields.load(ordering: .acquiring) }

    /// A new stream of the events from now on (after `initial`, if given).
    package init() {}

    package func stream(initial: Element? = nil) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        let id = UUID()
        if let initial { continuation.yield(initial) }
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    package func yield(_ element: Element) {
        yields.add(1, ordering: .releasing)
        for continuation in subscribers.withLock({ Array($0.values) }) {
            continuation.yield(element)
        }
    }
}
