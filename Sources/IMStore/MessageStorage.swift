import Foundation
import IMCore

/// An application: the unit of isolation. Users, tokens and messages of one app never meet another's.
public struct AppRecord: Sendable, Equatable {
    public var id: Int64
    public var appKey: String
    public var appSecret: String
    public var name: String
    public var createdAt: Int64
    /// Banned by the operator: its clients cannot connect (31008) and its Server API calls are
    /// refused (1006) until the ban is lifted.
    public var banned: Bool
    /// The app's own values of per-app settings, by setting key (the server's apply otherwise).
    public var settings: [String: JSONValue]

    public init(id: Int64, appKey: String, appSecret: String, name: String, createdAt: Int64, banned: Bool = false,
                settings: [String: JSONValue] = [:]) {
        self.banned = banned
        self.settings = settings
        self.id = id
        self.appKey = appKey
        self.appSecret = appSecret
        self.name = name
        self.createdAt = createdAt
    }
}

/// A message as the server keeps it: stored once in its conversation's log.
public struct StoredMessage: Sendable, Equatable, Codable {
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
    /// A directional group message: only these members (and the sender) receive and see it. Empty
    /// for a message to the whole conversation.
    public var directedUserIds: [String]
    /// A group message whose sender asked the members for read receipts.
    public var receiptRequested: Bool
    /// Who an ultra group message mentions (its content's `mentionedInfo`), kept so that mention
    /// counts are computed by the store. Messages read back from a store need not carry it.
    public var mentions: MentionedInfo?
    /// RongCloud's MessagePushConfig as JSON (IMCore.MessagePushConfig); empty when none was given.
    public var pushConfig: Data = Data()

    public init(
        seq: UInt64 = 0, appId: Int64, conversationType: ConversationType, conversationKey: String,
        targetId: String, senderId: String, objectName: String, content: Data, uid: String = "",
        sentTime: Int64 = 0, flags: PersistentFlag, clientMessageId: String = "", pushContent: String = "",
        pushData: String = "", disableNotification: Bool = false, canIncludeExpansion: Bool = false,
        expansion: [String: String] = [:], channelId: String = "", includeSender: Bool = true,
        directedUserIds: [String] = [], receiptRequested: Bool = false
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
        self.directedUserIds = directedUserIds
        self.receiptRequested = receiptRequested
    }

    /// The `targetId` of a broadcast: a message every user of the app receives.
    public static let everyone = "*"

    /// Whether the message belongs in cloud history (ISPERSISTED); other stored messages are kept
    /// only for offline delivery.
    public var isInHistory: Bool { flags.contains(.isPersisted) && !isOnlineBroadcast }

    /// Whether `userId` may see this message: everyone in the conversation may, except that a
    /// directional message is seen only by its listed members and its sender.
    public func isVisible(to userId: String) -> Bool {
        directedUserIds.isEmpty || senderId == userId || directedUserIds.contains(userId)
    }
}

