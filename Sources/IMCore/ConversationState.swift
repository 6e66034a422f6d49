import Foundation

/// RongCloud's `RCPushNotificationLevel`: how much of a conversation (or of everything, during
/// quiet hours) reaches the user as a push notification. Messages are delivered and counted
/// whatever the level; only the push is held back (spec/system-push-ultra.md §2.2).
public enum PushNotificationLevel: Int, Sendable, Hashable, CaseIterable, Codable {
    /// Every message pushes, overriding any coarser do-not-disturb.
    case allMessage = -1
    /// Not set: the coarser setting (conversation type, app) decides; by default everything pushes.
    case `default` = 0
    /// Only @ mentions of the user or of everyone push.
    case mention = 1
    /// Only @ mentions that name the user push.
    case mentionUsers = 2
    /// Only @all mentions push.
    case mentionAll = 4
    /// Nothing pushes.
    case blocked = 5

    /// Levels 1 and above are do-not-disturb (RongCloud's "blocked" conversation status).
    public var isDoNotDisturb: Bool { rawValue >= 1 }

    /// Whether a message pushes under this level, given who it mentions.
    public func allowsPush(mentionsUser: Bool, mentionsEveryone: Bool) -> Bool {
        switch self {
        case .allMessage, .default: return true
        case .mention: return mentionsUser || mentionsEveryone
        case .mentionUsers: return mentionsUser
        case .mentionAll: return mentionsEveryone
        case .blocked: return false
        }
    }
}

/// A user's global quiet hours (RongCloud's `setNotificationQuietHours`): every day from
/// `startTime` for `spanMinutes`, pushes follow `level` instead of the conversation settings
/// (spec/system-push-ultra.md §2.2, P17).
public struct QuietHours: Sendable, Hashable, Codable {
    /// "HH:MM:SS", in `timeZone`.
    public var startTime: String
    /// 0 < spanMinutes < 1440.
    public var spanMinutes: Int
    /// The level during the window: `.blocked` (nothing pushes) unless set otherwise.
    public var level: PushNotificationLevel
    /// The IANA time zone `startTime` is read in (the device's, when set from a client; nil: UTC).
    public var timeZone: String?

    public init(startTime: String, spanMinutes: Int, level: PushNotificationLevel = .blocked, timeZone: String? = nil) {
        self.startTime = startTime
        self.spanMinutes = spanMinutes
        self.level = level
        self.timeZone = timeZone
    }

    /// Seconds after midnight of `startTime`, or nil if it is not "HH:MM:SS" (00:00:00 to 23:59:59).
    public static func secondsOfDay(_ startTime: String) -> Int? {
        let parts = startTime.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
              let hours = Int(parts[0]), let minutes = Int(parts[1]), let seconds = Int(parts[2]),
              (0..<24).contains(hours), (0..<60).contains(minutes), (0..<60).contains(seconds) else { return nil }
        return hours * 3600 + minutes * 60 + seconds
    }

    /// Checks the values a caller passed; throws 33003 with what is allowed.
    public func validate() throws {
        guard Self.secondsOfDay(startTime) != nil else {
            throw IMError(.invalidParameter, "startTime must be \"HH:MM:SS\" (00:00:00 to 23:59:59), got \"\(startTime)\"")
        }
        guard ConversationStateLimits.quietHoursSpanMinutes.contains(spanMinutes) else {
            throw IMError(.invalidParameter, "spanMins must be greater than 0 and less than 1440 (1 to 1439 minutes), got \(spanMinutes)")
        }
        guard level.isDoNotDisturb else {
            throw IMError(.invalidParameter, "the quiet-hours level must be 1 (mentions), 2 (mentions of the user), 4 (@all) or 5 (nothing), got \(level.rawValue)")
        }
        if let timeZone, TimeZone(identifier: timeZone) == nil {
            throw IMError(.invalidParameter, "timeZone '\(timeZone)' is not an IANA time zone identifier")
        }
    }

    /// Whether the window covers this moment (ms since 1970). The window may run past midnight.
    public func covers(milliseconds: Int64) -> Bool {
        guard let start = Self.secondsOfDay(startTime) else { return false }
        let zone = timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!
        let seconds = Int(milliseconds / 1000)
        let offset = zone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(seconds)))
        let dayLength = 86_400
        let secondOfDay = ((seconds + offset) % dayLength + dayLength) % dayLength
        let sinceStart = ((secondOfDay - start) % dayLength + dayLength) % dayLength
        return sinceStart < spanMinutes * 60
    }
}

/// A conversation named by type, target and channel: RongCloud's `RCConversationIdentifier`.
public struct ConversationIdentifier: Sendable, Hashable, Codable {
    public var type: ConversationType
    public var targetId: String
    /// The ultra-group channel; empty elsewhere.
    public var channelId: String

    public init(_ type: ConversationType, targetId: String, channelId: String = "") {
        self.type = type
        self.targetId = targetId
        self.channelId = channelId
    }
}

