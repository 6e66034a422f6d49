import IMCore
import IMWire

/// A message this device sent that the app's moderation held back: RongCloud's
/// `RCBlockedMessageInfo`. The send itself succeeded, as RongCloud's does.
public struct BlockedMessageInfo: Sendable, Equatable {
    /// RongCloud's `RCMessageBlockType`.
    public enum BlockType: Int, Sendable {
        case globalSensitiveWord = 1
        /// The app's own sensitive words.
        case customSensitiveWord = 2
        /// The app's message callback (third-party moderation).
        case thirdPartyModeration = 3
        case unknown = 0
    }

    public var conversationType: ConversationType
    public var targetId: String
    public var channelId: String
    public var blockedMessageUId: String
    public var blockType: BlockType
    /// What the app's server gave for the sender (its callback answer's `extra`).
    public var extra: String
    public var sentTime: Int64
    /// 0 the message itself, 1 an extension, 2 a modification.
    public var sourceType: Int
    public var sourceContent: String

    init(_ wire: Im_MessageBlocked) {
        conversationType = ConversationType(rawValue: Int(wire.conversationType)) ?? .private
        targetId = wire.targetID
        channelId = wire.channelID
        blockedMessageUId = wire.messageUid
        blockType = BlockType(rawValue: Int(wire.blockType)) ?? .unknown
        extra = wire.extra
        sentTime = wire.sentTime
        sourceType = Int(wire.sourceType)
        sourceContent = wire.sourceContent
    }
}
