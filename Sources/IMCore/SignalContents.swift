import Foundation

// Contents that carry what happens to messages after they are sent: recall, read status, typing
// and extensions. Their object names are RongCloud's; the server and IMLib both act on them.

extension BuiltInContentTypes {
    /// The command contents, which IMLib applies to the messages they name instead of showing them
    /// (`RC:RcNtf` is the exception: it is stored and shown where a recalled message was).
    public static let commands: [any MessageContent.Type] = [
        RecallNotificationMessage.self, RecallCommandMessage.self, ReadReceiptMessage.self, SyncReadStatusMessage.self,
        TypingStatusMessage.self, ExpansionChangeMessage.self,
    ]
}

/// `RC:RcNtf`: what stands in a recalled message's place, on the server and on every device.
/// Shown, not counted.
public struct RecallNotificationMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RcNtf"
    public static let persistentFlag = PersistentFlag.isPersisted

    /// Who recalled the message (its sender, or an admin through the Server API).
    public var operatorId: String
    /// When it was recalled (ms).
    public var recallTime: Int64
    /// The object name the message had.
    public var originalObjectName: String
    public var isAdmin: Bool
    public var isDelete: Bool
    public var extra: String?

    public init(operatorId: String, recallTime: Int64, originalObjectName: String, isAdmin: Bool = false,
                isDelete: Bool = false, extra: String? = nil) {
        self.operatorId = operatorId
        self.recallTime = recallTime
        self.originalObjectName = originalObjectName
        self.isAdmin = isAdmin
        self.isDelete = isDelete
        self.extra = extra
    }

    public var conversationDigest: String { "[撤回了一条消息]" }
}

/// `RC:RcCmd`: the server's command telling every device that a message was recalled. Not stored
/// or counted; delivered offline.
/// The server's notice that the sender (through the app's server) modified a private or group
/// message: it travels the conversation's log like a recall command, so every device of both
/// sides applies it, live or at its next sync. Only the server sends it.
public struct MessageModifyCommand: MessageContent, Codable, Equatable {
    public static let objectName = "RC:MsgModifyCmd"
    public static let persistentFlag = PersistentFlag.none

    public var messageUId: String
    public var conversationType: Int
    public var targetId: String
    /// The message's type, which a modification keeps.
    public var objectName: String
    /// The new content, as JSON text.
    public var content: String
    public var modifiedTime: Int64

    public init(messageUId: String, conversationType: Int, targetId: String, objectName: String, content: String, modifiedTime: Int64) {
        self.messageUId = messageUId
        self.conversationType = conversationType
        self.targetId = targetId
        self.objectName = objectName
        self.content = content
        self.modifiedTime = modifiedTime
    }
}

public struct RecallCommandMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RcCmd"
    public static let persistentFlag = PersistentFlag.none

    public var messageUId: String
    public var conversationType: Int
    public var targetId: String
    public var sentTime: Int64
    /// 1 when an admin recalled it through the Server API.
    public var isAdmin: Int
    /// 1 when the message was deleted rather than replaced by a notification.
    public var isDelete: Int
    public var extra: String?

    public init(messageUId: String, conversationType: Int, targetId: String, sentTime: Int64, isAdmin: Int = 0,
                isDelete: Int = 0, extra: String? = nil) {
        self.messageUId = messageUId
        self.conversationType = conversationType
        self.targetId = targetId
        self.sentTime = sentTime
        self.isAdmin = isAdmin
        self.isDelete = isDelete
        self.extra = extra
    }
}

/// `RC:ReadNtf`: a one-to-one read receipt. The reader has read the conversation's messages sent
/// up to `lastMessageSendTime`; the peer marks its sent messages read, and the reader's other
/// devices clear their unread count up to it.
public struct ReadReceiptMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:ReadNtf"
    public static let persistentFlag = PersistentFlag.none

    public var lastMessageSendTime: Int64
    public var messageUId: String?
    /// RongCloud's receipt type: 1 for a one-to-one read receipt.
    public var type: Int

    public init(lastMessageSendTime: Int64, messageUId: String? = nil, type: Int = 1) {
        self.lastMessageSendTime = lastMessageSendTime
        self.messageUId = messageUId
        self.type = type
    }
}

/// `RC:SRSMsg`: the user read a conversation up to `lastMessageSendTime` on one device; their other
/// devices clear the unread count up to it. The server routes it to the user's own devices only.
public struct SyncReadStatusMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:SRSMsg"
    public static let persistentFlag = PersistentFlag.none

    public var lastMessageSendTime: Int64
    /// The conversation that was read (the message itself travels to the user's own devices).
    public var conversationType: Int
    public var targetId: String

    public init(lastMessageSendTime: Int64, conversationType: Int, targetId: String) {
        self.lastMessageSendTime = lastMessageSendTime
        self.conversationType = conversationType
        self.targetId = targetId
    }
}

/// `RC:TypSts`: the sender is typing a message of `typingContentType`. A STATUS message: online
/// recipients only, never stored.
public struct TypingStatusMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:TypSts"
    public static let persistentFlag = PersistentFlag.status

    public var typingContentType: String
    public var data: String?

    public init(typingContentType: String, data: String? = nil) {
        self.typingContentType = typingContentType
        self.data = data
    }
}

/// `RC:MsgExMsg`: extensions of a message changed; sent by the server to the conversation's other
/// members and the operator's other devices. Not stored or counted; delivered offline.
public struct ExpansionChangeMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:MsgExMsg"
    public static let persistentFlag = PersistentFlag.none

    /// The messageUId of the extended message.
    public var mid: String
    /// Keys set, with their new values.
    public var put: [String: String]?
    /// Keys removed.
    public var del: [String]?

    public init(mid: String, put: [String: String]? = nil, del: [String]? = nil) {
        self.mid = mid
        self.put = put
        self.del = del
    }
}
