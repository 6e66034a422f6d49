/// The limits and defaults of one-to-one messaging, each with the spec line it comes from.
public enum MessageLimits {
    /// 「消息大小超限，消息体最大 128 KB」 (spec/imlib-core.md Appendix A, 30016).
    public static let maxContentBytes = 128 * 1024
    /// The most message bytes one frame of many messages carries (a chatroom push, join reply or
    /// history page, an ultra group summary), well under the 4 MB frame limit: 50 messages of
    /// 128 KB would not fit in one frame.
    public static let frameBudgetBytes = 1024 * 1024
    /// 「1 秒钟最多只允许发送 5 条消息」 (spec/imlib-core.md §9.10, 20604).
    public static let clientSendsPerSecond = 5
    /// Offline messages are kept 7 days by default, configurable 1 to 7 (spec/imlib-core.md §8.0).
    public static let defaultOfflineRetentionDays = 7
    public static let offlineRetentionDayRange = 1...7
    /// Natural days a new device's first sync covers (RongCloud: today, raised by ticket up to 7).
    public static let defaultCompensationDays = 1
    /// RongCloud keeps cloud history 6 months by default.
    public static let defaultCloudHistoryRetentionDays = 180
    /// Remote history pages hold 1 to 100 messages.
    public static let historyCountRange = 1...100
    /// Local history returns at most 20 messages per call (spec/imlib-core.md §9.7).
    public static let localHistoryMaxCount = 20
    /// Messages per remote delete call (RongCloud's deleteRemoteMessage takes a list; 100 keeps a
    /// call to one page of history).
    public static let remoteDeleteBatch = 100
    /// An object name of a custom type is at most 32 characters (spec/server-api.md §6.2).
    public static let maxObjectNameLength = 32
}

/// User ids: at most 64 bytes of letters, digits and `+ = - _ |` (spec/server-api.md §6.1).
public enum UserID {
    public static let maxBytes = 64
    /// The rule in words, for the error messages of every id check.
    public static let rule = "1 to 64 bytes of letters, digits and + = - _ |"

    public static func isValid(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maxBytes else { return false }
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "+"), UInt8(ascii: "="), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "|"):
                continue
            default:
                return false
            }
        }
        return true
    }
}

/// Group limits (spec/group-chatroom.md, group part).
public enum GroupLimits {
    /// "默认一个群上限为 3000 人，可调整" (3000 members per group by default, adjustable).
    public static let defaultMaxMembers = 3000
    /// A group's name: 128 characters (RongCloud's older documents; newer ones say 64).
    public static let maxNameCharacters = 128
    /// Users per join/quit/create call (spec/server-api.md §6.3).
    public static let usersPerCall = 1000
    /// Users and groups per mute call (spec/server-api.md §6.3).
    public static let mutesPerCall = 20
    /// Longest timed mute, minutes (30 days; spec/server-api.md §6.3).
    public static let maxMuteMinutes = 43_200
    /// Groups per `/message/group/publish.json` call ("最多不超过 3 个群组", spec/server-api.md §3.3).
    public static let groupsPerPublish = 3
    /// Group messages per second through the Server API ("服务端调用，20 条/秒", spec/group-chatroom.md A2).
    public static let serverMessagesPerSecond = 20
    /// Members named by one directional message. RongCloud states no figure; a directional message
    /// is meant for part of a group, so the per-call user limit applies.
    public static let maxDirectedUsers = 1000
    /// Messages per read-receipt response from a member: the response is a batch (spec/group-chatroom.md A8).
    public static let receiptResponseBatch = 100
    /// Readers per page of a message's read-user list; pages keep frames small in 3,000-member groups.
    public static let readUsersPageRange = 1...100
    /// Read receipts per page of the receipt sync and per live push.
    public static let receiptSyncPage = 200
}

