import Foundation
import IMCore

/// A registered user, as `/user/info.json` reports it.
public struct UserRecord: Sendable, Equatable {
    public var userId: String
    public var name: String
    public var portraitUri: String
    /// Registration time, ms.
    public var createdAt: Int64
    /// Connecting is refused (31009) until this time, ms; 0 when not blocked.
    public var blockedUntil: Int64

    public init(userId: String, name: String, portraitUri: String, createdAt: Int64, blockedUntil: Int64 = 0) {
        self.userId = userId
        self.name = name
        self.portraitUri = portraitUri
        self.createdAt = createdAt
        self.blockedUntil = blockedUntil
    }
}

/// What the gateway checks when a user connects.
public struct UserAccess: Sendable, Equatable {
    /// Tokens issued before this time (ms) are refused; 0 when none were revoked.
    public var tokensValidAfter: Int64
    /// Connecting is refused until this time (ms); 0 when not blocked.
    public var blockedUntil: Int64

    /// When the user was deactivated (ms); 0 while active. A deactivated user cannot connect (31029).
    public var deactivatedAt: Int64
    /// The user's sync and cloud history start after this seq of the message log: what came before
    /// their deactivation was deleted for them (their reactivation sets it).
    public var historyAfterSeq: UInt64

    public init(tokensValidAfter: Int64 = 0, blockedUntil: Int64 = 0, deactivatedAt: Int64 = 0, historyAfterSeq: UInt64 = 0) {
        self.tokensValidAfter = tokensValidAfter
        self.blockedUntil = blockedUntil
        self.deactivatedAt = deactivatedAt
        self.historyAfterSeq = historyAfterSeq
    }
}

/// The tables that hold a user's personal data, and the column naming the user: what
/// deactivating or deleting a user erases (both stores).
public enum PersonalDataTables {
    public static let all: [(table: String, column: String)] = [
        ("user_profiles", "user_id"), ("user_tags", "user_id"), ("user_lists", "owner"),
        ("push_devices", "user_id"), ("push_profiles", "user_id"), ("user_remarks", "user_id"), ("group_remarks", "user_id"),
        ("conversation_settings", "user_id"), ("conversation_tags", "user_id"), ("conversation_tag_links", "user_id"),
        ("app_daily_users", "user_id"),
    ]
}

/// A user's hosted profile (RongCloud's user profile hosting, `/user/profile/*`): the basic fields
/// and the app's own `ext_` fields, each a JSON object, and a version that grows with every change.
public struct HostedProfile: Sendable, Equatable {
    public var userId: String
    /// JSON object text, e.g. `{"name":"Ann","gender":2}`.
    public var profile: String
    /// JSON object text of `ext_` keys and string values.
    public var extProfile: String
    public var version: Int64

    public init(userId: String, profile: String, extProfile: String, version: Int64) {
        self.userId = userId
        self.profile = profile
        self.extProfile = extProfile
        self.version = version
    }
}

/// A user's own list of other users: whose private messages they refuse (blacklist) or, in
/// whitelist mode, the only users whose private messages they accept.
public enum UserListKind: Int, Sendable, CaseIterable {
    case blacklist = 1
    case whitelist = 2
}

/// A group and its member count.
public struct GroupRecord: Sendable, Equatable {
    public var groupId: String
    public var name: String
    public var createdAt: Int64
    public var memberCount: Int

    public init(groupId: String, name: String, createdAt: Int64, memberCount: Int) {
        self.groupId = groupId
        self.name = name
        self.createdAt = createdAt
        self.memberCount = memberCount
    }
}

/// A member of a group, with the time they joined (ms).
public struct GroupMember: Sendable, Equatable {
    public var userId: String
    public var joinedAt: Int64

    public init(userId: String, joinedAt: Int64) {
        self.userId = userId
        self.joinedAt = joinedAt
    }
}

/// A muted member. `groupId` is empty for a mute in every group (the global group mute).
public struct GroupMute: Sendable, Equatable {
    public var groupId: String
    public var userId: String
    /// When the mute was set and when it ends (ms); `until` is `Int64.max` for a permanent mute.
    public var since: Int64
    public var until: Int64

    public init(groupId: String, userId: String, since: Int64, until: Int64) {
        self.groupId = groupId
        self.userId = userId
        self.since = since
        self.until = until
    }
}

/// A group as the send path checks it: who may send, who receives, and from where each member reads.
public struct GroupRosterRecord: Sendable {
    public struct Member: Sendable, Equatable {
        /// The highest seq of the message log when the member joined: they sync only later messages.
        public var joinedSeq: UInt64
        /// The member reads the group's cloud history after this seq: their joining, or earlier when
        /// the app shows pre-join history.
        public var historyAfterSeq: UInt64

