import Foundation
import IMCore
import IMStore
import Logging
import ServiceLifecycle

/// A node's side of the cluster bus: runs the transport and carries out, on this node, what the
/// other nodes publish: deliveries and frames to its own sessions, kicks, and cache drops. It is a
/// service of the node's group, placed so that a graceful shutdown stops it after the gateway has
/// closed and the message log has drained (their last deliveries still reach the other nodes).
struct ClusterNode: Service {
    let core: ServerCore
    let transport: any ClusterTransport

    func run() async throws {
        let messages = transport.messages()
        // Graceful shutdown reaches this service once the services after it have stopped: then
        // nothing more is published but what the chatroom relay still holds, which is flushed
        // onto the bus; then the transport is cancelled (it leaves the presence table).
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await transport.run() }
            group.addTask {
                for await event in messages {
                    switch event {
                    case .message(let message):
                        await core.applyFromCluster(message)
                    case .interrupted:
                        let sessions = core.registry.allSessions()
                        core.logger.warning("the cluster bus may have lost messages: this node's sessions reconnect and sync",
                                            metadata: ["sessions": "\(sessions.count)"])
                        for session in sessions { session.close() }
                        core.chatroomRouting.cluster?.busInterrupted()
                    }
                }
            }
            if let relay = core.chatrooms.relay {
                group.addTask { await relay.run() }
            }
            group.addTask {
                try? await gracefulShutdown()
                core.chatrooms.relay?.flush()
                await transport.flush()
            }
            try await group.next()
            group.cancelAll()
        }
    }
}

extension ServerCore {
    /// Carries out what another node published.
    func applyFromCluster(_ message: ClusterMessage) async {
        switch message {
        case .deliver(let stored, let origin):
            await localBus.deliver(stored, origin: origin.origin)
        case .modified(let stored, let origin):
            await localBus.deliverModified(stored, origin: origin.origin)
        case .send(let frame, let appId, let userIds, let exceptSession):
            let except: Origin? = exceptSession.map { .session(id: $0, appId: appId, userId: "") }
            localBus.send(OutboundFrame(Array(frame)), appId: appId, userIds: userIds, except: except)
        case .kickSessions(let appId, let userId, let sessionIds, let code, let reason):
            for session in registry.sessions(appId: appId, userId: userId) where sessionIds.contains(session.id) {
                session.kick(code: ErrorCode(code), reason: reason)
            }
        case .disconnectApp(let appId, let code, let reason):
            for session in registry.sessions(appId: appId) {
                session.kick(code: ErrorCode(code), reason: reason)
                registry.remove(session)
            }
        case .disconnectUsers(let appId, let userIds, let code, let reason):
            for userId in userIds {
                for session in registry.sessions(appId: appId, userId: userId) {
                    if let code {
                        session.kick(code: ErrorCode(code), reason: "user \(userId): \(reason)")
                        registry.remove(session)
                    } else {
                        session.close()
                    }
                }
            }
        case .invalidate(let invalidation):
            await forget(invalidation)
        case .barrier(let id, let from):
            // Everything published before the barrier has been applied (the bus is ordered).
            cluster?.publish(.barrierAck(id: id, to: from, from: cluster?.nodeId ?? ""))
        case .barrierAck(let id, let to, let from):
            if to == cluster?.nodeId { peers.acknowledged(id, by: from) }
        case .nodeLeft(let nodeId):
            guard let rooms = chatroomRouting.cluster else { return }
            if nodeId == rooms.nodeId {
                // Taken for dead while running: other nodes may hold this node's rooms by now.
                let sessions = registry.allSessions()
                logger.warning("the cluster took this node for dead: its chatrooms are dropped and its sessions reconnect",
                               metadata: ["sessions": "\(sessions.count)"])
                rooms.reset()
                for session in sessions { session.close() }
            } else {
                rooms.nodeLost(nodeId)
            }
        case .chatroomNodeReset(let nodeId):
            chatroomRouting.cluster?.nodeLost(nodeId)
        case .chatroomRequest(let request):
            chatroomRouting.received(request)
        case .chatroomRelay(let from, let items):
            chatroomRouting.cluster?.relayed(items, from: from)
        case .chatroomSessionsClosed(_, let sessionIds):
            chatroomRouting.cluster?.remoteSessionsClosed(sessionIds)
        case .chatroomSettingsChanged(let change):
            await chatrooms.applySettingsChange(change)
        case .chatroomUserJoined(let appId, let userId, let roomId):
            chatrooms.userJoinedElsewhere(appId: appId, userId: userId, roomId: roomId)
        }
    }

    private func forget(_ invalidation: CacheInvalidation) async {
        switch invalidation {
        case .groups(let appId, let groupIds):
            groups.rosters.forget(appId: appId, groupIds: groupIds)
        case .ultraGroups(let appId, let groupIds):
            ultraGroups.rosters.forget(appId: appId, groupIds: groupIds)
        case .sensitiveWords(let appId):
            sensitiveWords.forget(appId: appId)
        case .userLists(let appId, let owners):
            directory.forgetLists(appId: appId, owners: owners)
        case .privateChatMutes(let appId):
            directory.forgetPrivateChatMutes(appId: appId)
        case .chatroomSettings(let appId):
            await chatrooms.reloadSettings(appId: appId)
        case .apps:
            do {
                try await apps.load()
            } catch {
                logger.error("apps not reloaded after another node changed them", metadata: ["error": "\(error)"])
            }
        }
    }
}
