import Foundation
import IMCore
import IMWire

extension StoredMessage {
    /// The message as clients receive it.
    var wire: Im_Message {
        var message = Im_Message()
        message.conversationType = Int32(conversationType.rawValue)
        message.targetID = targetId
        message.senderUserID = senderId
        message.objectName = objectName
        message.content = content
        message.messageUid = uid
        message.sentTime = sentTime
        message.seq = seq
        message.clientMessageID = clientMessageId
        message.flags = flags.rawValue
        message.pushContent = pushContent
        message.pushData = pushData
        message.disableNotification = disableNotification
        message.canIncludeExpansion = canIncludeExpansion
        message.expansion = expansion
        message.channelID = channelId
        message.receiptRequested = receiptRequested
        return message
    }

    /// The push frame that carries the message to a live session.
    func pushFrame() -> [UInt8] {
        (try? FrameCodec.push(op: .message, wire)) ?? []
    }
}

/// The log key of a private conversation: the same for both users.
public func privateConversationKey(_ a: String, _ b: String) -> String {
    a <= b ? "p|\(a)|\(b)" : "p|\(b)|\(a)"
}

/// The log key of a group conversation.
public func groupConversationKey(_ groupId: String) -> String {
    "g|\(groupId)"
}

/// The log key of an ultra group channel: each channel is a conversation of its own.
public func ultraGroupConversationKey(_ groupId: String, _ channelId: String) -> String {
    "u|\(groupId)|\(channelId)"
}

/// The log key of a system conversation: one sender (a system account) and one recipient, or
/// `StoredMessage.everyone` for a broadcast.
public func systemConversationKey(sender: String, recipient: String) -> String {
    "s|\(sender)|\(recipient)"
}
