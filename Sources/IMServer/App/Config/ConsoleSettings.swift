extension ServerConfig {
    /// The operator console at `/console`.
    public struct ConsoleSettings: SettingsArea {
        public static let title = "Console"
        public static let summary = "The operator console at /console (docs/CONSOLE.md): its operator's password and sessions."

        @Setting(key: "consoleEnabled",
                 doc: "Serve the operator console at /console. Off, /console answers 404 and only the admin key reaches the admin API.")
        public var enabled = true

        @Setting(key: "consolePassword", allowed: .bytes(10...256),
                 doc: "The console operator's (`admin`) password, stored hashed at start (it replaces the one stored). Unset, the password stays as stored; at the first start a random one is made and printed once.")
        public var password: String? = nil

        @Setting(key: "consoleSessionMinutes", allowed: .range(5...10_080),
                 doc: "Minutes a console login lasts before the operator signs in again.")
        public var sessionMinutes = 480

        @Setting(key: "consoleLoginAttempts", allowed: .range(1...100),
                 doc: "Failed console logins one address may make in 15 minutes; further attempts are refused (1008) until the oldest failure is 15 minutes old.")
        public var loginAttempts = 5

        public init() {}
    }
}
