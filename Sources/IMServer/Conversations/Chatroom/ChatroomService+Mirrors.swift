import Foundation
import IMCore
import IMStore

/// Mirrors, in a cluster: a room another node holds, as far as this node's sessions in it go.
///
/// The owner keeps the room (seats, quota, attributes, its order); for the seats of sessions
/// connected here it tells this node which sessions sit in the room and relays every push the room
/// publishes, at its place among those seat changes (`ChatroomRelay`). This node keeps a mirror per
/// such room: a `ChatroomRoom` holding only its readers (this node's sessions with a seat) and the
/// room's log, which the usual delivery task sweeps (`deliver`). So a session here gets the room's
/// pushes from the point its seat was taken, in the room's order, written by its own node, and the
/// room's owner sends each push once per node, not once per member.
extension ChatroomService {
    /// A session of this node took a seat in a room another node holds.
    func mirrorSeat(_ key: ChatroomRoom.Key, session: ClientSession) {
        state.withLock { state in
            guard !session.isClosed else { return }
            let room: ChatroomRoom
            if let existing = state.mirrors[key] {
                room = existing
            } else {
                room = ChatroomRoom(key: key, name: key.roomId, now: clock.nowMilliseconds(), idleDestroyMinutes: 0)
                state.mirrors[key] = room
            }
            room.seatOnline(session)
        }
    }

    /// A session of this node lost its seat in a room another node holds (or closed).
    func mirrorUnseat(_ key: ChatroomRoom.Key, sessionId: String) {
        state.withLock { state in
            guard let room = state.mirrors[key] else { return }
            room.seatOffline(sessionId: sessionId)
            if room.onlineSessions.isEmpty { state.mirrors[key] = nil }
        }
    }

    /// Pushes a room of another node published: published here too, for this node's sessions in it.
    func mirrorPublish(_ key: ChatroomRoom.Key, _ records: [ChatroomPushRecord]) {
        state.withLock { state in
            guard let room = state.mirrors[key] else { return }
            for record in records {
                let push: ChatroomRoom.Push
                switch record {
                case .message(let message, let origin): push = .message(message, origin: origin.origin, stored: nil)
                case .roomFrame(let frame): push = .roomFrame(frame.bytes)
                case .frame(let frame, let sessions): push = .frame(frame.bytes, to: Set(sessions))
                }
                room.head += 1
                room.log.append((room.head, push))
            }
            guard !room.delivering else { return }
            room.delivering = true
            if case .terminated = deliveryStarter.yield(room) { room.delivering = false }
        }
    }

    /// Drops the mirrors of these rooms (their owner is gone); returns the sessions that sat in them.
    func dropMirrors(_ keys: Set<ChatroomRoom.Key>) -> [ClientSession] {
        state.withLock { state in
            keys.flatMap { key -> [ClientSession] in
                guard let room = state.mirrors.removeValue(forKey: key) else { return [] }
                let sessions = room.onlineSessions
                for session in sessions { room.seatOffline(sessionId: session.id) }
                return sessions
            }
        }
    }

    /// Which of these rooms this node holds.
    func heldRooms(_ keys: [ChatroomRoom.Key]) -> Set<ChatroomRoom.Key> {
        state.withLock { state in Set(keys.filter { state.rooms[$0] != nil }) }
    }

    /// Forgets every room and mirror without telling anyone: this node was taken for dead by the
    /// cluster, whose other nodes may hold these rooms now, and its sessions are being closed.
    func dropAllRooms() {
        state.withLock { state in
            state.rooms = [:]
            state.roomCounts = [:]
            state.sessionRooms = [:]
            state.userRooms = [:]
            state.mirrors = [:]
        }
    }
}
