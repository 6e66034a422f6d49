import Foundation
import IMCore
import IMWire
import Logging
import Synchronization

/// Settings of an `IMClient`.
public struct IMClientOptions: Sendable {
    /// The platform reported to the server; decides which sessions a login kicks.
    public var platform: Platform = .current
    /// Identifies this device to the server.
    public var deviceId: String = UUID().uuidString
    /// Where the per-user local databases live (default: Application Support on Apple platforms,
    /// `~/.local/share/imlib` elsewhere).
    public var databaseDirectory: URL?
    /// RongCloud's `setReconnectKickEnable`: an automatic reconnect does not kick another online
    /// device of the same class; it is refused (31023) and the client stops.
    public var reconnectKickEnable = false
    /// How long a request may wait for its reply before failing with 30003; also how long a server
    /// may take to accept the WebSocket before a connect moves on to the next server URL.
    public var requestTimeout: Duration = .seconds(30)
    /// The wait before each round of connect attempts (RongCloud's schedule by default): round 0
    /// starts connecting, and each later round follows one that failed on every server URL. Within
    /// a round the next URL is tried at once.
    public var reconnectDelay: @Sendable (Int) -> Duration = { ReconnectSchedule.delay(attempt: $0) }
    public var logger = Logger(label: "IMLib")
    /// The clock for the client's own time rules (typing-status throttle, local insert times).
    public var clock: any WallClock = SystemClock()
    /// Received GIFs smaller than this are downloaded at once (RongCloud: under 1 MB); 0: never.
    public var autoDownloadGIFBytes: Int64 = 1_048_576

    public init() {}
}

