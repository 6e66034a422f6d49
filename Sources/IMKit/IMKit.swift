import Foundation
import IMCore
import IMLib
import Synchronization

/// RongCloud's IMKit without the pixels: the behaviour a chat UI carries above IMLib (spec
/// imkit-and-overview.md §3-4). One per signed-in app: it connects with RongCloud's policy, keeps
/// the user and group info cache, raises local notifications, and makes the list and conversation
/// models a UI draws from. Every time rule reads `clock`.
public final class IMKit: Sendable {
    public let client: IMClient
    public let info: InfoCache
    public let clock: any WallClock
    private let dataDirectory: URL
    private let state: Mutex<State>
    let connectionSignal = Broadcaster<KitConnectionState>()
    let notificationSignal = Broadcaster<LocalNotification>()
    let suppressionSignal = Broadcaster<(Int64, NotificationSuppression)>()
    /// Changes this device made (a send, a delete, a draft, a read): the list reloads.
    let localChanges = Broadcaster<ConversationIdentifier?>()
    private let pumps = Mutex<[Task<Void, Never>]>([])

    private struct State {
        var config: KitConfig
        var policy: NotificationPolicy
        var openConversation: ConversationIdentifier?
        var focused = true
        var database: KitDatabase?
        var userId: String?
        var connection: KitConnectionState = .disconnected
        var locationSessions: [String: LocationShareSession] = [:]
        var locationProvider: (@Sendable () async -> (latitude: Double, longitude: Double)?)?
    }

    /// - Parameters:
    ///   - dataDirectory: where the kit keeps its own database per user (the persistent info cache
    ///     and re-edit texts); default `~/.local/share/imkit`.
    public init(client: IMClient, config: KitConfig = KitConfig(), providers: InfoProviders = InfoProviders(),
                dataDirectory: URL? = nil, clock: any WallClock = SystemClock()) {
        self.client = client
        self.clock = clock
        self.info = InfoCache(providers: providers)
        self.dataDirectory = dataDirectory ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/imkit")
        self.state = Mutex(State(config: config, policy: NotificationPolicy()))
        startPumps()
    }

    deinit {
        for task in pumps.withLock({ $0 }) { task.cancel() }
    }

    // MARK: settings

    public var config: KitConfig { state.withLock { $0.config } }
    public var strings: KitStrings { KitStrings(config.language) }

    /// Changes settings at runtime (a settings screen, `/set`). Models read them on their next rule.
    public func updateConfig(_ change: (inout KitConfig) throws -> Void) rethrows {
        try state.withLock { state in
            var config = state.config
            try change(&config)
            state.config = config
        }
    }

    /// The app's notification hook (`onRCIMCustomLocalNotification`): true when the app showed its own.
    public func setNotificationHook(_ hook: (@Sendable (LocalNotification) -> Bool)?) {
        state.withLock { $0.policy.customHook = hook }
    }

    /// The conversation on screen (nil: the list or elsewhere): no notification is raised for it.
    public func setOpenConversation(_ conversation: ConversationIdentifier?) {
        state.withLock { $0.openConversation = conversation }
    }

    /// Whether the app has focus (a terminal reports focus; a phone app is in the foreground).
    public func setFocused(_ focused: Bool) {
        state.withLock { $0.focused = focused }
    }

    public var currentUserId: String? { state.withLock { $0.userId } }

    /// The device's position for real-time location sharing (CoreLocation's role; Linux has no
    /// GPS, so a fake provider: typed coordinates or a file). Asked when sharing starts and at
    /// every repeat; nil keeps the last position.
    public func setLocationProvider(_ provider: (@Sendable () async -> (latitude: Double, longitude: Double)?)?) {
        state.withLock { $0.locationProvider = provider }
    }

    var locationProvider: (@Sendable () async -> (latitude: Double, longitude: Double)?)? { state.withLock { $0.locationProvider } }