/// Limits of conversation state (do-not-disturb, pins, quiet hours, tags), each with its source.
public enum ConversationStateLimits {
    /// 「0 < spanMins < 1440」 (spec/imlib-core.md §8.7).
    public static let quietHoursSpanMinutes = 1...1439
    /// RongCloud's conversation tags: at most 20 tags per user.
    public static let maxTagsPerUser = 20
    /// A tag id is at most 10 characters.
    public static let maxTagIdLength = 10
    /// A tag name is at most 15 characters.
    public static let maxTagNameLength = 15
    /// 「批量处理会话个数最大为 1000」: conversations per batch tag call (34013).
    public static let maxConversationsPerTagCall = 1000
    /// Tag ids per `removeTagsFromConversation` call: a user has at most 20 tags, so more can only be a mistake.
    public static let maxTagIdsPerCall = maxTagsPerUser
    /// Only these conversation types can be tagged (34012).
    public static let taggableTypes: Set<ConversationType> = [.private, .group, .system]
    /// Types that take a do-not-disturb level (the Server API's 1, 2, 3, 4, 6 and 10).
    public static let notificationTypes: Set<ConversationType> = [.private, .discussion, .group, .chatroom, .system, .ultraGroup]
    /// Types that can be pinned: those that appear in the conversation list (chatrooms do not).
    public static let pinnableTypes: Set<ConversationType> = [.private, .discussion, .group, .system, .ultraGroup]
    /// State rows per page of the state sync (a page is one frame).
    public static let syncPageRange = 1...1000
    public static let defaultSyncPage = 500
}

/// The checks of conversation-state calls, shared by IMLib (which fails early, offline too) and
/// the server (which decides). Each throws an `IMError` with RongCloud's code and what to do.
public enum ConversationStateRules {
    /// A conversation that takes a do-not-disturb level; an empty target means the whole type.
    public static func checkNotificationTarget(_ conversation: ConversationIdentifier, allowTypeWide: Bool = false) throws {
        guard ConversationStateLimits.notificationTypes.contains(conversation.type) else {
            throw IMError(.invalidParameter, "conversation type \(conversation.type.rawValue) has no do-not-disturb setting: use 1, 2, 3, 4, 6 or 10")
        }
        if conversation.targetId.isEmpty && allowTypeWide && conversation.channelId.isEmpty { return }
        try checkIds(conversation)
    }

    public static func checkPinTarget(_ conversation: ConversationIdentifier) throws {
        guard ConversationStateLimits.pinnableTypes.contains(conversation.type) else {
            throw IMError(.invalidParameter, "conversation type \(conversation.type.rawValue) cannot be pinned: only private, discussion, group, system and ultra-group conversations are in the list")
        }
        try checkIds(conversation)
    }

    public static func checkLevel(_ raw: Int) throws -> PushNotificationLevel {
        guard let level = PushNotificationLevel(rawValue: raw) else {
            throw IMError(.invalidParameter, "notification level must be -1, 0, 1, 2, 4 or 5, got \(raw)")
        }
        return level
    }

    public static func checkTagId(_ tagId: String) throws {
        guard !tagId.isEmpty, TextLength.characters(tagId) <= ConversationStateLimits.maxTagIdLength else {
            throw IMError(.invalidParameter, "a tag id must be 1 to \(ConversationStateLimits.maxTagIdLength) characters, got \(TextLength.characters(tagId)): \(TextLength.quoted(tagId))")
        }
    }

    public static func checkTagName(_ name: String) throws {
        guard !name.isEmpty, TextLength.characters(name) <= ConversationStateLimits.maxTagNameLength else {
            throw IMError(.invalidParameter, "a tag name must be 1 to \(ConversationStateLimits.maxTagNameLength) characters, got \(TextLength.characters(name))")
        }
    }

    /// The conversations of one batch tag call: 1 to 1000 (34013), of taggable types only (34012).
    public static func checkTaggedConversations(_ conversations: [ConversationIdentifier]) throws {
        guard !conversations.isEmpty else {
            throw IMError(.invalidParameter, "pass at least one conversation")
        }
        guard conversations.count <= ConversationStateLimits.maxConversationsPerTagCall else {
            throw IMError(.tagConversationsExceeded, "a tag call takes at most \(ConversationStateLimits.maxConversationsPerTagCall) conversations, got \(conversations.count): split it into several calls")
        }
        for conversation in conversations {
            guard ConversationStateLimits.taggableTypes.contains(conversation.type) else {
                throw IMError(.tagUnsupportedConversationType, "conversation type \(conversation.type.rawValue) cannot be tagged: only private (1), group (3) and system (6) conversations can")
            }
            try checkIds(conversation)
        }
    }

    private static func checkIds(_ conversation: ConversationIdentifier) throws {
        guard UserID.isValid(conversation.targetId) else {
            throw IMError(.invalidParameter, "targetId '\(conversation.targetId)' is not a valid id (\(UserID.rule))")
        }
        guard conversation.channelId.isEmpty || UserID.isValid(conversation.channelId) else {
            throw IMError(.invalidParameter, "channelId '\(conversation.channelId)' is not a valid id")
        }
        if conversation.type != .ultraGroup && !conversation.channelId.isEmpty {
            throw IMError(.invalidParameter, "only ultra-group conversations have channels; pass an empty channelId")
        }
    }
}
