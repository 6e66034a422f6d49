import IMCore
import IMStore

extension IMError {
    /// The code and the words users see for a change the store refused.
    init(_ refusal: StoreRefusal) {
        switch refusal {
        case .tagExists(let tagId):
            self.init(.invalidParameter, "tag '\(tagId)' already exists: rename it with updateTag or pick another id")
        case .tooManyTags(let tagId, let limit):
            self.init(.invalidParameter, "a user has at most \(limit) tags: remove a tag before adding '\(tagId)'")
        case .noSuchTag(let tagId):
            self.init(.invalidParameter, "there is no tag '\(tagId)': add it with addTag first")
        case .conversationNotInTag(let tagId, let type, let targetId):
            self.init(.invalidParameter, "conversation \(type.rawValue)/\(targetId) is not in tag '\(tagId)': add it with addConversationsToTag first")
        case .tooManyGroupMembers(let limit):
            self.init(.apiBadParameter, "a group would have more than \(limit) members; nothing was changed")
        case .tooManySensitiveWords(let limit):
            self.init(.apiBadParameter, "an app may have at most \(limit) sensitive words; remove some before adding more")
        case .noSuchMessage(let uid):
            self.init(.invalidParameter, "no message \(uid): extensions are set on sent messages by their messageUId")
        case .messageNotExpandable(let uid):
            self.init(.messageNotExpandable, "message \(uid) was sent without canIncludeExpansion, so it cannot carry extensions: set it when sending")
        case .tooManyExpansionKeys(let uid, let count, let limit):
            self.init(.expansionLimitExceeded, "message \(uid) would have \(count) extension keys; at most \(limit) are allowed: remove keys first")
        case .noSuchUltraGroup(let groupId):
            self.init(.ultraGroupNotFound, "ultra group \(groupId) does not exist: create it with /ultragroup/create.json")
        case .channelExists(let groupId, let channelId):
            self.init(.ultraGroupParameterInvalid, "channel \(channelId) already exists in ultra group \(groupId)")
        case .tooManyChannels(let groupId, let count, let limit):
            self.init(.ultraGroupChannelsExceeded, "ultra group \(groupId) already has \(count) channels, the most it can have (\(limit)): delete one with /ultragroup/channel/del.json first")
        case .tooManyUserGroups(let groupId, let count, let limit):
            self.init(.ultraGroupMembersExceeded, "ultra group \(groupId) would have \(count) user groups; it can have \(limit): delete some with /ultragroup/usergroup/del.json first")
        case .userGroupTooLarge(let userGroupId, let count, let limit):
            self.init(.ultraGroupMembersExceeded, "user group \(userGroupId) would have \(count) members; a user group holds at most \(limit)")
        case .tooManyPushTemplates(let limit):
            self.init(.apiBadParameter, "an app has at most \(limit) push templates: delete one with /push/template/delete.json first")
        }
    }
}

/// Runs a store change and turns a refusal of the store into the error users see.
func explainingRefusals<T: Sendable>(_ change: () async throws -> T) async throws -> T {
    do {
        return try await change()
    } catch let refusal as StoreRefusal {
        throw IMError(refusal)
    }
}
