extension ServerConfig {
    /// Where the data is kept.
    public struct StorageSettings: SettingsArea {
        public static let title = "Storage"
        public static let summary = "Where the embedded database (SQLite) is kept."

        @Setting(key: "dataDir", allowed: .nonEmpty,
                 doc: "Directory of the embedded database; made if missing.")
        public var dataDir = "./data"

        public init() {}
    }
}
