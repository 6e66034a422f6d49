import IMCore
import IMStore

/// Mutes and default do-not-disturb levels of an ultra group's channels (`channelId` empty: the
/// whole group), as the app's server sets them. Mute changes run through the roster cache.
extension UltraGroupService {
    /// Mutes a channel as a whole, or lifts it.
    public func setChannelMuted(appId: Int64, groupId: String, channelId: String, muted: Bool) async throws {
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setUltraGroupChannelMuted(appId: appId, groupId: groupId, channelId: channelId, muted: muted)
        }
    }

    /// Mutes users in a channel until `until` (nil: lifts their mute).
    public func setMutedUsers(appId: Int64, groupId: String, channelId: String, userIds: [String], until: Int64?) async throws {
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setUltraGroupMutedUsers(appId: appId, groupId: groupId, channelId: channelId, userIds: userIds, until: until)
        }
    }

    /// Adds users to (or removes them from) those who may speak while a channel is muted.
    public func setMuteWhitelist(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws {
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setUltraGroupMuteWhitelist(appId: appId, groupId: groupId, channelId: channelId, userIds: userIds, add: add)
        }
    }

    /// Sets the group's default do-not-disturb level of a channel.
    public func setDefaultUnpushLevel(appId: Int64, groupId: String, channelId: String, level: PushNotificationLevel) async throws {
        try await store.setUltraGroupUnpushLevel(appId: appId, groupId: groupId, channelId: channelId, level: level.rawValue)
    }

    /// The group's default do-not-disturb level of a channel, 0 when none is set.
    public func defaultUnpushLevel(appId: Int64, groupId: String, channelId: String) async throws -> Int {
        try await store.ultraGroupUnpushLevel(appId: appId, groupId: groupId, channelId: channelId)
    }
}
