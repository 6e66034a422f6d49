import Foundation
import IMCore
import IMStore
import IMWire

/// Group chat beyond a plain send: Server API publishing, membership changes that must reach the
/// rosters, dismissal, and group read receipts.
///
/// Read receipts: the sender asks once per message (an `RC:RRReqMsg` command goes to the members,
/// online now or at their next sync); members report read messages in batches; each new read is
/// recorded once and pushed to the sender's sessions, and a sender that was offline pulls the reads
/// it missed by its receipt watermark. Pushes and pages carry reads, never whole reader lists, so a
/// frame stays small in a 3,000-member group; the full list is read in pages.
public final class GroupService: Sendable {
    /// The object name of the group notification a dismissal leaves in the conversation.
    public static let notificationObjectName = "RC:GrpNtf"

    let store: any GroupStore & MessageStore & MessageLifecycleStore
    private let clock: any WallClock
    private let apps: AppRegistry
    private let bus: any SessionBus
    private let events: ServerEvents
    let rosters: GroupRosters
    private let messages: MessageService
    private let log: MessageLog

    init(store: any GroupStore & MessageStore & MessageLifecycleStore, clock: any WallClock, apps: AppRegistry, bus: any SessionBus, events: ServerEvents,
         rosters: GroupRosters, messages: MessageService, log: MessageLog) {
        self.store = store
        self.clock = clock
        self.apps = apps
        self.bus = bus
        self.events = events
        self.rosters = rosters
        self.messages = messages
        self.log = log
    }

    // MARK: membership (Server API)

