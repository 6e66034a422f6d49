import IMCore

/// Online fan-out: writes a message to the live sessions that should see it now.
///
/// Recipients are the target user's sessions (for a group: its online members' sessions, or the
/// listed members of a directional message) and the sender's other sessions (multi-device sync);
/// the session the message came from gets its reply instead. The push frame is encoded once and
/// shared by every recipient.
public final class Delivery: Sendable {
    private let registry: SessionRegistry
    private let rosters: GroupRosters

    init(registry: SessionRegistry, rosters: GroupRosters) {
        self.registry = registry
        self.rosters = rosters
    }

    /// Delivers committed messages, in commit order (the MessageLog calls this before answering senders).
    func committed(_ batch: [CommittedMessage]) async {
        for item in batch {
            guard case .stored(let message) = item.outcome else { continue }
            await deliver(message, origin: item.origin)
        }
    }

    func deliver(_ message: StoredMessage, origin: String) async {
        let frame = message.pushFrame()
        switch message.conversationType {
        case .group:
            // A group that cannot be read now is delivered by sync instead.
            guard let sessions = try? await rosters.onlineSessions(appId: message.appId, groupId: message.targetId) else { return }
            let directed = message.directedUserIds.isEmpty ? nil : Set(message.directedUserIds)
            for session in sessions where session.id != origin {
                if session.userId == message.senderId {
                    guard message.includeSender else { continue }
                } else if let directed, !directed.contains(session.userId) {
                    continue
                }
                session.deliver(seq: message.seq, frame: frame)
            }
        default:
            if message.targetId == StoredMessage.everyone {
                for session in registry.sessions(appId: message.appId) where session.userId != message.senderId {
                    session.deliver(seq: message.seq, frame: frame)
                }
                return
            }
            for session in registry.sessions(appId: message.appId, userId: message.targetId) where session.id != origin {
                session.deliver(seq: message.seq, frame: frame)
            }
            guard message.senderId != message.targetId, message.includeSender else { return }
            for session in registry.sessions(appId: message.appId, userId: message.senderId) where session.id != origin {
                session.deliver(seq: message.seq, frame: frame)
            }
        }
    }
}
