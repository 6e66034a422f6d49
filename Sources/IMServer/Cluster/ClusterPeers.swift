import Foundation
import IMCore
import Synchronization

/// How a service reaches the other nodes of a cluster: to say it changed something they may hold
/// in a cache, or that some users' sessions must go wherever they are. A single-node server has no
/// peers and these calls do nothing; a node of a cluster puts them on the cluster bus, ordered with
/// the deliveries around them, so a node drops a stale roster before it delivers a message sent
/// after the change.
public final class ClusterPeers: Sendable {
    let transport: (any ClusterTransport)?
    /// Cache drops announced so far: a call that announced one waits for the other nodes.
    private let announced = Atomic<UInt64>(0)
    private let barriers = Mutex<[String: Barrier]>([:])
    private struct Barrier {
        var acks: Set<String> = []
        var needed: Int
        var waiter: CheckedContinuation<Void, Never>?
    }
    /// How long a call waits for the other nodes to apply its cache drops: past it a node is
    /// taken to be dead (it is removed once its heartbeat is overdue).
    static let barrierTimeout: Duration = .seconds(1)

    init(transport: (any ClusterTransport)?) {
        self.transport = transport
    }

    /// Tells the other nodes to drop what they cached of this.
    func announce(_ invalidation: CacheInvalidation) {
        guard let transport else { return }
        announced.add(1, ordering: .relaxed)
        transport.publish(.invalidate(invalidation))
    }

    /// How many cache drops were announced so far (see `applied(since:)`).
    var announcements: UInt64 { announced.load(ordering: .relaxed) }

    /// If cache drops were announced since `mark`, waits until every other live node has applied
    /// everything this node published (or `barrierTimeout`): once a call that changed a cached
    /// thing answers, no node serves the old copy.
    func applied(since mark: UInt64) async {
        guard let transport, announced.load(ordering: .relaxed) != mark else { return }
        let others = transport.liveNodes() - 1
        guard others > 0 else { return }
        let id = UUID().uuidString
        barriers.withLock { $0[id] = Barrier(needed: others) }
        transport.publish(.barrier(id: id, from: transport.nodeId))
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let done = self.barriers.withLock { barriers -> Bool in
                        guard var barrier = barriers[id] else { return true }
                        if barrier.acks.count >= barrier.needed { return true }
                        barrier.waiter = continuation
                        barriers[id] = barrier
                        return false
                    }
                    if done { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: Self.barrierTimeout)
                self.finish(id)
            }
            await group.next()
            group.cancelAll()
        }
        finish(id)
    }

    /// Another node applied everything before barrier `id`.
    func acknowledged(_ id: String, by node: String) {
        let waiter = barriers.withLock { barriers -> CheckedContinuation<Void, Never>? in
            guard var barrier = barriers[id] else { return nil }
            barrier.acks.insert(node)
            guard barrier.acks.count >= barrier.needed, let waiter = barrier.waiter else {
                barriers[id] = barrier
                return nil
            }
            barrier.waiter = nil
            barriers[id] = barrier
            return waiter
        }
        waiter?.resume()
    }

    private func finish(_ id: String) {
        let waiter = barriers.withLock { $0.removeValue(forKey: id)?.waiter }
        waiter?.resume()
    }

    /// Tells the other nodes that a chatroom moderation setting changed: each reads the app's
    /// settings again and applies the change to the rooms it holds.
    func chatroomSettingsChanged(_ change: ChatroomSettingsChange) {
        transport?.publish(.chatroomSettingsChanged(change))
    }

    /// Returns once what was published before is on the bus: a change the caller is answered
    /// for then comes before anything the caller does next, on any node.
    func flush() async {
        await transport?.flush()
    }

    /// Tells the other nodes that the user joined this room while rooms hold one user at a time.
    func chatroomUserJoined(appId: Int64, userId: String, roomId: String) {
        transport?.publish(.chatroomUserJoined(appId: appId, userId: userId, roomId: roomId))
    }

    /// Has the other nodes kick every session of the app with `code`.
    func disconnect(appId: Int64, code: ErrorCode, reason: String) {
        transport?.publish(.disconnectApp(appId: appId, code: code.rawValue, reason: reason))
    }

    /// Has the other nodes kick these users' sessions with `code` (or close them without a kick
    /// when nil, as a network failure would).
    func disconnect(appId: Int64, userIds: [String], code: ErrorCode?, reason: String) {
        transport?.publish(.disconnectUsers(appId: appId, userIds: userIds, code: code.map { $0.rawValue }, reason: reason))
    }
}
