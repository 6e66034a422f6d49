import IMCore
import IMStore

/// What happened on the server, told after it happened: the seam that delivery, push, callbacks
/// to the app's server, metrics and a cluster bus attach to.
public enum ServerEvent: Sendable {
    /// A message is durable in the log (published in commit order, once its sender is answered; in a
    /// cluster before).
    case messageCommitted(CommittedMessageEvent)
    /// A device signed in: its session is registered and reachable.
    case sessionOnline(SessionPresence)
    /// A device's session ended (closed, kicked, dropped by the heartbeat sweep).
    case sessionOffline(SessionPresence)
    /// A user's conversation state (do not disturb, pins, quiet hours, tags) moved to a new version.
    case conversationStateChanged(ConversationStateEvent)
    /// Users joined or left a group or an ultra group, or a group was dismissed.
    case membershipChanged(MembershipChange)
}

/// A committed message, who asked for it, and whom it is for.
public struct CommittedMessageEvent: Sendable {
    public let message: StoredMessage
    public let origin: Origin
    /// Worked out when asked: most messages reach no subscriber that needs it.
    public var recipients: Recipients { Recipients(of: message) }
}

/// The audience of a message, as its conversation addresses it. Group audiences are named, not
/// listed: a subscriber that needs the members (push) reads them from the roster it keeps.
public enum Recipients: Sendable, Equatable {
    /// These users (a private or system conversation: the target, and the sender's other devices
    /// when `includeSender`).
    case users([String])
    /// The members of a group (only `directed` when the message names some).
    case group(groupId: String, directed: [String])
    /// The members of an ultra group channel.
    case ultraGroup(groupId: String, channelId: String, directed: [String])
    /// The members of a chatroom.
    case chatroom(roomId: String)
    /// Every user of the app (a broadcast).
    case everyone

    init(of message: StoredMessage) {
        switch message.conversationType {
        case .group:
            self = .group(groupId: message.targetId, directed: message.directedUserIds)
        case .ultraGroup:
            self = .ultraGroup(groupId: message.targetId, channelId: message.channelId, directed: message.directedUserIds)
        case .chatroom:
            self = .chatroom(roomId: message.targetId)
        default:
            if message.targetId == StoredMessage.everyone {
                self = .everyone
            } else if message.includeSender, message.senderId != message.targetId {
                self = .users([message.targetId, message.senderId])
            } else {
                self = .users([message.targetId])
            }
        }
    }
}

/// One device's session.
public struct SessionPresence: Sendable, Equatable {
    public let appId: Int64
    public let userId: String
    public let sessionId: String
    public let platform: String
    /// The device the session signed in from (empty when the client named none).
    public let deviceId: String
}

/// A user's conversation state after an edit.
public struct ConversationStateEvent: Sendable, Equatable {
    public let appId: Int64
    public let userId: String
    public let version: UInt64
    public let origin: Origin
}

/// Who joined or left which group: the users the call named (a user already in the group, or
/// already out of it, may be among them), after the change is stored.
public struct MembershipChange: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case group
        case ultraGroup
    }

    public let kind: Kind
    public let appId: Int64
    public let groupId: String
    public let joined: [String]
    public let left: [String]
    /// The group itself ended (dismissed); `left` is then empty and every member is gone.
    public let dismissed: Bool
    public let origin: Origin
}
