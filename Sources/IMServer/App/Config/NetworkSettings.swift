import IMCore

extension ServerConfig {
    /// Where the server listens, and what one connection or one source address may hold.
    public struct NetworkSettings: SettingsArea {
        public static let title = "Network"
        public static let summary = "Where the server listens, and what one connection or one source address may hold."

        @Setting(key: "host", allowed: .nonEmpty,
                 doc: "Address to listen on.")
        public var host = "0.0.0.0"

        @Setting(key: "port", allowed: .range(0...65535, note: "0 = any free port"),
                 doc: "Port for HTTP (Server API) and WebSocket (`/ws`).")
        public var port = 8080

        @Setting(key: "maxConnectionsPerAddress", allowed: .range(0...1_000_000, note: "0 = no limit"),
                 doc: "Connections one source address may hold open at once, HTTP and WebSocket; an IPv6 address counts by its /64. Behind a reverse proxy every connection comes from the proxy: set 0 and limit at the proxy. Users behind one carrier NAT or a large office share an address: raise it if they are many.")
        public var maxConnectionsPerAddress = ConnectionLimits.defaultMaxConnectionsPerAddress

        @Setting(key: "maxQueuedBytesPerConnection",
                 allowed: .range(ConnectionLimits.queuedBytesRange, note: "8 MB to 1 GB, two 4 MB frames at least"),
                 doc: "Bytes waiting to be written to one connection before it is closed as a slow reader (its queue let go; the client reconnects and syncs). A client that is syncing has at most half of it, less one page, held back for it.")
        public var maxQueuedBytesPerConnection = ConnectionLimits.defaultMaxQueuedBytes

        @Setting(key: "httpIdleTimeoutSeconds", allowed: .range(1...3600),
                 doc: "Seconds an HTTP connection may sit idle between requests, and the most a request's head may take to arrive, before it is closed.")
        public var httpIdleTimeoutSeconds = ConnectionLimits.defaultHTTPIdleTimeoutSeconds

        @Setting(key: "httpRequestTimeoutSeconds", allowed: .range(1...3600),
                 doc: "Seconds a request's body may take to arrive after its head, and one more for each 64 KiB of body that arrives (a large upload goes on while it keeps that pace); later, it gets HTTP 408 (1003) and the connection is closed.")
        public var httpRequestTimeoutSeconds = ConnectionLimits.defaultHTTPRequestTimeoutSeconds

        @Setting(key: "closeTimeoutSeconds", allowed: .range(0...300),
                 doc: "Seconds a connection the server closes (kick, heartbeat or handshake timeout) has to answer the WebSocket close before its TCP connection is dropped.")
        public var closeTimeoutSeconds = ConnectionLimits.defaultCloseTimeoutSeconds

        @Setting(key: "shutdownTimeoutSeconds", allowed: .range(1...3600),
                 doc: "Seconds a graceful shutdown (SIGTERM, SIGINT) may take: the sessions close with 1001 and the message log drains; past it, what still runs is cancelled.")
        public var shutdownTimeoutSeconds = 25

        public init() {}
    }
}
