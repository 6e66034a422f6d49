import Foundation
import IMCore
import IMStore
import Synchronization

/// Who may connect and who may message whom: connect blocks, token revocation, and each user's
/// blacklist and whitelist (spec/imlib-core.md §6: a blacklisted sender gets 405; in whitelist
/// mode a sender not on the recipient's whitelist gets 407).
///
/// The lists are read on every private message, so they are cached in memory per owner, filled
/// from the store on first use and replaced whenever the Server API changes them.
public final class UserDirectory: Sendable {
    private let store: any UserStore
    private let registry: SessionRegistry
    /// Whose settings say whether an app is in whitelist mode.
    private let apps: AppRegistry
    private struct OwnerKey: Hashable {
        let appId: Int64
        let owner: String
        let kind: UserListKind
    }
    /// Cached lists, and a count of changes: a list read from the store is cached only if no
    /// change happened meanwhile, so a concurrent reader cannot put back a list older than a change.
    private let lists = Mutex<(entries: [OwnerKey: Set<String>], changes: UInt64)>(([:], 0))
    private static let cachedOwnerLimit = 200_000
    /// The users muted in one-to-one chat, per app, read on every private message a client sends:
    /// cached like the lists, a whole app at a time.
    private let privateMutes = Mutex<(entries: [Int64: Set<String>], changes: UInt64)>(([:], 0))

    private let peers: ClusterPeers
    /// A kick waits for the fan-out of messages committed before it: the app's server that
    /// publishes to a user and then blocks them has the message reach them first.
    private let fanOut: FanOutOrder

    init(store: any UserStore, registry: SessionRegistry, peers: ClusterPeers, apps: AppRegistry, fanOut: FanOutOrder) {
        self.peers = peers
        self.fanOut = fanOut
        self.store = store
        self.registry = registry
        self.apps = apps
    }

    /// Refuses a connect with a revoked token (31004), by a deactivated user (31029) or by a blocked
    /// user (31009); returns what the session needs of the user's access.
    @discardableResult
    func checkConnect(appId: Int64, userId: String, tokenIssuedAt: Int64, now: Int64) async throws -> UserAccess {
        let access = try await store.userAccess(appId: appId, userId: userId)
        guard tokenIssuedAt >= access.tokensValidAfter else {
            throw IMError(.tokenIncorrect, "this token was revoked: get a new token from your app server")
        }
        if let refusal = Self.refusal(access, userId: userId, now: now) { throw refusal }
        return access
    }

    private static func refusal(_ access: UserAccess, userId: String, now: Int64) -> IMError? {
        if access.deactivatedAt > 0 {
            return IMError(.userDeactivated, "user \(userId) was deactivated: the app's server can reactivate them with /user/reactivate.json")
        }
        if access.blockedUntil > now {
            return IMError(.userBlocked, "user \(userId) is blocked until \(APITime.text(access.blockedUntil)) UTC: the app's server can lift it with /user/unblock.json")
        }
        return nil
    }

    /// Blocks users from connecting for `minutes` (a connect gets 31009) and disconnects their live
    /// sessions with 31011, the seed's code for a user banned while online.
    func block(appId: Int64, userIds: [String], minutes: Int, now: Int64) async throws {
        try await store.setBlocked(appId: appId, userIds: userIds, until: now + Int64(minutes) * 60_000, now: now)
        await fanOut.behindCommitted()
        for userId in userIds {
            for session in registry.sessions(appId: appId, userId: userId) {
                session.kick(code: .bannedWhileOnline, reason: "user \(userId) was blocked by the app's server for \(minutes) minutes")
                registry.remove(session)
            }
        }
        peers.disconnect(appId: appId, userIds: userIds, code: .bannedWhileOnline,
                         reason: "blocked by the app's server for \(minutes) minutes")
    }

    func unblock(appId: Int64, userIds: [String], now: Int64) async throws {
        try await store.setBlocked(appId: appId, userIds: userIds, until: 0, now: now)
    }

    /// Throws 405 or 407 when `sender` may not send private messages to `recipient`.
    func checkPrivateMessage(appId: Int64, from sender: String, to recipient: String) async throws {
        guard sender != recipient else { return }
        if apps.settings(appId: appId).moderation.userWhitelistMode {
            guard try await list(appId: appId, owner: recipient, kind: .whitelist).contains(sender) else {
                throw IMError(.notInWhitelist, "\(recipient) accepts messages only from users on their whitelist, and \(sender) is not on it")
            }
        } else if try await list(appId: appId, owner: recipient, kind: .blacklist).contains(sender) {
            throw IMError(.rejectedByBlacklist, "\(recipient) has put \(sender) on their blacklist: the message was not delivered")
        }
    }

