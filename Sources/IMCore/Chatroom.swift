import Foundation

/// Chatroom limits and defaults (spec/group-chatroom.md, part B), each with the line it comes from.
public enum ChatroomLimits {
    /// `messageCount` of a join: -1 fetches nothing, 0 the SDK default of 10, otherwise at most 50
    /// (「最大值为 50」, B4); the server keeps the latest 50 messages of a room for this (B4 FAQ).
    public static let joinHistoryDefault = 10
    public static let joinHistoryMax = 50
    /// 「每 200 毫秒 40 条，其中 20 条为高优先级消息使用配额」 (B10).
    public static let quotaWindowMilliseconds: Int64 = 200
    public static let quotaPerWindow = 40
    public static let quotaHighPriorityReserved = 20
    /// A member offline for more than 30 s, or through more than 30 new messages, is removed on the
    /// room's next message (B4, D2).
    public static let offlineGraceMilliseconds: Int64 = 30_000
    public static let offlineGraceMessages = 30
    /// A room idle this long is destroyed (「默认等待时间为1小时...最长可设置24小时」, B3).
    public static let defaultIdleDestroyMinutes = 60
    public static let maxIdleDestroyMinutes = 24 * 60
    /// `getChatRoomInfo` lists at most 20 members (B4); the Server API at most 500 (B2).
    public static let infoMembersMax = 20
    public static let serverQueryMembersMax = 500
    /// Remote chatroom history: 「0 < count <= 200」 (B9), kept 2 months by default.
    public static let historyCountRange = 1...200
    public static let defaultHistoryRetentionDays = 60
    /// Chatroom messages per second through the Server API (E).
    public static let serverMessagesPerSecond = 100
    /// A chatroom's name (RongCloud names no figure; a group name's 128 characters).
    public static let maxNameCharacters = 128
    /// Joins per second from one client connection: a join may create a room, so joining is not
    /// free (RongCloud names no figure; 20607 is its code for calls that come too often).
    public static let defaultJoinsPerSecond = 10
    /// Rooms one app may have at once. RongCloud sets no limit ("App Key 下可创建的聊天室数量没有限制");
    /// this bound keeps memory finite (an empty room costs about a kilobyte) and is a setting.
    public static let defaultMaxRoomsPerApp = 100_000
}

/// Chatroom attributes (KV, spec/group-chatroom.md B5).
public enum ChatroomEntryLimits {
    /// 「每个聊天室中，最多允许设置 100 个属性信息」 (23423).
    public static let entriesPerRoom = 100
    /// 「最大长度 128 个字符」, letters, digits and `+ = - _`.
    public static let maxKeyLength = 128
    /// 「最大长度 4096 个字符」.
    public static let maxValueLength = 4096
    /// notificationExtra: 「最大长度 2048 个字符」.
    public static let maxExtraLength = 2048
    /// 「单个聊天室每秒上限 100 次」 (23425); one call touching n keys counts n.
    public static let operationsPerSecond = 100

    public static func isValidKey(_ key: String) -> Bool { isKeyOfLettersDigitsAndSigns(key, maxLength: maxKeyLength) }

    /// Checks a key, and the value and notification extra when given; throws 23412 saying which
    /// one is wrong.
    public static func check(key: String, value: String? = nil, extra: String? = nil) throws {
        guard isValidKey(key) else {
            throw IMError(.chatroomParameterInvalid, "chatroom attribute key \(TextLength.quoted(key)) is invalid: use 1 to \(maxKeyLength) characters of A-Z, a-z, 0-9 and + = - _")
        }
        if let value, TextLength.characters(value) > maxValueLength {
            throw IMError(.chatroomParameterInvalid, "the value of chatroom attribute '\(key)' has \(TextLength.characters(value)) characters; at most \(maxValueLength) are allowed")
        }
        if let extra, TextLength.characters(extra) > maxExtraLength {
            throw IMError(.chatroomParameterInvalid, "notificationExtra has \(TextLength.characters(extra)) characters; at most \(maxExtraLength) are allowed")
        }
    }
}

/// Chatroom ids follow the user-id rule: 1 to 64 bytes of letters, digits and `+ = - _ |`.
public enum ChatroomID {
    public static func isValid(_ id: String) -> Bool { UserID.isValid(id) }
}

/// The number of history messages a join fetches for a `messageCount` (B4): -1 none, 0 the default
/// of 10, otherwise up to 50. Nil for a count below -1.
public func chatroomJoinHistoryCount(_ messageCount: Int) -> Int? {
    switch messageCount {
    case -1: return 0
    case 0: return ChatroomLimits.joinHistoryDefault
    case 1...: return min(messageCount, ChatroomLimits.joinHistoryMax)
    default: return nil
    }
}

/// The order of `getChatRoomInfo`'s member list (RongCloud's RCChatRoomMemberOrder): the earliest
/// or the latest joiners first.
public enum ChatroomMemberOrder: Int, Sendable, Codable {
    case ascending = 1
    case descending = 2
}

/// `RC:chrmKVNotiMsg`: an attribute of the room was set or removed (B5). Sent to the room's
/// members when the operation asked for a notification.
public struct ChatroomKVNotificationMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:chrmKVNotiMsg"
    public static let persistentFlag = PersistentFlag.none

    /// RongCloud's RCChatroomKVNotificationType: 1 set, 2 remove.
    public var type: Int
    public var key: String
    public var value: String?
    public var extra: String?

    public static let setType = 1
    public static let removeType = 2

    public init(type: Int, key: String, value: String?, extra: String?) {
        self.type = type
        self.key = key
        self.value = value
        self.extra = extra
    }
}

/// A chatroom's intake quota (spec/group-chatroom.md B10): per window of 200 ms, 40 messages, of
/// which 20 are reserved for high priority and 20 shared. Low priority uses the shared part only;
/// high priority uses its own part first, then the shared part; whitelisted messages (by sender or
/// type) use the shared part first, then the high part, and are admitted even when both are used
/// up. What is not admitted is discarded, so under a flood the newest messages go.
public struct ChatroomIntakeQuota: Sendable, Equatable {
    public enum Priority: Sendable { case whitelisted, high, low }

    public let windowMilliseconds: Int64
    public let reservedHigh: Int
    public let shared: Int
    public private(set) var windowStart: Int64 = .min
    public private(set) var highUsed = 0
    public private(set) var sharedUsed = 0

    public init(windowMilliseconds: Int64 = ChatroomLimits.quotaWindowMilliseconds,
                perWindow: Int = ChatroomLimits.quotaPerWindow,
                reservedHigh: Int = ChatroomLimits.quotaHighPriorityReserved) {
        self.windowMilliseconds = windowMilliseconds
        self.reservedHigh = reservedHigh
        self.shared = perWindow - reservedHigh
    }

    /// Whether a message of this priority arriving at `now` is admitted (and takes its share).
    public mutating func admit(_ priority: Priority, now: Int64) -> Bool {
        if windowStart == .min || now - windowStart >= windowMilliseconds {
            windowStart = now
            highUsed = 0
            sharedUsed = 0
        }
        switch priority {
        case .low:
            guard sharedUsed < shared else { return false }
            sharedUsed += 1
        case .high:
            if highUsed < reservedHigh {
                highUsed += 1
            } else if sharedUsed < shared {
                sharedUsed += 1
            } else {
                return false
            }
        case .whitelisted:
            if sharedUsed < shared {
                sharedUsed += 1
            } else if highUsed < reservedHigh {
                highUsed += 1
            }
        }
        return true
    }
}
