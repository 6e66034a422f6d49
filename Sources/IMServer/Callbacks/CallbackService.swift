import Foundation
import IMCore
import IMStore
import Logging
import ServiceLifecycle
import Synchronization

/// Callbacks to the app's server, in RongCloud's formats (docs/CALLBACKS.md): full message routing,
/// online status, chatroom status and chatroom attributes, which the server takes on and delivers
/// for sure; and the message callback, which a message waits for before it is delivered.
///
/// Taking on: a callback is a row of the store's outbox before the action it reports is answered
/// (a device's connect, a chatroom join or a KV change), or, for routing, derived from the message
/// log: the service follows the committed messages and writes their routing rows with its cursor,
/// and at start it routes again the messages after the cursor (a row taken on twice is stored
/// once). Sending: a loop takes each app's oldest rows, sends the first of each order key (a
/// conversation, a user, a room) once it is due, the keys concurrently, and deletes what the app's
/// server answered with 200; a failure is tried again with doubling backoff, and the rows behind
/// it in its key wait. Nothing here is on a message's path but the message callback.
public final class CallbackService: Sendable {
    let store: any IMStore
    let transport: any CallbackTransport
    let apps: AppRegistry
    let clock: any WallClock
    let logger: Logger
    let node: String
    let options: Options
    let settingsCache = Mutex<[Int64: (settings: CallbackAppSettings, readAt: Int64)]>([:])
    let wake = WakeSignal()
    let intake: CallbackIntake
    /// Per app: when its server may next be tried after a round in which it answered nothing
    /// (RongCloud pauses an app whose server times out en masse), and the pause's length.
    let pauses = Mutex<[Int64: (until: Int64, length: Int64)]>([:])
    let counters = Mutex<[Int64: CallbackCounters]>([:])
    /// When the routing cursor was last written without rows to go with it.
    let cursorWrittenAt = Mutex<Int64>(0)
    /// The uids of the messages the message callback is asked about.
    let uids = MessageUIDGenerator()

    public struct Options: Sendable {
        /// How often the sender looks for rows that became due (retries) when nothing woke it.
        public var pollMilliseconds: Int64 = 250
        /// How long the sender waits with an empty outbox before it looks again unless told of new
        /// rows first (this node's rows tell it at once; this is for the rows of a node of the
        /// cluster that ended after writing them).
        public var idleMilliseconds: Int64 = 5_000
        /// How long a request may take (RongCloud: 5 s).
        public var requestTimeoutMilliseconds: Int64 = 5_000
        /// The first retry's delay; each next one doubles, up to `maxRetryDelayMilliseconds`.
        public var retryDelayMilliseconds: Int64 = 1_000
        public var maxRetryDelayMilliseconds: Int64 = 60_000
        /// How long a row is tried before it is given up (and logged).
        public var retentionMilliseconds: Int64 = 24 * 3_600_000
        /// Rows kept per app; past it the oldest are given up (and logged).
        public var maxBacklogPerApp = 100_000
        /// Rows read per app and round.
        public var pageSize = 2_000
        /// Order keys of one app sent at once.
        public var keysInFlight = 256
        /// How long a node holds the rows it took before another may take them.
        public var leaseMilliseconds: Int64 = 60_000
        public init() {}

        /// The options the `callback` settings give.
        public init(_ settings: ServerConfig.CallbackSettings) {
            requestTimeoutMilliseconds = Int64(settings.requestTimeoutSeconds) * 1000
            retentionMilliseconds = Int64(settings.retentionHours) * 3_600_000
            maxBacklogPerApp = settings.maxBacklog
            leaseMilliseconds = max(60_000, 4 * requestTimeoutMilliseconds)
        }
    }

    init(store: any IMStore, transport: any CallbackTransport, apps: AppRegistry, clock: any WallClock, logger: Logger, node: String,
         options: Options = Options()) {
        self.store = store
        self.transport = transport
        self.apps = apps
        self.clock = clock
        self.logger = logger
        self.node = node
        self.options = options
        let wake = self.wake
        // What the intake writes is sent at once (the sender waits for it when its outbox is empty).
        self.intake = CallbackIntake(store: store, node: node, logger: logger, written: { wake.signal() })
    }

    // MARK: settings

    /// The app's callback settings (cached for a few seconds; a change through this node drops the cache).
    public func settings(appId: Int64) async throws -> CallbackAppSettings {
        let now = clock.nowMilliseconds()
        if let cached = settingsCache.withLock({ $0[appId] }), now - cached.readAt < 5_000 { return cached.settings }
        let settings = try await store.callbackSettings(appId: appId).map { try JSONDecoder().decode(CallbackAppSettings.self, from: $0) }
            ?? CallbackAppSettings()
        settingsCache.withLock { $0[appId] = (settings, now) }
        return settings
    }

    /// The app's settings if this node has read them lately, without waiting for the store.
    func cachedSettings(appId: Int64) -> CallbackAppSettings? {
        settingsCache.withLock { $0[appId]?.settings }
    }

