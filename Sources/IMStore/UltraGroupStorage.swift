import Foundation
import IMCore

/// One channel of an ultra group.
public struct UltraGroupChannelRecord: Sendable, Equatable {
    public var channelId: String
    public var type: UltraGroupChannelType
    public var createdAt: Int64
    /// The highest seq of the message log when the channel was created: an earlier channel of the
    /// same id left its messages below it, and nobody reads them.
    public var createdSeq: UInt64
    /// A private channel's own member list (kept while the channel is public, used once it turns
    /// private).
    public var members: Set<String>
    /// User groups bound to the channel: their members see it while it is private.
    public var userGroups: Set<String>

    public init(channelId: String, type: UltraGroupChannelType, createdAt: Int64, createdSeq: UInt64 = 0,
                members: Set<String> = [], userGroups: Set<String> = []) {
        self.channelId = channelId
        self.type = type
        self.createdAt = createdAt
        self.createdSeq = createdSeq
        self.members = members
        self.userGroups = userGroups
    }
}

/// An ultra group as sending, delivery and history check it: members, channels with who sees
/// them, user groups, and mutes.
public struct UltraGroupRosterRecord: Sendable {
    public struct Member: Sendable, Equatable {
        public var joinedAt: Int64
        /// The highest seq of the message log when the member joined: live delivery and history
        /// start after it (unless the app shows pre-join history).
        public var joinedSeq: UInt64

        public init(joinedAt: Int64, joinedSeq: UInt64) {
            self.joinedAt = joinedAt
            self.joinedSeq = joinedSeq
        }
    }

    public var groupId: String
    public var name: String
    public var createdAt: Int64
    public var createdSeq: UInt64
    public var members: [String: Member]
    public var channels: [String: UltraGroupChannelRecord]
    /// User group id → its members.
    public var userGroups: [String: Set<String>]
    /// Muted users per channel ("" for the whole group) and when each mute ends (ms; `Int64.max`
    /// until lifted).
    public var mutedUsers: [String: [String: Int64]]
    /// Channels muted as a whole ("" for the whole group).
    public var mutedChannels: Set<String>
    /// Users who may still speak where everyone is muted, per channel ("" for the whole group).
    public var muteWhitelist: [String: Set<String>]

    public init(groupId: String, name: String, createdAt: Int64, createdSeq: UInt64, members: [String: Member],
                channels: [String: UltraGroupChannelRecord], userGroups: [String: Set<String>] = [:],
                mutedUsers: [String: [String: Int64]] = [:], mutedChannels: Set<String> = [],
                muteWhitelist: [String: Set<String>] = [:]) {
        self.groupId = groupId
        self.name = name
        self.createdAt = createdAt
        self.createdSeq = createdSeq
        self.members = members
        self.channels = channels
        self.userGroups = userGroups
        self.mutedUsers = mutedUsers
        self.mutedChannels = mutedChannels
        self.muteWhitelist = muteWhitelist
    }

    /// Whether `userId`, a member, sees `channel`: every member sees a public channel; a private one
    /// is seen by its listed members and the members of its bound user groups.
    public func sees(_ channel: UltraGroupChannelRecord, userId: String) -> Bool {
        guard members[userId] != nil else { return false }
        guard channel.type == .privateChannel else { return true }
        if channel.members.contains(userId) { return true }
        return channel.userGroups.contains { userGroups[$0]?.contains(userId) == true }
    }

    /// The members who see a private channel (nil for a public one: every member).
    public func privateAudience(_ channel: UltraGroupChannelRecord) -> Set<String>? {
        guard channel.type == .privateChannel else { return nil }
        var users = channel.members
        for id in channel.userGroups { users.formUnion(userGroups[id] ?? []) }
        return users.filter { members[$0] != nil }
    }

    /// The end of the user's mute in `channelId`, by a mute of them there or in the whole group, or
    /// by the channel or the group being muted without them on its whitelist; nil if they may speak.
    public func muteEnd(userId: String, channelId: String, now: Int64) -> Int64? {
        for scope in ["", channelId] {
            if let until = mutedUsers[scope]?[userId], until > now { return until }
        }
        for scope in ["", channelId] where mutedChannels.contains(scope) && muteWhitelist[scope]?.contains(userId) != true {
            return Int64.max
        }
        return nil
    }
}