        public init(joinedSeq: UInt64, historyAfterSeq: UInt64) {
            self.joinedSeq = joinedSeq
            self.historyAfterSeq = historyAfterSeq
        }
    }

    public var groupId: String
    public var members: [String: Member]
    /// Dismissed groups keep their members' read access to the history; nobody can send.
    public var isDismissed: Bool
    /// The whole group is muted: only `muteWhitelist` members may send.
    public var isMuted: Bool
    public var muteWhitelist: Set<String>
    /// Members muted in this group, and when each mute ends (ms; `Int64.max` permanently).
    public var mutedUntil: [String: Int64]

    public init(groupId: String, members: [String: Member], isDismissed: Bool = false, isMuted: Bool = false,
                muteWhitelist: Set<String> = [], mutedUntil: [String: Int64] = [:]) {
        self.groupId = groupId
        self.members = members
        self.isDismissed = isDismissed
        self.isMuted = isMuted
        self.muteWhitelist = muteWhitelist
        self.mutedUntil = mutedUntil
    }
}

/// The outcome of adding members to a group.
public enum GroupJoinOutcome: Sendable, Equatable {
    case joined(memberCount: Int)
    /// The group would have more than `limit` members; nobody was added.
    case tooManyMembers(limit: Int)
}

/// One entry of an app's sensitive-word list. A message containing a blocking word is not
/// delivered; a replaced word is rewritten to its replacement before delivery.
public struct SensitiveWord: Sendable, Equatable {
    public var word: String
    /// nil for a blocking word.
    public var replacement: String?

    public init(word: String, replacement: String?) {
        self.word = word
        self.replacement = replacement
    }
}

/// The users of each app: profiles, token revocation and blocks, black and white lists, push tags.
public protocol UserStore: Sendable {
    /// Registers the user or updates their name and portrait (empty values leave them unchanged).
    func upsertUser(appId: Int64, userId: String, name: String, portraitUri: String, now: Int64) async throws
    func user(appId: Int64, userId: String) async throws -> UserRecord?
    /// Token revocation and block state of a user (zeros for an unknown user).
    func userAccess(appId: Int64, userId: String) async throws -> UserAccess
    /// Refuses tokens issued before `before` (ms) for these users, registered or not.
    func expireTokens(appId: Int64, userIds: [String], before: Int64, now: Int64) async throws
    /// Sets (until > now) or lifts (until = 0) the connect block of these users, registered or not.
    func setBlocked(appId: Int64, userIds: [String], until: Int64, now: Int64) async throws
    /// Users blocked at `now`.
    func blockedUsers(appId: Int64, now: Int64) async throws -> [UserRecord]

    func addToUserList(appId: Int64, owner: String, kind: UserListKind, members: [String], now: Int64) async throws
    func removeFromUserList(appId: Int64, owner: String, kind: UserListKind, members: [String]) async throws
    func userList(appId: Int64, owner: String, kind: UserListKind) async throws -> [String]

    /// Replaces each user's push tags.
    func setUserTags(appId: Int64, userIds: [String], tags: [String]) async throws
    /// The tags of each user asked for (an empty list for a user without tags).
    func userTags(appId: Int64, userIds: [String]) async throws -> [String: [String]]
    /// The users (sorted) who carry every tag of `allOf` and at least one of `anyOf`; an empty list
    /// is no condition, and both empty match nobody.
    func users(appId: Int64, withAllTags allOf: [String], anyTag anyOf: [String]) async throws -> [String]

