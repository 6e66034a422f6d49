import IMCore

extension ServerConfig {
    /// What one client connection (a session) must do and may do.
    public struct SessionSettings: SettingsArea {
        public static let title = "Client sessions"
        public static let summary = "What one client connection must do and may do."

        @Setting(key: "handshakeTimeoutSeconds", allowed: .range(1...300),
                 doc: "Seconds a new WebSocket connection has to send its CONNECT frame before it is closed.")
        public var handshakeTimeoutSeconds = 10

        @Setting(key: "heartbeatIntervalSeconds", allowed: .range(1...3600),
                 doc: "Client heartbeat interval in seconds; a connection silent for three intervals is dropped.")
        public var heartbeatIntervalSeconds = 30

        @Setting(key: "clientSendsPerSecond", allowed: .atLeast(1),
                 perApp: true, doc: "Messages one client connection may send per second before getting 20604.")
        public var clientSendsPerSecond = MessageLimits.clientSendsPerSecond

        public init() {}
    }
}
