import Foundation
import IMCore
import IMWire

/// Something that changed in an ultra group for this user (RongCloud's ultra group channel, user
/// group and read-status listeners).
public struct UltraGroupEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Another device of this user read `channelId` up to `readTime`; its unread count is zero here too.
        case readSynced
        /// This user now sees `channelId`, or it changed type.
        case channelChanged
        /// `channelId` was deleted.
        case channelDeleted
        /// This user no longer sees private `channelId`.
        case channelHidden
        /// This user was added to `userGroupIds`.
        case userGroupsAdded
        /// This user left `userGroupIds` (or they were deleted).
        case userGroupsRemoved
        /// `userGroupIds` were bound to `channelId`.
        case channelBound
        /// `userGroupIds` were unbound from `channelId`.
        case channelUnbound
        /// This user joined the ultra group.
        case joined
        /// This user left the ultra group, or was removed.
        case left
        /// The ultra group was dismissed.
        case dismissed
    }

    public var kind: Kind
    public var targetId: String
    public var channelId: String
    public var channelType: UltraGroupChannelType
    public var userGroupIds: [String]
    public var readTime: Int64
}

/// What one catch-up of the ultra groups did (after each connect, or `syncUltraGroups()`).
public struct UltraGroupSyncResult: Sendable, Equatable {
    /// Channels this user sees.
    public var channels: Int
    /// Messages pulled from channel history into the local database.
    public var fetched: Int
    /// Local messages whose content was modified meanwhile.
    public var modified: Int
}

/// Ultra groups (RongCloud's `ConversationType_ULTRAGROUP`): the pair (targetId, channelId) names a
/// conversation; a message without a channel id goes to `RCDefault`. There are no offline messages:
/// after each connect the client reads every channel's state from the server (last message, unread
/// and mention counts), pulls the messages it lacks from the channels that moved, and applies the
/// modifications it missed.
extension IMClient {
    /// Channel events: read status from other devices, channel and user group changes, joins, leaves.
    public nonisolated func ultraGroupEvents() -> AsyncStream<UltraGroupEvent> {
        ultraGroupEventBroadcaster.stream()
    }

    /// Messages whose content their sender modified (RongCloud's `onMessagesModified`), live and
    /// found at a catch-up or sync; each carries the new content. Ultra group messages come from
    /// their channel summaries, private and group messages (modified through the Server API) from
    /// the conversation's log.
    public nonisolated func messageModifications() -> AsyncStream<Message> {
        modificationEvents.stream()
    }

    /// An event after each ultra group catch-up (RongCloud's ultra group sync-completed callback).
    public nonisolated func ultraGroupSyncCompleted() -> AsyncStream<UltraGroupSyncResult> {
        ultraGroupSyncEvents.stream()
    }

    /// Messages pulled per channel at a catch-up, at most: the newest page for a channel this
    /// device never saw, up to ten pages of 100 after the newest local message otherwise. Older
    /// messages are read with `getRemoteHistoryMessages`.
    static let catchUpPages = 10

    /// The channel a conversation of `type` uses: `RCDefault` for an ultra group without one, none
    /// elsewhere (33003 when one is given).
    static func channel(_ channelId: String, of type: ConversationType) throws -> String {
        if type == .ultraGroup {
            guard channelId.isEmpty || UltraGroupLimits.isValidChannelId(channelId) else {
                throw IMError(.invalidParameter, "channelId '\(channelId)' is invalid: use 1 to \(UltraGroupLimits.maxChannelIdLength) letters and digits")
            }
            return UltraGroupLimits.effectiveChannel(channelId)
        }
        guard channelId.isEmpty else {
            throw IMError(.invalidParameter, "only ultra group conversations have channels; pass no channelId for \(type) conversations")
        }
        return ""
    }

