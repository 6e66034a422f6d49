extension ServerConfig {
    /// What the server logs.
    public struct LoggingSettings: SettingsArea {
        public static let title = "Logging"
        public static let summary = "What the server logs."

        @Setting(key: "logLevel", allowed: .oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"]),
                 doc: "The least severe level logged.")
        public var level = "info"

        @Setting(key: "logFormat", allowed: .oneOf(["text", "json"]),
                 doc: "text: one readable line per event; json: one JSON object per line (time, level, label, message, source and the event's ids: user, session, msgUID, requestId), for log collectors.")
        public var format = "text"

        @Setting(key: "metricsEnabled",
                 doc: "Whether the server counts what it does and serves it at /metrics in Prometheus's format (off: /metrics answers 404).")
        public var metricsEnabled = true

        public init() {}
    }
}
