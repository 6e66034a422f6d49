import Foundation

extension StoredMessage {
    /// About what the message takes in a frame (`Im_Message`): every field it carries, with a
    /// little per field for protobuf's tags and lengths. An upper estimate, cheap enough to take
    /// per message of a page.
    public var wireSize: Int {
        var size = 96 + content.count + conversationKey.utf8.count + targetId.utf8.count + senderId.utf8.count
            + objectName.utf8.count + uid.utf8.count + clientMessageId.utf8.count + pushContent.utf8.count
            + pushData.utf8.count + channelId.utf8.count + pushConfig.count
        for (key, value) in expansion { size += key.utf8.count + value.utf8.count + 8 }
        return size
    }
}
