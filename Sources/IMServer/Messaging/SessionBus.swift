import IMCore
import IMStore
import IMWire
import Logging

/// How the server reaches client sessions. `LocalSessionBus` reaches the sessions of this process
/// (the single-node server); a cluster bus reaches those of every node by handing the same calls
/// to its peers, which run their local bus. Services and delivery go through this protocol only.
public protocol SessionBus: Sendable {
    /// Writes a committed message to the live sessions that should see it now, except the
    /// session it came from (which gets its reply instead).
    func deliver(_ message: StoredMessage, origin: Origin) async
    /// Writes an ultra group message's new content (`messageModified`) to the live sessions of its
    /// channel that got the message, except the session the change came from.
    func deliverModified(_ message: StoredMessage, origin: Origin) async
    /// Sends a frame to every session of these users, except the origin's session.
    func send(_ frame: OutboundFrame, appId: Int64, userIds: [String], except origin: Origin?)
}

extension SessionBus {
    /// Sends a frame to every session of one user, except the origin's session.
    func send(_ frame: [UInt8], appId: Int64, userId: String, except origin: Origin? = nil) {
        send(OutboundFrame(frame), appId: appId, userIds: [userId], except: origin)
    }
}

/// The sessions of this process.
///
/// Message recipients are the target user's sessions (for a group: its online members' sessions,
/// or the listed members of a directional message) and the sender's other sessions (multi-device
/// sync). The push frame is encoded once and shared by every recipient.
public final class LocalSessionBus: SessionBus {
    private let registry: SessionRegistry
    private let rosters: GroupRosters
    private let ultraGroups: UltraGroupRosters
    private let logger: Logger
    private let metrics: ServerMetrics?

    init(registry: SessionRegistry, rosters: GroupRosters, ultraGroups: UltraGroupRosters, logger: Logger, metrics: ServerMetrics? = nil) {
        self.metrics = metrics
        self.registry = registry
        self.rosters = rosters
        self.ultraGroups = ultraGroups
        self.logger = logger
    }

    public func send(_ frame: OutboundFrame, appId: Int64, userIds: [String], except origin: Origin?) {
        let except = origin?.sessionId
        for userId in userIds.count > 1 ? Array(Set(userIds)) : userIds {
            for session in registry.sessions(appId: appId, userId: userId) where session.id != except {
                _ = session.send(frame)
            }
        }
    }

    /// The group's online sessions. The roster is in memory except just after a change; if the
    /// store cannot be read even after retrying, the members online now miss the message until
    /// they reconnect (their sync has moved past it), so that is logged as an error.
    private func groupSessions(_ message: StoredMessage) async -> [(session: ClientSession, joinedSeq: UInt64)]? {
        for attempt in 1...3 {
            do {
                if message.conversationType == .ultraGroup {
                    return try await ultraGroups.onlineSessions(appId: message.appId, groupId: message.targetId, channelId: message.channelId)
                }
                return try await rosters.onlineSessions(appId: message.appId, groupId: message.targetId)
            } catch {
                if attempt == 3 {
                    logger.error("group message not delivered online: its group could not be read",
                                 metadata: ["group": "\(message.targetId)", "uid": "\(message.uid)", "error": "\(error)"])
                }
            }
        }
        return nil
    }

    public func deliverModified(_ message: StoredMessage, origin: Origin) async {
        guard let frame = try? FrameCodec.push(op: .messageModified, message.wire),
              let sessions = await groupSessions(message) else { return }
        let shared = OutboundFrame(frame)
        for (session, joinedSeq) in sessions
        where session.id != origin.sessionId && joinedSeq < message.seq && message.isVisible(to: session.userId) {
            _ = session.send(shared)
        }
    }

    public func deliver(_ message: StoredMessage, origin: Origin) async {
        let frame = OutboundFrame(message.pushFrame())   // encoded once, shared by every session
        let except = origin.sessionId
        switch message.conversationType {
        case .group, .ultraGroup:
            guard let sessions = await groupSessions(message) else { return }
            // Ultra group messages never come through offline sync, so a session still syncing must
            // not drop them as covered by its sync (seq 0 is released whatever the watermark).
            let heldSeq = message.conversationType == .ultraGroup ? 0 : message.seq
            let directed = message.directedUserIds.isEmpty ? nil : Set(message.directedUserIds)
            var written = 0
            defer { metrics?.fannedOut(message.conversationType, sessions: written) }
            for (session, joinedSeq) in sessions where session.id != except {
                // A member who joined after this message was committed syncs from their joining.
                if message.seq != 0 && message.seq <= joinedSeq { continue }
                if session.userId == message.senderId {
                    guard message.includeSender else { continue }
                } else if let directed, !directed.contains(session.userId) {
                    continue
                }
                session.deliver(seq: heldSeq, frame: frame)
                written += 1
            }
        default:
            var written = 0
            defer { metrics?.fannedOut(message.conversationType, sessions: written) }
            if message.targetId == StoredMessage.everyone {
                for session in registry.sessions(appId: message.appId) where session.userId != message.senderId {
                    session.deliver(seq: message.seq, frame: frame)
                    written += 1
                }
                return
            }
            for session in registry.sessions(appId: message.appId, userId: message.targetId) where session.id != except {
                session.deliver(seq: message.seq, frame: frame)
                written += 1
            }
            guard message.senderId != message.targetId, message.includeSender else { return }
            for session in registry.sessions(appId: message.appId, userId: message.senderId) where session.id != except {
                session.deliver(seq: message.seq, frame: frame)
                written += 1
            }
        }
    }
}
