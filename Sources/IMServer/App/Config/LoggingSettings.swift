extension ServerConfig {
    /// What the server logs.
    public struct LoggingSettings: SettingsArea {
        public static let title = "Logging"
        public static let summary = "What the server logs."

        @Setting(key: "logLevel", allowed: .oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"]),
                 doc: "The least severe level logged.")
        public var level = "info"

        public init() {}
    }
}
