import IMCore
import IMStore

/// Group details and mutes as the app's server sets and reads them. Every change runs through the
/// roster cache, so no sender is checked against mute state the change replaced.
extension GroupService {
    /// Renames a group; false if there is no such group.
    func rename(appId: Int64, groupId: String, name: String) async throws -> Bool {
        try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.renameGroup(appId: appId, groupId: groupId, name: name)
        }
    }

    /// The members, in joining order.
    func members(appId: Int64, groupId: String) async throws -> [GroupMember] {
        try await store.groupMembers(appId: appId, groupId: groupId)
    }

    /// The groups a user is a member of.
    func groups(appId: Int64, ofUser userId: String) async throws -> [GroupRecord] {
        try await store.groups(appId: appId, ofUser: userId)
    }

    /// Mutes members (`groupId` nil: in every group) until `until` (`Int64.max`: until lifted).
    func muteMembers(appId: Int64, groupId: String?, userIds: [String], until: Int64, now: Int64) async throws {
        try await changingMutes(appId: appId, groupIds: groupId.map { [$0] }) {
            try await store.muteGroupMembers(appId: appId, groupId: groupId, userIds: userIds, until: until, now: now)
        }
    }

    func unmuteMembers(appId: Int64, groupId: String?, userIds: [String]) async throws {
        try await changingMutes(appId: appId, groupIds: groupId.map { [$0] }) {
            try await store.unmuteGroupMembers(appId: appId, groupId: groupId, userIds: userIds)
        }
    }

    /// Member mutes in force (`groupId` nil: the all-groups mutes).
    func mutes(appId: Int64, groupId: String?, now: Int64) async throws -> [GroupMute] {
        try await store.groupMutes(appId: appId, groupId: groupId, now: now)
    }

    /// Mutes or unmutes whole groups.
    func setMuted(appId: Int64, groupIds: [String], muted: Bool) async throws {
        try await changingMutes(appId: appId, groupIds: groupIds) {
            try await store.setGroupMuted(appId: appId, groupIds: groupIds, muted: muted)
        }
    }

    /// Whole-group mute state of these groups (every muted group when `groupIds` is empty).
    func mutedGroups(appId: Int64, groupIds: [String]) async throws -> [String: Bool] {
        try await store.mutedGroups(appId: appId, groupIds: groupIds)
    }

    /// Adds (or removes) members who may speak while their group is muted.
    func setMuteWhitelisted(appId: Int64, groupId: String, userIds: [String], whitelisted: Bool) async throws {
        try await changingMutes(appId: appId, groupIds: [groupId]) {
            if whitelisted {
                try await store.addGroupMuteWhitelist(appId: appId, groupId: groupId, userIds: userIds)
            } else {
                try await store.removeGroupMuteWhitelist(appId: appId, groupId: groupId, userIds: userIds)
            }
        }
    }

    func muteWhitelist(appId: Int64, groupId: String) async throws -> [String] {
        try await store.groupMuteWhitelist(appId: appId, groupId: groupId)
    }
}
