extension ServerConfig {
    /// Where the data is kept.
    public struct StorageSettings: SettingsArea {
        public static let title = "Storage"
        public static let summary = "Where the data is kept: the embedded database (SQLite) in a directory, or a PostgreSQL database."

        @Setting(key: "dataDir", allowed: .nonEmpty,
                 doc: "Directory of the embedded database (imserver.sqlite, and imserver-push.sqlite for the push records: back up both); made if missing.")
        public var dataDir = "./data"

        /// The variable says what it holds (a URL, as other servers name theirs), so it is not the
        /// IMSERVER_DATABASE the key would give.
        @Setting(key: "database",
                 allowed: Allowed("empty (the embedded database in dataDir), or a postgres:// or postgresql:// URL") {
                     $0.isEmpty || $0.hasPrefix("postgres://") || $0.hasPrefix("postgresql://")
                 },
                 environmentVariable: "IMSERVER_DATABASE_URL",
                 doc: "PostgreSQL database to keep everything in, postgres://USER[:PASSWORD]@HOST[:PORT]/DB (several servers may share one; docs/POSTGRES.md); empty keeps the embedded database in dataDir.")
        public var database = ""

        public init() {}
    }
}
