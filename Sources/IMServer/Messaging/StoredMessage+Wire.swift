import Foundation
import IMCore
import IMStore
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
        message.flags = clientFlags
        message.pushContent = pushContent
        message.pushData = pushData
        message.disableNotification = disableNotification
        message.canIncludeExpansion = canIncludeExpansion
        message.expansion = expansion
        message.channelID = channelId
        message.receiptRequested = receiptRequested
        message.pushConfig = pushConfig
        message.disableUpdateLastMessage = disableUpdateLastMessage
        return message
    }

    /// The push frame that carries the message to a live session.
    package func pushFrame() -> [UInt8] {
        (try? FrameCodec.push(op: .message, wire)) ?? []
    }
}