/// The client SDK, RongCloud's `RCCoreClient`: connection, messages and the local database.
///
/// Create one per app key and server (or cluster), `connect(token:)`, and read events from
/// `connectionStatusUpdates()` and `receivedMessages()`.
public actor IMClient {
    public nonisolated let appKey: String
    /// The servers' base URLs in order of preference, e.g. `http://127.0.0.1:8080` (the WebSocket
    /// is `/ws` below each): nodes of one cluster, any of which serves any client. `connect` tries
    /// them in order; after a connection drops, reconnecting starts with the URL after the one that
    /// dropped.
    public nonisolated let serverURLs: [String]
    /// The first of `serverURLs`.
    public nonisolated var serverURL: String { serverURLs.first ?? "" }
    let options: IMClientOptions
    let types = MessageTypeRegistry()
    let statusEvents = Broadcaster<ConnectionStatus>()
    let messageEvents = Broadcaster<ReceivedMessage>()
    let syncEvents = Broadcaster<Void>()
    let receiptEvents = Broadcaster<ReadReceiptEvent>()
    let blockedEvents = Broadcaster<BlockedMessageInfo>()
    let recallEvents = Broadcaster<Message>()
    let conversationReadEvents = Broadcaster<ConversationReadReceipt>()
    let readStatusEvents = Broadcaster<ConversationReadStatus>()
    let typingEvents = Broadcaster<TypingStatus>()
    let expansionEvents = Broadcaster<MessageExpansionEvent>()
    /// When this client last sent a typing status, per conversation (the 6 s throttle).
    var lastTypingSent: [String: Int64] = [:]
    let stateEvents = Broadcaster<ConversationStateChange>()
    /// Whether a conversation-state pull is running, and whether another was asked for meanwhile.
    var stateSync = ConversationStateSyncFlags()
    let chatroomStatusEvents = Broadcaster<ChatRoomStatusEvent>()
    let chatroomKVEvents = Broadcaster<ChatRoomKVEvent>()
    /// The chatrooms this device is in, rejoined after each reconnect.
    var joinedChatrooms: [String: JoinedChatroom] = [:]
    let ultraGroupEventBroadcaster = Broadcaster<UltraGroupEvent>()
    let modificationEvents = Broadcaster<Message>()
    let ultraGroupSyncEvents = Broadcaster<UltraGroupSyncResult>()
    /// Ultra group channels ("group|channel") this connection has caught up: from then on their
    /// live messages arrive in order, so they advance the channel's caught-up time.
    var ultraCaughtUp: Set<UltraGroupChannelKey> = []
    /// Media uploads that can be canceled, by message id.
    var mediaUploads: [Int64: MediaTransfer] = [:]
    /// Running message downloads by message id: a second call waits for the first, and a cancel
    /// cancels the task.
    var mediaDownloads: [Int64: Task<String, any Error>] = [:]
    /// The app's download token while it is fresh (the server's last an hour; one is reused for
    /// ten minutes, so downloads, automatic ones included, do not ask for one each).
    var downloadToken: (token: String, until: ContinuousClock.Instant)?
    let mediaDownloadBroadcaster = Broadcaster<MediaDownloadEvent>()
    let reconnectBroadcaster = Broadcaster<ReconnectWait>()
    /// The wait of the connect loop's current round, which `networkDidChange()` cuts short.
    private var roundWait: Task<Void, Never>?
    /// Set by `networkDidChange()`: the connect loop starts its schedule again.
    private var restartSchedule = false

    var status: ConnectionStatus = .unconnected
    var store: LocalStore?
    private var token: String?
    /// The established connection and its work; nil while not connected.
    var scope: ConnectionScope?
    /// The socket of the established connection.
    var connection: WireConnection? { scope?.connection }
    /// False after disconnect, logout or an unrecoverable error: nothing reconnects then.
    private var wantsConnection = false
    /// The running connect loop (a `connect` call's, or the reconnect after a lost connection);
    /// disconnect, logout and a new connect cancel it.
    private var connecting: Task<Void, any Error>?
    private var heartbeatInterval: Duration = .seconds(30)
    var syncing = false
    private var heldPushes: [Im_Message] = []
    /// The index in `serverURLs` of the server of the current connection.
    private var connectedIndex: Int? { scope?.serverIndex }
    /// The index of the server this client was last connected to, kept after the connection ends,
    /// to log a move to another server.
    private var lastConnectedIndex: Int?

    deinit {
        scope?.cancel()
    }

    /// A client of one server.
    public init(appKey: String, serverURL: String, options: IMClientOptions = IMClientOptions()) {
        self.init(appKey: appKey, serverURLs: [serverURL], options: options)
    }

    /// A client of a cluster: `serverURLs` are its nodes' base URLs in order of preference, at
    /// least one (with none, `connect` fails with 33003).
    public init(appKey: String, serverURLs: [String], options: IMClientOptions = IMClientOptions()) {
        self.appKey = appKey
        self.serverURLs = serverURLs
        self.options = options
    }

    // MARK: events

    /// Connection status changes, starting with the current status.
    public nonisolated func connectionStatusUpdates() -> AsyncStream<ConnectionStatus> {
        statusEvents.stream()
    }

    /// The current connection status.
    public var connectionStatus: ConnectionStatus { status }

    /// Why the server last closed this client's connection (a kick: another device logged in
    /// 31010, the user banned while online 31011, the app banned 31008, ...), with the server's
    /// words; nil until that happens, and again after the next successful connect.
    public private(set) var lastKick: IMError?

    /// The base URL (one of `serverURLs`) of the server this client is connected to now; nil while
    /// not connected.
    public var connectedServerURL: String? { connectedIndex.map { serverURLs[$0] } }

    /// Every message this device receives: live, offline (pulled after a connect) and the user's own
    /// messages sent from other devices.
    public nonisolated func receivedMessages() -> AsyncStream<ReceivedMessage> {
        messageEvents.stream()
    }

    /// An event each time the offline messages of a connect have all been received (RongCloud's
    /// `onOfflineMessageSyncCompleted`); live messages follow it.
    public nonisolated func offlineMessageSyncCompleted() -> AsyncStream<Void> {
        syncEvents.stream()
    }

    /// How many messages `receivedMessages` has given out since this client was made: a stream
    /// taken before `connect` has caught up with the offline sync once it holds this many.
    package nonisolated var receivedMessageCount: Int { messageEvents.yieldedCount }

    /// Group read-receipt events: requests from the senders of messages this user received, and
    /// members' reads of this user's messages (live, and those missed while offline after a connect).
    public nonisolated func readReceiptEvents() -> AsyncStream<ReadReceiptEvent> {
        receiptEvents.stream()
    }

    /// Messages this device sent that the app's moderation held back (RongCloud's
    /// `messageDidBlock:`), when the app asks the server to tell senders.
    public nonisolated func messageBlockedEvents() -> AsyncStream<BlockedMessageInfo> {
        blockedEvents.stream()
    }

    /// Each wait of the reconnect schedule as it begins (RongCloud's back-off: 0.25 s, 0.5 s, 1 s,
    /// ... 64 s), for an app that shows "reconnecting in 4 s".
    public nonisolated func reconnectWaits() -> AsyncStream<ReconnectWait> {
        reconnectBroadcaster.stream()
    }

    /// Tells the client the device's network changed (a new interface, or back after none): a
    /// reconnect under way starts its schedule again from no wait, as RongCloud's does, to be
    /// connected as soon as possible.
    public func networkDidChange() {
        guard wantsConnection, status != .connected else { return }
        restartSchedule = true
        roundWait?.cancel()
    }

    /// The user id of the current token, once `connect` has been called.
    public var currentUserId: String? { store?.userId }

    /// Decodes a content JSON by its object name with the types this client knows (built-in and
    /// registered); nil for an unknown type or a body that does not decode.
    public nonisolated func decodeContent(objectName: String, data: Data) -> (any MessageContent)? {
        types.decode(objectName: objectName, data: data)
    }

    /// Registers an app-defined message type so it is decoded on receipt. Names starting with `RC:`
    /// are reserved.
    public func registerMessageType(_ type: any MessageContent.Type) throws {
        try types.register(type)
    }

    // MARK: connection

    /// Connects with a token from the app server and returns its user id.
    ///
    /// - Parameter timeLimit: seconds to keep trying; on expiry the call fails with 34006 and the
    ///   client stops. 0 or less: keep trying until connected or an unrecoverable error.
    /// - Throws: `IMError` with 31004 (bad token), 31009 (banned), 31023 (refused reconnect),
    ///   34001 (already connected), 34006 (time limit), 33003 (no server URL, or a device id
    ///   that is not `ConnectLimits.isValidDeviceId`).
    /// - Parameter dbOpened: called once the user's local database is open, before the network is
    ///   tried (RongCloud's `dbOpened`): an app shows its conversation list from there, even while
    ///   the server cannot be reached.
    @discardableResult
    public func connect(token: String, timeLimit: Int = 0, dbOpened: (@Sendable () -> Void)? = nil) async throws -> String {
        if wantsConnection && [.connected, .connecting, .suspend].contains(status) {
            throw IMError(.connectionExists, "already connected or connecting: call disconnect() before connecting again")
        }
        guard !serverURLs.isEmpty else {
            throw IMError(.invalidParameter, "the client has no server URL: create it with at least one in serverURLs")
        }
        guard ConnectLimits.isValidDeviceId(options.deviceId) else {
            throw IMError(.invalidParameter, "options.deviceId '\(options.deviceId.prefix(40))' is not valid: use \(ConnectLimits.deviceIdRule)")
        }
        guard let claims = ConnectTokenClaims.unverified(token), UserID.isValid(claims.userId) else {
            setStatus(.tokenIncorrect)
            throw IMError(.tokenIncorrect, "the token is malformed: get a new token from your app server (/user/getToken.json)")
        }
        guard claims.appKey == appKey else {
            setStatus(.tokenIncorrect)
            throw IMError(.tokenIncorrect, "the token was issued for app key \(claims.appKey), but this client uses \(appKey): use the same app key on client and server")
        }
        if store?.userId != claims.userId {
            store = try LocalStore(directory: databaseDirectory(userId: claims.userId), userId: claims.userId, registry: types)
        }
        dbOpened?()
        self.token = token
        wantsConnection = true
        connecting?.cancel()
        // The time limit covers reaching the server, from here; opening the local database (a
        // local step, before any network) is not part of it.
        let deadline = timeLimit > 0 ? ContinuousClock.now + .seconds(timeLimit) : nil
        let attempt = Task { try await self.connectLoop(isReconnect: false, startingAt: 0, deadline: deadline) }
        connecting = attempt
        try await withTaskCancellationHandler {
            try await attempt.value
        } onCancel: {
            attempt.cancel()
        }
        return claims.userId
    }

    /// Disconnects. With `receivePush` the server keeps pushing notifications to this device.
    public func disconnect(receivePush: Bool = true) async {
        await close(status: .unconnected, receivePush: receivePush)
    }

    /// Disconnects and stops push to this device.
    public func logout() async {
        await close(status: .signOut, receivePush: false)
    }

    private func close(status newStatus: ConnectionStatus, receivePush: Bool) async {
        wantsConnection = false
        connecting?.cancel()
        connecting = nil
        if let scope = endScope() {
            var request = Im_DisconnectRequest()
            request.receivePush = receivePush
            _ = try? await scope.connection.request(.disconnect, request, timeout: .seconds(2))
            await scope.end()
        }
        // Leaving on purpose leaves the chatrooms too; only a lost connection rejoins them.
        for roomId in joinedChatrooms.keys.sorted() {
            await forgetChatroom(roomId)
            chatroomStatusEvents.yield(.quit(roomId: roomId))
        }
        setStatus(newStatus)
    }

    private func setStatus(_ newStatus: ConnectionStatus) {
        guard newStatus != status else { return }
        status = newStatus
        statusEvents.yield(newStatus)
    }

    /// Tries to connect until connected, an unrecoverable error, the deadline, or cancellation (a
    /// disconnect, logout or newer connect). Each round tries every server URL once, in order from
    /// `firstIndex`: a server that cannot be reached or fails before its connect ACK is left for
    /// the next one at once, and an unrecoverable answer (bad token, blocked, kicked, ...) is the
    /// whole cluster's, so no other server is asked. Each round waits its reconnect delay first.
    private func connectLoop(isReconnect: Bool, startingAt firstIndex: Int, deadline: ContinuousClock.Instant?) async throws {
        setStatus(.connecting)
        var round = 0
        while true {
            let delay = options.reconnectDelay(round)
            if delay > .zero {
                let wait = deadline.map { min(delay, max(.zero, $0 - .now)) } ?? delay
                reconnectBroadcaster.yield(ReconnectWait(round: round, delay: wait))
                // A task of its own, so that networkDidChange() can cut this wait short.
                let sleeping = Task { _ = try? await Task.sleep(for: wait) }
                roundWait = sleeping
                await withTaskCancellationHandler { await sleeping.value } onCancel: { sleeping.cancel() }
                roundWait = nil
                if restartSchedule {
                    restartSchedule = false
                    round = 0
                }
            }
            for offset in serverURLs.indices {
                let index = (firstIndex + offset) % serverURLs.count
                guard !Task.isCancelled, wantsConnection else {
                    throw IMError(.connectionReleased, "the connection attempt was cancelled by disconnect()")
                }
                if let deadline, ContinuousClock.now >= deadline {
                    wantsConnection = false
                    setStatus(.timeout)
                    throw IMError(.connectTimeout, "could not connect within the time limit: check the network and call connect again")
                }
                do {
                    if let deadline {
                        try await establish(serverIndex: index, isReconnect: isReconnect, before: deadline)
                    } else {
                        try await establish(serverIndex: index, isReconnect: isReconnect)
                    }
                    return
                } catch let error as IMError where error.code.isUnrecoverableConnectError {
                    guard !Task.isCancelled else { throw error }
                    wantsConnection = false
                    setStatus(Self.status(for: error.code))
                    throw error
                } catch {
                    guard !Task.isCancelled, wantsConnection else { throw error }
                    options.logger.debug("connect attempt failed", metadata: [
                        "round": "\(round)", "server": "\(serverURLs[index])", "error": "\(error)",
                    ])
                }
            }
            round += 1
        }
    }

    private static func status(for code: ErrorCode) -> ConnectionStatus {
        switch code {
        case .tokenIncorrect, .tokenExpired: return .tokenIncorrect
        case .kickedByOtherClient, .otherDeviceLogin: return .kickedOfflineByOtherClient
        case .userBlocked, .bannedWhileOnline, .appBlockedOrDeleted: return .disconnectException
        case .userDeactivated: return .userAbandon
        default: return .unconnected
        }
    }

    /// One connect attempt that gives up at the deadline: the attempt and a timer race in a task
    /// group, and the loser is cancelled (a socket that neither connects nor fails is abandoned).
    private func establish(serverIndex: Int, isReconnect: Bool, before deadline: ContinuousClock.Instant) async throws {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.establish(serverIndex: serverIndex, isReconnect: isReconnect) }
                group.addTask {
                    try await Task.sleep(until: deadline)
                    throw IMError(.connectTimeout, "the connect attempt did not finish within the time limit")
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch let error as IMError where error.code == .connectTimeout {
            // The attempt may have connected in the same instant the timer fired: keep it.
            if scope != nil, status == .connected { return }
            throw error
        }
    }

    /// One connect attempt to `serverURLs[serverIndex]`: socket, CONNECT handshake, then the
    /// connection's scope with its heartbeat and offline sync.
    private func establish(serverIndex: Int, isReconnect: Bool) async throws {
        guard let token else { return }
        let connection = WireConnection(
            url: Self.webSocketURL(serverURLs[serverIndex]), logger: options.logger,
            onPush: { [weak self] connection, frame in await self?.handlePush(frame, on: connection) },
            onClose: { [weak self] connection, _ in await self?.connectionLost(connection) })
        try await connection.open(timeout: options.requestTimeout)
        var request = Im_ConnectRequest()
        request.appKey = appKey
        request.token = token
        request.platform = options.platform.wire
        request.deviceID = options.deviceId
        request.sdkVersion = IMLibVersion.current
        request.reconnectKickRefuse = isReconnect && options.reconnectKickEnable
        let reply: Im_ConnectReply
        do {
            reply = try await connection.request(.connect, request, timeout: options.requestTimeout).body(Im_ConnectReply.self)
        } catch {
            await connection.close()
            throw error
        }
        guard !Task.isCancelled, wantsConnection else {
            await connection.close()
            throw IMError(.connectionReleased, "the connection attempt was cancelled by disconnect()")
        }
        let scope = ConnectionScope(connection: connection, serverIndex: serverIndex)
        self.scope = scope
        if let previous = lastConnectedIndex, previous != serverIndex {
            options.logger.notice("connected to another server", metadata: [
                "server": "\(serverURLs[serverIndex])", "previous": "\(serverURLs[previous])",
            ])
        }
        lastConnectedIndex = serverIndex
        ultraCaughtUp = []
        if reply.heartbeatIntervalMs > 0 { heartbeatInterval = .milliseconds(Int64(reply.heartbeatIntervalMs)) }
        lastKick = nil
        setStatus(.connected)
        syncing = true
        let interval = heartbeatInterval
        // The client is held only while it pings, so a client the app lets go is freed.
        scope.run { [weak self] in
            while (try? await Task.sleep(for: interval)) != nil {
                guard let self, await self.ping(scope, timeout: interval) else { return }
            }
        }
        scope.run { [weak self] in await self?.syncOffline(scope) }
        if !joinedChatrooms.isEmpty { scope.run { [weak self] in await self?.rejoinChatrooms(scope) } }
    }

    private static func webSocketURL(_ serverURL: String) -> String {
        var base = serverURL
        if base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("http://") { base = "ws://" + base.dropFirst("http://".count) }
        if base.hasPrefix("https://") { base = "wss://" + base.dropFirst("https://".count) }
        return base.hasSuffix("/ws") ? base : base + "/ws"
    }

    /// One heartbeat; a ping without a pong within `timeout` ends the connection. False once the
    /// connection is gone.
    private func ping(_ scope: ConnectionScope, timeout: Duration) async -> Bool {
        do {
            _ = try await scope.connection.request(.ping, Im_Pong(), timeout: timeout)
            return true
        } catch {
            if !Task.isCancelled { await connectionLost(scope.connection) }
            return false
        }
    }

    /// The socket closed under us, or stopped answering: reconnect unless the app disconnected or
    /// an error was final.
    private func connectionLost(_ connection: WireConnection) async {
        // A connection that never finished its handshake is the connect loop's business.
        guard let current = scope, current.connection === connection, let scope = endScope() else { return }
        let dropped = scope.serverIndex
        chatroomsDisconnected()
        if wantsConnection {
            // RongCloud's SUSPEND: the connection is gone and the client will reconnect by itself.
            setStatus(.suspend)
            // The server that dropped is probably down: reconnecting starts with the next one.
            let nextIndex = (dropped + 1) % serverURLs.count
            options.logger.debug("lost the connection to the server: reconnecting", metadata: [
                "server": "\(serverURLs[dropped])", "next": "\(serverURLs[nextIndex])",
            ])
            connecting = Task { [weak self] in
                try await self?.connectLoop(isReconnect: true, startingAt: nextIndex, deadline: nil)
            }
        }
        await scope.end()
    }

    /// Forgets the current connection and what belongs to it alone (live messages held during its
    /// sync, the ultra group channels it caught up); the caller ends the returned scope.
    private func endScope() -> ConnectionScope? {
        defer {
            scope = nil
            syncing = false
            heldPushes = []
            ultraCaughtUp = []
        }
        return scope
    }

    // MARK: receiving

    /// A frame the server pushed on `connection`, handled in arrival order.
    private func handlePush(_ frame: Im_Frame, on connection: WireConnection) async {
        guard let scope, scope.connection === connection else { return }
        switch frame.op {
        case .message:
            guard let wire = try? frame.body(Im_Message.self) else { return }
            if syncing {
                heldPushes.append(wire)
            } else {
                await receive([wire], offline: false, hasPackage: false, watermark: Self.syncWatermark(of: wire))
            }
        case .messageModified:
            guard let wire = try? frame.body(Im_Message.self) else { return }
            _ = await applyModified([wire])
        case .ultraGroupEvent:
            guard let event = try? frame.body(Im_UltraGroupEvent.self) else { return }
            await ultraGroupEvent(event)
        case .messageBlocked:
            guard let blocked = try? frame.body(Im_MessageBlocked.self) else { return }
            blockedEvents.yield(BlockedMessageInfo(blocked))
        case .readReceipts:
            guard let receipts = try? frame.body(Im_ReadReceipts.self) else { return }
            // Live reads do not move the receipt watermark: the next connect's receipt sync
            // fetches from the last page it completed, and already-known readers are skipped.
            await applyReads(receipts.receipts, watermark: nil)
        case .chatroomMessages:
            guard let push = try? frame.body(Im_ChatroomMessages.self) else { return }
            await chatroomMessages(push)
        case .chatroomEntriesChanged:
            guard let changes = try? frame.body(Im_ChatroomEntryChanges.self) else { return }
            chatroomEntriesChanged(changes)
        case .chatroomEvent:
            guard let event = try? frame.body(Im_ChatroomEvent.self) else { return }
            await chatroomEvent(event)
        case .conversationStateChanged:
            guard let notice = try? frame.body(Im_ConversationStateChanged.self) else { return }
            await conversationStateChanged(notice, scope: scope)
        case .kicked:
            let kicked = (try? frame.body(Im_Kicked.self)) ?? Im_Kicked()
            lastKick = IMError(ErrorCode(Int(kicked.code)), kicked.reason)
            wantsConnection = false
            _ = endScope()
            setStatus(Self.status(for: ErrorCode(Int(kicked.code))))
            await scope.end()
        default:
            break
        }
    }

    /// Pulls offline messages page by page, then releases the live messages held meanwhile.
    private func syncOffline(_ scope: ConnectionScope) async {
        guard let store else { return }
        do {
            var hasMore = true
            while hasMore {
                var request = Im_SyncRequest()
                request.since = try await store.watermark()
                request.newDevice = try await !store.hasSynced()
                let reply = try await scope.connection.request(.sync, request, timeout: options.requestTimeout).body(Im_SyncReply.self)
                try Task.checkCancellation()
                hasMore = reply.morePackages
                await receive(reply.messages, offline: true, hasPackage: hasMore, watermark: reply.watermark)
            }
            try Task.checkCancellation()
            syncEvents.yield(())
            // Live messages keep being held while the held ones are stored (each store is a
            // suspension), so none overtakes another.
            while !heldPushes.isEmpty {
                let held = heldPushes
                heldPushes = []
                let watermark = try await store.watermark()
                for wire in held where Self.syncWatermark(of: wire) == nil || wire.seq > watermark {
                    await receive([wire], offline: false, hasPackage: false, watermark: Self.syncWatermark(of: wire))
                }
                try Task.checkCancellation()
            }
            syncing = false
            try await syncReadReceipts(scope)
            await syncConversationState(scope)
            await catchUpUltraGroups(scope)
        } catch {
            options.logger.debug("offline sync stopped", metadata: ["error": "\(error)"])
        }
    }

    /// Pulls the reads of this user's group messages recorded while this device was away.
    private func syncReadReceipts(_ scope: ConnectionScope) async throws {
        guard let store else { return }
        var more = true
        while more {
            var request = Im_ReadReceiptSyncRequest()
            request.since = try await store.receiptWatermark()
            let reply = try await scope.connection.request(.readReceiptSync, request, timeout: options.requestTimeout).body(Im_ReadReceipts.self)
            try Task.checkCancellation()
            await applyReads(reply.receipts, watermark: reply.watermark)
            more = reply.more
        }
    }

    /// Records reads of this user's messages and emits the readers new to this device.
    private func applyReads(_ receipts: [Im_ReadReceipt], watermark: UInt64?) async {
        guard let store else { return }
        do {
            let fresh = try await store.storeReaders(receipts.map { ($0.messageUid, $0.readerID, $0.readTime) }, watermark: watermark)
            var emitted = Set<String>()
            for receipt in receipts where emitted.insert(receipt.messageUid).inserted {
                guard let readers = fresh[receipt.messageUid] else { continue }
                receiptEvents.yield(.response(conversationType: ConversationType(rawValue: Int(receipt.conversationType)) ?? .group,
                                              targetId: receipt.targetID, messageUId: receipt.messageUid, readers: readers))
            }
        } catch {
            options.logger.error("could not store read receipts", metadata: ["error": "\(error)"])
        }
    }

    /// The offline-sync position a live message proves this device has reached; nil for messages
    /// that never come through offline sync (ultra group messages are pulled per channel).
    static func syncWatermark(of wire: Im_Message) -> UInt64? {
        wire.seq > 0 && wire.conversationType != Int32(ConversationType.ultraGroup.rawValue) ? wire.seq : nil
    }

    /// Stores what is new and emits it.
    func receive(_ wires: [Im_Message], offline: Bool, hasPackage: Bool, watermark: UInt64?) async {
        guard let store else { return }
        let now = options.clock.nowMilliseconds()
        let messages = wires.map { message(from: $0, me: store.userId, receivedAt: now) }
        let changes: IncomingChanges
        do {
            changes = try await store.storeIncoming(messages, watermark: watermark,
                                                    ultraGroupThroughs: offline ? [:] : ultraGroupThroughs(advancedBy: messages))
        } catch {
            options.logger.error("could not store received messages", metadata: ["error": "\(error)"])
            return
        }
        for request in changes.receiptRequests where request.direction == .receive {
            receiptEvents.yield(.request(conversationType: request.conversationType, targetId: request.targetId,
                                         messageUId: request.messageUId))
        }
        let fresh = changes.fresh
        for (index, message) in fresh.enumerated() {
            messageEvents.yield(ReceivedMessage(message: message, left: fresh.count - index - 1, offline: offline, hasPackage: hasPackage))
        }
        changes.recalled.forEach(recallEvents.yield)
        changes.modified.forEach(modificationEvents.yield)
        changes.readReceipts.forEach(conversationReadEvents.yield)
        changes.readStatuses.forEach(readStatusEvents.yield)
        changes.expansions.forEach(expansionEvents.yield)
        // A typing status from offline sync is stale; STATUS messages are never synced anyway.
        if !offline { changes.typing.forEach(typingEvents.yield) }
        autoDownload(fresh)
    }

    func message(from wire: Im_Message, me: String, receivedAt: Int64) -> Message {
        let type = ConversationType(rawValue: Int(wire.conversationType)) ?? .private
        let outgoing = wire.senderUserID == me
        // One-to-one and system conversations are named after the other side: the sender of a
        // received message (a system account for system messages and broadcasts).
        let namedBySender = type == .private || type == .system
        let target = namedBySender ? (outgoing ? wire.targetID : wire.senderUserID) : wire.targetID
        return Message(
            messageId: 0, conversationType: type, targetId: target, channelId: wire.channelID,
            senderUserId: wire.senderUserID, direction: outgoing ? .send : .receive, objectName: wire.objectName,
            contentData: wire.content, content: types.decode(objectName: wire.objectName, data: wire.content),
            flags: PersistentFlag(rawValue: wire.flags), sentStatus: outgoing ? .sent : .received, isRead: outgoing,
            sentTime: wire.sentTime, receivedTime: receivedAt, messageUId: wire.messageUid,
            clientMessageId: wire.clientMessageID, pushContent: wire.pushContent, pushData: wire.pushData,
            readReceiptInfo: ReadReceiptInfo(isReceiptRequestMessage: wire.receiptRequested),
            canIncludeExpansion: wire.canIncludeExpansion, expansion: wire.expansion,
            pushConfig: wire.pushConfig.isEmpty ? nil : (try? MessagePushConfig.decode(wire.pushConfig)) ?? nil,
            disableNotification: wire.disableNotification, disableUpdateLastMessage: wire.disableUpdateLastMessage)
    }

    // MARK: sending

    /// Sends a message: stores it locally (`attached` sees it with status `sending`), sends it, and
    /// returns it with its messageUId and server sentTime once the server has stored it.
    ///
    /// - Throws: `SendMessageError` carrying the code (30016 too large, 20604 too fast, 30002 not
    ///   connected, ...) and the message as stored, with status `failed`; `IMError` 34021, before
    ///   anything is stored, when the content's type is not registered.
    @discardableResult
    ///
    /// - Parameters:
    ///   - canIncludeExpansion: the message may carry extensions (fixed once sent).
    ///   - expansion: extensions sent with the message (at most 20; needs `canIncludeExpansion`).
    ///   - pushConfig: how offline devices are pushed (title, content, data, per-platform fields,
    ///     template); checked before anything is stored: `IMError` 26001 names the invalid field.
    ///   - disableNotification: a silent message: delivered, never pushed.
    ///   - disableUpdateLastMessage: the message does not become its conversation's last message,
    ///     here or on any device that receives it (RongCloud's `disableUpdateLastMessage`).
    public func sendMessage(
        _ conversationType: ConversationType, targetId: String, channelId: String = "", content: some MessageContent,
        pushContent: String? = nil, pushData: String? = nil,
        canIncludeExpansion: Bool = false, expansion: [String: String] = [:],
        pushConfig: MessagePushConfig? = nil, disableNotification: Bool = false, disableUpdateLastMessage: Bool = false,
        attached: @Sendable (Message) -> Void = { _ in }
    ) async throws -> Message {
        try await send(conversationType, targetId: targetId, channelId: channelId, directedUserIds: [], content: content,
                       pushContent: pushContent, pushData: pushData, canIncludeExpansion: canIncludeExpansion,
                       expansion: expansion, pushConfig: pushConfig, disableNotification: disableNotification,
                       disableUpdateLastMessage: disableUpdateLastMessage, attached: attached)
    }

    /// Sends a directional group message: only the listed members (and this user's other devices)
    /// receive it, now, after reconnecting, and in cloud history (RongCloud's `sendDirectionalMessage`).
    ///
    /// - Throws: `SendMessageError` as `sendMessage`, and 22406 / 22408 when this user may not send
    ///   to the group, 33003 when a listed user is not a member.
    @discardableResult
    public func sendDirectionalMessage(
        _ conversationType: ConversationType, targetId: String, channelId: String = "", toUserIds: [String], content: some MessageContent,
        pushContent: String? = nil, pushData: String? = nil,
        attached: @Sendable (Message) -> Void = { _ in }
    ) async throws -> Message {
        guard conversationType == .group || conversationType == .ultraGroup else {
            throw IMError(.invalidParameter, "directional messages are sent to groups, not to \(conversationType) conversations")
        }
        guard !toUserIds.isEmpty, toUserIds.count <= GroupLimits.maxDirectedUsers, toUserIds.allSatisfy(UserID.isValid) else {
            throw IMError(.invalidParameter, "toUserIds must list 1 to \(GroupLimits.maxDirectedUsers) valid user ids")
        }
        return try await send(conversationType, targetId: targetId, channelId: channelId, directedUserIds: toUserIds, content: content,
                              pushContent: pushContent, pushData: pushData, attached: attached)
    }

    func send(
        _ conversationType: ConversationType, targetId: String, channelId: String = "", directedUserIds: [String], content: some MessageContent,
        pushContent: String?, pushData: String?, canIncludeExpansion: Bool = false, expansion: [String: String] = [:],
        pushConfig: MessagePushConfig? = nil, disableNotification: Bool = false, disableUpdateLastMessage: Bool = false,
        attached: @Sendable (Message) -> Void
    ) async throws -> Message {
        let message = try await storeOutgoing(conversationType, targetId: targetId, channelId: channelId, directedUserIds: directedUserIds,
                                        content: content, pushContent: pushContent, pushData: pushData,
                                        canIncludeExpansion: canIncludeExpansion, expansion: expansion, pushConfig: pushConfig,
                                        disableNotification: disableNotification, disableUpdateLastMessage: disableUpdateLastMessage)
        attached(message)
        return try await transmit(message, store: try openStore())
    }

    /// Checks an outgoing message and stores it with status `sending`.
    func storeOutgoing(
        _ conversationType: ConversationType, targetId: String, channelId: String, directedUserIds: [String], content: some MessageContent,
        pushContent: String?, pushData: String?, canIncludeExpansion: Bool = false, expansion: [String: String] = [:],
        pushConfig: MessagePushConfig? = nil, disableNotification: Bool = false, disableUpdateLastMessage: Bool = false,
        localMediaPath: String? = nil
    ) async throws -> Message {
        let store = try openStore()
        try requireRegistered(content)
        try pushConfig?.validate()
        if !expansion.isEmpty {
            guard canIncludeExpansion else {
                throw IMError(.messageNotExpandable, "the message carries extensions but canIncludeExpansion is off: set it to send extensions")
            }
            try ExpansionLimits.check(set: expansion, remove: [])
        }
        let data: Data
        do {
            data = try content.encode()
        } catch {
            throw IMError(.invalidParameter, "the message content could not be encoded: \(error)")
        }
        guard UserID.isValid(targetId) else {
            throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid id")
        }
        let channel = try Self.channel(channelId, of: conversationType)
        let now = options.clock.nowMilliseconds()
        var message = Message(
            messageId: 0, conversationType: conversationType, targetId: targetId, channelId: channel,
            senderUserId: store.userId, direction: .send, objectName: type(of: content).objectName, contentData: data,
            content: content, flags: type(of: content).persistentFlag, sentStatus: .sending, isRead: true,
            sentTime: now, receivedTime: now, messageUId: "", clientMessageId: UUID().uuidString,
            pushContent: pushContent ?? "", pushData: pushData ?? "", directedUserIds: directedUserIds,
            canIncludeExpansion: canIncludeExpansion, expansion: expansion,
            pushConfig: pushConfig.flatMap { $0.isEmpty ? nil : $0 }, disableNotification: disableNotification,
            disableUpdateLastMessage: disableUpdateLastMessage, localMediaPath: localMediaPath)
        message = try await store.insertOutgoing(message)
        return message
    }

    /// Sends a failed message again with its original client message id: if the server already
    /// stored it (the reply was lost), it answers with the first messageUId and stores nothing twice.
    @discardableResult
    public func resendMessage(messageId: Int64) async throws -> Message {
        try await sendMessage(messageId: messageId)
    }

    /// Sends an outgoing message this device holds and the server does not: one stored by
    /// `insertOutgoingMessage`, or one whose send failed (RongCloud's `sendMessage` with an
    /// inserted message). The same local message becomes the sent one, with its extensions and
    /// `extra`; its time becomes the server's. A message already sent is returned as it is.
    ///
    /// - Throws: 33003 when there is no such outgoing message; `SendMessageError` as `sendMessage`.
    @discardableResult
    public func sendMessage(messageId: Int64) async throws -> Message {
        let store = try openStore()
        guard var message = try await store.message(id: messageId), message.direction == .send else {
            throw IMError(.invalidParameter, "no outgoing message \(messageId) in the local database")
        }
        // Sent and acknowledged: nothing to do. A failed message is sent again even with a uid
        // (its acknowledgement may have been lost: the server answers with the stored one).
        guard message.messageUId.isEmpty || message.sentStatus == .failed || message.sentStatus == .sending else { return message }
        if let media = message.content as? any MediaMessageContent, media.mediaUrl.isEmpty {
            throw IMError(.invalidParameter, "local message \(messageId) is a media message whose file was never uploaded: send it with sendMediaMessage")
        }
        message.sentStatus = .sending
        return try await transmit(message, store: store)
    }

    /// Marks a message failed here and makes the error a send throws with it.
    func sendFailed(_ message: Message, _ error: IMError, store: LocalStore) async -> SendMessageError {
        try? await store.markFailed(message.messageId)
        var message = message
        message.sentStatus = .failed
        return SendMessageError(error: error, message: message)
    }

    func transmit(_ message: Message, store: LocalStore) async throws -> Message {
        var message = message
        func failed(_ error: IMError) async -> SendMessageError { await sendFailed(message, error, store: store) }
        guard message.contentData.count <= MessageLimits.maxContentBytes else {
            throw await failed(IMError(.messageTooLarge, "message content is \(message.contentData.count) bytes; the limit is 128 KB: send large data as a media file"))
        }
        guard let connection, status == .connected else {
            throw await failed(IMError(.connectionUnavailable, "not connected: wait for status connected, then resend the message"))
        }
        var request = Im_SendMessageRequest()
        request.conversationType = Int32(message.conversationType.rawValue)
        request.targetID = message.targetId
        request.objectName = message.objectName
        request.content = message.contentData
        request.clientMessageID = message.clientMessageId
        request.flags = message.flags.rawValue
        request.pushContent = message.pushContent
        request.pushData = message.pushData
        request.channelID = message.channelId
        request.directedUserIds = message.directedUserIds
        request.canIncludeExpansion = message.canIncludeExpansion
        request.expansion = message.expansion
        request.pushConfig = message.pushConfig?.encoded() ?? Data()
        request.disableNotification = message.disableNotification
        request.disableUpdateLastMessage = message.disableUpdateLastMessage
        do {
            let reply = try await connection.request(.sendMessage, request, timeout: options.requestTimeout)
                .body(Im_SendMessageReply.self)
            message.messageUId = reply.messageUid
            message.sentTime = reply.sentTime
            message.sentStatus = .sent
            try await store.markSent(message)
            return message
        } catch let error as IMError {
            throw await failed(error)
        } catch {
            throw await failed(IMError(.connectionUnavailable, "the send failed: \(error)"))
        }
    }

    // MARK: group read receipts

    /// Asks the members of a group to report reading one of this user's sent messages (RongCloud's
    /// `sendReadReceiptRequest`). Their reads arrive as `.response` events of `readReceiptEvents()`.
    public func sendReadReceiptRequest(_ message: Message) async throws {
        let store = try openStore()
        guard message.conversationType == .group, message.direction == .send, !message.messageUId.isEmpty else {
            throw IMError(.invalidParameter, "read receipts are requested for one's own sent group messages")
        }
        var request = Im_ReadReceiptRequest()
        request.conversationType = Int32(message.conversationType.rawValue)
        request.targetID = message.targetId
        request.messageUid = message.messageUId
        _ = try await connected().request(.readReceiptRequest, request, timeout: options.requestTimeout)
        try await store.markReceiptRequested(uid: message.messageUId)
    }

    /// Reports received group messages as read to their senders (RongCloud's `sendReadReceiptResponse`),
    /// in batches of at most 100; messages whose senders asked for no receipt are passed over.
    public func sendReadReceiptResponse(_ conversationType: ConversationType, targetId: String, messages: [Message]) async throws {
        let store = try openStore()
        let uids = messages.filter { $0.direction == .receive && !$0.messageUId.isEmpty }.map(\.messageUId)
        guard !uids.isEmpty else { return }
        let connection = try connected()
        for start in stride(from: 0, to: uids.count, by: GroupLimits.receiptResponseBatch) {
            var request = Im_ReadReceiptResponse()
            request.conversationType = Int32(conversationType.rawValue)
            request.targetID = targetId
            request.messageUids = Array(uids[start..<min(start + GroupLimits.receiptResponseBatch, uids.count)])
            _ = try await connection.request(.readReceiptResponse, request, timeout: options.requestTimeout)
            try await store.markReceiptResponded(uids: request.messageUids)
        }
    }

    /// One page of the members who have read one of this user's group messages, from the server,
    /// in reading order: `count` (1-100) readers after `pageToken` (nil: the first page).
    public func getMessageReadUsers(messageUId: String, count: Int = 100, pageToken: String? = nil) async throws -> MessageReadUsers {
        guard GroupLimits.readUsersPageRange.contains(count) else {
            throw IMError(.invalidParameter, "count must be 1...100, got \(count)")
        }
        var request = Im_ReadUsersRequest()
        request.messageUid = messageUId
        request.count = Int32(count)
        request.pageToken = pageToken ?? ""
        let reply = try await connected().request(.readReceiptUsers, request, timeout: options.requestTimeout).body(Im_ReadUsersReply.self)
        return MessageReadUsers(users: reply.users.map { ($0.userID, $0.readTime) }, total: Int(reply.total),
                                nextPageToken: reply.nextPageToken.isEmpty ? nil : reply.nextPageToken)
    }

    /// The readers of one of this user's messages known on this device, with their read times.
    public func getReadReceiptReaders(messageUId: String) async throws -> [String: Int64] {
        try await openStore().readers(uid: messageUId)
    }

    func connected() throws -> WireConnection {
        guard let connection, status == .connected else {
            throw IMError(.connectionUnavailable, "not connected: wait for status connected and try again")
        }
        return connection
    }

    // MARK: local conversations and history

    /// Marks a conversation read: its unread count and mention flag go to zero (RongCloud's
    /// `clearMessagesUnreadStatus`). Returns false if there is no such conversation.
    @discardableResult
    public func clearMessagesUnreadStatus(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> Bool {
        try await openStore().clearUnread(type: type, targetId: targetId, channelId: try Self.channel(channelId, of: type))
    }

    /// A message of the local database by its id.
    public func getMessage(messageId: Int64) async throws -> Message? {
        try await openStore().message(id: messageId)
    }

    func openStore() throws -> LocalStore {
        guard let store else {
            throw IMError(.clientNotInit, "the local database opens with connect(token:): call connect first")
        }
        return store
    }

    /// The conversation list with each conversation's latest message, read in two queries (for a
    /// list screen's digests): the same order and paging as `getConversationList`.
    public func getConversationSummaries(types: [ConversationType], count: Int = 100, startTime: Int64 = 0) async throws -> [ConversationSummary] {
        let store = try openStore()
        let conversations = try await store.conversations(types: types, count: count, startTime: startTime)
        let latest = try await store.messages(ids: conversations.map(\.latestMessageId).filter { $0 > 0 })
        return conversations.map { ConversationSummary(conversation: $0, latestMessage: latest[$0.latestMessageId]) }
    }

    /// Messages of the local database by id, in one read; ids not found are left out.
    public func getMessages(ids: [Int64]) async throws -> [Int64: Message] {
        try await openStore().messages(ids: ids)
    }

    /// Conversations of the given types, pinned first, then newest first. `startTime` > 0 returns
    /// only conversations whose latest message is older than it (paging).
    public func getConversationList(types: [ConversationType], count: Int = 100, startTime: Int64 = 0) async throws -> [Conversation] {
        try await openStore().conversations(types: types, count: count, startTime: startTime)
    }

    public func getConversation(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> Conversation? {
        try await openStore().conversation(type: type, targetId: targetId, channelId: try Self.channel(channelId, of: type))
    }

    /// Removes a conversation from the local list (its messages stay); no server effect.
    @discardableResult
    public func removeConversation(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> Bool {
        try await openStore().removeConversation(type: type, targetId: targetId, channelId: try Self.channel(channelId, of: type))
    }

    /// Removes every local conversation of these types.
    @discardableResult
    public func clearConversations(types: [ConversationType]) async throws -> Bool {
        try await openStore().clearConversations(types: types)
        return true
    }

    /// Local history: up to `count` (at most 20) messages older than `oldestMessageId`, newest
    /// first; pass -1 to start from the newest.
    public func getHistoryMessages(_ type: ConversationType, targetId: String, channelId: String = "", oldestMessageId: Int64 = -1,
                                   count: Int = 20) async throws -> [Message] {
        let limit = min(max(count, 1), MessageLimits.localHistoryMaxCount)
        return try await openStore().history(type: type, targetId: targetId, channelId: try Self.channel(channelId, of: type),
                                       oldestMessageId: oldestMessageId, count: limit)
    }

    /// Cloud history from the server: `count` (1-100) messages before `recordTime` (descending;
    /// 0 = from the newest) or after it (ascending), and whether more remain.
    public func getRemoteHistoryMessages(
        _ type: ConversationType, targetId: String, channelId: String = "", recordTime: Int64 = 0, count: Int = 20,
        order: HistoryOrder = .descending
    ) async throws -> (messages: [Message], isRemaining: Bool) {
        let channel = try Self.channel(channelId, of: type)
        let store = try openStore()
        guard MessageLimits.historyCountRange.contains(count) else {
            throw IMError(.invalidParameter, "count must be 1...100, got \(count)")
        }
        guard let connection, status == .connected else {
            throw IMError(.connectionUnavailable, "not connected: remote history needs a connection")
        }
        var request = Im_HistoryRequest()
        request.conversationType = Int32(type.rawValue)
        request.targetID = targetId
        request.channelID = channel
        request.recordTime = recordTime
        request.count = Int32(count)
        request.order = Int32(order.rawValue)
        let reply = try await connection.request(.history, request, timeout: options.requestTimeout).body(Im_HistoryReply.self)
        let now = options.clock.nowMilliseconds()
        return (reply.messages.map { message(from: $0, me: store.userId, receivedAt: now) }, reply.isRemaining)
    }

    private func databaseDirectory(userId: String) -> URL {
        let base: URL
        if let directory = options.databaseDirectory {
            base = directory
        } else {
            #if canImport(Darwin)
            base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0].appendingPathComponent("IMLib")
            #else
            base = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/imlib")
            #endif
        }
        return base.appendingPathComponent(appKey).appendingPathComponent(userId)
    }
}

/// The SDK version reported to the server.
public enum IMLibVersion {
    public static let current = "0.1.0"
}
