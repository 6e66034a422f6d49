import IMCore

extension ServerConfig {
    /// Who may message whom, and what words are filtered.
    public struct ModerationSettings: SettingsArea {
        public static let title = "Moderation"
        public static let summary = "Who may send private messages to whom, and how many words are filtered."

        @Setting(key: "userWhitelistMode",
                 perApp: true, doc: "Whitelist mode: a user receives private messages only from users on their whitelist (407), and blacklists no longer apply. Off by default, as on RongCloud.")
        public var userWhitelistMode = false

        @Setting(key: "maxSensitiveWords", allowed: .atLeast(0),
                 perApp: true, doc: "Sensitive words one app may have.")
        public var maxSensitiveWords = ModerationLimits.maxSensitiveWords

        public init() {}
    }
}
