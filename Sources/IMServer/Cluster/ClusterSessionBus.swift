import Foundation
import IMCore
import IMStore

/// The session bus of a node in a cluster: this node's sessions through its `LocalSessionBus`,
/// every other node's through the cluster bus, where each node hands the same call to its own
/// local bus (`ClusterNode`). Session ids are unique across the cluster, so "except the session it
/// came from" holds whichever node that session is on.
public final class ClusterSessionBus: SessionBus {
    let local: LocalSessionBus
    let transport: any ClusterTransport

    init(local: LocalSessionBus, transport: any ClusterTransport) {
        self.local = local
        self.transport = transport
    }

    public func deliver(_ message: StoredMessage, origin: Origin) async {
        transport.publish(.deliver(message, origin: ClusterOrigin(origin)))
        await local.deliver(message, origin: origin)
    }

    public func deliverModified(_ message: StoredMessage, origin: Origin) async {
        transport.publish(.modified(message, origin: ClusterOrigin(origin)))
        await local.deliverModified(message, origin: origin)
    }

    public func send(_ frame: OutboundFrame, appId: Int64, userIds: [String], except origin: Origin?) {
        transport.publish(.send(frame: Data(frame.payload), appId: appId, userIds: userIds, exceptSession: origin?.sessionId))
        local.send(frame, appId: appId, userIds: userIds, except: origin)
    }
}
