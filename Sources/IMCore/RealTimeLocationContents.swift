import Foundation

// Real-time location sharing in one-to-one conversations (RongCloud's RongLocation library; spec
// imkit-and-overview.md §3.14.17). The documents give the client's state machine but not the wire:
// these five contents are it. The start and end are stored, so both sides keep a card in the
// history; joining, quitting and positions are STATUS messages, for whoever is online now.

extension BuiltInContentTypes {
    /// The contents of a location-sharing session.
    public static let realTimeLocation: [any MessageContent.Type] = [
        RealTimeLocationStartMessage.self, RealTimeLocationEndMessage.self, RealTimeLocationJoinMessage.self,
        RealTimeLocationQuitMessage.self, RealTimeLocationStatusMessage.self,
    ]
}

/// `RC:RLStart`: the sender started sharing its location. Stored and counted (the peer is told);
/// shown as a "sharing started" card.
public struct RealTimeLocationStartMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RLStart"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var content: String
    public var extra: String?

    public init(content: String = "", extra: String? = nil) {
        self.content = content
        self.extra = extra
    }

    public var conversationDigest: String { "[位置共享]" }
}

/// `RC:RLEnd`: the last participant left, the session is over. Stored, not counted; shown as a
/// "sharing ended" card.
public struct RealTimeLocationEndMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RLEnd"
    public static let persistentFlag = PersistentFlag.isPersisted

    public var content: String
    public var extra: String?

    public init(content: String = "", extra: String? = nil) {
        self.content = content
        self.extra = extra
    }

    public var conversationDigest: String { "[位置共享已结束]" }
}

/// `RC:RLJoin`: the sender joined the peer's sharing. A STATUS message.
public struct RealTimeLocationJoinMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RLJoin"
    public static let persistentFlag = PersistentFlag.status

    public var extra: String?

    public init(extra: String? = nil) { self.extra = extra }
}

/// `RC:RLQuit`: the sender stopped sharing. A STATUS message.
public struct RealTimeLocationQuitMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RLQuit"
    public static let persistentFlag = PersistentFlag.status

    public var extra: String?

    public init(extra: String? = nil) { self.extra = extra }
}

/// `RC:RL`: a participant's position, sent when it changes and repeated while the participant
/// shares (the repeat tells the peer it is still there). Without coordinates when the device has
/// no position yet. A STATUS message.
public struct RealTimeLocationStatusMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:RL"
    public static let persistentFlag = PersistentFlag.status

    public var latitude: Double?
    public var longitude: Double?
    /// The coordinate system: `wgs84` (GPS), `gcj02` or `bd09`.
    public var type: String

    public init(latitude: Double? = nil, longitude: Double? = nil, type: String = "wgs84") {
        self.latitude = latitude
        self.longitude = longitude
        self.type = type
    }
}
