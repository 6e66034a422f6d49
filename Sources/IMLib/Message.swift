import Foundation
import IMCore

/// Whether this device's user sent or received a message.
public enum MessageDirection: Int, Sendable, Hashable {
    case send = 1
    case receive = 2
}

/// RongCloud's `RCSentStatus` values.
public enum SentStatus: Int, Sendable, Hashable {
    case sending = 10
    case failed = 20
    case sent = 30
    case received = 40
    case read = 50
    case destroyed = 60
    case canceled = 70
}

/// A message as the client sees it: RongCloud's `RCMessage`.
public struct Message: Sendable, Identifiable {
    /// Local id in this device's database; 0 for a message that is not stored locally.
    public var messageId: Int64
    public var conversationType: ConversationType
    /// The conversation's target: the other user of a private chat.
    public var targetId: String
    public var channelId: String
    public var senderUserId: String
    public var direction: MessageDirection
    public var objectName: String
    /// The JSON body as it travels.
    public var contentData: Data
    /// The decoded body, when its object name is registered on this client.
    public var content: (any MessageContent)?
    public var flags: PersistentFlag
    public var sentStatus: SentStatus
    /// Whether the user has read a received message.
    public var isRead: Bool
    /// Server time in ms (local time for a message not yet sent).
    public var sentTime: Int64
    public var receivedTime: Int64
    /// The server's globally unique id; empty until the server has stored the message.
    public var messageUId: String
    /// The client's id of the send, used to make a resend idempotent.
    public var clientMessageId: String
    public var pushContent: String
    public var pushData: String
    /// The members a directional group message was sent to (empty: the whole conversation).
    public var directedUserIds: [String] = []
    /// Group read-receipt state of the message on this device.
    public var readReceiptInfo = ReadReceiptInfo()
    /// Whether the message may carry extensions; fixed when it is sent.
    public var canIncludeExpansion = false
    /// The message's extensions (key-value pairs) as this device knows them.
    public var expansion: [String: String] = [:]
    /// How the message is pushed to offline devices (RongCloud's `RCMessagePushConfig`).
    public var pushConfig: MessagePushConfig?
    /// A silent message: no push for it (RongCloud's `RCMessageConfig.disableNotification`).
    public var disableNotification = false
    /// RongCloud's `disableUpdateLastMessage`: the message does not become its conversation's last
    /// message (on the sender's devices and the recipients'), though it is stored, counted and
    /// shown in the conversation. Known when the message is sent or received, not kept locally.
    public var disableUpdateLastMessage = false
    /// RongCloud's `extra`: text the app keeps with the message on this device only; it is never
    /// sent, and nothing from the server replaces it (`setMessageExtra`).
    public var extra = ""
    /// Where this message's media file is on this device: the file it was sent from, or where
    /// `downloadMediaMessage` put it; nil until then. Kept in the local database.
    public var localMediaPath: String?

    public var id: Int64 { messageId }

    /// The content as a given type, if it is one.
    public func content<T: MessageContent>(as type: T.Type) -> T? { content as? T }
}

extension Message {
    /// A message that is not stored (messageId 0): for a screen that shows one without keeping it
    /// (RongCloud's `appendAndDisplayMessage`).
    public init(unsaved content: some MessageContent, conversationType: ConversationType, targetId: String, channelId: String = "",
                senderUserId: String, direction: MessageDirection = .send, time: Int64) {
        self.init(messageId: 0, conversationType: conversationType, targetId: targetId, channelId: channelId,
                  senderUserId: senderUserId, direction: direction, objectName: type(of: content).objectName,
                  contentData: (try? content.encode()) ?? Data("{}".utf8), content: content, flags: type(of: content).persistentFlag,
                  sentStatus: direction == .send ? .sent : .received, isRead: true, sentTime: time, receivedTime: time,
                  messageUId: "", clientMessageId: UUID().uuidString, pushContent: "", pushData: "")
    }
}

