import IMCore

extension ServerConfig {
    /// Chatrooms.
    public struct ChatroomSettings: SettingsArea {
        public static let title = "Chatrooms"
        public static let summary = "How many chatrooms and members there may be, what they keep, and how they deliver."

        @Setting(key: "chatroomMultipleRooms",
                 perApp: true, doc: "Whether one user may be in several chatrooms at once (RongCloud's \"单个用户加入多个聊天室\"); off, joining a room quits the user's other room.")
        public var multipleRooms = false

        @Setting(key: "chatroomIdleDestroyMinutes", allowed: .range(1...ChatroomLimits.maxIdleDestroyMinutes),
                 perApp: true, doc: "Minutes a chatroom may go without a message, join or quit before it is destroyed.")
        public var idleDestroyMinutes = ChatroomLimits.defaultIdleDestroyMinutes

        @Setting(key: "chatroomHistoryEnabled",
                 perApp: true, doc: "Whether chatroom messages are kept for remote chatroom history (off: history calls fail with 23414).")
        public var historyEnabled = false

        @Setting(key: "chatroomHistoryRetentionDays", allowed: .range(1...36_500),
                 perApp: true, doc: "Days chatroom history is kept (RongCloud's default is 2 months).")
        public var historyRetentionDays = ChatroomLimits.defaultHistoryRetentionDays

        @Setting(key: "chatroomEntriesEnabled",
                 perApp: true, doc: "Whether chatroom attributes (KV entries) are available (off: attribute calls fail with 23426).")
        public var entriesEnabled = true

        @Setting(key: "chatroomMaxMembers", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Members one chatroom may have (23411 beyond); no limit is RongCloud's default.")
        public var maxMembers = 0

        @Setting(key: "chatroomMaxRooms", allowed: .atLeast(0, note: "0 = no limit"),
                 perApp: true, doc: "Chatrooms one app may have at once: past it, a client's join cannot create a room (23410) and the Server API creates none (1002).")
        public var maxRooms = ChatroomLimits.defaultMaxRoomsPerApp

        @Setting(key: "chatroomJoinsPerSecond", allowed: .range(1...1000),
                 perApp: true, doc: "Chatroom joins one client connection may make per second (20607 beyond; an automatic rejoin of an existing room is not counted).")
        public var joinsPerSecond = ChatroomLimits.defaultJoinsPerSecond

        @Setting(key: "chatroomSweepStep", allowed: .range(1...100_000),
                 doc: "Sessions a chatroom's delivery sweep writes per step: a message published during a step waits for the next, and each step waits for its writes; smaller steps let a new message start sooner, larger ones cost fewer hand-offs (see ARCHITECTURE).")
        public var sweepStep = 1_000

        public init() {}
    }
}
