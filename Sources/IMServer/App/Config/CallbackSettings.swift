import Foundation

extension ServerConfig {
    /// Callbacks to the app's server (docs/CALLBACKS.md): how they are sent. Where each goes is per
    /// app, set through the Server API (`/callback/settings/set.json`).
    public struct CallbackSettings: SettingsArea {
        public static let title = "Callbacks"
        public static let summary = "Message routing, online status and chatroom callbacks to the app's server, and the message callback (docs/CALLBACKS.md): timeouts, retries and the backlog's bounds."

        @Setting(key: "callbacksEnabled",
                 doc: "Send callbacks to the apps' servers. Off: none are taken on or sent, and the message callback is not asked.")
        public var enabled = true

        @Setting(key: "callbackRequestTimeoutSeconds", allowed: .range(1...60),
                 doc: "How long a routing, status or chatroom callback may take before it is tried again (RongCloud: 5 s). The message callback has its own per-app timeout.")
        public var requestTimeoutSeconds = 5

        @Setting(key: "callbackRetentionHours", allowed: .range(1...168),
                 doc: "How long a callback the app's server does not take is tried again (backoff from 1 s doubling to 1 min) before it is given up and logged.")
        public var retentionHours = 24

        @Setting(key: "callbackMaxBacklog", allowed: .range(1_000...10_000_000),
                 doc: "Callbacks kept waiting per app while its server does not take them; past it the oldest are given up and logged.")
        public var maxBacklog = 100_000

        public init() {}
    }
}
