import Foundation
import IMCore
import IMWire

/// Offline sync and remote history, both read from the message log.
public final class SyncService: Sendable {
    private let store: any IMStore
    private let clock: any WallClock
    private let config: ServerConfig

    init(store: any IMStore, clock: any WallClock, config: ServerConfig) {
        self.store = store
        self.clock = clock
        self.config = config
    }

    /// One page of the messages a session has not seen: everything the user received or sent with a
    /// seq above the client's watermark and younger than the offline retention.
    func page(_ request: Im_SyncRequest, for session: ClientSession) async throws -> Im_SyncReply {
        let limit = request.limit > 0 ? min(Int(request.limit), config.syncPageSize) : config.syncPageSize
        let oldest = clock.nowMilliseconds() - Int64(config.offlineRetentionDays) * 86_400_000
        let rows = try await store.syncPage(appId: session.appId, userId: session.userId,
                                            after: request.since, minSentTime: oldest, limit: limit + 1)
        var reply = Im_SyncReply()
        reply.morePackages = rows.count > limit
        reply.messages = rows.prefix(limit).map(\.wire)
        reply.watermark = reply.messages.last?.seq ?? request.since
                return reply
    }

    /// A page of one conversation's cloud history.
    func history(_ request: Im_HistoryRequest, for session: ClientSession) async throws -> Im_HistoryReply {
        guard ConversationType(rawValue: Int(request.conversationType)) == .private else {
            throw IMError(.invalidParameter, "remote history is available for private (1) conversations only on this server")
        }
        guard UserID.isValid(request.targetID) else {
            throw IMError(.invalidParameter, "targetId '\(request.targetID)' is not a valid user id")
        }
        guard MessageLimits.historyCountRange.contains(Int(request.count)) else {
            throw IMError(.invalidParameter, "count must be 1...100, got \(request.count)")
        }
        guard request.order == 0 || request.order == 1 else {
            throw IMError(.invalidParameter, "order must be 0 (descending) or 1 (ascending), got \(request.order)")
        }
        let page = try await store.history(
            appId: session.appId, conversationKey: privateConversationKey(session.userId, request.targetID),
            recordTime: request.recordTime, count: Int(request.count), ascending: request.order == 1)
        var reply = Im_HistoryReply()
        reply.messages = page.messages.map(\.wire)
        reply.isRemaining = page.hasMore
        return reply
    }
}
