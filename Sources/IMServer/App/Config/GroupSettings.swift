import IMCore

extension ServerConfig {
    /// Groups.
    public struct GroupSettings: SettingsArea {
        public static let title = "Groups"
        public static let summary = "The size of groups and what new members read."

        @Setting(key: "maxGroupMembers", allowed: .atLeast(1),
                 perApp: true, doc: "Members one group may have (RongCloud's default is 3000, raised on request).")
        public var maxMembers = GroupLimits.defaultMaxMembers

        @Setting(key: "groupPreJoinHistory", allowed: .atLeast(0, note: "0 = none"),
                 perApp: true, doc: "Messages from before they joined a new group member may read in cloud history: the group's latest N (0: only messages after joining, RongCloud's default).")
        public var preJoinHistory = 0

        public init() {}
    }
}