    func add(appId: Int64, owner: String, kind: UserListKind, members: [String], now: Int64) async throws {
        try await store.addToUserList(appId: appId, owner: owner, kind: kind, members: members, now: now)
        forget(appId: appId, owner: owner, kind: kind)
    }

    func remove(appId: Int64, owner: String, kind: UserListKind, members: [String]) async throws {
        try await store.removeFromUserList(appId: appId, owner: owner, kind: kind, members: members)
        forget(appId: appId, owner: owner, kind: kind)
    }

    private func forget(appId: Int64, owner: String, kind: UserListKind) {
        lists.withLock { lists in
            lists.entries.removeValue(forKey: OwnerKey(appId: appId, owner: owner, kind: kind))
            lists.changes &+= 1
        }
        peers.announce(.userLists(appId: appId, owners: [owner]))
    }

    /// Drops the cached lists of these owners (another node changed them).
    func forgetLists(appId: Int64, owners: [String]) {
        lists.withLock { lists in
            for owner in owners {
                for kind in [UserListKind.blacklist, .whitelist] {
                    lists.entries.removeValue(forKey: OwnerKey(appId: appId, owner: owner, kind: kind))
                }
            }
            lists.changes &+= 1
        }
    }

    private func list(appId: Int64, owner: String, kind: UserListKind) async throws -> Set<String> {
        let key = OwnerKey(appId: appId, owner: owner, kind: kind)
        let (cached, changes) = lists.withLock { ($0.entries[key], $0.changes) }
        if let cached { return cached }
        let members = Set(try await store.userList(appId: appId, owner: owner, kind: kind))
        lists.withLock { lists in
            guard lists.changes == changes else { return }
            if lists.entries.count >= Self.cachedOwnerLimit { lists.entries.removeAll(keepingCapacity: true) }
            lists.entries[key] = members
        }
        return members
    }

    /// Why the user may not be online at `now` (blocked: 31009, deactivated: 31029), or nil; read
    /// from the store, not a cache, so that a block committed a moment ago counts.
    func accessRefusal(appId: Int64, userId: String, now: Int64) async throws -> IMError? {
        Self.refusal(try await store.userAccess(appId: appId, userId: userId), userId: userId, now: now)
    }

    // MARK: one-to-one chat mute

    /// Throws 20106 when the user is muted in one-to-one chat (`/user/chat/fb/set.json`). Only
    /// clients are held to it: the Server API's private publish is not, as RongCloud documents.
    func checkPrivateChatMute(appId: Int64, sender: String) async throws {
        if try await privateChatMuted(appId: appId).contains(sender) {
            throw IMError(.mutedInPrivateChat, "user \(sender) is muted in one-to-one chat: the app's server can lift it with /user/chat/fb/set.json (state=0)")
        }
    }

    func setPrivateChatMuted(appId: Int64, userIds: [String], muted: Bool, now: Int64) async throws {
        try await store.setPrivateChatMuted(appId: appId, userIds: userIds, muted: muted, now: now)
        forgetPrivateChatMutes(appId: appId)
        peers.announce(.privateChatMutes(appId: appId))
    }

    /// The users muted in one-to-one chat, by user id.
    func privateChatMuted(appId: Int64) async throws -> Set<String> {
        let (cached, changes) = privateMutes.withLock { ($0.entries[appId], $0.changes) }
        if let cached { return cached }
        let users = Set(try await store.privateChatMutedUsers(appId: appId))
        privateMutes.withLock { mutes in
            guard mutes.changes == changes else { return }
            mutes.entries[appId] = users
        }
        return users
    }

    /// Drops the app's cached one-to-one chat mutes (changed here or on another node).
    func forgetPrivateChatMutes(appId: Int64) {
        privateMutes.withLock { mutes in
            mutes.entries.removeValue(forKey: appId)
            mutes.changes &+= 1
        }
    }

    // MARK: deactivation and deletion

    /// Deactivates users (their personal data deleted, see `UserStore.deactivateUsers`) and closes
    /// their connections with 31029, here and on the other nodes.
    func deactivate(appId: Int64, userIds: [String], now: Int64) async throws {
        try await store.deactivateUsers(appId: appId, userIds: userIds, now: now)
        forgetAll(appId: appId, owners: userIds)
        await fanOut.behindCommitted()
        disconnect(appId: appId, userIds: userIds, code: .userDeactivated, reason: "the user was deactivated by the app's server")
    }

