import Foundation
import IMCore
import IMStore

/// All of the server's settings, with their defaults. Filled from a JSON config file, then
/// `IMSERVER_*` environment variables, then command-line flags (later sources win).
public struct ServerConfig: Sendable, Codable, Equatable {
    /// Address to listen on.
    public var host: String = "0.0.0.0"
    /// Port for HTTP (Server API) and WebSocket (`/ws`); 0 picks a free port.
    public var port: Int = 8080
    /// Directory of the embedded database.
    public var dataDir: String = "./data"
    /// The development app's key and secret. Unset: generated once and kept in the database.
    public var appKey: String?
    public var appSecret: String?
    /// Days an offline message waits for its recipient (1-7).
    public var offlineRetentionDays: Int = MessageLimits.defaultOfflineRetentionDays
    /// Days an offline system message (Server API system publish, `/push.json`, broadcast) waits
    /// for its recipient (1-7), set apart from private and group messages as RongCloud does.
    public var systemOfflineRetentionDays: Int = MessageLimits.defaultOfflineRetentionDays
    /// Client heartbeat interval; a connection silent for three intervals is dropped.
    public var heartbeatIntervalSeconds: Int = 30
    /// Messages one client connection may send per second before getting 20604.
    public var clientSendsPerSecond: Int = MessageLimits.clientSendsPerSecond
    /// Offline messages per sync page.
    public var syncPageSize: Int = 200
    /// Seconds a new WebSocket connection has to send its CONNECT frame.
    public var handshakeTimeoutSeconds: Int = 10
    /// Bytes waiting to be written to one connection before it is treated as a slow reader and
    /// closed (its queue is dropped); at least two 4 MB frames. A client that is syncing has held
    /// back for it at most half of this, less one page (`ConnectionLimits.heldBytes`).
    public var maxQueuedBytesPerConnection: Int = ConnectionLimits.defaultMaxQueuedBytes
    /// Connections one source address may hold open at once (HTTP and WebSocket); 0 = no limit.
    /// Behind a reverse proxy every connection comes from the proxy: set 0 and limit at the proxy.
    public var maxConnectionsPerAddress: Int = ConnectionLimits.defaultMaxConnectionsPerAddress
    /// Seconds an HTTP connection may sit idle between requests, and the most a request's head may
    /// take to arrive, before it is closed.
    public var httpIdleTimeoutSeconds: Int = ConnectionLimits.defaultHTTPIdleTimeoutSeconds
    /// Seconds a Server API request's body may take to arrive (408 and the connection closed after).
    public var httpRequestTimeoutSeconds: Int = ConnectionLimits.defaultHTTPRequestTimeoutSeconds
    /// Seconds a connection the server closes (kick, heartbeat or handshake timeout) gets to answer
    /// the WebSocket close before its TCP connection is dropped.
    public var closeTimeoutSeconds: Int = ConnectionLimits.defaultCloseTimeoutSeconds
    /// Seconds a graceful shutdown (SIGTERM, SIGINT) may take: the requests under way finish, the
    /// client sessions close, the message log is drained and the store closed. Past it, what is
    /// still running is cancelled (messages not yet committed are answered with an error, never
    /// acknowledged). Below the 30 s a container orchestrator commonly waits before SIGKILL.
    public var shutdownTimeoutSeconds: Int = 25
    /// Check Server API timestamps: refuse requests older than this many seconds (0 = off; the
    /// official SDKs send seconds or milliseconds and some reuse signatures, spec/server-api.md §2).
    public var apiTimestampWindowSeconds: Int = 0
    /// Log level: trace, debug, info, notice, warning, error, critical.
    public var logLevel: String = "info"
    /// Whitelist mode: a user receives private messages only from users on their whitelist (407),
    /// and blacklists no longer apply. Off by default, as on RongCloud (spec/imlib-core.md §6).
    public var userWhitelistMode: Bool = false
    /// Members one group may have (RongCloud's default is 3000, raised on request).
    public var maxGroupMembers: Int = GroupLimits.defaultMaxMembers
    /// Pre-join history: a new group member may read this many of the group's latest messages from
    /// before they joined in cloud history (0: only messages after joining, RongCloud's default).
    public var groupPreJoinHistory: Int = 0
    /// Seconds after sending during which a client may recall its message (RongCloud's default
    /// is 2 minutes; 0: no limit).
    public var recallWindowSeconds: Int = RecallLimits.defaultWindowSeconds
    /// Group messages per second one app may publish through the Server API (each group counts).
    public var groupPublishPerSecond: Int = GroupLimits.serverMessagesPerSecond
    /// Sensitive words one app may have.
    public var maxSensitiveWords: Int = ModerationLimits.maxSensitiveWords
    /// Calls per second one app may make to one Server API endpoint (1008 beyond; 0 = unlimited).
    public var apiCallsPerSecond: Int = APIRateLimits.callsPerSecond
    /// Private messages per minute one app may publish through the Server API (each recipient counts).
    public var privatePublishPerMinute: Int = APIRateLimits.privateMessagesPerMinute
    /// System messages per second one app may publish through the Server API (each recipient counts).
    public var systemPublishPerSecond: Int = APIRateLimits.systemMessagesPerSecond
    /// The server's public base URL (e.g. https://im.example.com), used in links the Server API
    /// returns; unset: the scheme-less host the caller reached, over http.
    public var publicURL: String?
    /// Whether one user may be in several chatrooms at once (RongCloud's "单个用户加入多个聊天室",
    /// off by default: joining a room quits the user's other room).
    public var chatroomMultipleRooms: Bool = false
    /// Minutes a chatroom may go without a message, join or quit before it is destroyed (1...1440).
    public var chatroomIdleDestroyMinutes: Int = ChatroomLimits.defaultIdleDestroyMinutes
    /// Whether chatroom messages are kept in the store for remote chatroom history (off: 23414).
    public var chatroomHistoryEnabled: Bool = false
    /// Days chatroom history is kept (RongCloud's default is 2 months).
    public var chatroomHistoryRetentionDays: Int = ChatroomLimits.defaultHistoryRetentionDays
    /// Whether chatroom attributes (KV) are available (off: 23426).
    public var chatroomEntriesEnabled: Bool = true
    /// Members one chatroom may have (23411 beyond); 0 = no limit, RongCloud's default.
    public var chatroomMaxMembers: Int = 0
    /// Sessions a chatroom's delivery sweep writes per step (1...100,000): a message published
    /// during a step waits for the next, and each step waits for its writes (see ARCHITECTURE).
    public var chatroomSweepStep: Int = 1_000
    /// Chatroom messages per second one app may publish through the Server API (each room counts).
    public var chatroomPublishPerSecond: Int = ChatroomLimits.serverMessagesPerSecond
    /// Days ultra group history is kept (RongCloud's default is 7).
    public var ultraGroupHistoryRetentionDays: Int = UltraGroupLimits.defaultHistoryRetentionDays
    /// Whether a new ultra group member reads the history sent before they joined (off by default).
    public var ultraGroupPreJoinHistory: Bool = false
    /// Ultra group messages per second one app may publish through the Server API.
    public var ultraGroupPublishPerSecond: Int = UltraGroupLimits.serverMessagesPerSecond
    /// Chatroom joins one client connection may make per second (20607 beyond).
    public var chatroomJoinsPerSecond: Int = ChatroomLimits.defaultJoinsPerSecond
    /// Chatrooms one app may have at once (0 = no limit): past it, a client's join cannot create a
    /// room (23410) and the Server API creates none (1002).
    public var chatroomMaxRooms: Int = ChatroomLimits.defaultMaxRoomsPerApp

