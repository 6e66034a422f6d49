import IMCore

/// One conversation's settings for one user: its do-not-disturb level and pin.
///
/// A setting with an empty `conversation.targetId` is the level of the whole conversation type.
public struct ConversationSettingRecord: Sendable, Equatable {
    public var conversation: ConversationIdentifier
    public var level: PushNotificationLevel
    public var isTop: Bool
    /// The user's state version when the row last changed.
    public var version: UInt64
    public var updatedAt: Int64

    public init(conversation: ConversationIdentifier, level: PushNotificationLevel, isTop: Bool, version: UInt64, updatedAt: Int64) {
        self.conversation = conversation
        self.level = level
        self.isTop = isTop
        self.version = version
        self.updatedAt = updatedAt
    }
}

/// A user's quiet hours as stored; `hours` nil once removed.
public struct QuietHoursRecord: Sendable, Equatable {
    public var hours: QuietHours?
    public var version: UInt64

    public init(hours: QuietHours?, version: UInt64) {
        self.hours = hours
        self.version = version
    }
}

/// A conversation tag of a user (RongCloud's `RCTagInfo`), or the tombstone of a removed one.
public struct ConversationTagRecord: Sendable, Equatable {
    public var tagId: String
    public var name: String
    public var createdAt: Int64
    public var removed: Bool
    public var version: UInt64

    public init(tagId: String, name: String, createdAt: Int64, removed: Bool, version: UInt64) {
        self.tagId = tagId
        self.name = name
        self.createdAt = createdAt
        self.removed = removed
        self.version = version
    }
}

/// A conversation in one of the user's tags, or the tombstone of one taken out.
public struct ConversationTagLinkRecord: Sendable, Equatable {
    public var tagId: String
    public var conversation: ConversationIdentifier
    /// Pinned inside the tag.
    public var isTop: Bool
    public var removed: Bool
    public var version: UInt64
    public var linkedAt: Int64

    public init(tagId: String, conversation: ConversationIdentifier, isTop: Bool, removed: Bool, version: UInt64, linkedAt: Int64) {
        self.tagId = tagId
        self.conversation = conversation
        self.isTop = isTop
        self.removed = removed
        self.version = version
        self.linkedAt = linkedAt
    }
}

/// State rows of one user changed after some version: what one edit did, or a page of a sync.
public struct ConversationStateDeltaRecord: Sendable, Equatable {
    public var settings: [ConversationSettingRecord] = []
    /// Set when the quiet hours changed.
    public var quietHours: QuietHoursRecord?
    public var tags: [ConversationTagRecord] = []
    public var links: [ConversationTagLinkRecord] = []
    /// After an edit: the user's version before it. The delta holds every row stamped since.
    public var previousVersion: UInt64 = 0
    /// After an edit: the user's version now. A sync page: the `since` of the next page.
    public var version: UInt64 = 0
    /// A sync page: more rows wait.
    public var more = false

    public init() {}

    public var isEmpty: Bool { settings.isEmpty && quietHours == nil && tags.isEmpty && links.isEmpty }

    /// A sync page from the rows changed after `since` (each kind read up to `limit` + 1 rows in
    /// version order): the `limit` lowest versions of the four kinds together, `more` when rows
    /// were left, and the next page's `since` (the user's `current` version once nothing is left).
    public static func page(settings: [ConversationSettingRecord], tags: [ConversationTagRecord], links: [ConversationTagLinkRecord],
                            quietHours quiet: QuietHoursRecord?, current: UInt64, since: UInt64, limit: Int) -> ConversationStateDeltaRecord {
        var versions = settings.map(\.version) + tags.map(\.version) + links.map(\.version)
        if let quiet { versions.append(quiet.version) }
        versions.sort()
        var page = ConversationStateDeltaRecord()
        let through: UInt64
        if versions.count > limit {
            through = versions[limit - 1]
            page.more = true
            page.version = through
        } else {
            through = .max
            page.version = max(current, since)
        }
        page.settings = settings.filter { $0.version <= through }
        page.tags = tags.filter { $0.version <= through }
        page.links = links.filter { $0.version <= through }
        page.quietHours = quiet.flatMap { $0.version <= through ? $0 : nil }
        return page
    }
}

/// One change of a user's conversation state. The store applies it in one transaction, stamping
/// every row it changes with a new version, or refuses it (a `StoreRefusal`) and changes nothing.
public enum ConversationStateEdit: Sendable, Equatable {
    /// An empty target id sets the level of the whole conversation type.
    case setLevel(ConversationIdentifier, PushNotificationLevel)
    case setTop(ConversationIdentifier, Bool)
    case setQuietHours(QuietHours)
    case removeQuietHours
    /// Adds a tag; refused if it exists or the user already has `limit` tags.
    case addTag(tagId: String, name: String, limit: Int)
    case renameTag(tagId: String, name: String)
    /// Removes the tag and takes every conversation out of it.
    case removeTag(tagId: String)
    case addConversations(tagId: String, [ConversationIdentifier])
    case removeConversations(tagId: String, [ConversationIdentifier])
    /// Takes one conversation out of these tags.
    case removeTags(ConversationIdentifier, tagIds: [String])
    /// Pins or unpins a conversation inside a tag; the conversation must be in the tag.
    case setTopInTag(tagId: String, ConversationIdentifier, Bool)
}

/// The conversation state the server keeps per user and syncs to the user's devices.
public protocol ConversationStateStore: Sendable {
    /// Applies one edit atomically and returns the rows it changed with the versions around it
    /// (each changed row gets the next version of the user; an edit that changes nothing stamps
    /// nothing). Refuses, changing nothing, with `StoreRefusal.tagExists` and `.tooManyTags`
    /// (adding), `.noSuchTag` (renaming, or adding conversations to, a tag the user does not have)
    /// and `.conversationNotInTag` (pinning inside a tag a conversation that is not in it).
    func editConversationState(appId: Int64, userId: String, _ edit: ConversationStateEdit, now: Int64) async throws -> ConversationStateDeltaRecord
    /// Rows with a version above `since`, lowest versions first, at most `limit` of them. From
    /// `since` 0 the tombstones are left out (a new device has nothing to remove).
    func conversationStateChanges(appId: Int64, userId: String, since: UInt64, limit: Int) async throws -> ConversationStateDeltaRecord
    /// A user's do-not-disturb level for one conversation (`.default` when not set).
    func conversationUnpushLevel(appId: Int64, userId: String, type: ConversationType, targetId: String, channelId: String) async throws -> Int
    /// A user's quiet hours, if set.
    func quietHours(appId: Int64, userId: String) async throws -> QuietHours?
}