    func isDeactivated(appId: Int64, userId: String) async throws -> Bool {
        try await store.userAccess(appId: appId, userId: userId).deactivatedAt > 0
    }

    func reactivate(appId: Int64, userIds: [String], now: Int64) async throws {
        try await store.reactivateUsers(appId: appId, userIds: userIds, now: now)
    }

    func deactivatedUsers(appId: Int64, offset: Int, limit: Int) async throws -> [String] {
        try await store.deactivatedUsers(appId: appId, offset: offset, limit: limit)
    }

    /// Deletes users and their personal data; their tokens stop working (a live connection is
    /// closed with 31004) until they are registered again.
    func delete(appId: Int64, userIds: [String], now: Int64) async throws {
        try await store.deleteUsers(appId: appId, userIds: userIds, now: now)
        forgetAll(appId: appId, owners: userIds)
        await fanOut.behindCommitted()
        disconnect(appId: appId, userIds: userIds, code: .tokenIncorrect, reason: "the user was deleted by the app's server")
    }

    func users(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> (total: Int, users: [UserRecord]) {
        try await store.users(appId: appId, offset: offset, limit: limit, descending: descending)
    }

    private func forgetAll(appId: Int64, owners: [String]) {
        forgetLists(appId: appId, owners: owners)
        forgetPrivateChatMutes(appId: appId)
        peers.announce(.userLists(appId: appId, owners: owners))
        peers.announce(.privateChatMutes(appId: appId))
    }

    private func disconnect(appId: Int64, userIds: [String], code: ErrorCode, reason: String) {
        for userId in userIds {
            for session in registry.sessions(appId: appId, userId: userId) {
                session.kick(code: code, reason: reason)
                registry.remove(session)
            }
        }
        peers.disconnect(appId: appId, userIds: userIds, code: code, reason: reason)
    }

    // MARK: hosted profiles

    func mergeHostedProfile(appId: Int64, userId: String, profile: String, extProfile: String, now: Int64) async throws -> Bool {
        try await store.mergeHostedProfile(appId: appId, userId: userId, profile: profile, extProfile: extProfile, now: now)
    }

    func removeHostedProfiles(appId: Int64, userIds: [String]) async throws {
        try await store.removeHostedProfiles(appId: appId, userIds: userIds)
    }

    func hostedProfiles(appId: Int64, userIds: [String]) async throws -> [HostedProfile] {
        try await store.hostedProfiles(appId: appId, userIds: userIds)
    }

    func hostedProfiles(appId: Int64, offset: Int, limit: Int, descending: Bool) async throws -> [HostedProfile] {
        try await store.hostedProfiles(appId: appId, offset: offset, limit: limit, descending: descending)
    }

    // MARK: profiles, tokens, lists and tags (Server API)

    /// Registers the user, or updates their name and portrait (empty values leave them).
    func register(appId: Int64, userId: String, name: String, portraitUri: String, now: Int64) async throws {
        try await store.upsertUser(appId: appId, userId: userId, name: name, portraitUri: portraitUri, now: now)
    }

    func user(appId: Int64, userId: String) async throws -> UserRecord? {
        try await store.user(appId: appId, userId: userId)
    }

    /// Refuses the tokens of these users issued before `before` at their next connect.
    func expireTokens(appId: Int64, userIds: [String], before: Int64, now: Int64) async throws {
        try await store.expireTokens(appId: appId, userIds: userIds, before: before, now: now)
    }

    func blockedUsers(appId: Int64, now: Int64) async throws -> [UserRecord] {
        try await store.blockedUsers(appId: appId, now: now)
    }

    /// The owner's black or white list, as stored.
    func members(appId: Int64, owner: String, kind: UserListKind) async throws -> [String] {
        try await store.userList(appId: appId, owner: owner, kind: kind)
    }

    /// Replaces each user's push tags.
    func setTags(appId: Int64, userIds: [String], tags: [String]) async throws {
        try await store.setUserTags(appId: appId, userIds: userIds, tags: tags)
    }

    func tags(appId: Int64, userIds: [String]) async throws -> [String: [String]] {
        try await store.userTags(appId: appId, userIds: userIds)
    }

    /// The users carrying every tag of `allOf` and one of `anyOf` (see `UserStore.users`).
    func users(appId: Int64, withAllTags allOf: [String], anyTag anyOf: [String]) async throws -> [String] {
        try await store.users(appId: appId, withAllTags: allOf, anyTag: anyOf)
    }
}