/// The message as one node of a cluster sends it to the others (the bus carries it as JSON): short
/// keys, the fields left at their defaults omitted, and the content as text when it is UTF-8 (it
/// is JSON, almost always) rather than base64: about 400 bytes for a 100-byte text message where
/// the synthesized encoding took about 690, so a notification of the bus carries 70% more.
extension StoredMessage {
    private enum CodingKeys: String, CodingKey {
        case seq = "s", appId = "a", conversationType = "ct", conversationKey = "ck", targetId = "t", senderId = "f"
        case objectName = "o", content = "c", binaryContent = "cb", uid = "u", sentTime = "st", flags = "fl"
        case clientMessageId = "cm", pushContent = "pc", pushData = "pd", disableNotification = "dn"
        case canIncludeExpansion = "ce", expansion = "ex", channelId = "ch", includeSender = "is"
        case directedUserIds = "du", receiptRequested = "rr", mentions = "m", pushConfig = "pf"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        if seq != 0 { try c.encode(seq, forKey: .seq) }
        try c.encode(appId, forKey: .appId)
        try c.encode(conversationType.rawValue, forKey: .conversationType)
        try c.encode(conversationKey, forKey: .conversationKey)
        try c.encode(targetId, forKey: .targetId)
        try c.encode(senderId, forKey: .senderId)
        try c.encode(objectName, forKey: .objectName)
        if let text = String(validating: content, as: UTF8.self) {
            try c.encode(text, forKey: .content)
        } else {
            try c.encode(content, forKey: .binaryContent)
        }
        if !uid.isEmpty { try c.encode(uid, forKey: .uid) }
        if sentTime != 0 { try c.encode(sentTime, forKey: .sentTime) }
        try c.encode(flags.rawValue, forKey: .flags)
        if !clientMessageId.isEmpty { try c.encode(clientMessageId, forKey: .clientMessageId) }
        if !pushContent.isEmpty { try c.encode(pushContent, forKey: .pushContent) }
        if !pushData.isEmpty { try c.encode(pushData, forKey: .pushData) }
        if disableNotification { try c.encode(true, forKey: .disableNotification) }
        if canIncludeExpansion { try c.encode(true, forKey: .canIncludeExpansion) }
        if !expansion.isEmpty { try c.encode(expansion, forKey: .expansion) }
        if !channelId.isEmpty { try c.encode(channelId, forKey: .channelId) }
        if !includeSender { try c.encode(false, forKey: .includeSender) }
        if !directedUserIds.isEmpty { try c.encode(directedUserIds, forKey: .directedUserIds) }
        if receiptRequested { try c.encode(true, forKey: .receiptRequested) }
        try c.encodeIfPresent(mentions, forKey: .mentions)
        if !pushConfig.isEmpty { try c.encode(String(decoding: pushConfig, as: UTF8.self), forKey: .pushConfig) }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let type = try c.decode(Int.self, forKey: .conversationType)
        guard let conversationType = ConversationType(rawValue: type) else {
            throw DecodingError.dataCorruptedError(forKey: .conversationType, in: c, debugDescription: "unknown conversation type \(type)")
        }
        let content: Data
        if let text = try c.decodeIfPresent(String.self, forKey: .content) {
            content = Data(text.utf8)
        } else {
            content = try c.decode(Data.self, forKey: .binaryContent)
        }
        self.init(seq: try c.decodeIfPresent(UInt64.self, forKey: .seq) ?? 0,
                  appId: try c.decode(Int64.self, forKey: .appId),
                  conversationType: conversationType,
                  conversationKey: try c.decode(String.self, forKey: .conversationKey),
                  targetId: try c.decode(String.self, forKey: .targetId),
                  senderId: try c.decode(String.self, forKey: .senderId),
                  objectName: try c.decode(String.self, forKey: .objectName),
                  content: content,
                  uid: try c.decodeIfPresent(String.self, forKey: .uid) ?? "",
                  sentTime: try c.decodeIfPresent(Int64.self, forKey: .sentTime) ?? 0,
                  flags: PersistentFlag(rawValue: try c.decode(PersistentFlag.RawValue.self, forKey: .flags)),
                  clientMessageId: try c.decodeIfPresent(String.self, forKey: .clientMessageId) ?? "",
                  pushContent: try c.decodeIfPresent(String.self, forKey: .pushContent) ?? "",
                  pushData: try c.decodeIfPresent(String.self, forKey: .pushData) ?? "",
                  disableNotification: try c.decodeIfPresent(Bool.self, forKey: .disableNotification) ?? false,
                  canIncludeExpansion: try c.decodeIfPresent(Bool.self, forKey: .canIncludeExpansion) ?? false,
                  expansion: try c.decodeIfPresent([String: String].self, forKey: .expansion) ?? [:],
                  channelId: try c.decodeIfPresent(String.self, forKey: .channelId) ?? "",
                  includeSender: try c.decodeIfPresent(Bool.self, forKey: .includeSender) ?? true,
                  directedUserIds: try c.decodeIfPresent([String].self, forKey: .directedUserIds) ?? [],
                  receiptRequested: try c.decodeIfPresent(Bool.self, forKey: .receiptRequested) ?? false)
        mentions = try c.decodeIfPresent(MentionedInfo.self, forKey: .mentions)
        pushConfig = Data((try c.decodeIfPresent(String.self, forKey: .pushConfig) ?? "").utf8)
    }
}

/// One page of offline sync.
public struct SyncPage: Sendable {
    /// The messages the user may see, in seq order.
    public var messages: [StoredMessage]
    /// The highest seq this page covers (messages the user may not see included); the client's next
    /// `since`.
    public var watermark: UInt64
    /// More messages wait beyond `watermark`.
    public var hasMore: Bool

    public init(messages: [StoredMessage], watermark: UInt64, hasMore: Bool) {
        self.messages = messages
        self.watermark = watermark
        self.hasMore = hasMore
    }
}

