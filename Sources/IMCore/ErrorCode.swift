/// RongCloud's numeric status codes, as the seed documents list them
/// (spec/imlib-core.md Appendix A, spec/system-push-ultra.md, spec/server-api.md §5.2).
///
/// Every error a client or an HTTP caller sees carries one of these values, so an app written
/// against RongCloud can keep its error handling unchanged.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    // Server API (HTTP) business codes.
    public static let apiSuccess = ErrorCode(200)
    public static let apiNotFound = ErrorCode(404)
    public static let apiInternalError = ErrorCode(1000)
    public static let apiSecretMismatch = ErrorCode(1001)
    public static let apiBadParameter = ErrorCode(1002)
    public static let apiNoPostData = ErrorCode(1003)
    public static let apiSignatureFailed = ErrorCode(1004)
    public static let apiParameterTooLong = ErrorCode(1005)
    public static let apiAppLocked = ErrorCode(1006)
    public static let apiRateLimited = ErrorCode(1008)
    /// 「服务未开通」 (HTTP 430): the feature behind the endpoint is not available to the app
    /// (spec/server-api.md §5.2), e.g. push-only notifications on a server without a push service.
    public static let apiServiceNotEnabled = ErrorCode(1009)

    // Sending.
    public static let rejectedByBlacklist = ErrorCode(405)
    public static let notInWhitelist = ErrorCode(407)
    public static let sendTimeout = ErrorCode(5004)
    public static let sendRateTooHigh = ErrorCode(20604)
    public static let callFrequencyExceeded = ErrorCode(20607)
    public static let cloudHistoryDisabled = ErrorCode(25102)
    /// Recall refused: no such message, not the sender's, or wrong conversation (spec/server-api.md §5.2).
    public static let recallParameterInvalid = ErrorCode(25101)
    /// Clearing history: the time given is later than the server's current time (spec/imlib-core.md §9.11).
    public static let clearHistoryTimeInvalid = ErrorCode(25103)
    /// 「当前用户不在群组中」: the sender is not a member of the group (spec/group-chatroom.md Part C).
    public static let notInGroup = ErrorCode(22406)
    /// 「当前用户在群组中已被禁言」: the sender is muted in the group (spec/group-chatroom.md Part C).
    public static let mutedInGroup = ErrorCode(22408)

    // Ultra groups (RongCloud's RCErrorCode 24401-24416, 34022, 34024, 20114-20116).
    /// 「超级群参数错误」: a bad ultra group, channel or user group parameter.
    public static let ultraGroupParameterInvalid = ErrorCode(24403)
    /// 「非超级群成员」: the user is not a member of the ultra group.
    public static let notInUltraGroup = ErrorCode(24406)
    /// 「超级群成员禁言」: the user is muted in the ultra group or channel.
    public static let mutedInUltraGroup = ErrorCode(24408)
    /// 「超级群不存在」: no ultra group with this id.
    public static let ultraGroupNotFound = ErrorCode(24410)
    /// 「超级群成员超限制」: a user group holds at most 100 users, an ultra group 50 user groups.
    public static let ultraGroupMembersExceeded = ErrorCode(24411)
    /// 「用户加入超级群数量超限」: a user belongs to at most 100 ultra groups.
    public static let ultraGroupCountExceeded = ErrorCode(24412)
    /// 「创建超级群频道，频道数超限」: an ultra group has at most 50 channels.
    public static let ultraGroupChannelsExceeded = ErrorCode(24413)
    /// 「超级群频道 ID 不存在」: the channel does not exist in the ultra group.
    public static let ultraGroupChannelNotFound = ErrorCode(24414)
    /// 「用户不在超级群私有频道中」: the channel is private and the user is not on its list.
    public static let notInPrivateChannel = ErrorCode(24416)
    /// 「该接口不支持超级群会话」: the call does not take ultra group conversations.
    public static let ultraGroupNotSupported = ErrorCode(34022)
    /// 「发送的消息中包含敏感词」: the content has a word the app blocks (a modification is refused;
    /// a sent message is answered as sent and delivered to nobody, as RongCloud does).
    public static let blockedBySensitiveWord = ErrorCode(21501)
    /// 「消息不支持修改」: only the sender's own ultra group messages kept in history can be modified.
    public static let messageNotModifiable = ErrorCode(20116)

    // Connection.
    /// 「当前用户不在聊天室中」: the sender (this device) has not joined the chatroom.
    public static let notInChatroom = ErrorCode(23406)
    /// 「当前用户在聊天室中已被禁言」: muted in the room, by a whole-room mute, or in every chatroom.
    public static let mutedInChatroom = ErrorCode(23408)
    /// 「聊天室中已被踢出并禁止加入」: banned from the room until the ban the Server API set ends.
    public static let bannedFromChatroom = ErrorCode(23409)
    /// 「聊天室不存在」: joinExistChatRoom, or an operation on a room that does not exist.
    public static let chatroomNotFound = ErrorCode(23410)
    /// 「聊天室成员超限」: the room has as many members as the server allows.
    public static let chatroomFull = ErrorCode(23411)
    /// 「聊天室接口参数无效」: an invalid chatroom id, message count or other parameter.
    public static let chatroomParameterInvalid = ErrorCode(23412)
    /// 「聊天室云存储业务未开通」: chatroom history is not kept on this server.
    public static let chatroomHistoryDisabled = ErrorCode(23414)
    /// 「聊天室属性个数超限」: a room holds at most 100 attributes.
    public static let chatroomEntriesExceeded = ErrorCode(23423)
    /// 「没有权限修改聊天室中已存在的属性值」: another user set this attribute (use force).
    public static let chatroomEntryNotOwned = ErrorCode(23424)
    /// 「聊天室中属性设置频率超限」: more than 100 attribute operations per second in one room.
    public static let chatroomEntryRateExceeded = ErrorCode(23425)
    /// 「聊天室自定义属性功能未开通」: attributes are turned off on this server.
    public static let chatroomEntriesDisabled = ErrorCode(23426)
    /// 「聊天室属性值不存在」: no attribute with this key.
    public static let chatroomEntryNotFound = ErrorCode(23427)
    /// 「聊天室状态未同步完成」: the room's attributes are not synced yet after joining.
    public static let chatroomNotSynced = ErrorCode(34004)
    public static let connectionReleased = ErrorCode(30001)
    public static let connectionUnavailable = ErrorCode(30002)
    public static let responseTimeout = ErrorCode(30003)
    public static let socketDisconnected = ErrorCode(30011)
    public static let pingTimeout = ErrorCode(30013)
    public static let messageTooLarge = ErrorCode(30016)
    public static let connectAckTimeout = ErrorCode(31000)
    public static let wrongAppKey = ErrorCode(31002)
    public static let serverUnavailable = ErrorCode(31003)
    public static let tokenIncorrect = ErrorCode(31004)
    public static let appBlockedOrDeleted = ErrorCode(31008)
    public static let userBlocked = ErrorCode(31009)
    public static let kickedByOtherClient = ErrorCode(31010)
    public static let tokenExpired = ErrorCode(31020)
    public static let otherDeviceLogin = ErrorCode(31023)

    // SDK.
    public static let clientNotInit = ErrorCode(33001)
    public static let databaseError = ErrorCode(33002)
    public static let invalidParameter = ErrorCode(33003)
    public static let connectionExists = ErrorCode(34001)
    public static let connectTimeout = ErrorCode(34006)
    /// 「指定的会话类型不支持标签功能」: only private, group and system conversations can be tagged.
    public static let tagUnsupportedConversationType = ErrorCode(34012)
    /// 「批量处理指定标签的会话个数超限」: at most 1000 conversations per batch tag call.
    public static let tagConversationsExceeded = ErrorCode(34013)
    public static let messageTypeNotRegistered = ErrorCode(34021)
    /// 「Push 参数不正确」: a message's push config has a field out of its rules (spec/system-push-ultra.md §2.5).
    public static let invalidPushParameter = ErrorCode(26001)
    /// 「用户级别功能设置未开通」: the app has not enabled user-level settings (the push profile, §2.4).
    public static let userSettingsNotEnabled = ErrorCode(34016)
    /// 「系统会话不支持发送该消息」 (RongCloud's `RC_CONVERSATION_NOT_SUPPORT_MESSAGE`, SDK 5.6.2 and
    /// later): a client sending into a system conversation, which users cannot reply to.
    public static let systemConversationNotWritable = ErrorCode(20109)
    /// The message was sent without `canIncludeExpansion`: it cannot carry extensions.
    public static let messageNotExpandable = ErrorCode(34008)
    /// An extension update could not reach the server (network).
    public static let expansionFailed = ErrorCode(34009)
    /// Extension limits: key <= 32 of [A-Za-z0-9+=_-], value <= 4096, <= 20 per call, <= 300 per message.
    public static let expansionLimitExceeded = ErrorCode(34010)

    // The rest of the seed's status-code table (spec/system-push-ultra.md §7.1): codes an SDK or a
    // server of RongCloud's reports that this project's paths have no use for yet or report on
    // the client's side; declared so that an app's handling of them compiles and reads the same.
    /// The developer passed an invalid argument to an API (RongCloud's SDK checks, before any request).
    public static let developerArgumentInvalid = ErrorCode(-1000)
    /// An unknown status.
    public static let unknown = ErrorCode(-1)
    /// 「单聊禁言」: the sender may not send one-to-one messages (`/user/chat/fb/set.json`).
    public static let mutedInPrivateChat = ErrorCode(20106)
    /// 「信令被封禁」: the user's signalling is banned.
    public static let signalingBanned = ErrorCode(20605)
    /// Several clients set the same chatroom attribute at once; the set failed.
    public static let chatroomEntryConflict = ErrorCode(23431)
    /// An internal error while clearing history.
    public static let clearHistoryFailed = ErrorCode(25105)
    /// Syncing with the server failed, probably too many operations at once: try again later.
    public static let syncTooFrequent = ErrorCode(26002)
    /// The short video (sight) service is not enabled for the app.
    public static let sightServiceNotEnabled = ErrorCode(26101)
    /// The navigation request could not be sent.
    public static let navigationSendFailed = ErrorCode(30004)
    /// The navigation request failed.
    public static let navigationRequestFailed = ErrorCode(30007)
    /// The navigation answer was not in the expected format.
    public static let navigationResponseInvalid = ErrorCode(30008)
    /// The socket could not be created.
    public static let socketCreationFailed = ErrorCode(30010)
    /// A PING could not be sent.
    public static let pingFailed = ErrorCode(30012)
    /// A signalling frame could not be sent.
    public static let signalSendFailed = ErrorCode(30014)
    /// Connecting too often: wait before the next attempt.
    public static let connectTooFrequent = ErrorCode(30015)
    /// App verification is on and this app did not pass it.
    public static let appVerificationFailed = ErrorCode(31005)
    /// The app's bundle id is not the one configured.
    public static let bundleIdIncorrect = ErrorCode(31007)
    /// 「用户在线时被封禁」: the user was banned while connected and has been disconnected.
    public static let bannedWhileOnline = ErrorCode(31011)
    /// 「用户已销户」 (RongCloud's `RC_CONN_USER_ABANDON`, SDK 5.3.0 and later): the user was
    /// deactivated (`/user/deactivate.json`); connecting is refused until the app reactivates them.
    public static let userDeactivated = ErrorCode(31029)
    /// The server refused the connection; the SDK reconnects by itself.
    public static let connectionRefused = ErrorCode(32061)
    /// 「历史消息云存储业务未开通」 on the SDK's side (its remote history calls).
    public static let remoteHistoryDisabled = ErrorCode(33007)
    /// A short video is longer than allowed (2 minutes by default).
    public static let sightTooLong = ErrorCode(34002)
    /// A GIF is larger than allowed (2 MB by default).
    public static let gifTooLarge = ErrorCode(34003)
    /// The connection environment is wrong.
    public static let wrongEnvironment = ErrorCode(34005)
    /// The public service asked about does not exist.
    public static let publicServiceNotFound = ErrorCode(34007)
    /// A media file's HTTP upload failed.
    public static let mediaUploadFailed = ErrorCode(34011)
    /// A video could not be compressed.
    public static let videoCompressionFailed = ErrorCode(34015)
    /// The message could not be processed (usually a nil message).
    public static let messageProcessingFailed = ErrorCode(34017)
    /// A media upload found no file, or a file of size 0.
    public static let mediaFileMissing = ErrorCode(34018)
    /// The media file's format is not supported.
    public static let mediaFormatUnsupported = ErrorCode(34019)
    /// The file has expired or was cleaned up (180 days; short videos 7 days).
    public static let fileExpired = ErrorCode(34020)
    /// An RTC room operation had a bad parameter.
    public static let rtcRoomParameterInvalid = ErrorCode(40006)

    /// Every declared code with what it means, for logs, tools and the test that checks the set
    /// against the seed's status-code table.
    public static let catalogue: [ErrorCode: String] = [
        .apiSuccess: "Success", .apiNotFound: "Not found", .apiInternalError: "Internal server error",
        .apiSecretMismatch: "App secret mismatch", .apiBadParameter: "Bad parameter",
        .apiNoPostData: "No POST data", .apiSignatureFailed: "Signature verification failed",
        .apiParameterTooLong: "Parameter too long", .apiAppLocked: "App locked or deleted",
        .apiRateLimited: "Call rate limited", .apiServiceNotEnabled: "Service not enabled",
        .rejectedByBlacklist: "Blacklisted by the recipient", .notInWhitelist: "Not in the recipient's whitelist",
        .sendTimeout: "Timeout", .sendRateTooHigh: "Send rate too high (at most 5 messages per second)",
        .callFrequencyExceeded: "Call rate limit exceeded; retry later",
        .cloudHistoryDisabled: "History cloud storage not enabled", .recallParameterInvalid: "Invalid recall parameter",
        .clearHistoryTimeInvalid: "Clear history: the time is later than the server's",
        .notInGroup: "Not in the group", .mutedInGroup: "Muted in the group",
        .ultraGroupParameterInvalid: "Invalid ultra group parameter", .notInUltraGroup: "Not a member of the ultra group",
        .mutedInUltraGroup: "Muted in the ultra group", .ultraGroupNotFound: "Ultra group does not exist",
        .ultraGroupMembersExceeded: "Ultra group member limit exceeded", .ultraGroupCountExceeded: "Too many ultra groups joined",
        .ultraGroupChannelsExceeded: "Ultra group channel limit exceeded", .ultraGroupChannelNotFound: "Ultra group channel does not exist",
        .notInPrivateChannel: "Not in the ultra group's private channel", .ultraGroupNotSupported: "Not supported for ultra groups",
        .blockedBySensitiveWord: "The message contains a blocked word", .messageNotModifiable: "The message cannot be modified",
        .notInChatroom: "Not in the chatroom", .mutedInChatroom: "Muted in the chatroom",
        .bannedFromChatroom: "Kicked out and banned from the chatroom", .chatroomNotFound: "Chatroom does not exist",
        .chatroomFull: "Chatroom member limit exceeded", .chatroomParameterInvalid: "Invalid chatroom parameter",
        .chatroomHistoryDisabled: "Chatroom cloud storage not enabled", .chatroomEntriesExceeded: "Chatroom attribute count exceeded",
        .chatroomEntryNotOwned: "No permission to modify the chatroom attribute",
        .chatroomEntryRateExceeded: "Chatroom attribute set rate exceeded", .chatroomEntriesDisabled: "Chatroom attributes not enabled",
        .chatroomEntryNotFound: "Chatroom attribute does not exist", .chatroomNotSynced: "Chatroom state not yet synced",
        .connectionReleased: "Connection already released", .connectionUnavailable: "Connection unavailable",
        .responseTimeout: "The server's answer timed out", .socketDisconnected: "Socket disconnected",
        .pingTimeout: "PING timeout", .messageTooLarge: "Message larger than 128 KB",
        .connectAckTimeout: "Connection ACK timeout", .wrongAppKey: "Wrong AppKey",
        .serverUnavailable: "Server unavailable", .tokenIncorrect: "Token invalid",
        .appBlockedOrDeleted: "AppKey banned or deleted", .userBlocked: "User banned; connection refused",
        .kickedByOtherClient: "Logged in on another device", .tokenExpired: "Token expired",
        .otherDeviceLogin: "Logged in on another device during reconnect",
        .clientNotInit: "init not called", .databaseError: "Database error", .invalidParameter: "Invalid API parameter",
        .connectionExists: "Connection already exists", .connectTimeout: "Connection timeout",
        .tagUnsupportedConversationType: "Conversation type does not support tags",
        .tagConversationsExceeded: "Too many conversations in a batch tag operation",
        .messageTypeNotRegistered: "Message type not registered", .invalidPushParameter: "Invalid push parameter",
        .userSettingsNotEnabled: "User-level settings not enabled",
        .systemConversationNotWritable: "System conversations do not take this message",
        .messageNotExpandable: "Message cannot be extended", .expansionFailed: "Message extension failed",
        .expansionLimitExceeded: "Message extension too large",
        .developerArgumentInvalid: "Invalid argument passed to an API", .unknown: "Unknown status",
        .mutedInPrivateChat: "Muted for one-to-one chat", .signalingBanned: "Signalling banned",
        .chatroomEntryConflict: "Several clients set the same chatroom attribute",
        .clearHistoryFailed: "Internal error while clearing history", .syncTooFrequent: "Sync failed; operations too frequent",
        .sightServiceNotEnabled: "Short video service not enabled", .navigationSendFailed: "Navigation request not sent",
        .navigationRequestFailed: "Navigation request failed", .navigationResponseInvalid: "Navigation answer malformed",
        .socketCreationFailed: "Socket creation failed", .pingFailed: "PING failed", .signalSendFailed: "Signalling send failed",
        .connectTooFrequent: "Connecting too frequently", .appVerificationFailed: "App verification failed",
        .bundleIdIncorrect: "BundleID incorrect", .bannedWhileOnline: "User banned while online", .userDeactivated: "User deactivated",
        .connectionRefused: "Connection refused; the SDK reconnects", .remoteHistoryDisabled: "History cloud storage not enabled",
        .sightTooLong: "Short video too long", .gifTooLarge: "GIF too large", .wrongEnvironment: "Wrong connection environment",
        .publicServiceNotFound: "Public service does not exist", .mediaUploadFailed: "Media upload failed",
        .videoCompressionFailed: "Video compression failed", .messageProcessingFailed: "Message processing failed",
        .mediaFileMissing: "Media file missing or empty", .mediaFormatUnsupported: "Media format not supported",
        .fileExpired: "File expired or cleaned", .rtcRoomParameterInvalid: "RTC room parameter error",
    ]

    /// What the code means, when it is one of the declared codes.
    public var meaning: String? { Self.catalogue[self] }

    public var description: String { "\(rawValue)" }

    /// Connect results after which a client must not reconnect by itself: the user or the app has
    /// to act (new token, unban, log in again).
    public var isUnrecoverableConnectError: Bool {
        switch self {
        case .tokenIncorrect, .tokenExpired, .userBlocked, .bannedWhileOnline, .userDeactivated, .appBlockedOrDeleted, .kickedByOtherClient,
             .otherDeviceLogin, .wrongAppKey, .invalidParameter:
            return true
        default:
            return false
        }
    }
}

/// An error with a RongCloud status code and a message that says what to do about it.
public struct IMError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