/// RongCloud's `RCReadReceiptInfo` for a group message.
public struct ReadReceiptInfo: Sendable, Hashable {
    /// The sender asked the members to report reading this message.
    public var isReceiptRequestMessage: Bool
    /// This user has reported reading it (a received message).
    public var hasRespond: Bool
    /// Members known on this device to have read it (a sent message); `getMessageReadUsers` asks
    /// the server for the full list.
    public var readerCount: Int

    public init(isReceiptRequestMessage: Bool = false, hasRespond: Bool = false, readerCount: Int = 0) {
        self.isReceiptRequestMessage = isReceiptRequestMessage
        self.hasRespond = hasRespond
        self.readerCount = readerCount
    }
}

/// Group read-receipt events (RongCloud's `onMessageReceiptRequest` and `onMessageReceiptResponse`).
public enum ReadReceiptEvent: Sendable, Equatable {
    /// The sender of a group message asks this user to report reading it.
    case request(conversationType: ConversationType, targetId: String, messageUId: String)
    /// Members have read one of this user's messages: the readers new to this device, with their
    /// read times (ms).
    case response(conversationType: ConversationType, targetId: String, messageUId: String, readers: [String: Int64])
}

/// One page of the members who have read a message.
public struct MessageReadUsers: Sendable, Equatable {
    /// Readers and their read times (ms), in reading order.
    public var users: [(userId: String, readTime: Int64)]
    /// Readers in all.
    public var total: Int
    /// Pass to the next call for the next page; nil on the last page.
    public var nextPageToken: String?

    public static func == (a: MessageReadUsers, b: MessageReadUsers) -> Bool {
        a.total == b.total && a.nextPageToken == b.nextPageToken
            && a.users.map(\.userId) == b.users.map(\.userId) && a.users.map(\.readTime) == b.users.map(\.readTime)
    }
}

/// One message from the receive stream, with RongCloud's delivery details.
public struct ReceivedMessage: Sendable {
    public var message: Message
    /// Messages still to come in the current package.
    public var left: Int
    /// Pulled from the server after being offline, not pushed live.
    public var offline: Bool
    /// More packages wait on the server: sync is not finished.
    public var hasPackage: Bool
}

/// A conversation in the local list: RongCloud's `RCConversation`.
public struct Conversation: Sendable, Hashable {
    public var conversationType: ConversationType
    public var targetId: String
    public var channelId: String
    public var unreadMessageCount: Int
    public var isTop: Bool
    /// Time of the latest message (ms); the list is sorted by it.
    public var sentTime: Int64
    public var latestMessageId: Int64
    public var latestObjectName: String
    public var latestSenderUserId: String
    public var draft: String
    /// Unread messages that mention this user (or everyone).
    public var mentionedCount: Int = 0
    /// The conversation's own do-not-disturb level, as the server keeps it for this user
    /// (RongCloud's `notificationLevel`); `.default` defers to the conversation type's level.
    public var notificationLevel: PushNotificationLevel = .default

    /// Whether an unread message mentions this user: RongCloud's `hasUnreadMentioned`.
    public var hasUnreadMentioned: Bool { mentionedCount > 0 }
}

/// A conversation with its latest message, for list screens.
public struct ConversationSummary: Sendable {
    public var conversation: Conversation
    /// Nil when the conversation has no message on this device (a draft only, or deleted history).
    public var latestMessage: Message?

    public init(conversation: Conversation, latestMessage: Message?) {
        self.conversation = conversation
        self.latestMessage = latestMessage
    }
}

/// A send that failed: the code, and the message as it is stored locally (status `failed`).
public struct SendMessageError: Error, Sendable, CustomStringConvertible {
    public let error: IMError
    public let message: Message
    public var code: ErrorCode { error.code }
    public var description: String { "send failed with \(error) (local message \(message.messageId))" }
}

/// Order of a remote history page.
public enum HistoryOrder: Int, Sendable {
    /// Older than the record time, newest first.
    case descending = 0
    /// Newer than the record time, oldest first.
    case ascending = 1
}
