import Foundation
import IMCore

/// A group as the app describes it (RongCloud's `RCGroup`).
public struct GroupInfo: Sendable, Hashable, Codable {
    public var groupId: String
    public var name: String
    public var portraitUri: String?

    public init(groupId: String, name: String, portraitUri: String? = nil) {
        self.groupId = groupId
        self.name = name
        self.portraitUri = portraitUri
    }
}

/// The app's answers about users and groups (RongCloud's `RCIMUserInfoDataSource`,
/// `RCIMGroupInfoDataSource`, `RCIMGroupMemberDataSource` and `RCIMGroupUserInfoDataSource`),
/// usually from the app's own server. Every answer may be nil: the kit then shows the id.
public struct InfoProviders: Sendable {
    public var user: (@Sendable (String) async -> UserInfo?)?
    public var group: (@Sendable (String) async -> GroupInfo?)?
    public var groupMembers: (@Sendable (String) async -> [String])?
    /// A member's card in one group (a group nickname): preferred over `user` inside that group.
    public var groupUser: (@Sendable (_ userId: String, _ groupId: String) async -> UserInfo?)?

    public init(user: (@Sendable (String) async -> UserInfo?)? = nil, group: (@Sendable (String) async -> GroupInfo?)? = nil,
                groupMembers: (@Sendable (String) async -> [String])? = nil,
                groupUser: (@Sendable (String, String) async -> UserInfo?)? = nil) {
        self.user = user
        self.group = group
        self.groupMembers = groupMembers
        self.groupUser = groupUser
    }
}

/// The providers' answers, cached: read from the cache first, asked of the provider once when
/// missing (concurrent asks share one call), kept in memory and, with
/// `enablePersistentUserInfoCache`, in the kit's database so a restart does not ask again.
///
/// `refresh` and `clear` change the cache only: screens already shown keep what they read until
/// they load again (RongCloud's deferred refresh, "for performance").
public actor InfoCache {
    private let providers: InfoProviders
    private var persistent: KitDatabase?
    private var users: [String: UserInfo] = [:]
    private var groups: [String: GroupInfo] = [:]
    private var groupUsers: [String: UserInfo] = [:]
    private var asking: [String: Task<UserInfo?, Never>] = [:]
    private var askingGroups: [String: Task<GroupInfo?, Never>] = [:]
    /// Users named by the `user` field their messages carried: a fallback when no provider answers.
    private var carried: [String: UserInfo] = [:]
    /// The signed-in user's own info (`currentUserInfo`), sent with messages when set.
    public private(set) var currentUser: UserInfo?
    private var currentUserId: String?

    init(providers: InfoProviders) {
        self.providers = providers
    }

    /// A user signed in: with a persistent cache, what it holds is read back.
    func signedIn(as userId: String, persistent: KitDatabase?) {
        if currentUserId != userId {
            users = [:]
            groups = [:]
            groupUsers = [:]
            currentUser = nil
        }
        currentUserId = userId
        self.persistent = persistent
        if let persistent {
            for user in (try? persistent.cachedUsers()) ?? [] { users[user.userId] = user }
            for group in (try? persistent.cachedGroups()) ?? [] { groups[group.groupId] = group }
        }
    }

    /// Sets the signed-in user's info; ignored when its id is not the signed-in user's.
    @discardableResult
    public func setCurrentUser(_ info: UserInfo) -> Bool {
        guard info.userId == currentUserId else { return false }
        currentUser = info
        users[info.userId] = info
        return true
    }

    /// The cached info of a user, or nil if no provider supplied it (`getUserInfoCache`).
    public func cachedUser(_ userId: String) -> UserInfo? { users[userId] }

    /// A user's info: from the cache, else from the provider (then cached), else what their messages
    /// carried.
    public func user(_ userId: String) async -> UserInfo? {
        if let cached = users[userId] { return cached }
        guard let provider = providers.user else { return carried[userId] }
        if let pending = asking[userId] { return await pending.value ?? carried[userId] }
        let task = Task { await provider(userId) }
        asking[userId] = task
        let answer = await task.value
        asking[userId] = nil
        if let answer, users[userId] == nil {
            users[userId] = answer
            try? persistent?.cache(answer)
        }
        return answer ?? carried[userId]
    }

    /// The name to show for a user: the group card inside a group, else the user's name, else the id.
    public func displayName(_ userId: String, inGroup groupId: String? = nil) async -> String {
        if let groupId, let card = await groupUser(userId, groupId: groupId), !card.name.isEmpty { return card.name }
        if let info = await user(userId), !info.name.isEmpty { return info.name }
        return userId
    }

    /// Notes the `user` a received message carried (IMKit prefers it for GIF messages, and it names
    /// senders no provider knows).
    func noteCarried(_ info: UserInfo) {
        guard !info.userId.isEmpty else { return }
        carried[info.userId] = info
    }

    /// Replaces a user's cached info (`refreshUserInfoCache`); screens show it when they next load.
    public func refreshUser(_ info: UserInfo) {
        users[info.userId] = info
        try? persistent?.cache(info)
    }

    /// Drops every cached user (`clearUserInfoCache`), in memory and on disk.
    public func clearUsers() {
        users = [:]
        if let currentUser { users[currentUser.userId] = currentUser }
        try? persistent?.clearUsers()
    }

    public func cachedGroup(_ groupId: String) -> GroupInfo? { groups[groupId] }

    public func group(_ groupId: String) async -> GroupInfo? {
        guard !groupId.isEmpty else { return nil }
        if let cached = groups[groupId] { return cached }
        guard let provider = providers.group else { return nil }
        if let pending = askingGroups[groupId] { return await pending.value }
        let task = Task { await provider(groupId) }
        askingGroups[groupId] = task
        let answer = await task.value
        askingGroups[groupId] = nil
        if let answer {
            groups[groupId] = answer
            try? persistent?.cache(answer)
        }
        return answer
    }

    public func refreshGroup(_ info: GroupInfo) {
        groups[info.groupId] = info
        try? persistent?.cache(info)
    }

    public func clearGroups() {
        groups = [:]
        try? persistent?.clearGroups()
    }

    /// A group's member ids from the member provider (required for @ mentions); empty without one.
    public func members(ofGroup groupId: String) async -> [String] {
        await providers.groupMembers?(groupId) ?? []
    }

    public func groupUser(_ userId: String, groupId: String) async -> UserInfo? {
        let key = groupId + "\u{1F}" + userId
        if let cached = groupUsers[key] { return cached }
        guard let provider = providers.groupUser, let answer = await provider(userId, groupId) else { return nil }
        groupUsers[key] = answer
        return answer
    }

    public func refreshGroupUser(_ info: UserInfo, groupId: String) {
        groupUsers[groupId + "\u{1F}" + info.userId] = info
    }

    /// The title of a conversation: the group's name, the peer's name, or the id.
    public func title(of type: ConversationType, targetId: String) async -> String {
        switch type {
        case .group, .ultraGroup:
            return await group(targetId)?.name ?? targetId
        case .private, .system:
            return await displayName(targetId)
        default:
            return targetId
        }
    }
}