/// Who reads a conversation's cloud history. A group member sees messages after `afterSeq` (their
/// joining, or earlier when the app shows pre-join history) and, of directional messages, only
/// their own; anyone sees nothing they deleted from their own history.
public struct HistoryViewer: Sendable {
    public var userId: String
    public var afterSeq: UInt64
    /// Messages sent before this time are past the conversation's history retention.
    public var minSentTime: Int64

    public init(userId: String, afterSeq: UInt64, minSentTime: Int64 = Int64.min) {
        self.userId = userId
        self.afterSeq = afterSeq
        self.minSentTime = minSentTime
    }
}

/// One member having read one group message whose sender asked for receipts.
public struct ReadReceiptRecord: Sendable, Equatable {
    /// Position in the order reads were recorded; the sender's receipt watermark.
    public var seq: UInt64
    public var uid: String
    public var senderId: String
    public var groupId: String
    public var readerId: String
    public var readTime: Int64

    public init(seq: UInt64 = 0, uid: String, senderId: String, groupId: String, readerId: String, readTime: Int64) {
        self.seq = seq
        self.uid = uid
        self.senderId = senderId
        self.groupId = groupId
        self.readerId = readerId
        self.readTime = readTime
    }
}

/// One extension of a message: its value and when it was last set (ms).
public struct ExpansionEntry: Sendable, Equatable {
    public var value: String
    public var time: Int64

    public init(value: String, time: Int64) {
        self.value = value
        self.time = time
    }
}

extension ExpansionEntry {
    /// A message's extensions as its two stored columns (values and set times, JSON objects by
    /// key); both nil when there are none. Every store keeps them this way.
    public static func columns(_ entries: [String: ExpansionEntry]) throws -> (values: String?, times: String?) {
        guard !entries.isEmpty else { return (nil, nil) }
        return (String(decoding: try JSONEncoder().encode(entries.mapValues(\.value)), as: UTF8.self),
                String(decoding: try JSONEncoder().encode(entries.mapValues(\.time)), as: UTF8.self))
    }

