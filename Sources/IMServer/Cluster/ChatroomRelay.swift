import Foundation
import IMCore
import Synchronization

/// What a node sends the other nodes about their sessions in the chatrooms it holds: seats taken
/// and lost, the rooms' pushes, frames for their sessions, and the answers to their requests.
///
/// One queue per node keeps everything in the order it happened; neighbours of one kind are merged
/// (a room destroyed with 5,000 members on a node is one item naming them, a burst of pushes one
/// list), and `run` flushes each queue as one bus message as soon as it wakes, so a busy room costs
/// a message per node per flush, whatever its number of members. Items are queued from under the
/// chatroom lock and never wait.
final class ChatroomRelay: Sendable {
    private struct Entry {
        enum Head: Equatable {
            case seated(Int64, String)
            case unseated(Int64, String)
            case pushes(Int64, String)
            case frame(WireBytes)
            case response(UInt64, ChatroomCallResult)
        }

        var head: Head
        var sessions: [String] = []
        var pushes: [ChatroomPushRecord] = []

        var item: ChatroomRelayItem {
            switch head {
            case .seated(let app, let room): .seated(appId: app, roomId: room, sessions: sessions)
            case .unseated(let app, let room): .unseated(appId: app, roomId: room, sessions: sessions)
            case .pushes(let app, let room): .pushes(appId: app, roomId: room, pushes)
            case .frame(let frame): .frame(frame, sessions: sessions)
            case .response(let id, let result): .response(id: id, result)
            }
        }
    }

    private let transport: any ClusterTransport
    private let queues = Mutex<[String: [Entry]]>([:])
    /// Held while a flush takes the queues and publishes them, so that flushes never overtake
    /// each other.
    private let flushing = Mutex(())
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation

    init(transport: any ClusterTransport) {
        self.transport = transport
        (wakeUps, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var nodeId: String { transport.nodeId }

    func seated(_ key: ChatroomRoom.Key, sessionId: String, on node: String) {
        enqueue(.seated(key.appId, key.roomId), session: sessionId, to: node)
    }

    func unseated(_ key: ChatroomRoom.Key, sessionId: String, on node: String) {
        enqueue(.unseated(key.appId, key.roomId), session: sessionId, to: node)
    }

    func frame(_ frame: [UInt8], for sessionId: String, on node: String) {
        enqueue(.frame(WireBytes(frame)), session: sessionId, to: node)
    }

    func respond(_ id: UInt64, _ result: ChatroomCallResult, to node: String) {
        enqueue(.response(id, result), session: nil, to: node)
    }

    /// The room's pushes, for each of these nodes.
    func pushes(_ key: ChatroomRoom.Key, _ pushes: [ChatroomPushRecord], to node: String) {
        guard !pushes.isEmpty else { return }
        let wasEmpty = queues.withLock { queues -> Bool in
            let wasEmpty = queues.isEmpty
            let head = Entry.Head.pushes(key.appId, key.roomId)
            if let last = queues[node]?.indices.last, queues[node]![last].head == head {
                queues[node]![last].pushes.append(contentsOf: pushes)
            } else {
                queues[node, default: []].append(Entry(head: head, pushes: pushes))
            }
            return wasEmpty
        }
        if wasEmpty { wakeUp.yield() }
    }

    private func enqueue(_ head: Entry.Head, session: String?, to node: String) {
        let wasEmpty = queues.withLock { queues -> Bool in
            let wasEmpty = queues.isEmpty
            if let session, let last = queues[node]?.indices.last, queues[node]![last].head == head {
                queues[node]![last].sessions.append(session)
            } else {
                queues[node, default: []].append(Entry(head: head, sessions: session.map { [$0] } ?? []))
            }
            return wasEmpty
        }
        if wasEmpty { wakeUp.yield() }
    }

    /// Publishes what is queued: one message per node.
    func flush() {
        flushing.withLock { _ in
            let taken = queues.withLock { queues -> [String: [Entry]] in
                defer { queues = [:] }
                return queues
            }
            for (node, entries) in taken {
                transport.publish(.chatroomRelay(from: transport.nodeId, items: entries.map(\.item)), to: node)
            }
        }
    }

    /// Flushes whenever something was queued, until cancelled.
    func run() async {
        for await _ in wakeUps { flush() }
        flush()
    }
}

/// The way from a session this node stands in for to the node the session is connected to.
final class RemoteSessionLink: Sendable {
    /// The session's node.
    let node: String
    let sessionId: String
    let relay: ChatroomRelay

    init(node: String, sessionId: String, relay: ChatroomRelay) {
        self.node = node
        self.sessionId = sessionId
        self.relay = relay
    }

    func send(_ frame: OutboundFrame) {
        relay.frame(frame.payload, for: sessionId, on: node)
    }

    func seated(in key: ChatroomRoom.Key) {
        relay.seated(key, sessionId: sessionId, on: node)
    }

    func unseated(from key: ChatroomRoom.Key) {
        relay.unseated(key, sessionId: sessionId, on: node)
    }
}
