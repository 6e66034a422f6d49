import IMCore

extension ServerConfig {
    /// The Server API: its rate limits, signature checks and the links it returns.
    public struct ServerAPISettings: SettingsArea {
        public static let title = "Server API"
        public static let summary = "Rate limits of the Server API (per app; 0 turns a limit off), its signature check and the links it returns."

        @Setting(key: "apiCallsPerSecond", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Calls per second one app may make to one Server API endpoint (1008, HTTP 429 beyond).")
        public var callsPerSecond = APIRateLimits.callsPerSecond

        @Setting(key: "privatePublishPerMinute", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Private messages per minute one app may publish through the Server API, each recipient counted.")
        public var privatePublishPerMinute = APIRateLimits.privateMessagesPerMinute

        @Setting(key: "systemPublishPerSecond", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "System messages per second one app may publish through the Server API, each recipient counted.")
        public var systemPublishPerSecond = APIRateLimits.systemMessagesPerSecond

        @Setting(key: "groupPublishPerSecond", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Group messages per second one app may publish through the Server API, each group counted.")
        public var groupPublishPerSecond = GroupLimits.serverMessagesPerSecond

        @Setting(key: "chatroomPublishPerSecond", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Chatroom messages per second one app may publish through the Server API, each room counted.")
        public var chatroomPublishPerSecond = ChatroomLimits.serverMessagesPerSecond

        @Setting(key: "ultraGroupPublishPerSecond", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Ultra group messages per second one app may publish through the Server API.")
        public var ultraGroupPublishPerSecond = UltraGroupLimits.serverMessagesPerSecond

        @Setting(key: "onlineBroadcastEnabled",
                 perApp: true, doc: "Whether /message/online/broadcast.json is served (RongCloud enables it per app; off, it answers 1009).")
        public var onlineBroadcastEnabled = true

        @Setting(key: "onlineBroadcastsPerMinute", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Online broadcasts per minute one app may send (1008 beyond): each one reaches every online user.")
        public var onlineBroadcastsPerMinute = 60

        @Setting(key: "adminKey", allowed: .bytes(16...256),
                 doc: "The operator's key for the admin API (`/admin/apps`: create, rename, rotate the secret, ban), sent as `Authorization: Bearer <key>`; unset, the admin API is off. Keep it apart from every app's secret.")
        public var adminKey: String? = nil

        @Setting(key: "apiTimestampWindowSeconds", allowed: .range(0...31_536_000, note: "0 = off; at most a year"),
                 doc: "Refuse Server API calls whose timestamp is further than this many seconds from now (1004). Off, a signed call is accepted at any age and can be replayed, because RongCloud's SDKs send seconds or milliseconds and some reuse signatures (see the README on signatures and replay).")
        public var timestampWindowSeconds = 0

        @Setting(key: "publicURL", allowed: .httpURL,
                 doc: "The server's public base URL (e.g. https://im.example.com), used in links the Server API returns; unset, links use the host the caller reached, over http.")
        public var publicURL: String? = nil

        public init() {}
    }
}
