import IMCore

/// Online fan-out: writes a message to the live sessions that should see it now.
///
/// Recipients are the target user's sessions and the sender's other sessions (multi-device sync);
/// the session the message came from gets its reply instead. The push frame is encoded once and
/// shared by every recipient.
public final class Delivery: Sendable {
    private let registry: SessionRegistry

    public init(registry: SessionRegistry) {
        self.registry = registry
    }

    /// Delivers committed messages, in commit order (the MessageLog calls this before answering senders).
    func committed(_ batch: [CommittedMessage]) {
        for item in batch {
            guard case .stored(let message) = item.outcome else { continue }
            deliver(message, origin: item.origin)
        }
    }

    func deliver(_ message: StoredMessage, origin: String) {
        let frame = message.pushFrame()
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