/// Content moderation limits (spec/server-api.md §6.6).
public enum ModerationLimits {
    /// Sensitive words per app (RongCloud's console limit for the word list).
    public static let maxSensitiveWords = 50
    /// Longest sensitive word, characters.
    public static let maxWordLength = 32
    /// Words per batch delete.
    public static let wordsPerBatch = 50
}

/// Server API rate limits per app, as RongCloud documents them (spec/server-api.md §5.2, §6.2).
public enum APIRateLimits {
    /// Calls per second to one endpoint ("100 req/s per API by default").
    public static let callsPerSecond = 100
    /// Private messages per minute, each recipient counted ("6000 msgs/min for private publish").
    public static let privateMessagesPerMinute = 6000
    /// System messages per second, each recipient counted.
    public static let systemMessagesPerSecond = 100
    /// Broadcasts to every user: 2 per hour and 3 per day.
    public static let broadcastsPerHour = 2
    public static let broadcastsPerDay = 3
    /// Recipients per private publish and per system publish.
    public static let privateRecipientsPerCall = 1000
    public static let systemRecipientsPerCall = 100
}

/// Message extensions (spec/imlib-core.md §9.14, spec/system-push-ultra.md §5).
public enum ExpansionLimits {
    /// 「单条消息单次最多可设置 20 个扩展信息 KV 对」.
    public static let keysPerCall = 20
    /// 「总计不可超过 300 个扩展信息 KV 对」.
    public static let keysPerMessage = 300
    /// Keys: at most 32 characters of letters, digits and `+ = - _`.
    public static let maxKeyLength = 32
    /// Values: at most 4096 characters (SDK 5.2.0 and later), counted as RongCloud's SDKs count them
    /// (`TextLength.characters`), so at most 12 KB.
    public static let maxValueLength = 4096

    public static func isValidKey(_ key: String) -> Bool { isKeyOfLettersDigitsAndSigns(key, maxLength: maxKeyLength) }

    /// Checks one call's keys and values (`perCall` keys at most to set and to remove); throws
    /// 34010 saying which one is wrong.
    public static func check(set: [String: String], remove: [String], perCall: Int = keysPerCall) throws {
        guard !set.isEmpty || !remove.isEmpty else {
            throw IMError(.invalidParameter, "an extension update sets or removes at least one key")
        }
        guard set.count <= perCall, remove.count <= perCall else {
            throw IMError(.expansionLimitExceeded, "at most \(perCall) extension keys per call, got \(max(set.count, remove.count)): split the update")
        }
        for key in set.keys.sorted() + remove where !isValidKey(key) {
            throw IMError(.expansionLimitExceeded, "extension key \(TextLength.quoted(key)) is invalid: use 1 to \(maxKeyLength) characters of A-Z, a-z, 0-9 and + = - _")
        }
        for (key, value) in set where TextLength.characters(value) > maxValueLength {
            throw IMError(.expansionLimitExceeded, "the value of extension key '\(key)' has \(TextLength.characters(value)) characters; at most \(maxValueLength) are allowed")
        }
    }
}

/// Recall (spec/imlib-core.md §8.0, §9.9).
public enum RecallLimits {
    /// 「默认可撤回时间为 2 分钟，时间可配置」.
    public static let defaultWindowSeconds = 120
}

/// Typing status (spec/imlib-core.md; RongCloud's RCTypingStatusMessage).
public enum TypingLimits {
    /// A client sends at most one typing status per conversation in this many ms; a status holds
    /// for as long on the receiving side.
    public static let intervalMilliseconds: Int64 = 6000
}

/// Whether a key is 1 to `maxLength` characters of letters, digits and `+ = - _`: the rule of
/// message extension keys and chatroom attribute keys.
public func isKeyOfLettersDigitsAndSigns(_ key: String, maxLength: Int) -> Bool {
    guard !key.isEmpty, key.utf8.count <= maxLength else { return false }
    return key.unicodeScalars.allSatisfy { scalar in
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "+", "=", "-", "_": return true
        default: return false
        }
    }
}

