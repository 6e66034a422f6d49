import Foundation
import IMCore
import IMStore
import IMWire

/// Offline sync and remote history, both read from the message log.
public final class SyncService: Sendable {
    private let store: any SyncStore
    private let clock: any WallClock
    private let config: ServerConfig
    private let apps: AppRegistry
    private let rosters: GroupRosters

    init(store: any SyncStore, clock: any WallClock, config: ServerConfig, apps: AppRegistry, rosters: GroupRosters) {
        self.store = store
        self.clock = clock
        self.config = config
        self.apps = apps
        self.rosters = rosters
    }

    /// One page of the messages a session has not seen: everything the user received or sent, and
    /// what their groups got after they joined, with a seq above the client's watermark and younger
    /// than the offline retention.
    ///
    /// A device that never synced (`newDevice`) reads from the start of the compensation window
    /// instead: RongCloud's default is today since 00:00.
    ///
    /// System messages have a retention of their own (`systemOfflineRetentionDays`): the store reads
    /// from the older of the two limits and the messages past their own are left out of the page
    /// (its watermark still covers them, so they are never offered again).
    func page(_ request: Im_SyncRequest, for session: ClientSession) async throws -> Im_SyncReply {
        try WireNumbers.checkWatermark(request.since, field: "since")
        let limit = request.limit > 0 ? min(Int(request.limit), config.messaging.syncPageSize) : config.messaging.syncPageSize
        let now = clock.nowMilliseconds()
        let messaging = apps.settings(appId: session.appId).messaging
        var oldest = now - Int64(messaging.offlineRetentionDays) * 86_400_000
        var oldestSystem = now - Int64(messaging.systemOfflineRetentionDays) * 86_400_000
        if request.newDevice {
            // RongCloud's offline message compensation: a new install gets the natural days of the
            // window (today by default), within the retention.
            let start = messaging.compensationStart(now: now)
            oldest = max(oldest, start)
            oldestSystem = max(oldestSystem, start)
        }
        let page = try await store.syncPage(appId: session.appId, userId: session.userId,
                                            after: max(request.since, session.historyAfterSeq), minSentTime: min(oldest, oldestSystem), limit: limit,
                                            maxBytes: FrameBudget.bytes)
        var reply = Im_SyncReply()
        reply.morePackages = page.hasMore
        reply.messages = page.messages
            .filter { $0.sentTime >= ($0.conversationType == .system ? oldestSystem : oldest) }
            .filter { !$0.isOnlineBroadcast || $0.sentTime >= now - StoredMessage.onlineBroadcastWindow }
            // A group message the user sent without a copy for their devices (the Server API's
            // isIncludeSender off, or an app without multi-device sync); the store's scans leave
            // out such private and system messages already, and keep those to the user themselves.
            .filter { $0.conversationType != .group || $0.includeSender || $0.senderId != session.userId }
            .map(\.wire)
        reply.watermark = max(page.watermark, request.since)
        return reply
    }

    /// A page of one conversation's cloud history.
    func history(_ request: Im_HistoryRequest, for session: ClientSession) async throws -> Im_HistoryReply {
        let type = ConversationType(rawValue: Int(request.conversationType))
        guard type == .private || type == .group || type == .system else {
            throw IMError(.invalidParameter, "remote history is available for private (1), group (3) and system (6) conversations on this server")
        }
        guard UserID.isValid(request.targetID) else {
            throw IMError(.invalidParameter, "targetId \(TextLength.quoted(request.targetID)) is not a valid \(type == .group ? "group" : "user") id")
        }
        guard MessageLimits.historyCountRange.contains(Int(request.count)) else {
            throw IMError(.invalidParameter, "count must be 1...100, got \(request.count)")
        }
        guard request.order == 0 || request.order == 1 else {
            throw IMError(.invalidParameter, "order must be 0 (descending) or 1 (ascending), got \(request.order)")
        }
        let floor = try apps.settings(appId: session.appId).messaging.cloudHistoryFloor(now: clock.nowMilliseconds())
        let page: HistoryPage
        if type == .group {
            // Members, present or of a dismissed group, read from their joining (or the pre-join
            // history the app allows), and only the directional messages meant for them.
            guard let roster = try await rosters.roster(appId: session.appId, groupId: request.targetID),
                  let member = roster.members[session.userId] else {
                throw IMError(.notInGroup, "user \(session.userId) is not a member of group \(request.targetID): only members read its history")
            }
            page = try await store.history(
                appId: session.appId, conversationKey: groupConversationKey(request.targetID), recordTime: request.recordTime,
                count: Int(request.count), ascending: request.order == 1,
                viewer: HistoryViewer(userId: session.userId, afterSeq: max(member.historyAfterSeq, session.historyAfterSeq), minSentTime: floor), maxBytes: FrameBudget.bytes)
        } else if type == .system {
            page = try await systemHistory(request, for: session, floor: floor)
        } else {
            page = try await store.history(
                appId: session.appId, conversationKey: privateConversationKey(session.userId, request.targetID),
                recordTime: request.recordTime, count: Int(request.count), ascending: request.order == 1,
                viewer: HistoryViewer(userId: session.userId, afterSeq: session.historyAfterSeq, minSentTime: floor), maxBytes: FrameBudget.bytes)
        }
        var reply = Im_HistoryReply()
        reply.messages = page.messages.map(\.wire)
        reply.isRemaining = page.hasMore
        return reply
    }

    /// A system conversation's history: what the account sent to this user and its broadcasts to
    /// everyone, two logs read alike and merged by time.
    private func systemHistory(_ request: Im_HistoryRequest, for session: ClientSession, floor: Int64) async throws -> HistoryPage {
        let viewer = HistoryViewer(userId: session.userId, afterSeq: session.historyAfterSeq, minSentTime: floor)
        let ascending = request.order == 1
        var pages: [HistoryPage] = []
        for recipient in [session.userId, StoredMessage.everyone] {
            pages.append(try await store.history(
                appId: session.appId, conversationKey: systemConversationKey(sender: request.targetID, recipient: recipient),
                recordTime: request.recordTime, count: Int(request.count), ascending: ascending, viewer: viewer,
                maxBytes: FrameBudget.bytes))
        }
        func before(_ a: StoredMessage, _ b: StoredMessage) -> Bool {
            ascending ? (a.sentTime, a.seq) < (b.sentTime, b.seq) : (a.sentTime, a.seq) > (b.sentTime, b.seq)
        }
        var merged = (pages[0].messages + pages[1].messages).sorted(by: before)
        // A log whose page stopped early (by count or bytes) has more messages after its last one:
        // the other log's messages past that point wait for the next page, or they would be
        // returned before messages of the first log that come earlier.
        for page in pages where page.hasMore {
            guard let last = page.messages.last else { continue }
            merged = merged.filter { !before(last, $0) }
        }
        let count = Int(request.count)
        let (fitting, cut) = FrameBudget.prefix(Array(merged.prefix(count)))
        return HistoryPage(messages: fitting, hasMore: cut || merged.count > count || pages.contains { $0.hasMore })
    }
}
