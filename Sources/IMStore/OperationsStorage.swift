import IMCore

/// Figures kept per app per day: messages by conversation type, the users who connected, the
/// most connections open at once. `day` is the natural day as `YYYY-MM-DD` in the app's time zone.
public protocol StatisticsStore: Sendable {
    /// Adds each count to its figure of the day and raises each peak to the value given when it is
    /// higher, in one transaction.
    func addDailyFigures(counts: [DailyFigure], peaks: [DailyFigure]) async throws
    /// Records that these users were active on the day; each user adds one to the day's
    /// `activeUsers` figure the first time only.
    func recordActiveUsers(appId: Int64, day: String, userIds: [String]) async throws
    /// The app's figures from `fromDay` to `toDay` (inclusive), by day, oldest first; days without
    /// a figure are left out.
    func dailyStatistics(appId: Int64, fromDay: String, toDay: String) async throws -> [DailyStatistics]
    /// Forgets which users were active on days before `day` (their counts stay).
    func pruneActiveUsers(beforeDay day: String) async throws
}

/// One figure of one app on one day.
public struct DailyFigure: Sendable, Equatable {
    public var appId: Int64
    public var day: String
    /// `messages.<conversation type>`, `peakConnections`, `activeUsers`.
    public var name: String
    public var value: Int64

    public init(appId: Int64, day: String, name: String, value: Int64) {
        self.appId = appId
        self.day = day
        self.name = name
        self.value = value
    }

    /// The figure counting messages of one conversation type.
    public static func messages(_ type: ConversationType) -> String { "messages.\(type.rawValue)" }
    public static let peakConnections = "peakConnections"
    public static let activeUsers = "activeUsers"
}

/// One app's figures of one day, by name.
public struct DailyStatistics: Sendable, Equatable {
    public var day: String
    public var figures: [String: Int64]

    public init(day: String, figures: [String: Int64]) {
        self.day = day
        self.figures = figures
    }
}

/// The operator console's accounts and sessions.
public protocol ConsoleStore: Sendable {
    /// The operator's password hash (PHC-style text), nil before one is set.
    func operatorPasswordHash(name: String) async throws -> String?
    func setOperatorPassword(name: String, hash: String, now: Int64) async throws
    /// Starts a session: `tokenHash` is the SHA-256 of the cookie's token, never the token.
    func createConsoleSession(tokenHash: String, operatorName: String, createdAt: Int64, expiresAt: Int64) async throws
    /// The operator of a session that has not expired at `now`.
    func consoleSession(tokenHash: String, now: Int64) async throws -> String?
    func deleteConsoleSession(tokenHash: String) async throws
    /// Ends every session of the operator (a password change) and the expired ones.
    func deleteConsoleSessions(operatorName: String?, expiredBefore now: Int64) async throws
}
