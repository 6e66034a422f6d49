import IMCore

/// Conversation log keys: a kind prefix (`p`, `g`, `u`, `s`, `c`) and the conversation's ids, each
/// escaped (`%` as `%25`, `|` as `%7C`) and joined with `|`. Escaping makes a key name exactly one
/// conversation whatever characters ids hold: user ids may contain `|`, and without it `acme` +
/// `zed|zbob` would read the conversation of `acme|zed` and `zbob`. Ids without `%` or `|` (every
/// id RongCloud's documented charset allows) keep the plain `p|a|b` form.
public enum ConversationKey {
    /// One part of a key, with `%` and `|` escaped.
    public static func escape(_ part: String) -> String {
        guard part.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "|") }) else { return part }
        var escaped = ""
        escaped.reserveCapacity(part.utf8.count + 8)
        for character in part.unicodeScalars {
            switch character {
            case "%": escaped += "%25"
            case "|": escaped += "%7C"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// Built in one string (a key is made for every message sent).
    static func key(_ kind: String, _ parts: String...) -> String {
        var key = kind
        key.reserveCapacity(parts.reduce(kind.utf8.count) { $0 + 1 + $1.utf8.count })
        for part in parts {
            key += "|"
            key += escape(part)
        }
        return key
    }
}

/// A conversation's log key within its app: what per-conversation notes (the newest sentTime the
/// message log stamped, the one a commit stored) are kept by.
public struct AppConversation: Hashable, Sendable {
    public var appId: Int64
    public var key: String

    public init(appId: Int64, key: String) {
        self.appId = appId
        self.key = key
    }
}

/// The log key of a private conversation: the same for both users.
public func privateConversationKey(_ a: String, _ b: String) -> String {
    a <= b ? ConversationKey.key("p", a, b) : ConversationKey.key("p", b, a)
}

/// The log key of a group conversation.
public func groupConversationKey(_ groupId: String) -> String {
    ConversationKey.key("g", groupId)
}

/// The log key of an ultra group channel: each channel is a conversation of its own.
public func ultraGroupConversationKey(_ groupId: String, _ channelId: String) -> String {
    ConversationKey.key("u", groupId, channelId)
}

/// The log key of a system conversation: one sender (a system account) and one recipient, or
/// `StoredMessage.everyone` for a broadcast.
public func systemConversationKey(sender: String, recipient: String) -> String {
    ConversationKey.key("s", sender, recipient)
}

/// The key of a chatroom's messages (kept apart from the other kinds by its prefix).
public func chatroomConversationKey(_ roomId: String) -> String {
    ConversationKey.key("c", roomId)
}
