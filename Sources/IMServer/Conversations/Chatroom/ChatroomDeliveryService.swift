import IMCore
import ServiceLifecycle

/// Owns the chatrooms' delivery tasks: each room with pushes to send gets one
/// (`ChatroomService.deliver`), as a child of this service's task group. On graceful shutdown no
/// more tasks start; those running finish what their rooms queued (messages kept in history are
/// stored and their senders answered) and end, since the sessions they write to are closed by
/// then; `run` returns once they all have. A push queued after that is dropped, and a sender
/// waiting for its message to be stored is told it was not (31003).
struct ChatroomDeliveryService: Service {
    let chatrooms: ChatroomService

    func run() async {
        await withGracefulShutdownHandler {
            await chatrooms.runDeliveries()
        } onGracefulShutdown: {
            chatrooms.stopDeliveries()
        }
    }
}

extension ChatroomService {
    /// Starts a delivery task for every room `queue` hands over, until `stopDeliveries`; returns
    /// once the tasks started have ended.
    func runDeliveries() async {
        await withDiscardingTaskGroup { group in
            for await room in deliveryStarts {
                group.addTask { await self.deliver(room) }
            }
        }
    }

    /// No delivery task starts after this.
    func stopDeliveries() {
        deliveryStarter.finish()
    }

    /// A room's pushes queued once the deliveries have stopped: nothing will send them. Under the lock.
    func deliveriesEnded(_ room: ChatroomRoom) {
        room.delivering = false
        let pushes = room.pending
        room.pending = []
        let refusal = IMError(.serverUnavailable, "the server is shutting down: the chatroom message was not stored; send it again once reconnected")
        for case .message(_, _, let stored?) in pushes { stored.resolve(.failure(refusal)) }
    }
}