    /// Changes the app's callback settings.
    public func updateSettings(appId: Int64, _ change: (inout CallbackAppSettings) throws -> Void) async throws -> CallbackAppSettings {
        settingsCache.withLock { $0[appId] = nil }
        var settings = try await settings(appId: appId)
        try change(&settings)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await store.setCallbackSettings(appId: appId, settings: try encoder.encode(settings))
        settingsCache.withLock { $0[appId] = nil }
        wake.signal()
        return settings
    }

    // MARK: taking on

    /// Takes records on: durable when this returns.
    func takeOn(_ records: [CallbackRecord]) async throws {
        guard !records.isEmpty else { return }
        try await intake.write(records)
        wake.signal()
    }

    /// Takes records on without waiting (from code that cannot wait): written with the next batch,
    /// and written again with the one after if that fails.
    func takeOnSoon(_ records: [CallbackRecord]) {
        guard !records.isEmpty else { return }
        intake.add(records)
        wake.signal()
    }

    func record(appId: Int64, kind: CallbackKind, orderKey: String, dedupKey: String = UUID().uuidString, body: Data) -> CallbackRecord {
        let now = clock.nowMilliseconds()
        return CallbackRecord(appId: appId, kind: kind, orderKey: orderKey, dedupKey: dedupKey, body: body, nextAttemptAt: now, createdAt: now)
    }

    /// The routing row of a message, if the app routes it.
    func routingRecord(_ message: StoredMessage, settings: CallbackAppSettings,
                       sensitivity: CallbackPayloads.Sensitivity? = nil) -> CallbackRecord? {
        guard let routing = settings.routing, !message.flags.contains(.status) else { return nil }
        let platform = message.senderPlatform
        if platform == nil, !routing.includeServerAPI { return nil }
        let sensitivity = sensitivity ?? (message.hadWordReplaced ? .replaced : .none)
        if sensitivity == .blocked, !routing.includeBlocked { return nil }
        let body = CallbackPayloads.routing(message, source: CallbackPayloads.source(platform), sensitivity: sensitivity)
        var conversation = "\(message.conversationType.rawValue):\(message.conversationKey)"
        if message.conversationType == .ultraGroup { conversation += ":" + message.channelId }
        return record(appId: message.appId, kind: .routing, orderKey: conversation, dedupKey: message.uid, body: body)
    }

    /// Routes a message that is not in the log (a chatroom message), before it is answered.
    func route(_ message: StoredMessage, sensitivity: CallbackPayloads.Sensitivity? = nil) async throws {
        guard let record = routingRecord(message, settings: try await settings(appId: message.appId), sensitivity: sensitivity) else { return }
        try await takeOn([record])
    }

    // MARK: running

    /// Follows the committed messages and sends until cancelled. `events` is the server's event
    /// stream (subscribed before the first message can commit).
    /// `executor`: where following the log and sending run (a `BackgroundExecutor`); the intake,
    /// which connects and chatroom joins wait for, stays on the default executor.
    func run(events: AsyncStream<ServerEvent>, executor: (any TaskExecutor)? = nil) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.intake.run() }
            group.addTask(executorPreference: executor) { await self.followLog(events) }
            group.addTask(executorPreference: executor) { await self.sendLoop(executor: executor) }
            await group.next()
            group.cancelAll()
        }
    }

    private func followLog(_ events: AsyncStream<ServerEvent>) async {
        do {
            try await recover()
        } catch {
            logger.error("callbacks: the messages committed before this start could not be routed", metadata: ["error": "\(error)"])
        }
        for await event in events {
            guard case .messageCommitted(let committed) = event else { continue }
            let message = committed.message
            let settings: CallbackAppSettings
            do {
                settings = try await self.settings(appId: message.appId)
            } catch {
                logger.error("callbacks: the app's settings could not be read; the message is routed after the next start",
                             metadata: ["app": "\(message.appId)", "uid": "\(message.uid)", "error": "\(error)"])
                continue
            }
            if let record = routingRecord(message, settings: settings) {
                intake.add([record], cursor: message.seq)
                wake.signal()
            } else if cursorDue() {
                intake.add([], cursor: message.seq)
            }
        }
    }

    /// Whether a message without a row should move the cursor: at most once a second.
    private func cursorDue() -> Bool {
        let now = clock.nowMilliseconds()
        return cursorWrittenAt.withLock { last in
            guard now - last >= 1_000 else { return false }
            last = now
            return true
        }
    }

    /// Routes the messages committed after this node's cursor (a crash came between their commit
    /// and their routing rows), within the retention window.
    private func recover() async throws {
        let last = try await store.lastCommittedSeq()
        guard var cursor = try await store.callbackCursor(node: node) else {
            try await store.enqueueCallbacks([], node: node, cursor: last)
            return
        }
        let oldest = clock.nowMilliseconds() - options.retentionMilliseconds
        var routed = 0
        while cursor < last {
            let page = try await store.committedMessages(afterSeq: cursor, limit: 1_000)
            guard let end = page.last?.seq else { break }
            var records: [CallbackRecord] = []
            for message in page where message.seq <= last && message.sentTime >= oldest {
                if let record = routingRecord(message, settings: try await settings(appId: message.appId)) { records.append(record) }
            }
            try await store.enqueueCallbacks(records, node: node, cursor: min(end, last))
            routed += records.count
            cursor = end
        }
        if routed > 0 {
            logger.notice("callbacks: routed the messages committed before this start", metadata: ["messages": "\(routed)"])
            wake.signal()
        }
    }

    // MARK: counters

    /// What happened to an app's callbacks since the server started.
    public struct CallbackCounters: Sendable, Equatable {
        public var delivered = 0
        public var failedAttempts = 0
        /// Given up: past the retention window or the backlog bound, or the app turned the callback off.
        public var dropped = 0
        public var messagesBlocked = 0
        public var messageCallbackFailures = 0
    }

    public func counters(appId: Int64) -> CallbackCounters {
        counters.withLock { $0[appId] ?? CallbackCounters() }
    }

    func tally(appId: Int64, _ change: (inout CallbackCounters) -> Void) {
        counters.withLock { change(&$0[appId, default: CallbackCounters()]) }
    }

    /// How many rows each app has waiting.
    public func backlog() async throws -> [Int64: Int] {
        try await store.callbackBacklog()
    }
}