    public init() {}

    /// Checks every value and says which one is wrong and what is allowed.
    public func validate() throws {
        func fail(_ message: String) -> IMError { IMError(.invalidParameter, message) }
        guard (0...65535).contains(port) else { throw fail("port must be 0...65535, got \(port)") }
        guard MessageLimits.offlineRetentionDayRange.contains(offlineRetentionDays) else {
            throw fail("offlineRetentionDays must be 1...7, got \(offlineRetentionDays)")
        }
        guard MessageLimits.offlineRetentionDayRange.contains(systemOfflineRetentionDays) else {
            throw fail("systemOfflineRetentionDays must be 1...7 (days an offline system message is kept), got \(systemOfflineRetentionDays)")
        }
        guard (1...3600).contains(heartbeatIntervalSeconds) else { throw fail("heartbeatIntervalSeconds must be 1...3600, got \(heartbeatIntervalSeconds)") }
        guard (1...300).contains(handshakeTimeoutSeconds) else { throw fail("handshakeTimeoutSeconds must be 1...300, got \(handshakeTimeoutSeconds)") }
        guard (0...31_536_000).contains(apiTimestampWindowSeconds) else {
            throw fail("apiTimestampWindowSeconds must be 0 (off) to 31536000 (a year), got \(apiTimestampWindowSeconds)")
        }
        guard ConnectionLimits.queuedBytesRange.contains(maxQueuedBytesPerConnection) else {
            throw fail("maxQueuedBytesPerConnection must be \(ConnectionLimits.queuedBytesRange.lowerBound)...\(ConnectionLimits.queuedBytesRange.upperBound) (two 4 MB frames), got \(maxQueuedBytesPerConnection)")
        }
        guard (0...1_000_000).contains(maxConnectionsPerAddress) else {
            throw fail("maxConnectionsPerAddress must be 0 (no limit) to 1000000, got \(maxConnectionsPerAddress)")
        }
        guard (1...3600).contains(httpIdleTimeoutSeconds) else { throw fail("httpIdleTimeoutSeconds must be 1...3600, got \(httpIdleTimeoutSeconds)") }
        guard (1...3600).contains(httpRequestTimeoutSeconds) else { throw fail("httpRequestTimeoutSeconds must be 1...3600, got \(httpRequestTimeoutSeconds)") }
        guard (0...300).contains(closeTimeoutSeconds) else { throw fail("closeTimeoutSeconds must be 0...300, got \(closeTimeoutSeconds)") }
        guard (1...3600).contains(shutdownTimeoutSeconds) else { throw fail("shutdownTimeoutSeconds must be 1...3600, got \(shutdownTimeoutSeconds)") }
        guard (1...1000).contains(chatroomJoinsPerSecond) else { throw fail("chatroomJoinsPerSecond must be 1...1000, got \(chatroomJoinsPerSecond)") }
        guard chatroomMaxRooms >= 0 else { throw fail("chatroomMaxRooms must not be negative (0 means no limit)") }
        guard clientSendsPerSecond >= 1 else { throw fail("clientSendsPerSecond must be at least 1") }
        guard (1...1000).contains(syncPageSize) else { throw fail("syncPageSize must be 1...1000, got \(syncPageSize)") }
        if let appKey, !(1...64).contains(appKey.utf8.count) { throw fail("appKey must be 1 to 64 bytes") }
        if let appSecret, !(1...64).contains(appSecret.utf8.count) { throw fail("appSecret must be 1 to 64 bytes") }
        guard maxGroupMembers >= 1 else { throw fail("maxGroupMembers must be at least 1") }
        guard (0...31_536_000).contains(recallWindowSeconds) else {
            throw fail("recallWindowSeconds must be 0 (no limit) to 31536000 (a year), got \(recallWindowSeconds)")
        }
        guard groupPreJoinHistory >= 0 else { throw fail("groupPreJoinHistory must not be negative (0 shows no pre-join history)") }
        guard maxSensitiveWords >= 0 else { throw fail("maxSensitiveWords must not be negative") }
        guard (1...ChatroomLimits.maxIdleDestroyMinutes).contains(chatroomIdleDestroyMinutes) else {
            throw fail("chatroomIdleDestroyMinutes must be 1...\(ChatroomLimits.maxIdleDestroyMinutes), got \(chatroomIdleDestroyMinutes)")
        }
        guard (1...36_500).contains(chatroomHistoryRetentionDays) else { throw fail("chatroomHistoryRetentionDays must be 1...36500, got \(chatroomHistoryRetentionDays)") }
        guard (1...36_500).contains(ultraGroupHistoryRetentionDays) else {
            throw fail("ultraGroupHistoryRetentionDays must be 1...36500, got \(ultraGroupHistoryRetentionDays)")
        }
        guard (1...100_000).contains(chatroomSweepStep) else { throw fail("chatroomSweepStep must be 1...100000, got \(chatroomSweepStep)") }
        guard chatroomMaxMembers >= 0 else { throw fail("chatroomMaxMembers must not be negative (0 means no limit)") }
        guard apiCallsPerSecond >= 0, privatePublishPerMinute >= 0, systemPublishPerSecond >= 0, groupPublishPerSecond >= 0,
              chatroomPublishPerSecond >= 0, ultraGroupPublishPerSecond >= 0 else {
            throw fail("Server API rate limits must not be negative (0 turns a limit off)")
        }
    }