/// Limits on what a client's CONNECT carries.
public enum ConnectLimits {
    /// Tokens this server issues are about 200 bytes (claims and HMAC, base64url); RongCloud's are
    /// at most 256 bytes (spec/server-api.md §6.1). Anything longer is refused before it is parsed.
    public static let maxTokenBytes = 1024
    /// App keys are at most 64 bytes (the server's own setting allows no more).
    public static let maxAppKeyBytes = 64
    /// A device id identifies one installation (RongCloud's SDKs send a UUID-like string).
    public static let maxDeviceIdBytes = 128
    /// The rule in words, for the error messages of the device id check.
    public static let deviceIdRule = "at most \(maxDeviceIdBytes) bytes of printable ASCII (a UUID, for example), no spaces"

    /// Whether a device id (which may be empty: a client that names no device) is one the server
    /// keeps. Printable ASCII only: a device id is a key of push tokens and badges, held in memory
    /// as Swift strings, whose equality is canonical (an id in NFD would be its NFC twin's device
    /// there and another device in the store, which compares bytes).
    public static func isValidDeviceId(_ id: String) -> Bool {
        guard id.utf8.count <= maxDeviceIdBytes else { return false }
        return id.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// Limits on one connection and on the connections of one source address (the server's own
/// choices: RongCloud's documents give none).
public enum ConnectionLimits {
    /// Bytes waiting for a slow connection before it is closed: two 4 MB frames.
    public static let defaultMaxQueuedBytes = 8 * 1024 * 1024
    public static let queuedBytesRange = (8 * 1024 * 1024)...(1024 * 1024 * 1024)

    /// Bytes held for a client while it syncs, for a queue bound of `queue`: half of it less one
    /// page, so the last sync page and everything held, released together, still fit the queue.
    public static func heldBytes(forQueue queue: Int) -> Int {
        queue / 2 - MessageLimits.frameBudgetBytes
    }
    /// Connections from one address: room for a large office or carrier NAT, far below the
    /// process's file limit.
    public static let defaultMaxConnectionsPerAddress = 1000
    public static let defaultHTTPIdleTimeoutSeconds = 60
    public static let defaultHTTPRequestTimeoutSeconds = 30
    /// A request's body earns one more second to arrive for every this many bytes it brings: a
    /// 100 MB file at 64 KiB/s (a poor mobile link) still arrives, a trickle earns nothing.
    public static let requestBodyBytesPerSecondOwed = 64 * 1024
    public static let defaultCloseTimeoutSeconds = 5
}

/// The kinds of media files clients upload (spec/imkit-and-overview.md §3.11).
public enum MediaType: String, Sendable, CaseIterable {
    case image, gif, voice, file, sight
}

/// Media files' limits and retention (spec/imkit-and-overview.md §3.11, imlib-core.md §9.3).
public enum MediaLimits {
    /// Flagship and premium editions keep files 180 days, short videos 7.
    public static let defaultRetentionDays = 180
    public static let defaultSightRetentionDays = 7
    /// File messages: 100 MB.
    public static let defaultMaxFileMB = 100
    /// GIFs: 2 MB (34003 beyond).
    public static let defaultMaxGifMB = 2
    /// Original images sent with `full`.
    public static let defaultMaxImageMB = 20
    /// An HQ voice message of 60 s is well under this.
    public static let maxVoiceMB = 10
    /// A short video of 2 minutes.
    public static let maxSightMB = 100
    /// A short video: 2 minutes (34002 beyond).
    public static let defaultMaxSightSeconds = 120
    /// An HQ voice message: 60 seconds.
    public static let defaultMaxVoiceSeconds = 60
    /// A file name, in UTF-8 bytes.
    public static let maxFileNameBytes = 255
    /// How long an upload token and a download token last.
    public static let uploadTokenSeconds = 10 * 60
    public static let downloadTokenSeconds = 60 * 60
}
