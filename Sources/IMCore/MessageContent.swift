import Foundation

/// The body of a message: its RongCloud object name, how it is kept, and its JSON encoding.
///
/// Built-in contents use RongCloud's object names (`RC:TxtMsg`, ...); an app registers its own types
/// with names that do not start with `RC:` (spec/imlib-core.md §9.4).
public protocol MessageContent: Sendable {
    /// The transport name of the type, the same on every platform.
    static var objectName: String { get }
    /// How the message is stored, cached and counted.
    static var persistentFlag: PersistentFlag { get }
    /// The JSON body sent on the wire.
    func encode() throws -> Data
    /// Decodes the JSON body; throws when it is not a valid body of this type.
    init(data: Data) throws
    /// A short text for the conversation list and notifications.
    var conversationDigest: String { get }
    /// The words a local search finds the message by (RongCloud's `getSearchableWords`), or nil
    /// when messages of this type are not searchable.
    var searchableWords: [String]? { get }
}

extension MessageContent {
    public var conversationDigest: String { "" }
    /// Not searchable unless the type says what to search.
    public var searchableWords: [String]? { nil }
}

/// Contents whose JSON body is their Codable form.
extension MessageContent where Self: Codable {
    public init(data: Data) throws {
        self = try JSONDecoder().decode(Self.self, from: data)
    }

    public func encode() throws -> Data {
        try JSONEncoder().encode(self)
    }
}

/// RongCloud's `RCMentionedInfo`: whom a group message mentions (@). It travels inside the content
/// JSON as `mentionedInfo`, whatever the content type.
public struct MentionedInfo: Codable, Sendable, Equatable {
    /// `RC_Mentioned_All` (1) or `RC_Mentioned_Users` (2).
    public enum MentionType: Int, Codable, Sendable {
        case all = 1
        case users = 2
    }

    public var type: MentionType
    /// The mentioned users (empty for `.all`).
    public var userIdList: [String]
    /// Push text for the mentioned users; it takes precedence over the message's push content.
    public var mentionedContent: String?

    public init(type: MentionType, userIdList: [String] = [], mentionedContent: String? = nil) {
        self.type = type
        self.userIdList = userIdList
        self.mentionedContent = mentionedContent
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        type = try container.decode(MentionType.self, forKey: .type)
        userIdList = try container.decodeIfPresent([String].self, forKey: .userIdList) ?? []
        mentionedContent = try container.decodeIfPresent(String.self, forKey: .mentionedContent)
    }

    /// Whether the message mentions this user.
    public func mentions(_ userId: String) -> Bool {
        type == .all || userIdList.contains(userId)
    }

    /// The `mentionedInfo` of any content JSON, if it has a valid one.
    public static func of(content: Data) -> MentionedInfo? {
        struct Probe: Decodable { var mentionedInfo: MentionedInfo? }
        return (try? JSONDecoder().decode(Probe.self, from: content))?.mentionedInfo
    }
}

/// `RC:TxtMsg`: a text message. Stored and counted.
public struct TextMessage: MessageContent, Equatable, Codable {
    public static let objectName = "RC:TxtMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var content: String
    public var extra: String?
    /// The users a group text mentions.
    public var mentionedInfo: MentionedInfo?
    /// The sender's display info carried in the message (`user`).
    public var user: UserInfo?

    public init(content: String, extra: String? = nil, mentionedInfo: MentionedInfo? = nil, user: UserInfo? = nil) {
        self.content = content
        self.extra = extra
        self.mentionedInfo = mentionedInfo
        self.user = user
    }

    public var conversationDigest: String { content }
    public var searchableWords: [String]? { [content] }
}

/// `RC:CmdMsg`: a command carried to the peer's app; not stored, not counted, cached offline.
public struct CommandMessage: MessageContent, Equatable, Codable {
    public static let objectName = "RC:CmdMsg"
    public static let persistentFlag = PersistentFlag.none

    public var name: String
    public var data: String

    public init(name: String, data: String) {
        self.name = name
        self.data = data
    }
}

/// A message whose object name this client has no registered type for: kept as its raw JSON.
public struct UnknownMessageContent: Sendable, Equatable {
    public let objectName: String
    public let data: Data
    public let persistentFlag: PersistentFlag

    public init(objectName: String, data: Data, persistentFlag: PersistentFlag) {
        self.objectName = objectName
        self.data = data
        self.persistentFlag = persistentFlag
    }
}

/// Object names of the group read-receipt commands (spec/group-chatroom.md A8).
public enum ReadReceiptObjectNames {
    /// The sender of a group message asks the members to report reading it: `{"messageUId": ...}`.
    public static let request = "RC:RRReqMsg"
}
