import Foundation
import IMCore

/// What happens to this client's chatrooms (RongCloud's `RCChatRoomStatusDelegate` and
/// `RCChatRoomNotifyEventDelegate`), from `IMClient.chatRoomStatusUpdates()`.
public enum ChatRoomStatusEvent: Sendable, Equatable {
    /// A join (or an automatic rejoin after a reconnect) started.
    case joining(roomId: String)
    /// Joined. `sessionId` identifies this incarnation of the room: it changes when the room is
    /// destroyed and created again.
    case joined(roomId: String, sessionId: String)
    /// A join or an automatic rejoin failed with this code (e.g. 23409 banned, 23410 no such room).
    case joinFailed(roomId: String, code: ErrorCode)
    /// This device left the room (quitChatRoom).
    case quit(roomId: String)
    /// An automatic rejoin found that this device had been removed meanwhile (offline too long):
    /// it joined again, but messages sent in between were not kept for it.
    case reset(roomId: String)
    /// The room was destroyed: through the Server API, or because it was idle or its time came.
    case destroyed(roomId: String, sessionId: String, automatically: Bool)
    /// The server removed this device from the room; see `ChatRoomNotification.kind`.
    case removed(roomId: String, reason: ChatRoomNotification.Kind)
    /// A moderation event of the room (mute, ban, whitelist), sent when the Server API call asked
    /// for a notification.
    case notification(ChatRoomNotification)
}

/// A moderation event of a chatroom.
public struct ChatRoomNotification: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Kicked and banned from the room for `durationMinutes`.
        case banned
        case unbanned
        case muted
        case unmuted
        case roomMuted
        case roomUnmuted
        case muteWhitelistAdded
        case muteWhitelistRemoved
        case globallyMuted
        case globallyUnmuted
        /// The user joined another room (one room per user).
        case leftForOtherRoom
    }

    public var roomId: String
    public var kind: Kind
    public var userIds: [String]
    public var durationMinutes: Int64
    public var extra: String

    public init(roomId: String, kind: Kind, userIds: [String], durationMinutes: Int64, extra: String) {
        self.roomId = roomId
        self.kind = kind
        self.userIds = userIds
        self.durationMinutes = durationMinutes
        self.extra = extra
    }
}

/// Changes of a chatroom's attributes (RongCloud's `RCChatRoomKVStatusChangeDelegate`), from
/// `IMClient.chatRoomKVUpdates()`.
public enum ChatRoomKVEvent: Sendable, Equatable {
    /// The room's attributes are synced after a join or rejoin: `getAllChatRoomEntries` now
    /// answers from the full set.
    case synced(roomId: String)
    /// Attributes set or changed, with their new values.
    case updated(roomId: String, entries: [String: String])
    /// Attributes removed, with the values they had.
    case removed(roomId: String, entries: [String: String])
}

/// A chatroom as `getChatRoomInfo` describes it.
public struct ChatRoomInfo: Sendable, Equatable {
    public struct Member: Sendable, Equatable {
        public var userId: String
        public var joinTime: Int64
    }

    public var roomId: String
    public var totalMemberCount: Int
    /// Up to the requested count (at most 20), by join time in the requested order.
    public var members: [Member]
    public var memberOrder: ChatroomMemberOrder
}

/// The order of a remote history page: RongCloud's `RCTimestampOrder`.
public enum TimestampOrder: Sendable {
    /// Messages sent before `recordTime`, newest first.
    case descending
    /// Messages sent after `recordTime`, oldest first.
    case ascending
}

/// What the client keeps about a room it joined: enough to rejoin after a reconnect, and the
/// attribute cache.
struct JoinedChatroom {
    var messageCount: Int
    var mustExist: Bool
    var sessionId = ""
    var lastMessageTime: Int64 = 0
    var entries: [String: String] = [:]
    var synced = false
    /// Counts what the server told of each key (changes pushed), and the snapshots it sent (joins):
    /// a device's own change is written into the cache when its reply comes only if the server
    /// told nothing newer meanwhile.
    var keyChanges: [String: Int] = [:]
    var snapshots = 0

    struct Mark: Equatable {
        let changes: Int
        let snapshots: Int
    }

    /// Where the server's news of `key` stood.
    func mark(_ key: String) -> Mark { Mark(changes: keyChanges[key] ?? 0, snapshots: snapshots) }
}
