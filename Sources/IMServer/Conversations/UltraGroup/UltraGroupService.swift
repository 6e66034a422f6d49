import Foundation
import IMCore
import IMStore
import IMWire

/// Ultra groups (spec/system-push-ultra.md §3): membership, channels, private channels, user
/// groups and mutes (changed through the Server API), and what clients do besides sending: read
/// each channel's state, pull its history, mark it read, modify their messages.
///
/// There are no offline messages: a message is stored once under its channel's log key and written
/// to the members online now; a client that comes back reads `summary` (every channel it sees,
/// with the last message and its unread and mention counts) and pulls the history of the channels
/// that moved. Every change of who sees what is told to the online members it concerns as an
/// `UltraGroupEvent`.
public final class UltraGroupService: Sendable {
    let store: any UltraGroupStore & MessageStore & SyncStore
    private let clock: any WallClock
    private let apps: AppRegistry
    private let bus: any SessionBus
    private let events: ServerEvents
    let rosters: UltraGroupRosters
    private let messages: MessageService
    private let words: SensitiveWordFilter

    init(store: any UltraGroupStore & MessageStore & SyncStore, clock: any WallClock, apps: AppRegistry, bus: any SessionBus, events: ServerEvents,
         rosters: UltraGroupRosters, messages: MessageService, words: SensitiveWordFilter) {
        self.words = words
        self.store = store
        self.clock = clock
        self.apps = apps
        self.bus = bus
        self.events = events
        self.rosters = rosters
        self.messages = messages
    }

    /// Modifications a summary lists at most.
    public static let maxModifiedPerSummary = 500
    /// Message bytes a summary carries at most (last messages, then modifications); the channels
    /// past it carry their last message's time only.
    static let summaryBudgetBytes = MessageLimits.frameBudgetBytes
    /// The most a summary frame may hold: the 4 MB frame less room for its envelope.
    static let summaryFrameBytes = FrameCodec.maxFrameBytes - 256 * 1024

    // MARK: membership (Server API)

    /// The group (24410 when there is none).
    public func roster(appId: Int64, groupId: String) async throws -> UltraGroupRosterRecord {
        guard let roster = try await rosters.roster(appId: appId, groupId: groupId) else {
            throw Self.notFound(groupId)
        }
        return roster
    }

