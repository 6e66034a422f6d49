import IMCore
import IMStore

/// Stored messages as the app's server reads them: by uid, by conversation and time, and the
/// hourly message logs it downloads (and deletes).
public final class MessageArchive: Sendable {
    private let store: any MessageStore

    init(store: any MessageStore) {
        self.store = store
    }

    public func message(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await store.message(appId: appId, uid: uid)
    }

    /// The stored messages among these uids, in no particular order.
    public func messages(appId: Int64, uids: [String]) async throws -> [StoredMessage] {
        try await store.messages(appId: appId, uids: uids)
    }

    /// Messages of a conversation between two times (see `MessageStore.conversationMessages`).
    public func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                                     ascending: Bool, limit: Int, senderId: String? = nil) async throws -> [StoredMessage] {
        try await store.conversationMessages(appId: appId, conversationKey: conversationKey, start: start, end: end,
                                             includeStart: includeStart, ascending: ascending, limit: limit, senderId: senderId)
    }

    /// One page of an hour's message log, after the cursor `(from, afterSeq)`.
    public func logPage(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage] {
        try await store.messages(appId: appId, sentFrom: from, afterSeq: afterSeq, to: to, limit: limit)
    }

    /// Whether an hour (`YYYYMMDDHH`, starting at `start`) has a log to download: not deleted,
    /// and at least one message sent in it.
    public func hasLog(appId: Int64, hour: String, start: Int64) async throws -> Bool {
        guard try await !store.isMessageLogDeleted(appId: appId, hour: hour) else { return false }
        return try await !logPage(appId: appId, sentFrom: start, afterSeq: 0, to: start + 3_600_000, limit: 1).isEmpty
    }

    public func isLogDeleted(appId: Int64, hour: String) async throws -> Bool {
        try await store.isMessageLogDeleted(appId: appId, hour: hour)
    }

    public func deleteLog(appId: Int64, hour: String) async throws {
        try await store.deleteMessageLog(appId: appId, hour: hour)
    }
}
