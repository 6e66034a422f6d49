import IMCore
import IMStore

/// The online members of an ultra group: the roster they were derived from, each member's live
/// sessions, and all of them flat with the members' joining seq (what a message to a public channel
/// goes to).
struct UltraGroupRecipients: Sendable {
    var roster: UltraGroupRosterRecord
    var online: [String: [ClientSession]]
    var all: [(session: ClientSession, joinedSeq: UInt64)]
}

extension UltraGroupRosterRecord: CachedRoster {
    var memberIds: Dictionary<String, Member>.Keys { members.keys }

    static func recipients(of roster: UltraGroupRosterRecord, online: [String: [ClientSession]]) -> UltraGroupRecipients {
        UltraGroupRecipients(roster: roster, online: online, all: online.flatMap { userId, sessions in
            let joined = roster.members[userId]?.joinedSeq ?? UInt64.max
            return sessions.map { ($0, joined) }
        })
    }
}

/// Ultra groups in memory for sending, delivery and reading (a `RosterCache` of
/// `UltraGroupRosterRecord`): members, channels and who sees them, user groups, mutes, and the
/// members' live sessions. A message costs one write per online session that sees its channel,
/// whatever the number of members.
public final class UltraGroupRosters: Sendable {
    private let cache: RosterCache<UltraGroupRosterRecord>
    private let peers: ClusterPeers

    init(store: any UltraGroupStore, registry: SessionRegistry, peers: ClusterPeers, fanOut: FanOutOrder, maxCachedGroups: Int = 10_000) {
        self.peers = peers
        cache = RosterCache(registry: registry, maxCached: maxCachedGroups, fanOut: fanOut) { appId, groupId in
            try await store.ultraGroupRoster(appId: appId, groupId: groupId)
        }
    }

    func roster(appId: Int64, groupId: String) async throws -> UltraGroupRosterRecord? {
        try await cache.record(appId: appId, id: groupId)
    }

    /// The sessions a message of `channelId` goes to, with their members' joining seq: every online
    /// member for a public channel, the online members who see it for a private one.
    func onlineSessions(appId: Int64, groupId: String, channelId: String) async throws -> [(session: ClientSession, joinedSeq: UInt64)] {
        guard let recipients = try await cache.recipients(appId: appId, id: groupId),
              let channel = recipients.roster.channels[channelId] else { return [] }
        let roster = recipients.roster
        guard let audience = roster.privateAudience(channel) else { return recipients.all }
        return audience.flatMap { userId in
            (recipients.online[userId] ?? []).map { ($0, roster.members[userId]?.joinedSeq ?? UInt64.max) }
        }
    }

    /// The online sessions of these members of the group (for events about them).
    func sessions(appId: Int64, groupId: String, userIds: some Sequence<String>) async throws -> [ClientSession] {
        guard let recipients = try await cache.recipients(appId: appId, id: groupId) else { return [] }
        return userIds.flatMap { recipients.online[$0] ?? [] }
    }

    /// The group's member and channel, refusing with the documented codes: 24410 no such group,
    /// 24406 not a member, 24414 no such channel, 24416 a private channel the user does not see.
    func checkReader(appId: Int64, groupId: String, channelId: String, userId: String) async throws
        -> (roster: UltraGroupRosterRecord, channel: UltraGroupChannelRecord, member: UltraGroupRosterRecord.Member) {
        guard let roster = try await roster(appId: appId, groupId: groupId) else {
            throw IMError(.ultraGroupNotFound, "ultra group \(groupId) does not exist: the app server creates it with /ultragroup/create.json")
        }
        guard let member = roster.members[userId] else {
            throw IMError(.notInUltraGroup, "user \(userId) is not a member of ultra group \(groupId): the app server adds members with /ultragroup/join.json")
        }
        guard let channel = roster.channels[channelId] else {
            throw IMError(.ultraGroupChannelNotFound, "ultra group \(groupId) has no channel '\(channelId)': the app server creates channels with /ultragroup/channel/create.json")
        }
        guard roster.sees(channel, userId: userId) else {
            throw IMError(.notInPrivateChannel, "channel \(channelId) of ultra group \(groupId) is private and user \(userId) is not on its list: the app server adds users with /ultragroup/channel/private/users/add.json")
        }
        return (roster, channel, member)
    }

    /// `checkReader`, and 24408 when the user is muted in the channel or the group, or either is
    /// muted as a whole and the user is not on its whitelist.
    func checkSender(appId: Int64, groupId: String, channelId: String, userId: String, now: Int64) async throws -> UltraGroupRosterRecord {
        let (roster, _, _) = try await checkReader(appId: appId, groupId: groupId, channelId: channelId, userId: userId)
        if let until = roster.muteEnd(userId: userId, channelId: channelId, now: now) {
            let when = until == Int64.max ? "until the mute is lifted" : "until \(APITime.text(until)) UTC"
            throw IMError(.mutedInUltraGroup, "user \(userId) may not speak in channel \(channelId) of ultra group \(groupId) \(when): the app server lifts mutes with /ultragroup/userbanned/del.json or /ultragroup/globalbanned/set.json")
        }
        return roster
    }

    // MARK: changes and presence

    func changing<T: Sendable>(appId: Int64, groupIds: [String], _ change: () async throws -> T) async throws -> T {
        defer { peers.announce(.ultraGroups(appId: appId, groupIds: groupIds)) }
        return try await cache.changing(appId: appId, ids: groupIds, change)
    }

    /// Drops what another node changed.
    func forget(appId: Int64, groupIds: [String]) {
        cache.changed(appId: appId, ids: groupIds)
    }

    func sessionOpened(_ session: ClientSession) { cache.sessionOpened(session) }
    func sessionClosed(_ session: ClientSession) { cache.sessionClosed(session) }
}
