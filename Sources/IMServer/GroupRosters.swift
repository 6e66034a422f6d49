import IMCore
import Synchronization

/// Groups in memory, for sending and fan-out: each group's members and mute state, read from the
/// store on first use, and the live sessions of its members, kept current as sessions open and
/// close. A group message therefore costs one write per online member's session, whatever the
/// number of offline members.
///
/// Every membership or mute change goes through `changing(appId:groupIds:_:)`, which marks the
/// groups as changing and drops them from the cache before the store is written, and again after.
/// A roster read that overlapped a change of its group (or of the app's all-group mutes) is used
/// once but not kept, so the cache never holds a roster older than the store.
public final class GroupRosters: Sendable {
    struct Key: Hashable {
        let appId: Int64
        let groupId: String
    }

    private struct Roster {
        var record: GroupRosterRecord
        /// Live sessions of members, by user id.
        var online: [String: [ClientSession]] {
            didSet { rebuildRecipients() }
        }
        /// The same sessions with their members' joining seq, flat: what a delivery takes, shared
        /// (copy on write) instead of built per message.
        private(set) var recipients: [(session: ClientSession, joinedSeq: UInt64)] = []

        init(record: GroupRosterRecord, online: [String: [ClientSession]]) {
            self.record = record
            self.online = online
            rebuildRecipients()
        }

        private mutating func rebuildRecipients() {
            recipients = online.flatMap { userId, sessions in
                let joined = record.members[userId]?.joinedSeq ?? UInt64.max
                return sessions.map { ($0, joined) }
            }
        }
    }

    private struct State {
        var rosters: [Key: Roster] = [:]
        /// For each user, the cached groups they are a member of (where their sessions go on connect).
        var groupsOfUser: [SessionRegistry.UserKey: Set<String>] = [:]
        /// Mutes in every group of an app: user → end of the mute (ms).
        var globalMutes: [Int64: [String: Int64]] = [:]
        /// Changes under way, and changes begun so far, per group; a load that overlapped one is
        /// not cached.
        var changesUnderWay: [Key: Int] = [:]
        var generation: [Key: UInt64] = [:]
        /// The same for the all-group mutes of each app.
        var globalChangesUnderWay: [Int64: Int] = [:]
        var globalGeneration: [Int64: UInt64] = [:]
    }

    private let store: any IMStore
    private let registry: SessionRegistry
    private let maxCachedGroups: Int
    private let state = Mutex(State())

    init(store: any IMStore, registry: SessionRegistry, maxCachedGroups: Int = 100_000) {
        self.store = store
        self.registry = registry
        self.maxCachedGroups = maxCachedGroups
    }

    // MARK: reading

    /// The group's members and mute state (nil if the group never existed).
    func roster(appId: Int64, groupId: String) async throws -> GroupRosterRecord? {
        let key = Key(appId: appId, groupId: groupId)
        let (cached, generation) = state.withLock { ($0.rosters[key]?.record, $0.generation[key, default: 0]) }
        if let cached { return cached }
        guard let record = try await store.groupRoster(appId: appId, groupId: groupId) else { return nil }
        state.withLock { state in
            guard state.changesUnderWay[key, default: 0] == 0, state.generation[key, default: 0] == generation,
                  state.rosters[key] == nil else { return }
            if state.rosters.count >= maxCachedGroups, let evicted = state.rosters.keys.first {
                Self.remove(evicted, from: &state)
            }
            for userId in record.members.keys {
                state.groupsOfUser[SessionRegistry.UserKey(appId: appId, userId: userId), default: []].insert(groupId)
            }
            // Inside the lock, so a session opening or closing now is either seen here or applied
            // by sessionOpened / sessionClosed after it.
            let online = registry.sessions(appId: appId, userIds: record.members.keys)
            state.rosters[key] = Roster(record: record, online: online)
        }
        return record
    }