    /// Applies `IMSERVER_*` environment variables (e.g. IMSERVER_PORT, IMSERVER_APP_KEY).
    public mutating func apply(environment: [String: String]) throws {
        func int(_ name: String) throws -> Int? {
            guard let text = environment[name] else { return nil }
            guard let value = Int(text) else { throw IMError(.invalidParameter, "\(name) must be a whole number, got '\(text)'") }
            return value
        }
        if let value = environment["IMSERVER_HOST"] { host = value }
        if let value = try int("IMSERVER_PORT") { port = value }
        if let value = environment["IMSERVER_DATA_DIR"] { dataDir = value }
        if let value = environment["IMSERVER_APP_KEY"] { appKey = value }
        if let value = environment["IMSERVER_APP_SECRET"] { appSecret = value }
        if let value = try int("IMSERVER_OFFLINE_RETENTION_DAYS") { offlineRetentionDays = value }
        if let value = try int("IMSERVER_SYSTEM_OFFLINE_RETENTION_DAYS") { systemOfflineRetentionDays = value }
        if let value = try int("IMSERVER_HEARTBEAT_INTERVAL_SECONDS") { heartbeatIntervalSeconds = value }
        if let value = try int("IMSERVER_CLIENT_SENDS_PER_SECOND") { clientSendsPerSecond = value }
        if let value = environment["IMSERVER_LOG_LEVEL"] { logLevel = value }
        if let value = environment["IMSERVER_USER_WHITELIST_MODE"] { userWhitelistMode = ["1", "true", "yes"].contains(value.lowercased()) }
        if let value = try int("IMSERVER_MAX_GROUP_MEMBERS") { maxGroupMembers = value }
        if let value = try int("IMSERVER_GROUP_PRE_JOIN_HISTORY") { groupPreJoinHistory = value }
        if let value = try int("IMSERVER_RECALL_WINDOW_SECONDS") { recallWindowSeconds = value }
        if let value = try int("IMSERVER_API_CALLS_PER_SECOND") { apiCallsPerSecond = value }
        if let value = try int("IMSERVER_GROUP_PUBLISH_PER_SECOND") { groupPublishPerSecond = value }
        if let value = try int("IMSERVER_CHATROOM_PUBLISH_PER_SECOND") { chatroomPublishPerSecond = value }
        if let value = environment["IMSERVER_PUBLIC_URL"] { publicURL = value }
        func bool(_ name: String) -> Bool? { environment[name].map { ["1", "true", "yes"].contains($0.lowercased()) } }
        if let value = bool("IMSERVER_CHATROOM_MULTIPLE_ROOMS") { chatroomMultipleRooms = value }
        if let value = try int("IMSERVER_CHATROOM_IDLE_DESTROY_MINUTES") { chatroomIdleDestroyMinutes = value }
        if let value = bool("IMSERVER_CHATROOM_HISTORY_ENABLED") { chatroomHistoryEnabled = value }
        if let value = try int("IMSERVER_CHATROOM_HISTORY_RETENTION_DAYS") { chatroomHistoryRetentionDays = value }
        if let value = bool("IMSERVER_CHATROOM_ENTRIES_ENABLED") { chatroomEntriesEnabled = value }
        if let value = try int("IMSERVER_CHATROOM_MAX_MEMBERS") { chatroomMaxMembers = value }
        if let value = try int("IMSERVER_CHATROOM_SWEEP_STEP") { chatroomSweepStep = value }
        if let value = try int("IMSERVER_ULTRA_GROUP_HISTORY_RETENTION_DAYS") { ultraGroupHistoryRetentionDays = value }
        if let value = bool("IMSERVER_ULTRA_GROUP_PRE_JOIN_HISTORY") { ultraGroupPreJoinHistory = value }
        if let value = try int("IMSERVER_ULTRA_GROUP_PUBLISH_PER_SECOND") { ultraGroupPublishPerSecond = value }
        if let value = try int("IMSERVER_HANDSHAKE_TIMEOUT_SECONDS") { handshakeTimeoutSeconds = value }
        if let value = try int("IMSERVER_MAX_QUEUED_BYTES_PER_CONNECTION") { maxQueuedBytesPerConnection = value }
        if let value = try int("IMSERVER_MAX_CONNECTIONS_PER_ADDRESS") { maxConnectionsPerAddress = value }
        if let value = try int("IMSERVER_HTTP_IDLE_TIMEOUT_SECONDS") { httpIdleTimeoutSeconds = value }
        if let value = try int("IMSERVER_HTTP_REQUEST_TIMEOUT_SECONDS") { httpRequestTimeoutSeconds = value }
        if let value = try int("IMSERVER_CLOSE_TIMEOUT_SECONDS") { closeTimeoutSeconds = value }
        if let value = try int("IMSERVER_SHUTDOWN_TIMEOUT_SECONDS") { shutdownTimeoutSeconds = value }
        if let value = try int("IMSERVER_CHATROOM_JOINS_PER_SECOND") { chatroomJoinsPerSecond = value }
        if let value = try int("IMSERVER_CHATROOM_MAX_ROOMS") { chatroomMaxRooms = value }
        if let value = try int("IMSERVER_API_TIMESTAMP_WINDOW_SECONDS") { apiTimestampWindowSeconds = value }
    }

