import Foundation
import IMCore
import IMLib

/// The one-line text of a message for the conversation list and notifications (RongCloud's
/// `conversationDigest`), in the kit's language.
public enum Digest {
    public static func of(_ message: Message, currentUserId: String, senderName: String, strings: KitStrings) -> String {
        of(objectName: message.objectName, content: message.content, senderUserId: message.senderUserId,
           currentUserId: currentUserId, senderName: senderName, strings: strings)
    }

    public static func of(objectName: String, content: (any MessageContent)?, senderUserId: String, currentUserId: String,
                          senderName: String, strings: KitStrings) -> String {
        switch content {
        case let text as TextMessage: return oneLine(text.content)
        case let reference as ReferenceMessage: return oneLine(reference.content)
        case is ImageMessage: return strings.image
        case is GIFMessage: return strings.gif
        case is HQVoiceMessage: return strings.voice
        case let file as FileMessage: return strings.file(file.name)
        case is SightMessage: return strings.sight
        case let location as LocationMessage: return location.poi.isEmpty ? strings.location : "\(strings.location) \(location.poi)"
        case is CombineMessage: return strings.chatHistory
        case is RealTimeLocationStartMessage: return strings.locationSharingStarted
        case is RealTimeLocationEndMessage: return strings.locationSharingEnded
        case let rich as RichContentMessage: return strings.richContent(rich.title)
        case let recall as RecallNotificationMessage:
            return recall.operatorId == currentUserId ? strings.youRecalled : strings.recalled(by: senderName)
        case let other?:
            let text = other.conversationDigest
            return text.isEmpty ? strings.unsupported : oneLine(text)
        case nil:
            return objectName.isEmpty ? "" : strings.unsupported
        }
    }

    /// Line breaks and tabs become spaces: a digest is one line.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline || $0 == "\t" ? " " : $0 })
    }
}
