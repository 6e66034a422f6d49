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
}

extension MessageContent {
    public var conversationDigest: String { "" }
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

/// `RC:TxtMsg`: a text message. Stored and counted.
public struct TextMessage: MessageContent, Equatable, Codable {
    public static let objectName = "RC:TxtMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var content: String
    public var extra: String?

    public init(content: String, extra: String? = nil) {
        self.content = content
        self.extra = extra
    }

    public var conversationDigest: String { content }
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