    /// Reads every channel's state from the server, pulls the messages this device lacks, sets the
    /// server's unread and mention counts, and applies modifications made meanwhile. Runs after
    /// each connect by itself.
    @discardableResult
    public func syncUltraGroups() async throws -> UltraGroupSyncResult {
        let connection = try connected()
        let store = try openStore()
        var request = Im_UltraGroupSummaryRequest()
        let cursor = try await store.ultraModifiedCursor()
        request.modifiedSince = cursor.time
        request.modifiedAfterSeq = cursor.seq
        var summary = try await connection.request(.ultraGroupSummary, request, timeout: options.requestTimeout)
            .body(Im_UltraGroupSummary.self)
        var fetched = 0
        // One read for every channel's position and one write for the positions and counts:
        // channels without new messages (most of them) cost no database round trip of their own.
        let keys = summary.channels.map { UltraGroupChannelKey(groupId: $0.groupID, channelId: $0.channelID) }
        let throughs = try await store.ultraGroupThroughs(keys)
        var reached: [UltraGroupChannelKey: Int64] = [:]
        for (key, state) in zip(keys, summary.channels) {
            let through = throughs[key]
            if state.lastSentTime > 0, state.lastSentTime > (through ?? Int64.min) {
                let (count, time) = try await fetchMissing(state, after: through, connection: connection, store: store)
                fetched += count
                reached[key] = time
            } else if state.lastSentTime > 0, through == nil {
                reached[key] = state.lastSentTime
            }
        }
        try await store.applyUltraGroupCatchUp(reached: reached, counts: summary.channels.map {
            (UltraGroupChannelKey(groupId: $0.groupID, channelId: $0.channelID), Int($0.unreadCount), Int($0.mentionedCount))
        }, asOf: summary.countedAt)
        ultraCaughtUp.formUnion(keys)
        var modified = await applyModified(summary.modified)
        // Modifications come oldest first, a page at a time.
        while summary.moreModified {
            try await store.advanceUltraModifiedCursor(time: summary.serverTime, seq: summary.modifiedThroughSeq)
            request.modifiedSince = summary.serverTime
            request.modifiedAfterSeq = summary.modifiedThroughSeq
            request.modifiedOnly = true
            summary = try await connection.request(.ultraGroupSummary, request, timeout: options.requestTimeout)
                .body(Im_UltraGroupSummary.self)
            await modified += applyModified(summary.modified)
        }
        try await store.advanceUltraModifiedCursor(time: summary.serverTime, seq: summary.modifiedThroughSeq)
        let result = UltraGroupSyncResult(channels: summary.channels.count, fetched: fetched, modified: modified)
        ultraGroupSyncEvents.yield(result)
        return result
    }

    /// Pulls a channel's messages after `after` (or its newest page when this device never caught
    /// up with it). Returns how many were new here and the time this device now holds everything
    /// through.
    private func fetchMissing(_ state: Im_UltraGroupChannelState, after: Int64?, connection: WireConnection,
                              store: LocalStore) async throws -> (stored: Int, through: Int64) {
        var request = Im_HistoryRequest()
        request.conversationType = Int32(ConversationType.ultraGroup.rawValue)
        request.targetID = state.groupID
        request.channelID = state.channelID
        guard let after else {
            request.count = 20
            request.order = Int32(HistoryOrder.descending.rawValue)
            let reply = try await connection.request(.history, request, timeout: options.requestTimeout).body(Im_HistoryReply.self)
            let now = options.clock.nowMilliseconds()
            let stored = try await store.storeFetched(reply.messages.map { message(from: $0, me: store.userId, receivedAt: now) }).count
            return (stored, state.lastSentTime)
        }
        request.count = Int32(UltraGroupLimits.maxHistoryCount)
        request.order = Int32(HistoryOrder.ascending.rawValue)
        var stored = 0
        var through = after
        for _ in 0..<Self.catchUpPages {
            request.recordTime = through
            let reply = try await connection.request(.history, request, timeout: options.requestTimeout).body(Im_HistoryReply.self)
            let now = options.clock.nowMilliseconds()
            await stored += try store.storeFetched(reply.messages.map { message(from: $0, me: store.userId, receivedAt: now) }).count
            guard reply.isRemaining, let newest = reply.messages.map(\.sentTime).max() else {
                return (stored, max(through, state.lastSentTime))
            }
            through = newest
        }
        return (stored, through)
    }

    /// The channels whose caught-up time live `messages` move: those this connection has caught
    /// up, to their newest message's time (stored in the same transaction as the messages).
    func ultraGroupThroughs(advancedBy messages: [Message]) -> [UltraGroupChannelKey: Int64] {
        guard !ultraCaughtUp.isEmpty else { return [:] }
        var throughs: [UltraGroupChannelKey: Int64] = [:]
        for message in messages where message.conversationType == .ultraGroup {
            let key = UltraGroupChannelKey(groupId: message.targetId, channelId: message.channelId)
            if ultraCaughtUp.contains(key) { throughs[key] = max(throughs[key] ?? 0, message.sentTime) }
        }
        return throughs
    }

