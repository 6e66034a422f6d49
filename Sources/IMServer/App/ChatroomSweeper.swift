import ServiceLifecycle
import IMStore

/// Destroys idle chatrooms and prunes old chatroom history: runs `ChatroomService.sweep` every
/// 10 seconds (a room's idle time is a whole number of minutes). In a cluster, the rooms this node
/// no longer has are then given up for other nodes to claim.
struct ChatroomSweeper: Service {
    let core: ServerCore

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(10))
                await core.chatrooms.sweep()
                await core.chatroomRouting.releaseUnusedRooms()
            }
        }
    }
}
