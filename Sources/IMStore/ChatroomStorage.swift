import Foundation
import IMCore

/// What the server keeps of chatrooms in the store. Rooms, members and attributes live in memory
/// (a restart empties the rooms, and clients join again when they reconnect); the moderation
/// settings and the optional history must survive a restart.
public protocol ChatroomStore: Sendable {
    /// Every chatroom setting of an app (bans, mutes, whitelists, keep-alive, priorities).
    func chatroomSettings(appId: Int64) async throws -> [ChatroomSettingRecord]
    /// Adds or updates settings (one row per app, kind, room and item).
    func putChatroomSettings(_ records: [ChatroomSettingRecord]) async throws
    /// Removes the named items of one kind and room.
    func deleteChatroomSettings(appId: Int64, kind: ChatroomSettingKind, roomId: String, items: [String]) async throws
    /// Appends chatroom messages to the room history (one transaction).
    func appendChatroomHistory(_ messages: [StoredMessage]) async throws
    /// A page of a room's history: messages sent before (descending) or after (ascending) `recordTime`.
    /// Messages sent before `minSentTime` (out of retention) are left out.
    func chatroomHistory(appId: Int64, roomId: String, recordTime: Int64, count: Int, ascending: Bool,
                         minSentTime: Int64, maxBytes: Int) async throws -> [StoredMessage]
    /// A message of the room history by uid.
    func chatroomMessage(appId: Int64, uid: String) async throws -> StoredMessage?
    /// Replaces a history message's content (recall).
    func replaceChatroomMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws
    /// Deletes the app's history messages sent before `before` (its retention).
    func pruneChatroomHistory(appId: Int64, before: Int64) async throws
}

/// The kinds of chatroom settings. Room-level kinds name a room; app-level kinds use room "".
public enum ChatroomSettingKind: String, Sendable, CaseIterable {
    /// Kicked and banned from a room until `until` (23409).
    case block
    /// Muted in a room until `until` (23408).
    case gag
    /// The whole room is muted (item "").
    case roomMute
    /// May still speak while the room is muted.
    case muteWhitelist
    /// Never discarded under load and never removed for being offline.
    case userWhitelist
    /// App level: muted in every chatroom until `until`.
    case globalMute
    /// App level: the room (item) is never destroyed for being idle.
    case keepAlive
    /// App level: messages of this object name are low priority.
    case lowPriority
    /// App level: messages of this object name are never discarded.
    case messageWhitelist
}

public struct ChatroomSettingRecord: Sendable, Equatable {
    public var appId: Int64
    public var kind: ChatroomSettingKind
    public var roomId: String
    public var item: String
    /// When a timed setting ends (ms); `Int64.max` for one without an end.
    public var until: Int64

    public init(appId: Int64, kind: ChatroomSettingKind, roomId: String, item: String, until: Int64 = .max) {
        self.appId = appId
        self.kind = kind
        self.roomId = roomId
        self.item = item
        self.until = until
    }
}