    /// Reads a JSON config file; keys are the property names above.
    public static func load(file path: String) throws -> ServerConfig {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw IMError(.invalidParameter, "cannot read config file \(path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(ServerConfig.self, from: data)
        } catch {
            throw IMError(.invalidParameter, "config file \(path) is not valid: \(error)")
        }
    }

    enum CodingKeys: String, CodingKey {
        case host, port, dataDir, appKey, appSecret, offlineRetentionDays, systemOfflineRetentionDays, heartbeatIntervalSeconds,
             clientSendsPerSecond, syncPageSize, handshakeTimeoutSeconds, maxQueuedBytesPerConnection, maxConnectionsPerAddress,
             httpIdleTimeoutSeconds, httpRequestTimeoutSeconds, closeTimeoutSeconds, shutdownTimeoutSeconds, chatroomJoinsPerSecond, chatroomMaxRooms,
             apiTimestampWindowSeconds, logLevel, userWhitelistMode, maxGroupMembers, maxSensitiveWords,
             apiCallsPerSecond, privatePublishPerMinute, systemPublishPerSecond, publicURL, groupPreJoinHistory, recallWindowSeconds,
             groupPublishPerSecond, chatroomMultipleRooms, chatroomIdleDestroyMinutes, chatroomHistoryEnabled,
             chatroomHistoryRetentionDays, chatroomEntriesEnabled, chatroomMaxMembers, chatroomSweepStep, chatroomPublishPerSecond,
             ultraGroupHistoryRetentionDays, ultraGroupPreJoinHistory, ultraGroupPublishPerSecond
    }