    /// A message's extensions read back from its two stored columns.
    public static func entries(values: String?, times: String?) throws -> [String: ExpansionEntry] {
        let values = try values.map { try JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let times = try times.map { try JSONDecoder().decode([String: Int64].self, from: Data($0.utf8)) } ?? [:]
        return values.reduce(into: [:]) { entries, pair in
            entries[pair.key] = ExpansionEntry(value: pair.value, time: times[pair.key] ?? 0)
        }
    }
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

/// Everything the server keeps on disk: one port per area, each service taking only the ports it
/// uses. The embedded default is IMStoreSQLite; every method is one transaction, and `commit`
/// returns only after its transaction is durable. `IMStoreConformance` is the suite a store passes.
public typealias IMStore = AppStore & MessageStore & SyncStore & MessageLifecycleStore & UserStore & GroupStore
    & SensitiveWordStore & ConversationStateStore & ChatroomStore & UltraGroupStore & PushStore & CallbackStore
    & StatisticsStore & ConsoleStore & MediaStore

/// The apps (tenants) of this server.
public protocol AppStore: Sendable {
    func loadApps() async throws -> [AppRecord]
    /// Creates the app, or updates the secret and name of the app with this key (a ban stays).
    func upsertApp(appKey: String, appSecret: String, name: String, now: Int64) async throws -> AppRecord
    /// Bans the app or lifts its ban; nil when there is no such app.
    func setAppBanned(appKey: String, banned: Bool) async throws -> AppRecord?
    /// Sets some of the app's own settings and removes others (`reset`, or a null value in `set`),
    /// in one statement so that two changes at once both apply; nil when there is no such app.
    func updateAppSettings(appKey: String, set: [String: JSONValue], reset: [String]) async throws -> AppRecord?
    /// Deletes the app and every row of every table that names it (`app_id`); its messages go in
    /// transactions of `batch` rows, so the log's writer is never held for long. Other apps'
    /// rows are untouched.
    func deleteApp(appId: Int64, batch: Int) async throws
}

/// The message log: commits and reads of stored messages.
public protocol MessageStore: Sendable {
    /// Stores the messages in one durable transaction, in order, assigning each a seq. A message
    /// whose (sender, client message id) is already stored is not stored again.
    func commit(_ messages: [StoredMessage]) async throws -> [CommitOutcome]
    /// The sentTime of the newest message of a conversation, if any.
    func lastSentTime(appId: Int64, conversationKey: String) async throws -> Int64?
    /// One stored message by its uid.
    func message(appId: Int64, uid: String) async throws -> StoredMessage?
    /// The stored messages among these uids, in no particular order.
    func messages(appId: Int64, uids: [String]) async throws -> [StoredMessage]
    /// Messages of a conversation's cloud history with sentTime between `start` and `end`
    /// (inclusive of `start` only when `includeStart`, always of `end`): ascending, from `start` up
    /// to `end`, oldest first; descending, from `start` down to `end`, newest first. Only
    /// `senderId`'s when given.
    func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                              ascending: Bool, limit: Int, senderId: String?) async throws -> [StoredMessage]
    /// Messages of the app with `from <= sentTime < to`, ordered by (sentTime, seq), starting after
    /// the cursor `(from, afterSeq)` (the hourly message log, read in pages).
    func messages(appId: Int64, sentFrom from: Int64, afterSeq: UInt64, to: Int64, limit: Int) async throws -> [StoredMessage]
    /// Marks an hour's message log (`YYYYMMDDHH`) as deleted.
    func deleteMessageLog(appId: Int64, hour: String) async throws
    func isMessageLogDeleted(appId: Int64, hour: String) async throws -> Bool
}

/// What a device reads: its offline sync and cloud history.
public protocol SyncStore: Sendable {
    /// Up to `limit` messages a user receives or sent (any device) with seq > `after` and sentTime >=
    /// `minSentTime`, in seq order: private and system messages, broadcasts, and the messages of
    /// their groups sent after they joined that they may see. The page stops before the message
    /// that would take its messages past `maxBytes` (`StoredMessage.wireSize`; the first message
    /// is always taken), with `hasMore` set and the watermark just below that message; full rows
    /// are read only for the messages the page takes.
    func syncPage(appId: Int64, userId: String, after: UInt64, minSentTime: Int64, limit: Int, maxBytes: Int) async throws -> SyncPage
    /// Cloud history of one conversation: messages before (descending) or after (ascending)
    /// `recordTime`, newest first when descending; as `viewer` may see it (nil: everything). At
    /// most `count` messages and `maxBytes` (at least one message); `hasMore` when either cut it.
    func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool,
                 viewer: HistoryViewer?, maxBytes: Int) async throws -> HistoryPage
}

/// What happens to messages after they are sent: recall, deletion, read receipts, extensions.
public protocol MessageLifecycleStore: Sendable {
    /// Replaces a message's content in place (a recall leaves a notification where it was).
    func replaceMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws
    /// Deletes a message from the log.
    func deleteMessage(appId: Int64, uid: String) async throws
    /// The retention sweep: deletes at most `limit` of the app's messages sent before `before`
    /// (only those of one conversation when `conversationKey` is given; ultra group messages, which
    /// have a retention of their own, only when `ultraGroups`), oldest first, with their read
    /// receipts; returns how many went.
    func deleteMessages(appId: Int64, conversationKey: String?, ultraGroups: Bool, sentBefore before: Int64, limit: Int) async throws -> Int
    /// The conversation key of every ultra group channel of the app (whose history has a
    /// retention of its own).
    func ultraGroupConversationKeys(appId: Int64) async throws -> [String]
    /// Marks a group message as asking for read receipts.
    func requestReadReceipts(appId: Int64, uid: String) async throws
    /// Records reads; a reader already recorded for a message is skipped. Returns the new ones with
    /// their seq.
    func recordReads(_ reads: [ReadReceiptRecord], appId: Int64) async throws -> [ReadReceiptRecord]
    /// Reads of `senderId`'s messages recorded after `after`, in seq order.
    func readReceipts(appId: Int64, senderId: String, after: UInt64, limit: Int) async throws -> [ReadReceiptRecord]
    /// Readers of one message in reading order after the read with seq `after`, and how many there are.
    func readers(appId: Int64, uid: String, after: UInt64, limit: Int) async throws -> (readers: [ReadReceiptRecord], total: Int)