    /// Applies new contents of modified messages to the local copies and emits the changed ones.
    /// A message recalled while this device was away comes as a modification to `RC:RcNtf`: it is
    /// recalled here as if the recall command had arrived.
    @discardableResult
    func applyModified(_ wires: [Im_Message]) async -> Int {
        guard let store, !wires.isEmpty else { return 0 }
        let now = options.clock.nowMilliseconds()
        do {
            var edits: [Message] = []
            var count = 0
            for wire in wires {
                if wire.objectName == RecallNotificationMessage.objectName {
                    if let notification = try? JSONDecoder().decode(RecallNotificationMessage.self, from: wire.content),
                       let recalled = try await store.recallLocally(uid: wire.messageUid, notification: notification) {
                        recallEvents.yield(recalled)
                        count += 1
                    }
                } else {
                    edits.append(message(from: wire, me: store.userId, receivedAt: now))
                }
            }
            let changed = try await store.replaceContents(edits)
            changed.forEach(modificationEvents.yield)
            return count + changed.count
        } catch {
            options.logger.error("could not store modified messages", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// Runs the catch-up after a connect; a failure is logged and retried at the next connect.
    func catchUpUltraGroups(_ scope: ConnectionScope) async {
        guard !Task.isCancelled, self.scope === scope else { return }
        do {
            try await syncUltraGroups()
        } catch {
            options.logger.debug("ultra group catch-up stopped", metadata: ["error": "\(error)"])
        }
    }

    func ultraGroupEvent(_ wire: Im_UltraGroupEvent) async {
        let kind: UltraGroupEvent.Kind
        switch wire.kind {
        case .ultraGroupReadSync: kind = .readSynced
        case .ultraGroupChannelChanged: kind = .channelChanged
        case .ultraGroupChannelDeleted: kind = .channelDeleted
        case .ultraGroupChannelHidden: kind = .channelHidden
        case .ultraGroupUserGroupsAdded: kind = .userGroupsAdded
        case .ultraGroupUserGroupsRemoved: kind = .userGroupsRemoved
        case .ultraGroupChannelBound: kind = .channelBound
        case .ultraGroupChannelUnbound: kind = .channelUnbound
        case .ultraGroupJoined: kind = .joined
        case .ultraGroupLeft: kind = .left
        case .ultraGroupDismissed: kind = .dismissed
        default: return
        }
        if kind == .readSynced {
            _ = try? await store?.clearUnread(type: .ultraGroup, targetId: wire.groupID, channelId: wire.channelID)
        }
        ultraGroupEventBroadcaster.yield(UltraGroupEvent(
            kind: kind, targetId: wire.groupID, channelId: wire.channelID,
            channelType: UltraGroupChannelType(rawValue: Int(wire.channelType)) ?? .publicChannel,
            userGroupIds: wire.userGroupIds, readTime: wire.readTime))
    }

    /// Marks every message of a channel read, here, on the server and on this user's other devices
    /// (RongCloud's `syncUltraGroupReadStatus`).
    public func syncUltraGroupReadStatus(targetId: String, channelId: String = "") async throws {
        let channel = try Self.channel(channelId, of: .ultraGroup)
        var request = Im_UltraGroupReadRequest()
        request.groupID = targetId
        request.channelID = channel
        _ = try await connected().request(.ultraGroupRead, request, timeout: options.requestTimeout)
        _ = try await openStore().clearUnread(type: .ultraGroup, targetId: targetId, channelId: channel)
    }

    /// Replaces the content of one of this user's ultra group messages (RongCloud's
    /// `modifyUltraGroupMessage`): same uid and time, the content's type unchanged. Every member
    /// online and this user's other devices get it now, the others at their next catch-up.
    ///
    /// - Throws: 20116 for another user's message, a message that is not an ultra group message or
    ///   not kept in history; 33003 when the new content is of another type.
    @discardableResult
    public func modifyUltraGroupMessage(messageUId: String, content: some MessageContent) async throws -> Message {
        let store = try openStore()
        if let local = try await store.message(uid: messageUId), local.objectName != type(of: content).objectName {
            throw IMError(.invalidParameter, "message \(messageUId) is \(local.objectName); its content can only be replaced by another \(local.objectName)")
        }
        var request = Im_ModifyMessageRequest()
        request.messageUid = messageUId
        do {
            request.content = try content.encode()
        } catch {
            throw IMError(.invalidParameter, "the message content could not be encoded: \(error)")
        }
        let wire = try await connected().request(.modifyMessage, request, timeout: options.requestTimeout).body(Im_Message.self)
        let modified = message(from: wire, me: store.userId, receivedAt: options.clock.nowMilliseconds())
        return try await store.replaceContents([modified]).first ?? modified
    }

    /// Unread messages of an ultra group, over its channels.
    public func getUltraGroupUnreadCount(targetId: String) async throws -> Int {
        try await openStore().unreadSums(type: .ultraGroup, targetId: targetId).unread
    }

    /// Unread messages of an ultra group that mention this user or everyone.
    public func getUltraGroupUnreadMentionedCount(targetId: String) async throws -> Int {
        try await openStore().unreadSums(type: .ultraGroup, targetId: targetId).mentioned
    }

    /// Unread mentions over every ultra group.
    public func getUltraGroupAllUnreadMentionedCount() async throws -> Int {
        try await openStore().unreadSums(type: .ultraGroup, targetId: nil).mentioned
    }

    /// The local conversations of every channel of an ultra group (RongCloud's
    /// `getConversationListForAllChannel`), pinned first, then newest first.
    public func getConversationsForAllChannels(targetId: String) async throws -> [Conversation] {
        try await openStore().conversations(types: [.ultraGroup], count: UltraGroupLimits.maxChannelsPerGroup, startTime: 0, targetId: targetId)
    }
}

/// One channel of one ultra group, as a set element.
struct UltraGroupChannelKey: Hashable {
    let groupId: String
    let channelId: String
}