    /// Registered users (deleted ones left out) by registration time, then id, and how many there are.
    func users(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> (total: Int, users: [UserRecord])
    /// Deletes users: their registration (the user is unknown afterwards, and their tokens stop
    /// working: tokens issued up to `now` are refused) and their personal data (see
    /// `deactivateUsers`). Registering the id again starts a new user: it syncs and reads no
    /// history from before the deletion (`UserAccess.historyAfterSeq`); group memberships stay.
    func deleteUsers(appId: Int64, userIds: [String], now: Int64) async throws
    /// Deactivates users, registered or not: their name, portrait and personal data are deleted
    /// (hosted profile, push tags, devices and push profile, black and white lists, remarks, the
    /// conversation state: pins, do-not-disturb, quiet hours, tags), connecting is refused until they
    /// are reactivated, and group memberships stay. Already deactivated users keep their time.
    func deactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws
    /// Reactivates users: they may connect again, and their sync and history start after the
    /// message log's current end (`UserAccess.historyAfterSeq`). Users not deactivated are left.
    func reactivateUsers(appId: Int64, userIds: [String], now: Int64) async throws
    /// Deactivated users, by deactivation time, then id.
    func deactivatedUsers(appId: Int64, offset: Int, limit: Int) async throws -> [String]

    /// Mutes (or unmutes) users in one-to-one chat: their clients' private messages are refused (20106).
    func setPrivateChatMuted(appId: Int64, userIds: [String], muted: Bool, now: Int64) async throws
    /// The users muted in one-to-one chat, by user id.
    func privateChatMutedUsers(appId: Int64) async throws -> [String]

    /// Merges JSON objects into the user's hosted profile (a key given replaces its value, the
    /// others stay) and raises its version; returns false, storing nothing, for an unknown user.
    func mergeHostedProfile(appId: Int64, userId: String, profile: String, extProfile: String, now: Int64) async throws -> Bool
    func removeHostedProfiles(appId: Int64, userIds: [String]) async throws
    /// The hosted profiles of these users (those without one left out), in the order asked.
    func hostedProfiles(appId: Int64, userIds: [String]) async throws -> [HostedProfile]
    /// Hosted profiles by their users' registration time, then id.
    func hostedProfiles(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> [HostedProfile]
}

/// Groups: members, dismissal and mutes.
public protocol GroupStore: Sendable {
    /// Creates the group (or renames an existing one, unless `name` is nil or empty; adding members
    /// to a dismissed one starts it again without its former members and history) and adds the
    /// members, all or none: `.tooManyMembers` when the group would pass `maxMembers`, and then
    /// nothing is stored. New members sync only messages committed after they join; their cloud
    /// history starts at their joining, or `preJoinHistory` history messages earlier (messages
    /// all members see; never before the group was created).
    func joinGroup(appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int,
                   preJoinHistory: Int, now: Int64) async throws -> GroupJoinOutcome
    /// Removes members; returns the remaining member count (nil if there is no such group).
    @discardableResult
    func quitGroup(appId: Int64, groupId: String, userIds: [String]) async throws -> Int?
    /// Dismisses the group: it no longer exists for the Server API and nobody can send to it; its
    /// mute settings go, and its former members keep syncing and reading what was sent before.
    /// Returns false if there was no such group.
    func dismissGroup(appId: Int64, groupId: String, now: Int64) async throws -> Bool
    /// Renames the group; returns false if there is no such group.
    func renameGroup(appId: Int64, groupId: String, name: String) async throws -> Bool
    func group(appId: Int64, groupId: String) async throws -> GroupRecord?
    func groupMembers(appId: Int64, groupId: String) async throws -> [GroupMember]
    func groups(appId: Int64, ofUser userId: String) async throws -> [GroupRecord]
    /// Makes the user a member of exactly these groups (creating missing ones, leaving the others),
    /// all or none: refuses (`StoreRefusal.tooManyGroupMembers`) when a group would pass `maxMembers`.
    /// Returns the groups the user was taken out of.
    @discardableResult
    func syncGroups(appId: Int64, userId: String, groups: [(id: String, name: String)], maxMembers: Int,
                    preJoinHistory: Int, now: Int64) async throws -> [String]
    /// Members, dismissal and mute state of a group (nil if it never existed).
    func groupRoster(appId: Int64, groupId: String) async throws -> GroupRosterRecord?

    /// Mutes members (`groupId` nil: in every group) until `until` (ms; `Int64.max` = permanently).
    func muteGroupMembers(appId: Int64, groupId: String?, userIds: [String], until: Int64, now: Int64) async throws
    func unmuteGroupMembers(appId: Int64, groupId: String?, userIds: [String]) async throws
    /// Mutes still in force at `now` (`groupId` nil: the global mutes; "*": every mute).
    func groupMutes(appId: Int64, groupId: String?, now: Int64) async throws -> [GroupMute]
    /// Mutes or unmutes whole groups.
    func setGroupMuted(appId: Int64, groupIds: [String], muted: Bool) async throws
    /// The whole-group mute state of these groups (all muted groups when `groupIds` is empty).
    func mutedGroups(appId: Int64, groupIds: [String]) async throws -> [String: Bool]
    func addGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws
    func removeGroupMuteWhitelist(appId: Int64, groupId: String, userIds: [String]) async throws
    func groupMuteWhitelist(appId: Int64, groupId: String) async throws -> [String]

}

/// The sensitive words of each app.
public protocol SensitiveWordStore: Sendable {
    /// Adds or replaces words; refuses (`StoreRefusal.tooManySensitiveWords`) a list past `limit`.
    func addSensitiveWords(appId: Int64, words: [SensitiveWord], limit: Int, now: Int64) async throws
    func removeSensitiveWords(appId: Int64, words: [String]) async throws
    func sensitiveWords(appId: Int64) async throws -> [SensitiveWord]
}