    /// Removes messages from one user's cloud history and offline sync, for good (the other side of
    /// the conversation keeps them).
    func hideMessages(appId: Int64, userId: String, uids: [String]) async throws
    /// Removes one user's messages of a conversation sent at or before `through` from their cloud
    /// history and offline sync, for good; clearing again with an earlier time brings nothing
    /// back. Commands (messages not kept in history) are still synced.
    func clearConversation(appId: Int64, userId: String, conversationKey: String, through: Int64) async throws
    /// Sets and removes extension keys of a message in one transaction and returns the result.
    /// Refuses (`StoreRefusal`) a message sent without `canIncludeExpansion`, a result of more
    /// than `maxKeys` keys, and an unknown message.
    func updateExpansion(appId: Int64, uid: String, set: [String: String], remove: [String], now: Int64,
                         maxKeys: Int) async throws -> [String: ExpansionEntry]
    /// A message's extensions with the time each was set; nil when there is no such message.
    func expansion(appId: Int64, uid: String) async throws -> [String: ExpansionEntry]?
}

extension SyncStore {
    /// Cloud history with no byte budget (the Server API's and the tests' reads, which are not
    /// bound for one client frame).
    public func history(appId: Int64, conversationKey: String, recordTime: Int64, count: Int, ascending: Bool,
                        viewer: HistoryViewer?) async throws -> HistoryPage {
        try await history(appId: appId, conversationKey: conversationKey, recordTime: recordTime, count: count,
                          ascending: ascending, viewer: viewer, maxBytes: Int.max)
    }
}

extension MessageStore {
    /// Messages of a conversation between two times, from every sender.
    public func conversationMessages(appId: Int64, conversationKey: String, start: Int64, end: Int64, includeStart: Bool,
                                     ascending: Bool, limit: Int) async throws -> [StoredMessage] {
        try await conversationMessages(appId: appId, conversationKey: conversationKey, start: start, end: end,
                                       includeStart: includeStart, ascending: ascending, limit: limit, senderId: nil)
    }
}

extension StoredMessage {
    /// The bits of `flags` a client may set and sees (RongCloud's persistent flags); the bits above
    /// are the server's own facts about the message, stored with it and never sent or taken.
    public static let clientFlagBits: UInt32 = 0xFFFF
    private static let platformShift: UInt32 = 24
    private static let platformMask: UInt32 = 0xF << 24
    private static let wordReplacedBit: UInt32 = 1 << 28
    private static let keepLastMessageBit: UInt32 = 1 << 29
    private static let onlineBroadcastBit: UInt32 = 1 << 30

    /// The platform of the device that sent the message; nil for the Server API and the server.
    public var senderPlatform: Platform? {
        get { Platform(rawValue: Int((flags.rawValue & Self.platformMask) >> Self.platformShift)) }
        set {
            let bits = UInt32(newValue?.rawValue ?? 0) << Self.platformShift & Self.platformMask
            flags = PersistentFlag(rawValue: flags.rawValue & ~Self.platformMask | bits)
        }
    }

    /// Whether the app's sensitive-word list replaced a word of the content.
    public var hadWordReplaced: Bool {
        get { flags.rawValue & Self.wordReplacedBit != 0 }
        set { flags = PersistentFlag(rawValue: newValue ? flags.rawValue | Self.wordReplacedBit : flags.rawValue & ~Self.wordReplacedBit) }
    }

    /// RongCloud's disableUpdateLastMessage (`disableUpdateLastMsg` in the Server API): the
    /// conversation's last message is not replaced by this one on any device.
    public var disableUpdateLastMessage: Bool {
        get { flags.rawValue & Self.keepLastMessageBit != 0 }
        set { flags = PersistentFlag(rawValue: newValue ? flags.rawValue | Self.keepLastMessageBit : flags.rawValue & ~Self.keepLastMessageBit) }
    }

    /// An online broadcast (`/message/online/broadcast.json`): it reaches the users online when it
    /// is sent and those who connect within `onlineBroadcastWindow`; it is not in cloud history,
    /// not pushed and not recalled.
    public var isOnlineBroadcast: Bool {
        get { flags.rawValue & Self.onlineBroadcastBit != 0 }
        set { flags = PersistentFlag(rawValue: newValue ? flags.rawValue | Self.onlineBroadcastBit : flags.rawValue & ~Self.onlineBroadcastBit) }
    }

    /// How long an online broadcast waits for users who connect after it was sent (RongCloud: 10 minutes).
    public static let onlineBroadcastWindow: Int64 = 600_000

    /// The persistent flags as a client sees them.
    public var clientFlags: UInt32 { flags.rawValue & Self.clientFlagBits }
}