extension ServerEvents {
    /// The events routing follows: a stream deep enough that a slow store makes it fall behind
    /// rather than lose messages.
    func callbackStream() -> AsyncStream<ServerEvent> { subscribe(buffer: 1_000_000) }
}

/// Runs the callback service as one of the server's services.
struct CallbackRunner: Service {
    let callbacks: CallbackService
    let events: AsyncStream<ServerEvent>

    func run() async throws {
        let executor = BackgroundExecutor(name: "imserver-callbacks")
        try? await cancelWhenGracefulShutdown {
            await callbacks.run(events: events, executor: executor)
        }
        executor.stop()
        await callbacks.transport.shutdown()
    }
}

/// Writes records to the outbox in the order they were added, batching whatever arrived while the
/// last transaction ran (group commit): one transaction for many devices connecting at once.
final class CallbackIntake: Sendable {
    private struct Pending {
        /// In the order added; `awaited` records belong to a caller waiting for them.
        var entries: [(record: CallbackRecord, awaited: Bool)] = []
        var cursor: UInt64?
        var waiters: [CheckedContinuation<Void, any Error>] = []
        /// A batch is being written now.
        var writing = false
    }

    private let store: any CallbackStore
    private let node: String
    private let pending = Mutex(Pending())
    private let wake = WakeSignal()
    private let logger: Logger
    /// Called once records are in the outbox.
    private let written: @Sendable () -> Void

    init(store: any CallbackStore, node: String, logger: Logger, written: @escaping @Sendable () -> Void = {}) {
        self.store = store
        self.node = node
        self.logger = logger
        self.written = written
    }

    /// Adds records (and the routing cursor they reach) to the next batch.
    func add(_ records: [CallbackRecord], cursor: UInt64? = nil) {
        pending.withLock { pending in
            pending.entries += records.map { ($0, false) }
            if let cursor { pending.cursor = max(pending.cursor ?? 0, cursor) }
        }
        wake.signal()
    }

    /// Adds records and returns once they, and every record added before them, are durable
    /// (throws if they could not be written). With no records and nothing waiting or being
    /// written, at once.
    func write(_ records: [CallbackRecord]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let idle = pending.withLock { pending -> Bool in
                if records.isEmpty, pending.entries.isEmpty, !pending.writing { return true }
                pending.entries += records.map { ($0, true) }
                pending.waiters.append(continuation)
                return false
            }
            if idle { continuation.resume() } else { wake.signal() }
        }
    }

    func run() async {
        while !Task.isCancelled {
            await wake.wait(milliseconds: 1_000)
            await flush()
        }
        await flush()
    }

    private func flush() async {
        let batch = pending.withLock { pending -> Pending in
            defer { pending = Pending(writing: true) }
            return pending
        }
        defer { pending.withLock { $0.writing = false } }
        guard !batch.entries.isEmpty || batch.cursor != nil || !batch.waiters.isEmpty else { return }
        do {
            try await store.enqueueCallbacks(batch.entries.map(\.record), node: node, cursor: batch.cursor)
            for waiter in batch.waiters { waiter.resume() }
            if !batch.entries.isEmpty { written() }
        } catch {
            // The waiting callers hear of it (their action is refused); the rest is written with
            // the next batch, ahead of what came meanwhile.
            for waiter in batch.waiters { waiter.resume(throwing: error) }
            let kept = batch.entries.filter { !$0.awaited }
            logger.error("callbacks: could not be written to the outbox; trying again", metadata: ["count": "\(kept.count)", "error": "\(error)"])
            pending.withLock { pending in
                pending.entries = kept + pending.entries
                if let cursor = batch.cursor { pending.cursor = max(pending.cursor ?? 0, cursor) }
            }
            try? await Task.sleep(for: .milliseconds(200))
            wake.signal()
        }
    }
}