    /// The live sessions of the group's members, each with the log position its member joined at
    /// (a member gets live only messages committed after joining); read from the store if the group
    /// is not cached.
    func onlineSessions(appId: Int64, groupId: String) async throws -> [(session: ClientSession, joinedSeq: UInt64)] {
        let key = Key(appId: appId, groupId: groupId)
        func cached() -> [(session: ClientSession, joinedSeq: UInt64)]? {
            state.withLock { $0.rosters[key]?.recipients }
        }
        if let sessions = cached() { return sessions }
        guard let record = try await roster(appId: appId, groupId: groupId) else { return [] }
        if let sessions = cached() { return sessions }
        // Read during a change and not cached: this once, from the registry.
        return registry.sessions(appId: appId, userIds: record.members.keys).flatMap { userId, sessions in
            sessions.map { ($0, record.members[userId]?.joinedSeq ?? UInt64.max) }
        }
    }

    /// The end of the user's mute in every group (nil if there is none).
    func globalMuteEnd(appId: Int64, userId: String, now: Int64) async throws -> Int64? {
        let (cached, generation) = state.withLock { ($0.globalMutes[appId], $0.globalGeneration[appId, default: 0]) }
        if let cached { return cached[userId] }
        var mutes: [String: Int64] = [:]
        for mute in try await store.groupMutes(appId: appId, groupId: nil, now: now) {
            mutes[mute.userId] = mute.until
        }
        state.withLock { state in
            if state.globalChangesUnderWay[appId, default: 0] == 0, state.globalGeneration[appId, default: 0] == generation {
                state.globalMutes[appId] = mutes
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
        mark(appId: appId, groupIds: groupIds, starting: true)
        defer { mark(appId: appId, groupIds: groupIds, starting: false) }
        return try await change()
    }

    /// Drops groups from the cache after a change whose groups were known only once it was done.
    func changed(appId: Int64, groupIds: [String]) {
        state.withLock { state in
            for groupId in groupIds {
                let key = Key(appId: appId, groupId: groupId)
                state.generation[key, default: 0] &+= 1
                Self.remove(key, from: &state)
            }
        }
    }

    private func mark(appId: Int64, groupIds: [String]?, starting: Bool) {
        state.withLock { state in
            if let groupIds {
                for groupId in groupIds {
                    let key = Key(appId: appId, groupId: groupId)
                    state.changesUnderWay[key, default: 0] += starting ? 1 : -1
                    if state.changesUnderWay[key] == 0 { state.changesUnderWay[key] = nil }
                    state.generation[key, default: 0] &+= 1
                    Self.remove(key, from: &state)
                }
            } else {
                state.globalChangesUnderWay[appId, default: 0] += starting ? 1 : -1
                if state.globalChangesUnderWay[appId] == 0 { state.globalChangesUnderWay[appId] = nil }
                state.globalGeneration[appId, default: 0] &+= 1
                state.globalMutes[appId] = nil
            }
        }
    }

    private static func remove(_ key: Key, from state: inout State) {
        guard let roster = state.rosters.removeValue(forKey: key) else { return }
        for userId in roster.record.members.keys {
            let user = SessionRegistry.UserKey(appId: key.appId, userId: userId)
            state.groupsOfUser[user]?.remove(key.groupId)
            if state.groupsOfUser[user]?.isEmpty == true { state.groupsOfUser[user] = nil }
        }
    }

    // MARK: presence

    /// A session of a user opened: it joins the online set of the user's cached groups. Call after
    /// the registry holds it.
    func sessionOpened(_ session: ClientSession) {
        let user = SessionRegistry.UserKey(appId: session.appId, userId: session.userId)
        state.withLock { state in
            guard let groups = state.groupsOfUser[user] else { return }
            for groupId in groups {
                let key = Key(appId: session.appId, groupId: groupId)
                guard state.rosters[key] != nil else { continue }
                var sessions = state.rosters[key]!.online[session.userId, default: []]
                if !sessions.contains(where: { $0 === session }) { sessions.append(session) }
                state.rosters[key]!.online[session.userId] = sessions
            }
        }
    }

    /// A session ended: it leaves every online set. Call after the registry dropped it.
    func sessionClosed(_ session: ClientSession) {
        let user = SessionRegistry.UserKey(appId: session.appId, userId: session.userId)
        state.withLock { state in
            guard let groups = state.groupsOfUser[user] else { return }
            for groupId in groups {
                let key = Key(appId: session.appId, groupId: groupId)
                guard var sessions = state.rosters[key]?.online[session.userId] else { continue }
                sessions.removeAll { $0 === session }
                state.rosters[key]!.online[session.userId] = sessions.isEmpty ? nil : sessions
            }
        }
    }
}
