import IMCore
import IMStore
import Synchronization

extension GroupRosterRecord: CachedRoster {
    var memberIds: Dictionary<String, Member>.Keys { members.keys }

    /// The members' live sessions with each member's joining seq, flat: what a delivery takes,
    /// shared (copy on write) instead of built per message.
    static func recipients(of roster: GroupRosterRecord, online: [String: [ClientSession]]) -> [(session: ClientSession, joinedSeq: UInt64)] {
        online.flatMap { userId, sessions in
            let joined = roster.members[userId]?.joinedSeq ?? UInt64.max
            return sessions.map { ($0, joined) }
        }
    }
}

/// Groups in memory for the send path (a `RosterCache` of `GroupRosterRecord`): members, mutes and
/// the live sessions of members, and the mutes that hold in every group of an app.
public final class GroupRosters: Sendable {
    private struct GlobalMutes {
        /// Mutes in every group of an app: user → end of the mute (ms).
        var mutes: [Int64: [String: Int64]] = [:]
        /// Changes under way, and changes begun so far, per app; a load that overlapped one is not cached.
        var changesUnderWay: [Int64: Int] = [:]
        var generation: [Int64: UInt64] = [:]
    }

    private let store: any GroupStore
    private let cache: RosterCache<GroupRosterRecord>
    private let global = Mutex(GlobalMutes())
    private let peers: ClusterPeers

    init(store: any GroupStore, registry: SessionRegistry, peers: ClusterPeers, fanOut: FanOutOrder, maxCachedGroups: Int = 100_000) {
        self.store = store
        self.peers = peers
        self.cache = RosterCache(registry: registry, maxCached: maxCachedGroups, fanOut: fanOut) { appId, groupId in
            try await store.groupRoster(appId: appId, groupId: groupId)
        }
    }

    // MARK: reading

    /// The group's members and mute state (nil if the group never existed).
    func roster(appId: Int64, groupId: String) async throws -> GroupRosterRecord? {
        try await cache.record(appId: appId, id: groupId)
    }

    /// The live sessions of the group's members, each with the log position its member joined at
    /// (a member gets live only messages committed after joining); read from the store if the group
    /// is not cached.
    func onlineSessions(appId: Int64, groupId: String) async throws -> [(session: ClientSession, joinedSeq: UInt64)] {
        try await cache.recipients(appId: appId, id: groupId) ?? []
    }

    /// The end of the user's mute in every group (nil if there is none).
    func globalMuteEnd(appId: Int64, userId: String, now: Int64) async throws -> Int64? {
        let (cached, generation) = global.withLock { ($0.mutes[appId], $0.generation[appId, default: 0]) }
        if let cached { return cached[userId] }
        var mutes: [String: Int64] = [:]
        for mute in try await store.groupMutes(appId: appId, groupId: nil, now: now) {
            mutes[mute.userId] = mute.until
        }
        global.withLock { state in
            if state.changesUnderWay[appId, default: 0] == 0, state.generation[appId, default: 0] == generation {
                state.mutes[appId] = mutes
            }
        }
        return mutes[userId]
    }

    /// Refuses a client send to the group: 22406 when the user is not a member (or the group is
    /// dismissed or unknown), 22408 when the user is muted there, in every group, or the whole group
    /// is muted and the user is not on its mute whitelist. A member's own mute holds even when the
    /// whitelist would let them speak in a muted group.
    func checkSender(appId: Int64, groupId: String, userId: String, now: Int64) async throws -> GroupRosterRecord {
        let roster = try await checkMember(appId: appId, groupId: groupId, userId: userId)
        if let until = roster.mutedUntil[userId], until > now {
            throw IMError(.mutedInGroup, "user \(userId) is muted in group \(groupId)\(Self.untilText(until)): the app server lifts it with /group/user/gag/rollback.json")
        }
        if let until = try await globalMuteEnd(appId: appId, userId: userId, now: now), until > now {
            throw IMError(.mutedInGroup, "user \(userId) is muted in every group\(Self.untilText(until)): the app server lifts it with /group/user/gag/rollback.json without groupId")
        }
        if roster.isMuted && !roster.muteWhitelist.contains(userId) {
            throw IMError(.mutedInGroup, "group \(groupId) is muted: only members on its mute whitelist may send until /group/ban/rollback.json lifts it")
        }
        return roster
    }

    /// Refuses with 22406 a user who is not a member of the group (or a group dismissed or unknown).
    func checkMember(appId: Int64, groupId: String, userId: String) async throws -> GroupRosterRecord {
        guard let roster = try await roster(appId: appId, groupId: groupId), !roster.isDismissed,
              roster.members[userId] != nil else {
            throw IMError(.notInGroup, "user \(userId) is not a member of group \(groupId): the app server adds members with /group/join.json")
        }
        return roster
    }

    private static func untilText(_ until: Int64) -> String {
        until == Int64.max ? " until the mute is lifted" : " until \(APITime.text(until)) UTC"
    }

    // MARK: changes

    /// Runs a change of these groups' members or mutes (nil: the mutes of every group) in the store,
    /// keeping the cache from serving what the change replaces.
    func changing<T: Sendable>(appId: Int64, groupIds: [String]?, _ change: () async throws -> T) async throws -> T {
        // Other nodes drop their copies once the change is over (made or not: a failed change may
        // still have written part of what it meant to).
        defer { peers.announce(.groups(appId: appId, groupIds: groupIds)) }
        guard let groupIds else {
            markGlobal(appId: appId, starting: true)
            defer { markGlobal(appId: appId, starting: false) }
            return try await change()
        }
        return try await cache.changing(appId: appId, ids: groupIds, change)
    }

    /// Drops groups from the cache after a change whose groups were known only once it was done.
    func changed(appId: Int64, groupIds: [String]) {
        cache.changed(appId: appId, ids: groupIds)
        peers.announce(.groups(appId: appId, groupIds: groupIds))
    }

    /// Drops what another node changed (nil: the mutes of every group of the app).
    func forget(appId: Int64, groupIds: [String]?) {
        if let groupIds {
            cache.changed(appId: appId, ids: groupIds)
        } else {
            markGlobal(appId: appId, starting: true)
            markGlobal(appId: appId, starting: false)
        }
    }

    private func markGlobal(appId: Int64, starting: Bool) {
        global.withLock { state in
            state.changesUnderWay[appId, default: 0] += starting ? 1 : -1
            if state.changesUnderWay[appId] == 0 { state.changesUnderWay[appId] = nil }
            state.generation[appId, default: 0] &+= 1
            state.mutes[appId] = nil
        }
    }

    // MARK: presence

    /// A session of a user opened: it joins the online set of the user's cached groups. Call after
    /// the registry holds it.
    func sessionOpened(_ session: ClientSession) { cache.sessionOpened(session) }

    /// A session ended: it leaves every online set. Call after the registry dropped it.
    func sessionClosed(_ session: ClientSession) { cache.sessionClosed(session) }
}
