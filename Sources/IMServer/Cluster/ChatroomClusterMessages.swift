import Foundation
import IMCore
import IMStore
import IMWire

// What the nodes of a cluster tell each other about chatrooms (`ChatroomRouting`, docs/ARCHITECTURE.md,
// "Chatrooms"). A room lives on one owner node; the other nodes send it their sessions' requests and
// the Server API calls about it, and it answers them, tells them which of their sessions sit in the
// room, and sends them the room's pushes, which they deliver to those sessions themselves.

/// A request to a room's owner node: a client's request (with the session's identity) or a Server
/// API call about one room.
public struct ChatroomRequest: Sendable, Equatable, Codable {
    /// Unique among the asking node's requests; the answer carries it back.
    public var id: UInt64
    /// The asking node, where the answer goes.
    public var from: String
    public var appId: Int64
    public var roomId: String
    /// The session asking, connected to the asking node; nil for the Server API.
    public var session: RemoteSession?
    public var call: ChatroomCall
}

/// A session connected to another node, as the owner of a room sees it: the owner stands in for it
/// with a session of its own (`ClientSession` relayed) whose frames go back to that node.
public struct RemoteSession: Sendable, Equatable, Codable {
    public var id: String
    public var appId: Int64
    public var userId: String
    /// `Platform.rawValue`.
    public var platform: Int
    public var deviceId: String
}

/// The calls an owner node answers for the other nodes, each as `ChatroomService` takes it.
public enum ChatroomCall: Sendable, Equatable, Codable {
    /// A client's chatroom request as it came (join, quit, room info, attributes, history).
    case client(WireFrame)
    /// A client's chatroom message, already checked and filtered by the sender's node.
    case send(StoredMessage)
    case recall(operatorId: String, uid: String, isAdmin: Bool, window: Int64?, extra: String?, origin: ClusterOrigin)
    case create(name: String, rule: ChatroomService.DestroyRule)
    case destroy
    case setDestroyRule(ChatroomService.DestroyRule)
    case summary
    case areMembers([String])
    case addMembers([String])
    case setDistribution(stopped: Bool)
    case members(count: Int, order: ChatroomMemberOrder)
    case entries(keys: [String])
    case setEntries([String: String], userId: String, autoDelete: Bool, force: Bool, notify: Bool, extra: String,
                    objectName: String?, content: Data?)
    case removeEntries([String], userId: String, force: Bool, notify: Bool, extra: String)
    case publish(StoredMessage)

    /// Whether the call may create the room, and so claims it for the node that runs it when no
    /// node holds it.
    var createsRoom: Bool {
        switch self {
        case .create, .addMembers: return true
        case .client(let wire): return wire.frame.op == .joinChatroom
        default: return false
        }
    }
}

/// What an owner node answered.
public enum ChatroomCallResult: Sendable, Equatable, Codable {
    /// The call failed with this error (an `IMError`).
    case failure(code: Int, message: String)
    /// The node does not hold the room (any more): ask its owner again.
    case notOwner
    /// A client request's reply frame, or nil when the request queued its own (a join).
    case reply(WireBytes?)
    case sent(StoredMessage, discarded: Bool)
    case recalled(RecallOutcome)
    /// The rooms created or destroyed.
    case rooms([String])
    case done
    case summary(ChatroomService.RoomSummary?)
    case membership([Bool])
    case members(total: Int, members: [ChatroomMemberRecord], createdAt: Int64, sessionId: String)
    case entries([ChatroomEntryRecord])
}

public struct ChatroomMemberRecord: Sendable, Equatable, Codable {
    public var userId: String
    public var joinTime: Int64
}

/// A room attribute as the Server API reads it.
public struct ChatroomEntryRecord: Sendable, Equatable, Codable {
    public var key: String
    public var value: String
    public var ownerId: String
    public var autoDelete: Bool
    public var updatedAt: Int64
}

/// What an owner node sends a node whose sessions sit in its rooms, in the order it happened
/// (`ChatroomRelay` keeps one queue per node and merges neighbours of the same kind).
public enum ChatroomRelayItem: Sendable, Equatable, Codable {
    /// These sessions took a seat in the room: their node delivers the room's pushes to them from
    /// here on.
    case seated(appId: Int64, roomId: String, sessions: [String])
    /// These sessions lost their seat (quit, kicked, removed, the room destroyed, or closed).
    case unseated(appId: Int64, roomId: String, sessions: [String])
    /// The room published these pushes, in its order.
    case pushes(appId: Int64, roomId: String, [ChatroomPushRecord])
    /// A frame for these sessions (a join reply, a room event).
    case frame(WireBytes, sessions: [String])
    /// The answer to a request of that node.
    case response(id: UInt64, ChatroomCallResult)

    /// The item and `next` as one, when they are of one kind about one thing.
    func merged(with next: ChatroomRelayItem) -> ChatroomRelayItem? {
        switch (self, next) {
        case (.seated(let app, let room, let sessions), .seated(let nextApp, let nextRoom, let more)) where app == nextApp && room == nextRoom:
            return .seated(appId: app, roomId: room, sessions: sessions + more)
        case (.unseated(let app, let room, let sessions), .unseated(let nextApp, let nextRoom, let more)) where app == nextApp && room == nextRoom:
            return .unseated(appId: app, roomId: room, sessions: sessions + more)
        case (.pushes(let app, let room, let pushes), .pushes(let nextApp, let nextRoom, let more)) where app == nextApp && room == nextRoom:
            return .pushes(appId: app, roomId: room, pushes + more)
        case (.frame(let frame, let sessions), .frame(let nextFrame, let more)) where frame == nextFrame:
            return .frame(frame, sessions: sessions + more)
        default:
            return nil
        }
    }
}

/// A push of a room's delivery (`ChatroomRoom.Push`) on the bus.
public enum ChatroomPushRecord: Sendable, Equatable, Codable {
    case message(StoredMessage, origin: ClusterOrigin)
    case roomFrame(WireBytes)
    /// For the listed sessions only.
    case frame(WireBytes, sessions: [String])
}

/// A moderation setting added or removed on one node: every node reads the app's settings again and
/// applies the change to the rooms it holds (a block puts the users out, members are told).
public struct ChatroomSettingsChange: Sendable, Equatable, Codable {
    public var appId: Int64
    /// `ChatroomSettingKind.rawValue`.
    public var kind: String
    public var adding: Bool
    public var roomId: String
    public var users: [String]
    public var minutes: Int?
    public var notify: Bool
    public var extra: String
}

/// Bytes on the bus (frames), base64 in JSON as `Data` is, compared and kept as they are.
public struct WireBytes: Sendable, Equatable, Codable {
    public var bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public init(from decoder: any Decoder) throws {
        bytes = Array(try decoder.singleValueContainer().decode(Data.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Data(bytes))
    }
}

/// A client's request frame on the bus: kept decoded on its way through one node, encoded as its
/// protobuf bytes on the bus.
public struct WireFrame: Sendable, Equatable, Codable {
    public var frame: Im_Frame

    public init(_ frame: Im_Frame) { self.frame = frame }

    public init(from decoder: any Decoder) throws {
        frame = try Im_Frame(serializedBytes: Array(try decoder.singleValueContainer().decode(Data.self)))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Data(try frame.serializedBytes() as [UInt8]))
    }
}
