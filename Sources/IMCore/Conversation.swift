/// RongCloud's conversation types, with their numeric values.
public enum ConversationType: Int, Sendable, Hashable, Codable, CaseIterable {
    case `private` = 1
    case discussion = 2
    case group = 3
    case chatroom = 4
    case customerService = 5
    case system = 6
    case appPublicService = 7
    case publicService = 8
    case pushService = 9
    case ultraGroup = 10

    /// The type's code in RongCloud's notification payloads (`cType` of the `rc` dictionary).
    public var pushCode: String {
        switch self {
        case .private: "PR"
        case .discussion: "DS"
        case .group: "GRP"
        case .system: "SYS"
        case .ultraGroup: "UG"
        case .customerService: "CS"
        case .appPublicService: "MC"
        case .publicService: "MP"
        case .pushService: "PH"
        case .chatroom: "CR"
        }
    }
}

/// RongCloud's `RCConnectionStatus` values, as reported by the client's status stream.
public enum ConnectionStatus: Int, Sendable, Hashable {
    case unknown = -1
    case connected = 0
    case networkUnavailable = 1
    /// The device switched to airplane mode, to a 2G (GPRS/EDGE), a 3G/4G, or a Wi-Fi network
    /// (RongCloud's network-change statuses, spec/system-push-ultra.md §7.1; IMLib learns of no
    /// network change by itself and does not emit them).
    case airplaneMode = 2
    case cellular2G = 3
    case cellular3G4G = 4
    case wifi = 5
    /// Another client of the same platform class logged in; the SDK does not reconnect.
    case kickedOfflineByOtherClient = 6
    /// The user logged in on the Web.
    case loginOnWeb = 7
    /// A server error.
    case serverInvalid = 8
    /// The connection's authentication failed.
    case validateInvalid = 9
    case connecting = 10
    case unconnected = 11
    case signOut = 12
    case suspend = 13
    case timeout = 14
    case tokenIncorrect = 15
    /// The server closed the connection for a reason the SDK cannot recover from (e.g. banned).
    case disconnectException = 16
    case proxyUnavailable = 17
    case userAbandon = 19
}

/// The device kinds a client can connect from.
public enum Platform: Int, Sendable, Hashable, CaseIterable {
    case iOS = 1, android = 2, harmonyOS = 3, web = 4, miniProgram = 5, windows = 6, macOS = 7, linux = 8, electron = 9

    /// The login class: one session per class per user is allowed at a time (spec/imlib-core.md §7.5).
    public var loginClass: LoginClass {
        switch self {
        case .iOS, .android, .harmonyOS: return .mobile
        case .web, .miniProgram: return .web
        case .windows, .macOS, .linux, .electron: return .desktop
        }
    }

    /// The platform this process runs on, for clients that do not name one.
    public static var current: Platform {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return .iOS
        #elseif os(macOS)
        return .macOS
        #elseif os(Windows)
        return .windows
        #else
        return .linux
        #endif
    }
}

/// RongCloud allows one mobile, one desktop and one web session of a user at once by default.
public enum LoginClass: String, Sendable, Hashable {
    case mobile, desktop, web
}

/// How a message is kept, RongCloud's `RCMessagePersistent` bit flags (spec/imlib-core.md §9.4).
public struct PersistentFlag: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Not stored, not counted, but cached offline (commands such as recall).
    public static let none: PersistentFlag = []
    /// Stored in the local database and in cloud history.
    public static let isPersisted = PersistentFlag(rawValue: 1 << 0)
    /// Counted as unread.
    public static let isCounted = PersistentFlag(rawValue: 1 << 1)
    /// A status message: online recipients only, never stored, cached or counted (typing status).
    public static let status = PersistentFlag(rawValue: 1 << 4)

    /// Text-like messages.
    public static let persistedAndCounted: PersistentFlag = [.isPersisted, .isCounted]
}