/// The outcome of adding users to an ultra group.
public enum UltraGroupJoinOutcome: Sendable, Equatable {
    case joined
    /// No such ultra group.
    case notFound
    /// These users are already in `UltraGroupLimits.maxGroupsPerUser` ultra groups; nobody was added.
    case tooManyGroups(userIds: [String])
}

/// The last message of one channel as a user sees it, with that user's unread and mention counts.
public struct UltraGroupChannelSummary: Sendable, Equatable {
    public var groupId: String
    public var channelId: String
    public var channelType: UltraGroupChannelType
    public var lastMessage: StoredMessage?
    public var readTime: Int64
    public var unreadCount: Int
    public var mentionedCount: Int

    public init(groupId: String, channelId: String, channelType: UltraGroupChannelType, lastMessage: StoredMessage?,
                readTime: Int64, unreadCount: Int, mentionedCount: Int) {
        self.groupId = groupId
        self.channelId = channelId
        self.channelType = channelType
        self.lastMessage = lastMessage
        self.readTime = readTime
        self.unreadCount = unreadCount
        self.mentionedCount = mentionedCount
    }
}

/// What a summary is computed over: one channel a user sees, and from where they read it.
public struct UltraGroupChannelView: Sendable, Equatable {
    public var groupId: String
    public var channelId: String
    public var channelType: UltraGroupChannelType
    /// Messages at or below this seq are not the user's (before joining or before the channel).
    public var afterSeq: UInt64

    public init(groupId: String, channelId: String, channelType: UltraGroupChannelType, afterSeq: UInt64) {
        self.groupId = groupId
        self.channelId = channelId
        self.channelType = channelType
        self.afterSeq = afterSeq
    }
}

