import Foundation
import IMCore

/// A one-to-one read receipt (RongCloud's `RCLibDispatchReadReceiptNotification`): `readerId` has
/// read the conversation's messages sent up to `lastReadTime`. The SDK has already marked this
/// user's sent messages up to that time as read (`SentStatus.read`).
public struct ConversationReadReceipt: Sendable, Equatable {
    public var conversationType: ConversationType
    /// The conversation: the reader, in a one-to-one chat.
    public var targetId: String
    public var readerId: String
    public var lastReadTime: Int64

    public init(conversationType: ConversationType, targetId: String, readerId: String, lastReadTime: Int64) {
        self.conversationType = conversationType
        self.targetId = targetId
        self.readerId = readerId
        self.lastReadTime = lastReadTime
    }
}

/// This user read a conversation on another device up to `lastReadTime`; this device has cleared
/// its unread count up to that time.
public struct ConversationReadStatus: Sendable, Equatable {
    public var conversationType: ConversationType
    public var targetId: String
    public var lastReadTime: Int64

    public init(conversationType: ConversationType, targetId: String, lastReadTime: Int64) {
        self.conversationType = conversationType
        self.targetId = targetId
        self.lastReadTime = lastReadTime
    }
}

/// Someone in a conversation is typing (RongCloud's `onTypingStatusChanged`). A status holds for
/// `TypingLimits.intervalMilliseconds` unless a newer one or a message from the same user follows.
public struct TypingStatus: Sendable, Equatable {
    public var conversationType: ConversationType
    public var targetId: String
    /// The ultra group channel typed in ("" for other conversations).
    public var channelId: String = ""
    public var userId: String
    /// The object name of what is being typed, e.g. `RC:TxtMsg`.
    public var typingContentType: String
    public var sentTime: Int64
}

/// A change of a message's extensions (RongCloud's `RCMessageExpansionDelegate`). The message
/// carries the whole map after the change.
public enum MessageExpansionEvent: Sendable {
    /// Keys set or changed, with their new values.
    case updated(changes: [String: String], message: Message)
    /// Keys removed.
    case removed(keys: [String], message: Message)
}

/// What one batch of received messages changed on this device.
struct IncomingChanges {
    /// Messages new to this device (stored when persisted), in arrival order.
    var fresh: [Message] = []
    /// Group read-receipt requests, applied to the messages they name.
    var receiptRequests: [Message] = []
    /// Local messages replaced by a recall notification.
    var recalled: [Message] = []
    /// Local messages whose content their sender modified.
    var modified: [Message] = []
    var readReceipts: [ConversationReadReceipt] = []
    var readStatuses: [ConversationReadStatus] = []
    var typing: [TypingStatus] = []
    var expansions: [MessageExpansionEvent] = []
}
