import IMCore
import IMWire

/// The bytes a reply of many messages may take: every page, list and push that aggregates stored
/// data keeps to `MessageLimits.frameBudgetBytes` (1 MB), well inside the 4 MB frame IMLib accepts,
/// and always carries at least one message (one message alone fits in a frame: its content, push
/// fields and 300 extensions are bounded, see `wireSize`).
enum FrameBudget {
    static let bytes = MessageLimits.frameBudgetBytes

    /// The longest prefix of `messages` that fits `maxBytes` (at least one message), and whether
    /// it had to leave messages out.
    static func prefix(_ messages: [StoredMessage], maxBytes: Int = bytes) -> (messages: [StoredMessage], cut: Bool) {
        var used = 0
        for (index, message) in messages.enumerated() {
            used += message.wireSize
            if used > maxBytes && index > 0 { return (Array(messages[..<index]), true) }
        }
        return (messages, false)
    }
}

extension StoredMessage {
    /// About what the message takes in a frame (`Im_Message`): every field it carries, with a
    /// little per field for protobuf's tags and lengths. An upper estimate, cheap enough to take
    /// per message of a page.
    public var wireSize: Int {
        var size = 96 + content.count + conversationKey.utf8.count + targetId.utf8.count + senderId.utf8.count
            + objectName.utf8.count + uid.utf8.count + clientMessageId.utf8.count + pushContent.utf8.count
            + pushData.utf8.count + channelId.utf8.count
        for (key, value) in expansion { size += key.utf8.count + value.utf8.count + 8 }
        return size
    }
}