/// Ultra groups on disk: groups, members, channels, private channel lists, user groups and their
/// bindings, mutes, and each member's read time per channel. Messages live in the message log
/// under the conversation key `ultraGroupConversationKey(group, channel)`.
public protocol UltraGroupStore: Sendable {
    /// Creates the group with its default channel if it does not exist (an existing one keeps its
    /// name), and adds `ownerId`. `.tooManyGroups` when the owner already is in `maxGroupsPerUser`
    /// ultra groups, and then no group is created.
    func createUltraGroup(appId: Int64, groupId: String, name: String, ownerId: String, now: Int64,
                          maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome
    /// Adds users to an existing group, all or none.
    func joinUltraGroup(appId: Int64, groupId: String, userIds: [String], now: Int64,
                        maxGroupsPerUser: Int) async throws -> UltraGroupJoinOutcome
    /// Removes users from the group and from its private channel lists and user groups. False if
    /// there is no such group.
    func quitUltraGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Bool
    /// Deletes the group with its members, channels, user groups, mutes and read times (messages
    /// stay until their retention ends, unread by anyone). False if there is no such group.
    func dismissUltraGroup(appId: Int64, groupId: String) async throws -> Bool
    func renameUltraGroup(appId: Int64, groupId: String, name: String) async throws -> Bool
    /// Everything sending and delivery need about one group; nil if there is no such group.
    func ultraGroupRoster(appId: Int64, groupId: String) async throws -> UltraGroupRosterRecord?
    /// The ultra groups a user is a member of.
    func ultraGroupIds(appId: Int64, ofUser userId: String) async throws -> [String]

    /// Creates a channel. Throws 24410 without the group, 24413 over `maxChannels`, 24403 when the
    /// channel exists.
    func createUltraGroupChannel(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType,
                                 now: Int64, maxChannels: Int) async throws
    /// Deletes a channel with its list and bindings; false if there is no such channel.
    func deleteUltraGroupChannel(appId: Int64, groupId: String, channelId: String) async throws -> Bool
    /// False if there is no such channel.
    func setUltraGroupChannelType(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType) async throws -> Bool
    /// Adds users to (or removes them from) a channel's private list; false if there is no such channel.
    func setPrivateChannelMembers(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws -> Bool

    /// Creates user groups. Throws 24411 when the group would have more than `maxUserGroups`.
    func createUserGroups(appId: Int64, groupId: String, userGroupIds: [String], now: Int64, maxUserGroups: Int) async throws
    /// Deletes user groups with their members and bindings.
    func deleteUserGroups(appId: Int64, groupId: String, userGroupIds: [String]) async throws
    /// Adds users to (or removes them from) a user group. Throws 24411 when it would hold more than
    /// `maxMembers`; false if there is no such user group.
    func setUserGroupMembers(appId: Int64, groupId: String, userGroupId: String, userIds: [String], add: Bool,
                             maxMembers: Int) async throws -> Bool
    /// Binds user groups to a channel (or unbinds them); false if the channel or a user group does not exist.
    func bindUserGroups(appId: Int64, groupId: String, channelId: String, userGroupIds: [String], bind: Bool) async throws -> Bool

    /// Mutes or unmutes users in a channel ("" for the whole group) until `until` (ms).
    func setUltraGroupMutedUsers(appId: Int64, groupId: String, channelId: String, userIds: [String], until: Int64?) async throws
    /// Mutes or unmutes a channel ("" for the whole group) as a whole.
    func setUltraGroupChannelMuted(appId: Int64, groupId: String, channelId: String, muted: Bool) async throws
    /// Adds users to (or removes them from) the mute whitelist of a channel ("" for the whole group).
    func setUltraGroupMuteWhitelist(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws
    /// Sets the group's default do-not-disturb level of a channel ("" for the whole group), which
    /// a member's own level overrides; 0 (not set) removes it.
    func setUltraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String, level: Int) async throws
    /// The group's default do-not-disturb level of a channel ("" for the whole group); 0 when not set.
    func ultraGroupUnpushLevel(appId: Int64, groupId: String, channelId: String) async throws -> Int

    /// Records that the user has read a channel up to `time` (ms); an earlier time than the one
    /// kept changes nothing.
    func setUltraGroupReadTime(appId: Int64, userId: String, groupId: String, channelId: String, time: Int64) async throws
    /// Per channel: the last message the user may see, and their unread and mention counts (counted
    /// messages from others after their read time), for messages sent at or after `minSentTime`.
    func ultraGroupSummaries(appId: Int64, userId: String, channels: [UltraGroupChannelView],
                             minSentTime: Int64) async throws -> [UltraGroupChannelSummary]
    /// Replaces the content of a message (a modification), keeping its uid, time and object name,
    /// and stamps it with `modifiedTime`.
    func modifyMessage(appId: Int64, uid: String, content: Data, mentions: MentionedInfo?, modifiedTime: Int64) async throws
    /// Messages of these conversations modified after `cursor`, oldest modification first (by
    /// modification time, then seq): at most `limit`, and no more than `maxBytes` of them
    /// (`StoredMessage.wireSize`; the first is always taken). Full rows are read only for the
    /// messages the page takes.
    func modifiedMessages(appId: Int64, conversationKeys: [String], after cursor: ModificationCursor, limit: Int,
                          maxBytes: Int) async throws -> ModifiedPage
}

/// A position in the order of modifications: (modification time, seq). `seq == 0` stands for the
/// whole millisecond `time` (every message modified then is behind the cursor), the meaning a
/// cursor of a time alone always had.
public struct ModificationCursor: Sendable, Equatable, Comparable {
    public var time: Int64
    public var seq: UInt64

    public init(time: Int64, seq: UInt64 = 0) {
        self.time = time
        self.seq = seq
    }

    /// Whether a modification at (`time`, `seq`) is behind this cursor.
    public func covers(time: Int64, seq: UInt64) -> Bool {
        self.time > time || (self.time == time && (self.seq == 0 || self.seq >= seq))
    }

    public static func < (a: ModificationCursor, b: ModificationCursor) -> Bool {
        if a.time != b.time { return a.time < b.time }
        return (a.seq == 0 ? UInt64.max : a.seq) < (b.seq == 0 ? UInt64.max : b.seq)
    }
}

/// A page of modified messages and where the next page starts.
public struct ModifiedPage: Sendable {
    public var messages: [(modifiedTime: Int64, message: StoredMessage)]
    /// The cursor after this page.
    public var next: ModificationCursor
    /// More modifications wait after `next`.
    public var hasMore: Bool

    public init(messages: [(modifiedTime: Int64, message: StoredMessage)], next: ModificationCursor, hasMore: Bool) {
        self.messages = messages
        self.next = next
        self.hasMore = hasMore
    }
}