    /// Adds members, all or none (see `GroupStore.joinGroup`).
    /// Adds members (creating the group if needed), all or none within `maxMembers` (the app's
    /// limit when nil or above it).
    func join(appId: Int64, groupId: String, name: String?, userIds: [String], maxMembers: Int? = nil) async throws -> GroupJoinOutcome {
        let groups = apps.settings(appId: appId).groups
        let limit = min(maxMembers ?? groups.maxMembers, groups.maxMembers)
        let outcome = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.joinGroup(appId: appId, groupId: groupId, name: name, userIds: userIds, maxMembers: limit,
                                      preJoinHistory: groups.preJoinHistory, now: clock.nowMilliseconds())
        }
        if case .joined = outcome, !userIds.isEmpty {
            await events.membershipChanged(.group, appId: appId, groupId: groupId, joined: userIds)
        }
        return outcome
    }

    func quit(appId: Int64, groupId: String, userIds: [String]) async throws {
        let remaining = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.quitGroup(appId: appId, groupId: groupId, userIds: userIds)
        }
        if remaining != nil { await events.membershipChanged(.group, appId: appId, groupId: groupId, left: userIds) }
    }


    /// Makes the user a member of exactly these groups.
    func sync(appId: Int64, userId: String, groups: [(id: String, name: String)]) async throws {
        let settings = apps.settings(appId: appId).groups
        let left = try await rosters.changing(appId: appId, groupIds: groups.map(\.id)) {
            try await store.syncGroups(appId: appId, userId: userId, groups: groups, maxMembers: settings.maxMembers,
                                       preJoinHistory: settings.preJoinHistory, now: clock.nowMilliseconds())
        }
        rosters.changed(appId: appId, groupIds: left)
        for group in groups { await events.membershipChanged(.group, appId: appId, groupId: group.id, joined: [userId]) }
        for groupId in left { await events.membershipChanged(.group, appId: appId, groupId: groupId, left: [userId]) }
    }

    /// Runs a change of mute state (`groupIds` nil: the mutes in every group).
    func changingMutes<T: Sendable>(appId: Int64, groupIds: [String]?, _ change: () async throws -> T) async throws -> T {
        try await rosters.changing(appId: appId, groupIds: groupIds, change)
    }

    /// Dismisses a group: an `RC:GrpNtf` notification (operation `Dismiss`) goes to every member,
    /// online now or at their next sync, and then nobody can send to the group. Returns false if
    /// there is no such group.
    func dismiss(appId: Int64, groupId: String, operatorId: String) async throws -> Bool {
        // Dismissed first, so no member's message lands after the notification.
        let dismissed = try await rosters.changing(appId: appId, groupIds: [groupId]) {
            try await store.dismissGroup(appId: appId, groupId: groupId, now: clock.nowMilliseconds())
        }
        guard dismissed else { return false }
        let notification: [String: Any] = [
            "operatorUserId": operatorId, "operation": "Dismiss", "data": "{\"targetGroupId\":\"\(groupId)\"}",
            "message": "", "extra": "",
        ]
        let message = StoredMessage(
            appId: appId, conversationType: .group, conversationKey: groupConversationKey(groupId), targetId: groupId,
            senderId: operatorId, objectName: Self.notificationObjectName,
            content: try JSONSerialization.data(withJSONObject: notification, options: [.sortedKeys]),
            flags: .isPersisted, includeSender: true)
        _ = try await log.append(message, origin: .serverAPI)
        await events.membershipChanged(.group, appId: appId, groupId: groupId, dismissed: true)
        return true
    }

    // MARK: publishing (Server API)

    /// Sends one message to each group on behalf of `message.senderId`, who need not be a member
    /// (the app server speaks for its users). A directional message names members of every group.
    /// Every group is checked before anything is sent. Returns each group's sent message, in order.
    func publish(_ message: StoredMessage, to groupIds: [String]) async throws -> [StoredMessage] {
        for groupId in groupIds {
            let roster = try await rosters.roster(appId: message.appId, groupId: groupId)
            if roster?.isDismissed == true {
                throw IMError(.apiBadParameter, "group \(groupId) was dismissed: create it again with /group/create.json before sending to it; nothing was sent")
            }
            if let outsider = message.directedUserIds.first(where: { roster?.members[$0] == nil }) {
                throw IMError(.apiBadParameter, "toUserId \(outsider) is not a member of group \(groupId): a directional message goes to members only; nothing was sent")
            }
        }
        var sent: [StoredMessage] = []
        for groupId in groupIds {
            var copy = message
            copy.targetId = groupId
            copy.conversationKey = groupConversationKey(groupId)
            sent.append(try await messages.send(copy, origin: .serverAPI))
        }
        return sent
    }

    // MARK: read receipts

    /// READ_RECEIPT_REQUEST: the sender of a group message asks its members to report reading it.
    /// Asking again changes nothing.
    func requestReceipts(_ request: Im_ReadReceiptRequest, from session: ClientSession) async throws {
        let groupId = try Self.groupTarget(request.conversationType, request.targetID)
        _ = try await rosters.checkMember(appId: session.appId, groupId: groupId, userId: session.userId)
        guard let original = try await store.message(appId: session.appId, uid: request.messageUid),
              original.conversationKey == groupConversationKey(groupId) else {
            throw IMError(.invalidParameter, "group \(groupId) has no message \(request.messageUid): pass the messageUId of a sent group message")
        }
        guard original.senderId == session.userId else {
            throw IMError(.invalidParameter, "message \(request.messageUid) was sent by \(original.senderId): read receipts are requested by a message's sender only")
        }
        guard !original.receiptRequested else { return }
        try await store.requestReadReceipts(appId: session.appId, uid: original.uid)
        let command = StoredMessage(
            appId: session.appId, conversationType: .group, conversationKey: original.conversationKey, targetId: groupId,
            senderId: session.userId, objectName: ReadReceiptObjectNames.request,
            content: try JSONSerialization.data(withJSONObject: ["messageUId": original.uid], options: [.sortedKeys]),
            flags: .none, includeSender: true, directedUserIds: original.directedUserIds)
        _ = try await log.append(command, origin: session.origin)
    }

    /// READ_RECEIPT_RESPONSE: a member reports group messages as read. Messages that ask for no
    /// receipt, are the member's own, or are not theirs to see are passed over; each new read
    /// reaches the message's sender.
    func respond(_ request: Im_ReadReceiptResponse, from session: ClientSession) async throws {
        let groupId = try Self.groupTarget(request.conversationType, request.targetID)
        guard (1...GroupLimits.receiptResponseBatch).contains(request.messageUids.count) else {
            throw IMError(.invalidParameter, "a read receipt response lists 1 to \(GroupLimits.receiptResponseBatch) messages, got \(request.messageUids.count)")
        }
        let roster = try await rosters.checkMember(appId: session.appId, groupId: groupId, userId: session.userId)
        let joinedSeq = roster.members[session.userId]?.joinedSeq ?? UInt64.max
        let now = clock.nowMilliseconds()
        var reads: [ReadReceiptRecord] = []
        for message in try await store.messages(appId: session.appId, uids: Array(Set(request.messageUids))) {
            guard message.seq > joinedSeq,
                  message.conversationKey == groupConversationKey(groupId), message.receiptRequested,
                  message.senderId != session.userId, message.isVisible(to: session.userId) else { continue }
            reads.append(ReadReceiptRecord(uid: message.uid, senderId: message.senderId, groupId: groupId, readerId: session.userId, readTime: now))
        }
        let recorded = try await store.recordReads(reads, appId: session.appId)
        for (senderId, receipts) in Dictionary(grouping: recorded, by: \.senderId) {
            var push = Im_ReadReceipts()
            push.receipts = receipts.map(\.wire)
            push.watermark = receipts.map(\.seq).max() ?? 0
            guard let frame = try? FrameCodec.push(op: .readReceipts, push) else { continue }
            bus.send(frame, appId: session.appId, userId: senderId)
        }
    }

    /// READ_RECEIPT_USERS: a page of who has read one of the caller's messages, in reading order.
    func readUsers(_ request: Im_ReadUsersRequest, from session: ClientSession) async throws -> Im_ReadUsersReply {
        let count = request.count == 0 ? GroupLimits.readUsersPageRange.upperBound : Int(request.count)
        guard GroupLimits.readUsersPageRange.contains(count) else {
            throw IMError(.invalidParameter, "count must be \(GroupLimits.readUsersPageRange.lowerBound) to \(GroupLimits.readUsersPageRange.upperBound), got \(request.count)")
        }
        let after = request.pageToken.isEmpty ? 0 : Int64(request.pageToken)
        guard let after, after >= 0 else {
            throw IMError(.invalidParameter, "pageToken '\(request.pageToken)' is not one this server returned: pass the previous reply's nextPageToken, or empty for the first page")
        }
        guard let message = try await store.message(appId: session.appId, uid: request.messageUid),
              message.conversationType == .group, message.senderId == session.userId else {
            throw IMError(.invalidParameter, "no group message \(request.messageUid) sent by \(session.userId): readers are listed for one's own group messages")
        }
        let (readers, total) = try await store.readers(appId: session.appId, uid: message.uid,
                                                       after: UInt64(after), limit: count + 1)
        var reply = Im_ReadUsersReply()
        reply.users = readers.prefix(count).map { reader in
            var user = Im_ReadUser()
            user.userID = reader.readerId
            user.readTime = reader.readTime
            return user
        }
        reply.total = Int32(clamping: total)
        if readers.count > count, let last = readers.prefix(count).last { reply.nextPageToken = String(last.seq) }
        return reply
    }

    /// READ_RECEIPT_SYNC: reads of the caller's messages recorded after its receipt watermark.
    func receiptSync(_ request: Im_ReadReceiptSyncRequest, for session: ClientSession) async throws -> Im_ReadReceipts {
        let limit = request.limit > 0 ? min(Int(request.limit), GroupLimits.receiptSyncPage) : GroupLimits.receiptSyncPage
        try WireNumbers.checkWatermark(request.since, field: "since")
        let reads = try await store.readReceipts(appId: session.appId, senderId: session.userId, after: request.since, limit: limit + 1)
        var reply = Im_ReadReceipts()
        reply.receipts = reads.prefix(limit).map(\.wire)
        reply.watermark = reads.prefix(limit).last?.seq ?? request.since
        reply.more = reads.count > limit
        return reply
    }

    private static func groupTarget(_ type: Int32, _ targetId: String) throws -> String {
        guard ConversationType(rawValue: Int(type)) == .group else {
            throw IMError(.invalidParameter, "group read receipts are for group (3) conversations, got conversation type \(type)")
        }
        guard UserID.isValid(targetId) else { throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid group id") }
        return targetId
    }
}

extension ReadReceiptRecord {
    var wire: Im_ReadReceipt {
        var receipt = Im_ReadReceipt()
        receipt.conversationType = Int32(ConversationType.group.rawValue)
        receipt.targetID = groupId
        receipt.messageUid = uid
        receipt.readerID = readerId
        receipt.readTime = readTime
        receipt.seq = seq
        return receipt
    }
}
