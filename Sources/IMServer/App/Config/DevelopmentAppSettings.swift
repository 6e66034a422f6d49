import IMCore

extension ServerConfig {
    /// The app the server makes sure exists when it starts.
    public struct DevelopmentAppSettings: SettingsArea {
        public static let title = "Development app"
        public static let summary = "The app the server makes sure exists at start. More apps: `imserver app create --name myapp`; `imserver app list`."

        @Setting(key: "appKey", allowed: .bytes(1...64),
                 doc: "Fix the development app's key. Unset: the first app in the database, or a new one generated once and kept.")
        public var key: String? = nil

        @Setting(key: "appSecret", allowed: .bytes(1...64),
                 doc: "Fix the development app's secret. Unset: the kept secret, or a new random one.")
        public var secret: String? = nil

        public init() {}
    }
}
