import Foundation
import IMWire
import Synchronization

/// A connection's sends that may wait for the app's message callback, run beside its reader: one
/// lane per conversation, in the order they arrived. A slow answer holds up that conversation's
/// later messages only; the connection's other conversations and requests go on.
final class SendLanes: Sendable {
    private let tails = Mutex<[String: (id: Int, task: Task<Void, Never>)]>([:])
    private let counter = Atomic<Int>(0)

    /// The lane of a SEND_MESSAGE frame: its conversation.
    static func lane(of frame: Im_Frame) -> String {
        guard let request = try? frame.body(Im_SendMessageRequest.self) else { return "" }
        return "\(request.conversationType)|\(request.targetID)|\(request.channelID)"
    }

    /// Whether sends of this lane are still running (a later one must queue behind them).
    func isBusy(_ lane: String) -> Bool {
        tails.withLock { $0[lane] != nil }
    }

    /// Runs `body` after what the lane already holds.
    func run(_ lane: String, _ body: @escaping @Sendable () async -> Void) {
        let id = counter.add(1, ordering: .relaxed).newValue
        tails.withLock { tails in
            let previous = tails[lane]?.task
            let task = Task {
                await previous?.value
                await body()
                self.finished(lane, id: id)
            }
            tails[lane] = (id, task)
        }
    }

    private func finished(_ lane: String, id: Int) {
        tails.withLock { tails in
            if tails[lane]?.id == id { tails[lane] = nil }
        }
    }
}
