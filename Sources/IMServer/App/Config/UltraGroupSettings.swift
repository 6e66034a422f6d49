import IMCore

extension ServerConfig {
    /// Ultra groups.
    public struct UltraGroupSettings: SettingsArea {
        public static let title = "Ultra groups"
        public static let summary = "What ultra groups keep and what new members read."

        @Setting(key: "ultraGroupHistoryRetentionDays", allowed: .range(1...36_500),
                 perApp: true, doc: "Days ultra group history is kept (RongCloud's default is 7).")
        public var historyRetentionDays = UltraGroupLimits.defaultHistoryRetentionDays

        @Setting(key: "ultraGroupPreJoinHistory",
                 perApp: true, doc: "Whether a new ultra group member reads the history sent before they joined (off: from their joining).")
        public var preJoinHistory = false

        public init() {}
    }
}
