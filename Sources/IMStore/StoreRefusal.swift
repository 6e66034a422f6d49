import IMCore

/// What a store refuses to do because the change would break a rule it enforces inside its
/// transaction (a limit that concurrent writers must not pass together, or a row that must exist).
///
/// A store throws these and rolls back; it never words them for users. The services turn each one
/// into the RongCloud code and the message that says what to do, so every store refuses the same
/// way and says nothing a second store would have to copy.
public enum StoreRefusal: Error, Equatable, Sendable {
    // Conversation tags of a user.
    case tagExists(tagId: String)
    case tooManyTags(tagId: String, limit: Int)
    case noSuchTag(tagId: String)
    case conversationNotInTag(tagId: String, type: ConversationType, targetId: String)
    // Groups and moderation.
    case tooManyGroupMembers(limit: Int)
    case tooManySensitiveWords(limit: Int)
    // Message extensions.
    case noSuchMessage(uid: String)
    case messageNotExpandable(uid: String)
    case tooManyExpansionKeys(uid: String, count: Int, limit: Int)
    // Ultra groups.
    case noSuchUltraGroup(groupId: String)
    case channelExists(groupId: String, channelId: String)
    case tooManyChannels(groupId: String, count: Int, limit: Int)
    case tooManyUserGroups(groupId: String, count: Int, limit: Int)
    case userGroupTooLarge(userGroupId: String, count: Int, limit: Int)
    // Push.
    case tooManyPushTemplates(limit: Int)
}
