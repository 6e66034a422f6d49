import Foundation
import IMCore

/// An application: the unit of isolation. Users, tokens and messages of one app never meet another's.
public struct AppRecord: Sendable, Equatable {
    public var id: Int64
    public var appKey: String
    public var appSecret: String
    public var name: String
    public var createdAt: Int64

    public init(id: Int64, appKey: String, appSecret: String, name: String, createdAt: Int64) {
        self.id = id
        self.appKey = appKey
        self.appSecret = appSecret
        self.name = name
        self.createdAt = createdAt
    }
}

/// A message as the server keeps it: stored once in its conversation's log.
public struct StoredMessage: Sendable, Equatable {
    /// Position in the server's commit order (the clients' sync watermark); 0 if never stored.
    public var seq: UInt64
    public var appId: Int64
    public var conversationType: ConversationType
    /// Identifies the conversation's log: for a private chat the sorted pair of user ids.
    public var conversationKey: String
    /// The target the sender addressed (the receiving user of a private message).
    public var targetId: String
    public var senderId: String
    public var objectName: String
    public var content: Data
    public var uid: String
    public var sentTime: Int64
    public var flags: PersistentFlag
    public var clientMessageId: String
    public var pushContent: String
    public var pushData: String
    public var disableNotification: Bool
    public var canIncludeExpansion: Bool
    public var expansion: [String: String]
    public var channelId: String
    /// Whether the sender's other devices get the message (a Server API publish may leave them out).
    public var includeSender: Bool

    public init(
        seq: UInt64 = 0, appId: Int64, conversationType: ConversationType, conversationKey: String,
        targetId: String, senderId: String, objectName: String, content: Data, uid: String = "",
        sentTime: Int64 = 0, flags: PersistentFlag, clientMessageId: String = "", pushContent: String = "",
        pushData: String = "", disableNotification: Bool = false, canIncludeExpansion: Bool = false,
        expansion: [String: String] = [:], channelId: String = "", includeSender: Bool = true
    ) {
        self.seq = seq
        self.appId = appId
        self.conversationType = conversationType
        self.conversationKey = conversationKey
        self.targetId = targetId
        self.senderId = senderId
        self.objectName = objectName
        self.content = content
        self.uid = uid
        self.sentTime = sentTime
        self.flags = flags
        self.clientMessageId = clientMessageId
        self.pushContent = pushContent
        self.pushData = pushData
        self.disableNotification = disableNotification
        self.canIncludeExpansion = canIncludeExpansion
        self.expansion = expansion
        self.channelId = channelId
        self.includeSender = includeSender
    }

    /// The `targetId` of a broadcast: a message every user of the app receives.
    public static let everyone = "*"

    /// Whether the message belongs in cloud history (ISPERSISTED); other stored messages are kept
    /// only for offline delivery.
    public var isInHistory: Bool { flags.contains(.isPersisted) }
}

/// The result of committing one message.
public enum CommitOutcome: Sendable, Equatable {
    /// Stored now, with its seq.
    case stored(StoredMessage)
    /// The sender already sent a message with this client message id: the first one, unchanged.
    case duplicate(StoredMessage)

    public var message: StoredMessage {
        switch self {
        case .stored(let message), .duplicate(let message): return message
        }
    }
}

/// A page of remote history.
public struct HistoryPage: Sendable {
    public var messages: [StoredMessage]
    public var hasMore: Bool

    public init(messages: [StoredMessage], hasMore: Bool) {
        self.messages = messages
        self.hasMore = hasMore
    }
}

/// Everything the server keeps on disk. The embedded default is IMStoreSQLite; every method is one
/// transaction, and `commit` returns only after its transaction is durable.
public protocol IMStore: DirectoryStore {
    func loadApps() async throws -> [AppRecord]
    /// Creates the app, or updates the secret and name of the app with this key.
    func upsertApp(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord

    /// Stores the messages in one durable transaction, in order, assigning each a seq. A message
    /// whose (sender, client message id) is already stored is not stored again.
    func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome]
    /// The sentTime of the newest message of a conversation, if any.
    func lastSentTime(appId: Int64, conversationKey: String) async throws -> Int64?
    /// Messages a user receives or sent (any device) with seq > `after` and sentTime >= `minSentTime`,
    /// in seq order.
    func syncPage(appId: Int64, userId: String, after: UInt64, minSentTime: Int64, limit: Int) async throws -> [StoredMessage]
    /// Cloud history of one conversation: messages before (descending) or after (ascending)
    /// `recordTime`, newest first when descending.
    func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool) async throws -> HistoryPage

    /// One stored message by its uid.
    func message(appId: Int64, uid: String) async throws -> StoredMessage?
    /// Replaces a message's content in place (a recall leaves a notification where it was).
    func replaceMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws
    /// Deletes a message from the log.
    func deleteMessage(appId: Int64, uid: String) async throws
    /// Messages of a conversation with sentTime between `start` and `end` (inclusive of `start`
    /// only when `includeStart`), oldest first when ascending.
    func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                              ascending: Bool, limit: Int) async throws -> [StoredMessage]
    /// Messages of the app with `from <= sentTime < to`, ordered by (sentTime, seq), starting after
    /// the cursor `(from, afterSeq)` (the hourly message log, read in pages).
    func messages(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage]
    /// Marks an hour's message log (`YYYYMMDDHH`) as deleted.
    func deleteMessageLog(appId: Int64, hour: String) async throws
    func isMessageLogDeleted(appId: Int64, hour: String) async throws -> Bool
}
