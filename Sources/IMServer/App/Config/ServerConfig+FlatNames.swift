// The settings' flat names from before they were grouped by area, kept while the call sites move
// to the areas' names.

extension ServerConfig {
    public var host: String { get { network.host } set { network.host = newValue } }
    public var port: Int { get { network.port } set { network.port = newValue } }
    public var maxConnectionsPerAddress: Int { get { network.maxConnectionsPerAddress } set { network.maxConnectionsPerAddress = newValue } }
    public var maxQueuedBytesPerConnection: Int { get { network.maxQueuedBytesPerConnection } set { network.maxQueuedBytesPerConnection = newValue } }
    public var httpIdleTimeoutSeconds: Int { get { network.httpIdleTimeoutSeconds } set { network.httpIdleTimeoutSeconds = newValue } }
    public var httpRequestTimeoutSeconds: Int { get { network.httpRequestTimeoutSeconds } set { network.httpRequestTimeoutSeconds = newValue } }
    public var closeTimeoutSeconds: Int { get { network.closeTimeoutSeconds } set { network.closeTimeoutSeconds = newValue } }
    public var handshakeTimeoutSeconds: Int { get { session.handshakeTimeoutSeconds } set { session.handshakeTimeoutSeconds = newValue } }
    public var heartbeatIntervalSeconds: Int { get { session.heartbeatIntervalSeconds } set { session.heartbeatIntervalSeconds = newValue } }
    public var clientSendsPerSecond: Int { get { session.clientSendsPerSecond } set { session.clientSendsPerSecond = newValue } }
    public var offlineRetentionDays: Int { get { messaging.offlineRetentionDays } set { messaging.offlineRetentionDays = newValue } }
    public var systemOfflineRetentionDays: Int { get { messaging.systemOfflineRetentionDays } set { messaging.systemOfflineRetentionDays = newValue } }
    public var syncPageSize: Int { get { messaging.syncPageSize } set { messaging.syncPageSize = newValue } }
    public var recallWindowSeconds: Int { get { messaging.recallWindowSeconds } set { messaging.recallWindowSeconds = newValue } }
    public var maxGroupMembers: Int { get { groups.maxMembers } set { groups.maxMembers = newValue } }
    public var groupPreJoinHistory: Int { get { groups.preJoinHistory } set { groups.preJoinHistory = newValue } }
    public var chatroomMultipleRooms: Bool { get { chatrooms.multipleRooms } set { chatrooms.multipleRooms = newValue } }
    public var chatroomIdleDestroyMinutes: Int { get { chatrooms.idleDestroyMinutes } set { chatrooms.idleDestroyMinutes = newValue } }
    public var chatroomHistoryEnabled: Bool { get { chatrooms.historyEnabled } set { chatrooms.historyEnabled = newValue } }
    public var chatroomHistoryRetentionDays: Int { get { chatrooms.historyRetentionDays } set { chatrooms.historyRetentionDays = newValue } }
    public var chatroomEntriesEnabled: Bool { get { chatrooms.entriesEnabled } set { chatrooms.entriesEnabled = newValue } }
    public var chatroomMaxMembers: Int { get { chatrooms.maxMembers } set { chatrooms.maxMembers = newValue } }
    public var chatroomMaxRooms: Int { get { chatrooms.maxRooms } set { chatrooms.maxRooms = newValue } }
    public var chatroomJoinsPerSecond: Int { get { chatrooms.joinsPerSecond } set { chatrooms.joinsPerSecond = newValue } }
    public var chatroomSweepStep: Int { get { chatrooms.sweepStep } set { chatrooms.sweepStep = newValue } }
    public var ultraGroupHistoryRetentionDays: Int { get { ultraGroups.historyRetentionDays } set { ultraGroups.historyRetentionDays = newValue } }
    public var ultraGroupPreJoinHistory: Bool { get { ultraGroups.preJoinHistory } set { ultraGroups.preJoinHistory = newValue } }
    public var apiCallsPerSecond: Int { get { serverAPI.callsPerSecond } set { serverAPI.callsPerSecond = newValue } }
    public var privatePublishPerMinute: Int { get { serverAPI.privatePublishPerMinute } set { serverAPI.privatePublishPerMinute = newValue } }
    public var systemPublishPerSecond: Int { get { serverAPI.systemPublishPerSecond } set { serverAPI.systemPublishPerSecond = newValue } }
    public var groupPublishPerSecond: Int { get { serverAPI.groupPublishPerSecond } set { serverAPI.groupPublishPerSecond = newValue } }
    public var chatroomPublishPerSecond: Int { get { serverAPI.chatroomPublishPerSecond } set { serverAPI.chatroomPublishPerSecond = newValue } }
    public var ultraGroupPublishPerSecond: Int { get { serverAPI.ultraGroupPublishPerSecond } set { serverAPI.ultraGroupPublishPerSecond = newValue } }
    public var apiTimestampWindowSeconds: Int { get { serverAPI.timestampWindowSeconds } set { serverAPI.timestampWindowSeconds = newValue } }
    public var publicURL: String? { get { serverAPI.publicURL } set { serverAPI.publicURL = newValue } }
    public var userWhitelistMode: Bool { get { moderation.userWhitelistMode } set { moderation.userWhitelistMode = newValue } }
    public var maxSensitiveWords: Int { get { moderation.maxSensitiveWords } set { moderation.maxSensitiveWords = newValue } }
    public var appKey: String? { get { developmentApp.key } set { developmentApp.key = newValue } }
    public var appSecret: String? { get { developmentApp.secret } set { developmentApp.secret = newValue } }
    public var dataDir: String { get { storage.dataDir } set { storage.dataDir = newValue } }
    public var logLevel: String { get { logging.level } set { logging.level = newValue } }
}
