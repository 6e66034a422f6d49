import Foundation
import IMCore
import IMStore

/// An app's callbacks to its server, as RongCloud's console sets them: where each goes and what it
/// includes. Stored per app (`CallbackStore`), changed at runtime through
/// `/callback/settings/set.json`; a callback without a URL is off.
public struct CallbackAppSettings: Sendable, Codable, Equatable {
    /// Full message routing (全量消息路由).
    public struct Routing: Sendable, Codable, Equatable {
        public var url: String
        /// Route messages sent through the Server API too (RongCloud: off unless set).
        public var includeServerAPI = false
        /// Route messages held back by a blocking sensitive word too, with sensitiveType 1
        /// (RongCloud's 「含敏感词消息开启路由」; off unless set).
        public var includeBlocked = false
    }

    /// The message callback (消息回调服务): asked before a message is delivered.
    public struct MessageCallback: Sendable, Codable, Equatable {
        public var url: String
        /// The conversation types asked about (empty: private, group, chatroom and ultra group).
        public var conversationTypes: [ConversationType] = []
        /// The object names asked about (empty: every type).
        public var objectNames: [String] = []
        /// How long a message waits for the answer (RongCloud: 3 s).
        public var timeoutMilliseconds: Int64 = 3_000
        /// What a failed or late answer means: false delivers the message (RongCloud's rule), true
        /// holds it back as a block would.
        public var failClosed = false
        /// Ask about messages sent through the Server API too (RongCloud: off unless set).
        public var includeServerAPI = false

        /// The conversation types RongCloud's message callback covers.
        public static let coveredTypes: Set<ConversationType> = [.private, .group, .chatroom, .ultraGroup]

        func covers(_ type: ConversationType, objectName: String) -> Bool {
            guard conversationTypes.isEmpty ? Self.coveredTypes.contains(type) : conversationTypes.contains(type) else { return false }
            return objectNames.isEmpty || objectNames.contains(objectName)
        }
    }

    public var routing: Routing?
    /// Online status subscription (在线状态订阅).
    public var statusURL: String?
    /// Chatroom status sync (聊天室状态同步).
    public var chatroomStatusURL: String?
    /// Chatroom attribute sync (聊天室属性同步).
    public var chatroomAttributeURL: String?
    /// Deactivation and reactivation results (用户注销结果回调).
    public var deactivationURL: String?
    public var messageCallback: MessageCallback?
    /// Tell the sender's device when its message is held back (RongCloud's 「含敏感词消息屏蔽状态回调发送端」,
    /// the client's messageDidBlock).
    public var blockNotice = false

    public init() {}

    /// The URL records of this kind go to, nil when the app has it off.
    public func url(for kind: CallbackKind) -> String? {
        switch kind {
        case .routing: return routing?.url
        case .status: return statusURL
        case .chatroomStatus: return chatroomStatusURL
        case .chatroomAttribute: return chatroomAttributeURL
        case .deactivation: return deactivationURL
        }
    }

    /// The reason `url` cannot be a callback address, nil when it can: an absolute http or https
    /// URL with a host, at most 1,024 bytes.
    public static func problem(with url: String) -> String? {
        guard url.utf8.count <= 1024 else { return "is longer than 1024 bytes" }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            return "is not a URL"
        }
        guard scheme == "http" || scheme == "https" else { return "must be an http:// or https:// URL, not \(scheme):" }
        guard let host = components.host, !host.isEmpty else { return "has no host" }
        guard components.user == nil, components.password == nil else { return "must not carry a user name or password" }
        guard components.fragment == nil else { return "must not have a #fragment" }
        return nil
    }
}
