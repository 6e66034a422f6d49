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
    private let whitelistMode: Bool
    private struct OwnerKey: Hashable {
        let appId: Int64
        let owner: String
        let kind: UserListKind
    }
    /// Cached lists, and a count of changes: a list read from the store is cached only if no
    /// change happened meanwhile, so a concurrent reader cannot put back a list older than a change.
    private let lists = Mutex<(entries: [OwnerKey: Set<String>], changes: UInt64)>(([:], 0))
    private static let cachedOwnerLimit = 200_000

    private let peers: ClusterPeers

    init(store: any UserStore, registry: SessionRegistry, peers: ClusterPeers, whitelistMode: Bool) {
        self.peers = peers
        self.store = store
        self.registry = registry
        self.whitelistMode = whitelistMode
    }

    /// Refuses a connect with a revoked token (31004) or by a blocked user (31009).
    func checkConnect(appId: Int64, userId: String, tokenIssuedAt: Int64, now: Int64) async throws {
        let access = try await store.userAccess(appId: appId, userId: userId)
        guard tokenIssuedAt >= access.tokensValidAfter else {
            throw IMError(.tokenIncorrect, "this token was revoked: get a new token from your app server")
        }
        guard access.blockedUntil <= now else {
            throw IMError(.userBlocked, "user \(userId) is blocked until \(APITime.text(access.blockedUntil)) UTC: the app's server can lift it with /user/unblock.json")
        }
    }

    /// Blocks users from connecting for `minutes` (a connect gets 31009) and disconnects their live
    /// sessions with 31011, the seed's code for a user banned while online.
    func block(appId: Int64, userIds: [String], minutes: Int, now: Int64) async throws {
        try await store.setBlocked(appId: appId, userIds: userIds, until: now + Int64(minutes) * 60_000, now: now)
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
        if whitelistMode {
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

    /// Whether the user is blocked at `now` (read from the store, not a cache: a block committed
    /// a moment ago counts).
    func isBlocked(appId: Int64, userId: String, now: Int64) async throws -> Bool {
        try await store.userAccess(appId: appId, userId: userId).blockedUntil > now
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