    /// The location-sharing session with one peer (`getRealTimeLocationProxy`): one per
    /// conversation for as long as the kit lives, so the screen finds it again.
    /// - Throws: `IMError` 33003 for any conversation but a one-to-one one (the feature is private
    ///   chat only) or before sign-in.
    public func locationShare(_ type: ConversationType = .private, targetId: String) throws -> LocationShareSession {
        guard type == .private else {
            throw IMError(.invalidParameter, "real-time location sharing works in one-to-one conversations only, not \(type)")
        }
        guard UserID.isValid(targetId) else { throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid user id") }
        return try state.withLock { state in
            guard let me = state.userId else { throw IMError(.clientNotInit, "sign in (connect) before sharing a location") }
            guard targetId != me else { throw IMError(.invalidParameter, "location sharing needs another user, not yourself") }
            if let existing = state.locationSessions[targetId] { return existing }
            let session = LocationShareSession(kit: self, targetId: targetId, me: me)
            state.locationSessions[targetId] = session
            return session
        }
    }
    var database: KitDatabase? { state.withLock { $0.database } }

    // MARK: connection

    /// The connection as the UI shows it, starting with the current state.
    public func connectionStates() -> AsyncStream<KitConnectionState> {
        let stream = connectionSignal.stream()
        let current = connectionState
        return AsyncStream { continuation in
            continuation.yield(current)
            let task = Task {
                for await state in stream { continuation.yield(state) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public var connectionState: KitConnectionState { state.withLock { $0.connection } }

    /// Local notifications for received messages (RongCloud's local notification), after the policy.
    public func notifications() -> AsyncStream<LocalNotification> { notificationSignal.stream() }

    /// Messages that raised no notification and why (for a diagnostics view and tests).
    public func suppressedNotifications() -> AsyncStream<(Int64, NotificationSuppression)> { suppressionSignal.stream() }

    /// Connects as RongCloud's kit does: the local databases open first (`dbOpened`, where the app
    /// shows its list), then the connection with its reconnect schedule. A token the server refuses
    /// (31004) is replaced once through `newToken` (the app server), never in a loop; other
    /// unrecoverable codes (kicked, banned) end in `signedOut` with the reason.
    @discardableResult
    public func connect(token: String, timeLimit: Int = 0, newToken: (@Sendable () async throws -> String)? = nil,
                        dbOpened: (@Sendable () -> Void)? = nil) async throws -> String {
        try await openKitDatabase(token: token)
        do {
            return try await client.connect(token: token, timeLimit: timeLimit, dbOpened: dbOpened)
        } catch let error as IMError where error.code == .tokenIncorrect || error.code == .tokenExpired {
            guard let newToken else { throw error }
            let fresh = try await newToken()
            try await openKitDatabase(token: fresh)
            return try await client.connect(token: fresh, timeLimit: timeLimit, dbOpened: nil)
        }
    }

    /// Disconnects; with `receivePush` false the device gets no pushes (logout).
    public func disconnect(receivePush: Bool = true) async {
        for session in state.withLock({ Array($0.locationSessions.values) }) { await session.stopForDisconnect() }
        if receivePush { await client.disconnect() } else { await client.logout() }
    }

    private func openKitDatabase(token: String) async throws {
        guard let claims = ConnectTokenClaims.unverified(token), UserID.isValid(claims.userId) else { return }
        if currentUserId == claims.userId { return }
        let file = dataDirectory.appendingPathComponent("\(claims.appKey)/\(claims.userId).sqlite").path
        let database = try KitDatabase(path: file)
        // Re-edit texts past their window can never be used again.
        try? database.pruneReedits(before: clock.nowMilliseconds() - Int64(config.reeditDuration) * 1000)
        // Another user's location sessions are not this one's.
        let stale = state.withLock { state -> [LocationShareSession] in
            state.database = database
            state.userId = claims.userId
            defer { state.locationSessions = [:] }
            return Array(state.locationSessions.values)
        }
        for session in stale { await session.discard() }
        await info.signedIn(as: claims.userId, persistent: config.enablePersistentUserInfoCache ? database : nil)
    }

    // MARK: events

    private func startPumps() {
        let statuses = client.connectionStatusUpdates()
        let waits = client.reconnectWaits()
        let received = client.receivedMessages()
        let recalled = client.recalledMessages()
        let statusTask = Task { [weak self] in
            for await status in statuses {
                guard let self else { return }
                let kick = await self.client.lastKick?.code
                self.setConnection(KitConnectionState.from(status, lastKick: kick))
            }
        }
        let waitTask = Task { [weak self] in
            for await wait in waits {
                guard let self else { return }
                let seconds = Int((Double(wait.delay.components.seconds) + Double(wait.delay.components.attoseconds) / 1e18).rounded(.up))
                self.setConnection(.reconnecting(seconds: max(1, seconds)))
            }
        }
        let messageTask = Task { [weak self] in
            for await event in received {
                guard let self else { return }
                await self.received(event)
            }
        }
        let recallTask = Task { [weak self] in
            for await message in recalled { self?.noteRecalled(message.messageUId) }
        }
        pumps.withLock { $0 = [statusTask, waitTask, messageTask, recallTask] }
    }

    /// Remembers that a message was recalled (in the kit's database): quotes of it show the recall.
    func noteRecalled(_ uid: String) {
        try? database?.noteRecalled(uid: uid)
    }

    func isRecalled(_ uid: String) -> Bool {
        (try? database?.isRecalled(uid: uid)) ?? false
    }

    private func setConnection(_ new: KitConnectionState) {
        let changed = state.withLock { state -> Bool in
            guard state.connection != new else { return false }
            state.connection = new
            return true
        }
        if changed { connectionSignal.yield(new) }
    }

    private func received(_ event: ReceivedMessage) async {
        let message = event.message
        if let carried = Self.carriedUser(message) { await info.noteCarried(carried) }
        if message.conversationType == .private, message.content is any LocationShareContent,
           let session = try? locationShare(targetId: message.targetId) {
            await session.received(message, offline: event.offline)
        }
        await decideNotification(message, offline: event.offline)
    }

    static func carriedUser(_ message: Message) -> UserInfo? {
        struct Probe: Decodable { var user: UserInfo? }
        return (try? JSONDecoder().decode(Probe.self, from: message.contentData))?.user
    }

    func decideNotification(_ message: Message, offline: Bool) async {
        guard let userId = currentUserId else { return }
        let (config, policy, open, focused) = state.withLock { ($0.config, $0.policy, $0.openConversation, $0.focused) }
        // Most messages (offline catch-up, commands, one's own, the open conversation's) are
        // settled without a store read.
        if let early = NotificationPolicy.precheck(message, offline: offline, config: config, currentUserId: userId,
                                                   openConversation: open, focused: focused) {
            suppressionSignal.yield((message.messageId, early))
            return
        }
        let conversationLevel = (try? await client.getConversationNotificationLevel(
            message.conversationType, targetId: message.targetId, channelId: message.channelId)) ?? .default
        let typeLevel = (try? await client.getConversationTypeNotificationLevel(message.conversationType)) ?? .default
        let quiet = try? await client.getNotificationQuietHours()
        let context = NotificationPolicy.Context(currentUserId: userId, openConversation: open, focused: focused,
                                                 conversationLevel: conversationLevel, typeLevel: typeLevel,
                                                 quietHours: quiet ?? nil, now: clock.nowMilliseconds())
        let groupId = message.conversationType == .group ? message.targetId : nil
        let sender = await info.displayName(message.senderUserId, inGroup: groupId)
        var title = sender
        if message.conversationType == .group || message.conversationType == .ultraGroup {
            title = "\(sender) (\(await info.title(of: message.conversationType, targetId: message.targetId)))"
        }
        let notification = LocalNotification(
            conversationType: message.conversationType, targetId: message.targetId, channelId: message.channelId,
            senderUserId: message.senderUserId, objectName: message.objectName, title: title,
            body: Digest.of(message, currentUserId: userId, senderName: sender, strings: KitStrings(config.language)),
            messageId: message.messageId)
        switch policy.decide(message, offline: offline, config: config, context: context, notification: notification) {
        case .success(let shown): notificationSignal.yield(shown)
        case .failure(let reason): suppressionSignal.yield((message.messageId, reason))
        }
    }

    // MARK: models

    /// The conversation list model (`RCConversationListViewController`'s behaviour).
    public func conversationList() -> ConversationListModel { ConversationListModel(kit: self) }

    /// The model of one conversation's screen.
    public func conversation(_ type: ConversationType, targetId: String, channelId: String = "") -> ConversationModel {
        ConversationModel(kit: self, conversation: ConversationIdentifier(type, targetId: targetId, channelId: channelId))
    }
}