    /// Keys of earlier versions that no longer mean anything, with what replaced them.
    private struct ObsoleteKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
        static let replacements = [
            "maxQueuedFramesPerConnection": "maxQueuedBytesPerConnection (a slow reader is now measured in bytes)",
        ]
    }

    public init(from decoder: any Decoder) throws {
        let obsolete = try decoder.container(keyedBy: ObsoleteKey.self)
        for (key, replacement) in ObsoleteKey.replacements where obsolete.contains(ObsoleteKey(stringValue: key)) {
            throw IMError(.invalidParameter, "\(key) is no longer a setting: use \(replacement)")
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = ServerConfig()
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? d.host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? d.port
        dataDir = try c.decodeIfPresent(String.self, forKey: .dataDir) ?? d.dataDir
        appKey = try c.decodeIfPresent(String.self, forKey: .appKey)
        appSecret = try c.decodeIfPresent(String.self, forKey: .appSecret)
        offlineRetentionDays = try c.decodeIfPresent(Int.self, forKey: .offlineRetentionDays) ?? d.offlineRetentionDays
        systemOfflineRetentionDays = try c.decodeIfPresent(Int.self, forKey: .systemOfflineRetentionDays) ?? d.systemOfflineRetentionDays
        heartbeatIntervalSeconds = try c.decodeIfPresent(Int.self, forKey: .heartbeatIntervalSeconds) ?? d.heartbeatIntervalSeconds
        clientSendsPerSecond = try c.decodeIfPresent(Int.self, forKey: .clientSendsPerSecond) ?? d.clientSendsPerSecond
        syncPageSize = try c.decodeIfPresent(Int.self, forKey: .syncPageSize) ?? d.syncPageSize
        handshakeTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .handshakeTimeoutSeconds) ?? d.handshakeTimeoutSeconds
        maxQueuedBytesPerConnection = try c.decodeIfPresent(Int.self, forKey: .maxQueuedBytesPerConnection) ?? d.maxQueuedBytesPerConnection
        maxConnectionsPerAddress = try c.decodeIfPresent(Int.self, forKey: .maxConnectionsPerAddress) ?? d.maxConnectionsPerAddress
        httpIdleTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .httpIdleTimeoutSeconds) ?? d.httpIdleTimeoutSeconds
        httpRequestTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .httpRequestTimeoutSeconds) ?? d.httpRequestTimeoutSeconds
        closeTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .closeTimeoutSeconds) ?? d.closeTimeoutSeconds
        shutdownTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .shutdownTimeoutSeconds) ?? d.shutdownTimeoutSeconds
        chatroomJoinsPerSecond = try c.decodeIfPresent(Int.self, forKey: .chatroomJoinsPerSecond) ?? d.chatroomJoinsPerSecond
        chatroomMaxRooms = try c.decodeIfPresent(Int.self, forKey: .chatroomMaxRooms) ?? d.chatroomMaxRooms
        apiTimestampWindowSeconds = try c.decodeIfPresent(Int.self, forKey: .apiTimestampWindowSeconds) ?? d.apiTimestampWindowSeconds
        logLevel = try c.decodeIfPresent(String.self, forKey: .logLevel) ?? d.logLevel
        userWhitelistMode = try c.decodeIfPresent(Bool.self, forKey: .userWhitelistMode) ?? d.userWhitelistMode
        maxGroupMembers = try c.decodeIfPresent(Int.self, forKey: .maxGroupMembers) ?? d.maxGroupMembers
        maxSensitiveWords = try c.decodeIfPresent(Int.self, forKey: .maxSensitiveWords) ?? d.maxSensitiveWords
        apiCallsPerSecond = try c.decodeIfPresent(Int.self, forKey: .apiCallsPerSecond) ?? d.apiCallsPerSecond
        privatePublishPerMinute = try c.decodeIfPresent(Int.self, forKey: .privatePublishPerMinute) ?? d.privatePublishPerMinute
        systemPublishPerSecond = try c.decodeIfPresent(Int.self, forKey: .systemPublishPerSecond) ?? d.systemPublishPerSecond
        publicURL = try c.decodeIfPresent(String.self, forKey: .publicURL)
        groupPreJoinHistory = try c.decodeIfPresent(Int.self, forKey: .groupPreJoinHistory) ?? d.groupPreJoinHistory
        recallWindowSeconds = try c.decodeIfPresent(Int.self, forKey: .recallWindowSeconds) ?? d.recallWindowSeconds
        groupPublishPerSecond = try c.decodeIfPresent(Int.self, forKey: .groupPublishPerSecond) ?? d.groupPublishPerSecond
        chatroomMultipleRooms = try c.decodeIfPresent(Bool.self, forKey: .chatroomMultipleRooms) ?? d.chatroomMultipleRooms
        chatroomIdleDestroyMinutes = try c.decodeIfPresent(Int.self, forKey: .chatroomIdleDestroyMinutes) ?? d.chatroomIdleDestroyMinutes
        chatroomHistoryEnabled = try c.decodeIfPresent(Bool.self, forKey: .chatroomHistoryEnabled) ?? d.chatroomHistoryEnabled
        chatroomHistoryRetentionDays = try c.decodeIfPresent(Int.self, forKey: .chatroomHistoryRetentionDays) ?? d.chatroomHistoryRetentionDays
        chatroomEntriesEnabled = try c.decodeIfPresent(Bool.self, forKey: .chatroomEntriesEnabled) ?? d.chatroomEntriesEnabled
        chatroomMaxMembers = try c.decodeIfPresent(Int.self, forKey: .chatroomMaxMembers) ?? d.chatroomMaxMembers
        chatroomSweepStep = try c.decodeIfPresent(Int.self, forKey: .chatroomSweepStep) ?? d.chatroomSweepStep
        chatroomPublishPerSecond = try c.decodeIfPresent(Int.self, forKey: .chatroomPublishPerSecond) ?? d.chatroomPublishPerSecond
        ultraGroupHistoryRetentionDays = try c.decodeIfPresent(Int.self, forKey: .ultraGroupHistoryRetentionDays) ?? d.ultraGroupHistoryRetentionDays
        ultraGroupPreJoinHistory = try c.decodeIfPresent(Bool.self, forKey: .ultraGroupPreJoinHistory) ?? d.ultraGroupPreJoinHistory
        ultraGroupPublishPerSecond = try c.decodeIfPresent(Int.self, forKey: .ultraGroupPublishPerSecond) ?? d.ultraGroupPublishPerSecond
    }
}