    /// Creates the group with its default channel and `ownerId` as its first member; creating an
    /// existing group adds `ownerId` to it.
    public func create(appId: Int64, groupId: String, name: String, ownerId: String) async throws {
        let outcome = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.createUltraGroup(appId: appId, groupId: groupId, name: name, ownerId: ownerId,
                                             now: clock.nowMilliseconds(), maxGroupsPerUser: UltraGroupLimits.maxGroupsPerUser)
        }
        try Self.check(outcome, groupId: groupId)
        notify(appId: appId, userIds: [ownerId], event(.ultraGroupJoined, groupId: groupId))
        await events.membershipChanged(.ultraGroup, appId: appId, groupId: groupId, joined: [ownerId])
    }


    /// Adds members, all or none: 24412 when one of them is already in 100 ultra groups.
    public func join(appId: Int64, groupId: String, userIds: [String]) async throws {
        let outcome = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.joinUltraGroup(appId: appId, groupId: groupId, userIds: userIds, now: clock.nowMilliseconds(),
                                           maxGroupsPerUser: UltraGroupLimits.maxGroupsPerUser)
        }
        try Self.check(outcome, groupId: groupId)
        notify(appId: appId, userIds: userIds, event(.ultraGroupJoined, groupId: groupId))
        await events.membershipChanged(.ultraGroup, appId: appId, groupId: groupId, joined: userIds)
    }

    public func quit(appId: Int64, groupId: String, userIds: [String]) async throws {
        let done = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.quitUltraGroup(appId: appId, groupId: groupId, userIds: userIds)
        }
        guard done else { throw Self.notFound(groupId) }
        notify(appId: appId, userIds: userIds, event(.ultraGroupLeft, groupId: groupId))
        await events.membershipChanged(.ultraGroup, appId: appId, groupId: groupId, left: userIds)
    }

    /// Deletes the group and tells its online members; its messages are read by nobody any more.
    public func dismiss(appId: Int64, groupId: String) async throws {
        let members = try await rosters.roster(appId: appId, groupId: groupId).map { Array($0.members.keys) } ?? []
        let done = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.dismissUltraGroup(appId: appId, groupId: groupId)
        }
        guard done else { throw Self.notFound(groupId) }
        notify(appId: appId, userIds: members, event(.ultraGroupDismissed, groupId: groupId))
        await events.membershipChanged(.ultraGroup, appId: appId, groupId: groupId, dismissed: true)
    }

    public func rename(appId: Int64, groupId: String, name: String) async throws {
        let done = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.renameUltraGroup(appId: appId, groupId: groupId, name: name)
        }
        guard done else { throw Self.notFound(groupId) }
    }

    // MARK: channels, private lists and user groups (Server API)

    /// Runs a change of the group's channels, private lists, user groups or mutes, and tells each
    /// online member what it changed for them: channels they now see (or that changed type),
    /// channels they no longer see, deleted channels, user groups they joined or left.
    public func changingChannels<T: Sendable>(appId: Int64, groupId: String, _ change: () async throws -> T) async throws -> T {
        let before = try await roster(appId: appId, groupId: groupId)
        let result = try await rosters.changing(appId: appId, groupIds: [groupId], change)
        if let after = try await rosters.roster(appId: appId, groupId: groupId) {
            try await announce(appId: appId, before: before, after: after)
        }
        return result
    }

    /// Creates a channel: 24413 past 50 channels, 24403 for a bad id or an existing channel.
    public func createChannel(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType) async throws {
        try Self.checkChannelId(channelId)
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.createUltraGroupChannel(appId: appId, groupId: groupId, channelId: channelId, type: type,
                                                    now: clock.nowMilliseconds(), maxChannels: UltraGroupLimits.maxChannelsPerGroup)
        }
    }

    /// Deletes a channel (not `RCDefault`): 24414 when there is none.
    public func deleteChannel(appId: Int64, groupId: String, channelId: String) async throws {
        guard channelId != UltraGroupLimits.defaultChannelId else {
            throw IMError(.ultraGroupParameterInvalid, "the default channel \(channelId) belongs to the group and cannot be deleted")
        }
        let done = try await changingChannels(appId: appId, groupId: groupId) {
            try await store.deleteUltraGroupChannel(appId: appId, groupId: groupId, channelId: channelId)
        }
        guard done else { throw Self.channelNotFound(groupId, channelId) }
    }

    /// Makes a channel public or private (`RCDefault` stays public).
    public func setChannelType(appId: Int64, groupId: String, channelId: String, type: UltraGroupChannelType) async throws {
        guard channelId != UltraGroupLimits.defaultChannelId || type == .publicChannel else {
            throw IMError(.ultraGroupParameterInvalid, "the default channel \(channelId) is open to every member and cannot be made private")
        }
        let done = try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setUltraGroupChannelType(appId: appId, groupId: groupId, channelId: channelId, type: type)
        }
        guard done else { throw Self.channelNotFound(groupId, channelId) }
    }

    /// Adds members to (or removes them from) a channel's private list.
    public func setPrivateChannelUsers(appId: Int64, groupId: String, channelId: String, userIds: [String], add: Bool) async throws {
        let done = try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setPrivateChannelMembers(appId: appId, groupId: groupId, channelId: channelId, userIds: userIds, add: add)
        }
        guard done else { throw Self.channelNotFound(groupId, channelId) }
    }

    /// Creates user groups: 24411 past 50 in the group.
    public func createUserGroups(appId: Int64, groupId: String, userGroupIds: [String]) async throws {
        for id in userGroupIds { try Self.checkChannelId(id, what: "user group id") }
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.createUserGroups(appId: appId, groupId: groupId, userGroupIds: userGroupIds, now: clock.nowMilliseconds(),
                                             maxUserGroups: UltraGroupLimits.maxUserGroupsPerGroup)
        }
    }

    public func deleteUserGroups(appId: Int64, groupId: String, userGroupIds: [String]) async throws {
        try await changingChannels(appId: appId, groupId: groupId) {
            try await store.deleteUserGroups(appId: appId, groupId: groupId, userGroupIds: userGroupIds)
        }
    }

    /// Adds users to (or removes them from) a user group: 24411 past 100 users, 24403 when there is
    /// no such user group.
    public func setUserGroupUsers(appId: Int64, groupId: String, userGroupId: String, userIds: [String], add: Bool) async throws {
        let done = try await changingChannels(appId: appId, groupId: groupId) {
            try await store.setUserGroupMembers(appId: appId, groupId: groupId, userGroupId: userGroupId, userIds: userIds, add: add,
                                                maxMembers: UltraGroupLimits.maxMembersPerUserGroup)
        }
        guard done else {
            throw IMError(.ultraGroupParameterInvalid, "ultra group \(groupId) has no user group \(userGroupId): create it with /ultragroup/usergroup/add.json")
        }
    }

    /// Binds user groups to a channel (or unbinds them): 24403 when the channel or a user group does not exist.
    public func bindUserGroups(appId: Int64, groupId: String, channelId: String, userGroupIds: [String], bind: Bool) async throws {
        let done = try await changingChannels(appId: appId, groupId: groupId) {
            try await store.bindUserGroups(appId: appId, groupId: groupId, channelId: channelId, userGroupIds: userGroupIds, bind: bind)
        }
        guard done else {
            throw IMError(.ultraGroupParameterInvalid, "ultra group \(groupId) has no channel \(channelId) or no user group among \(userGroupIds.joined(separator: ",")): create them first")
        }
    }

    /// Tells the online members what a change did to the channels they see and the user groups they are in.
    private func announce(appId: Int64, before: UltraGroupRosterRecord, after: UltraGroupRosterRecord) async throws {
        let groupId = after.groupId
        let sessions = try await rosters.sessions(appId: appId, groupId: groupId, userIds: after.members.keys)
        var byUser: [String: [ClientSession]] = [:]
        for session in sessions { byUser[session.userId, default: []].append(session) }
        for (userId, sessions) in byUser {
            var events: [Im_UltraGroupEvent] = []
            for (channelId, old) in before.channels {
                guard before.sees(old, userId: userId) else { continue }
                if after.channels[channelId] == nil {
                    events.append(event(.ultraGroupChannelDeleted, groupId: groupId, channelId: channelId, type: old.type))
                } else if let new = after.channels[channelId], !after.sees(new, userId: userId) {
                    events.append(event(.ultraGroupChannelHidden, groupId: groupId, channelId: channelId, type: new.type))
                }
            }
            for (channelId, new) in after.channels where after.sees(new, userId: userId) {
                let old = before.channels[channelId]
                if old == nil || !before.sees(old!, userId: userId) || old!.type != new.type {
                    events.append(event(.ultraGroupChannelChanged, groupId: groupId, channelId: channelId, type: new.type))
                }
                let added = new.userGroups.subtracting(old?.userGroups ?? []).sorted()
                let removed = (old?.userGroups ?? []).subtracting(new.userGroups).sorted()
                if !added.isEmpty {
                    var bound = event(.ultraGroupChannelBound, groupId: groupId, channelId: channelId, type: new.type)
                    bound.userGroupIds = added
                    events.append(bound)
                }
                if !removed.isEmpty {
                    var unbound = event(.ultraGroupChannelUnbound, groupId: groupId, channelId: channelId, type: new.type)
                    unbound.userGroupIds = removed
                    events.append(unbound)
                }
            }
            let groupsBefore = Set(before.userGroups.filter { $0.value.contains(userId) }.keys)
            let groupsAfter = Set(after.userGroups.filter { $0.value.contains(userId) }.keys)
            if !groupsAfter.subtracting(groupsBefore).isEmpty {
                var joined = event(.ultraGroupUserGroupsAdded, groupId: groupId)
                joined.userGroupIds = groupsAfter.subtracting(groupsBefore).sorted()
                events.append(joined)
            }
            if !groupsBefore.subtracting(groupsAfter).isEmpty {
                var left = event(.ultraGroupUserGroupsRemoved, groupId: groupId)
                left.userGroupIds = groupsBefore.subtracting(groupsAfter).sorted()
                events.append(left)
            }
            for event in events {
                guard let frame = try? FrameCodec.push(op: .ultraGroupEvent, event) else { continue }
                let shared = OutboundFrame(frame)
                for session in sessions { _ = session.send(shared) }
            }
        }
    }

    // MARK: clients

    /// Where `member` reads `channel` from: after their joining (unless the app shows pre-join
    /// history), and after the group and the channel were created.
    func readsAfter(appId: Int64, _ roster: UltraGroupRosterRecord, _ channel: UltraGroupChannelRecord,
                    _ member: UltraGroupRosterRecord.Member) -> UInt64 {
        max(apps.settings(appId: appId).ultraGroups.preJoinHistory ? 0 : member.joinedSeq, roster.createdSeq, channel.createdSeq)
    }

    /// The oldest sentTime kept in the app's ultra group history.
    private func historyFloor(appId: Int64) -> Int64 {
        clock.nowMilliseconds() - Int64(apps.settings(appId: appId).ultraGroups.historyRetentionDays) * 86_400_000
    }

    /// Every channel the user sees in each of their ultra groups, with its last message, unread and
    /// mention counts, and the messages of those channels modified after `modifiedSince`.
    func summary(_ request: Im_UltraGroupSummaryRequest, for session: ClientSession) async throws -> Im_UltraGroupSummary {
        let now = clock.nowMilliseconds()
        var views: [UltraGroupChannelView] = []
        var afterSeq: [String: UInt64] = [:]
        for groupId in try await store.ultraGroupIds(appId: session.appId, ofUser: session.userId) {
            guard let roster = try await rosters.roster(appId: session.appId, groupId: groupId),
                  let member = roster.members[session.userId] else { continue }
            for channel in roster.channels.values.sorted(by: { $0.channelId < $1.channelId }) where roster.sees(channel, userId: session.userId) {
                let after = readsAfter(appId: session.appId, roster, channel, member)
                views.append(UltraGroupChannelView(groupId: groupId, channelId: channel.channelId, channelType: channel.type, afterSeq: after))
                afterSeq[ultraGroupConversationKey(groupId, channel.channelId)] = after
            }
        }
        let floor = historyFloor(appId: session.appId)
        var reply = Im_UltraGroupSummary()
        reply.serverTime = now
        reply.countedAt = now
        // The frame's bytes so far: each channel's state, and the last messages it carries (the
        // newest of each channel while they fit the budget; past it, only their times).
        var bytes = 0
        var lastMessageBytes = 0
        let channels = request.modifiedOnly ? [] : try await store.ultraGroupSummaries(appId: session.appId, userId: session.userId,
                                                                                        channels: views, minSentTime: floor)
        for summary in channels {
            var state = Im_UltraGroupChannelState()
            state.groupID = summary.groupId
            state.channelID = summary.channelId
            state.channelType = Int32(summary.channelType.rawValue)
            bytes += 64 + summary.groupId.utf8.count + summary.channelId.utf8.count
            if let last = summary.lastMessage {
                state.lastSentTime = last.sentTime
                if lastMessageBytes + last.wireSize <= Self.summaryBudgetBytes {
                    state.lastMessage = last.wire
                    lastMessageBytes += last.wireSize
                    bytes += last.wireSize
                }
            }
            state.readTime = summary.readTime
            state.unreadCount = Int32(clamping: summary.unreadCount)
            state.mentionedCount = Int32(clamping: summary.mentionedCount)
            reply.channels.append(state)
        }
        if request.modifiedSince > 0 || request.modifiedAfterSeq > 0 {
            // Oldest first, by (modification time, seq), within the byte budget; the client asks
            // again from (`serverTime`, `modifiedThroughSeq`) while `moreModified`, for the
            // modifications only. A first modification that would not fit in the frame beside the
            // channels is left for that next request.
            let cursor = ModificationCursor(time: request.modifiedSince, seq: request.modifiedAfterSeq)
            let room = max(1, FrameBudget.bytes - lastMessageBytes)
            let page = try await store.modifiedMessages(appId: session.appId, conversationKeys: Array(afterSeq.keys), after: cursor,
                                                        limit: Self.maxModifiedPerSummary, maxBytes: room)
            var modified = page.messages
            var next = page.next
            var more = page.hasMore
            if !request.modifiedOnly, let first = modified.first, bytes + first.message.wireSize > Self.summaryFrameBytes {
                modified = []
                next = cursor
                more = true
            }
            for (_, message) in modified where message.sentTime >= floor
                && message.seq > afterSeq[message.conversationKey, default: UInt64.max] && message.isVisible(to: session.userId) {
                reply.modified.append(message.wire)
            }
            if more {
                reply.moreModified = true
                reply.serverTime = next.time
                reply.modifiedThroughSeq = next.seq
            }
        }
        return reply
    }

    /// A page of one channel's history, as the member may read it.
    func history(_ request: Im_HistoryRequest, for session: ClientSession) async throws -> Im_HistoryReply {
        let channelId = UltraGroupLimits.effectiveChannel(request.channelID)
        let (roster, channel, member) = try await rosters.checkReader(appId: session.appId, groupId: request.targetID,
                                                                      channelId: channelId, userId: session.userId)
        guard MessageLimits.historyCountRange.contains(Int(request.count)) else {
            throw IMError(.invalidParameter, "count must be 1...\(UltraGroupLimits.maxHistoryCount), got \(request.count)")
        }
        guard request.order == 0 || request.order == 1 else {
            throw IMError(.invalidParameter, "order must be 0 (descending) or 1 (ascending), got \(request.order)")
        }
        let page = try await store.history(
            appId: session.appId, conversationKey: ultraGroupConversationKey(request.targetID, channelId),
            recordTime: request.recordTime, count: Int(request.count), ascending: request.order == 1,
            viewer: HistoryViewer(userId: session.userId, afterSeq: max(readsAfter(appId: session.appId, roster, channel, member), session.historyAfterSeq),
                                  minSentTime: historyFloor(appId: session.appId)),
            maxBytes: FrameBudget.bytes)
        var reply = Im_HistoryReply()
        reply.messages = page.messages.map(\.wire)
        reply.isRemaining = page.hasMore
        return reply
    }

    /// Marks a channel read up to now for the user, on the server and on their other devices
    /// (RongCloud's `syncUltraGroupReadStatus`, whose timestamp is ignored).
    func markRead(_ request: Im_UltraGroupReadRequest, from session: ClientSession) async throws -> Im_UltraGroupEvent {
        let channelId = UltraGroupLimits.effectiveChannel(request.channelID)
        _ = try await rosters.checkReader(appId: session.appId, groupId: request.groupID, channelId: channelId, userId: session.userId)
        let now = clock.nowMilliseconds()
        try await store.setUltraGroupReadTime(appId: session.appId, userId: session.userId, groupId: request.groupID,
                                              channelId: channelId, time: now)
        var read = event(.ultraGroupReadSync, groupId: request.groupID, channelId: channelId)
        read.readTime = now
        if let frame = try? FrameCodec.push(op: .ultraGroupEvent, read) {
            bus.send(frame, appId: session.appId, userId: session.userId, except: session.origin)
        }
        return read
    }

    /// Replaces the content of the user's own ultra group message (same uid, time and object name);
    /// every online member who sees the channel, and the user's other devices, get it at once, and
    /// history returns it. 20116 for another user's message, a message of another conversation
    /// type, or one not kept in history.
    func modify(_ request: Im_ModifyMessageRequest, from session: ClientSession) async throws -> Im_Message {
        try await modify(appId: session.appId, userId: session.userId, uid: request.messageUid, content: request.content,
                         origin: session.origin).wire
    }

    /// Modifies a message for its sender (`modify(_:from:)`, and the Server API's
    /// `/ultragroup/msg/modify.json`); `origin` is the session that asked, which gets no push.
    public func modify(appId: Int64, userId: String, uid: String, content: Data, origin: Origin) async throws -> StoredMessage {
        try MessageService.checkContent(content)
        guard var message = try await store.message(appId: appId, uid: uid), message.conversationType == .ultraGroup else {
            throw IMError(.messageNotModifiable, "no ultra group message \(uid): only ultra group messages can be modified")
        }
        guard message.senderId == userId else {
            throw IMError(.messageNotModifiable, "message \(uid) was sent by another user: only its sender can modify it")
        }
        try MessageService.checkModifiable(message)
        _ = try await rosters.checkReader(appId: appId, groupId: message.targetId, channelId: message.channelId, userId: userId)
        let content = try await words.modifiedContent(appId: appId, objectName: message.objectName, content: content)
        let mentions = MentionedInfo.of(content: content)
        try await store.modifyMessage(appId: appId, uid: uid, content: content, mentions: mentions, modifiedTime: clock.nowMilliseconds())
        message.content = content
        message.mentions = mentions
        // The edit goes to the sessions directly (on every node): behind the original's fan-out, or
        // a member would be told of an edit to a message it has not got yet (and drop it).
        await messages.fanOut.behindCommitted()
        await bus.deliverModified(message, origin: origin)
        return message
    }

    /// Sends one message to each group's channel on behalf of `message.senderId` (the Server API's
    /// `/message/ultragroup/publish.json`): 24410 for a missing group and 24414 for a missing channel,
    /// checked for every group before anything is sent. Returns the stored messages in group order.
    public func publish(_ message: StoredMessage, toGroups groupIds: [String]) async throws -> [StoredMessage] {
        let channelId = UltraGroupLimits.effectiveChannel(message.channelId)
        for groupId in groupIds {
            let roster = try await roster(appId: message.appId, groupId: groupId)
            guard roster.channels[channelId] != nil else { throw Self.channelNotFound(groupId, channelId) }
        }
        let mentions = MentionedInfo.of(content: message.content)
        var sent: [StoredMessage] = []
        for groupId in groupIds {
            var copy = message
            copy.conversationType = .ultraGroup
            copy.targetId = groupId
            copy.channelId = channelId
            copy.conversationKey = ultraGroupConversationKey(groupId, channelId)
            copy.mentions = mentions
            // Through the sensitive-word filter; STATUS messages reach the online members only.
            sent.append(try await messages.send(copy, origin: .serverAPI))
        }
        return sent
    }

    // MARK: helpers

    private func event(_ kind: Im_UltraGroupEventKind, groupId: String, channelId: String = "",
                       type: UltraGroupChannelType = .publicChannel) -> Im_UltraGroupEvent {
        var event = Im_UltraGroupEvent()
        event.kind = kind
        event.groupID = groupId
        event.channelID = channelId
        event.channelType = Int32(type.rawValue)
        event.time = clock.nowMilliseconds()
        return event
    }

    /// Sends an event to every session of these users.
    private func notify(appId: Int64, userIds: [String], _ event: Im_UltraGroupEvent) {
        guard let frame = try? FrameCodec.push(op: .ultraGroupEvent, event) else { return }
        bus.send(OutboundFrame(frame), appId: appId, userIds: userIds, except: nil)
    }

    private static func check(_ outcome: UltraGroupJoinOutcome, groupId: String) throws {
        switch outcome {
        case .joined: return
        case .notFound: throw notFound(groupId)
        case .tooManyGroups(let userIds):
            throw IMError(.ultraGroupCountExceeded, "\(userIds.joined(separator: ",")) already belong to \(UltraGroupLimits.maxGroupsPerUser) ultra groups, the most a user can join: nobody was added")
        }
    }

    static func checkChannelId(_ id: String, what: String = "channel id") throws {
        guard UltraGroupLimits.isValidChannelId(id) else {
            throw IMError(.ultraGroupParameterInvalid, "\(what) \(TextLength.quoted(id)) is invalid: use 1 to \(UltraGroupLimits.maxChannelIdLength) letters and digits")
        }
    }

    static func notFound(_ groupId: String) -> IMError {
        IMError(.ultraGroupNotFound, "ultra group \(groupId) does not exist: the app server creates it with /ultragroup/create.json")
    }

    static func channelNotFound(_ groupId: String, _ channelId: String) -> IMError {
        IMError(.ultraGroupChannelNotFound, "ultra group \(groupId) has no channel \(channelId): create it with /ultragroup/channel/create.json")
    }
}
