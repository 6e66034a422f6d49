import IMCore

extension ServerConfig {
    /// How long messages wait for their recipients, how they are synced and recalled.
    public struct MessagingSettings: SettingsArea {
        public static let title = "Messages"
        public static let summary = "How long offline messages wait, how they are synced, and how long a message may be recalled."

        @Setting(key: "offlineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 doc: "Days an offline private or group message waits for its recipient.")
        public var offlineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "systemOfflineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 doc: "Days an offline system message (Server API system publish, `/push.json`, broadcasts) waits for its recipient, set apart from private and group messages as RongCloud does.")
        public var systemOfflineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "syncPageSize", allowed: .range(1...1000),
                 doc: "Offline messages per sync page.")
        public var syncPageSize = 200

        @Setting(key: "recallWindowSeconds", allowed: .range(0...31_536_000, note: "0 = no limit; at most a year"),
                 doc: "Seconds after sending during which a client may recall its message (RongCloud's default is 2 minutes).")
        public var recallWindowSeconds = RecallLimits.defaultWindowSeconds

        public init() {}
    }
}
