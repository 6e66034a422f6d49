import Foundation
import IMCore
import IMPush
import IMStore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Push notifications for devices that are away (spec/system-push-ultra.md §2).
///
/// Decisions: every committed message reaches the service as a server event; for each offline
/// recipient with a device it records, in one transaction, a pending push per device or the rule
/// that held the push back (with its troubleshooting code), and how far it has decided (the node's
/// cursor, a seq of the message log). A crash between a commit and its decision is
/// made good at the next start: the messages after the cursor are decided again, and a decision
/// already recorded is kept (one record per message, user and device).
///
/// Sending: a loop takes the pending pushes that are due, sends them through the `PushTransport`
/// concurrently, and records each answer; a retryable answer is tried again with backoff, a dead
/// token is deleted. Nothing of this is on the message path: delivery never waits for a push.
public final class PushService: Sendable {
    let store: any IMStore
    let transport: any PushTransport
    let registry: SessionRegistry
    let cluster: (any ClusterTransport)?
    let groups: GroupRosters
    let ultraGroups: UltraGroupRosters
    let clock: any WallClock
    let logger: Logger
    let node: String
    let settingsCache = Mutex<[Int64: (settings: PushAppSettings, readAt: Int64)]>([:])
    let frequency = Mutex<[String: [Int64]]>([:])
    let wake = WakeSignal()
    /// The pending pushes this node decided last, with their ids: the sender takes them from here
    /// rather than read them back from the store (it still claims them there, so none is sent
    /// twice). Up to `handOffLimit`; what comes past it waits in the store, where the sender's
    /// reads find it.
    let handOff = Mutex(PushHandOff())
    /// This node's sessions as the decide loop has seen them, by "appId|userId" and session id:
    /// built from the same ordered event stream as the commits, so a message is judged against
    /// the presence of its commit, not of the later moment it is decided (a phone that got the
    /// message and went offline meanwhile is not pushed).
    let presence = Mutex<[UserKey: [String: Platform]]>([:])
    /// Sessions whose end arrived before their start (kept until the start comes).
    let endedSessions = Mutex<Set<String>>([])
    /// When the presence view was last checked against the registry, and what that check found
    /// there that the registry did not have.
    let presenceCheckedAt = Mutex<Int64>(0)
    let staleSessions = Mutex<Set<String>>([])

    /// A user of an app.
    struct UserKey: Hashable {
        var appId: Int64
        var userId: String
    }
    /// When the decide loop last wrote its cursor without a decision to go with it.
    let cursorWrittenAt = Mutex<Int64>(0)
    let options: Options
    /// Where decisions and the providers' answers are counted.
    let metrics: ServerMetrics?
    /// The messages on their way, which the decisions and the sender step aside for between
    /// their pieces (a message's recipients, a transaction, a batch before it is claimed).
    let deliveryFirst: DeliveryFirst?

    public struct Options: Sendable {
        /// How often the sender looks for pushes that became due (retries) while some are pending.
        public var pollMilliseconds: Int64 = 250
        /// How long the sender waits, when none is pending, before it looks again unless told of
        /// new pushes first (a decision of this node tells it at once; this is for the pushes of a
        /// node of the cluster that ended after recording them).
        public var idleMilliseconds: Int64 = 5_000
        /// Pushes taken for sending at a time.
        public var batch = 2_000
        /// Batches sent at once (each waits for its answers while the next is read and claimed).
        public var batchesInFlight = 6
        /// Decided pushes held for the sender in memory at most (`handOff`).
        public var handOffLimit = 20_000
        /// Push records written per transaction: several messages' whole, or one message's part
        /// (on SQLite a message's records are a row of push_batches; the decisions have a file and
        /// a writer of their own there).
        public var writeChunk = 10_000
        /// Attempts before a retryable failure is final.
        public var maxAttempts = 6
        /// The first retry's delay; each next one doubles, up to `maxRetryDelayMilliseconds`.
        public var retryDelayMilliseconds: Int64 = 1_000
        public var maxRetryDelayMilliseconds: Int64 = 300_000
        /// How long a node holds the pushes it took for sending before another may take them.
        public var leaseMilliseconds: Int64 = 120_000
        /// How long records are kept for the troubleshooting view.
        public var retentionMilliseconds: Int64 = 7 * 86_400_000
        /// Messages older than this are not decided again after a crash (their push is stale).
        public var recoveryWindowMilliseconds: Int64 = 3_600_000
        public init() {}

        /// The options the `push` settings give.
        public init(_ settings: ServerConfig.PushSettings) {
            maxAttempts = settings.maxAttempts
            leaseMilliseconds = Int64(max(60, 4 * settings.requestTimeoutSeconds)) * 1000
            retentionMilliseconds = Int64(settings.recordRetentionDays) * 86_400_000
        }
    }

    init(store: any IMStore, transport: any PushTransport, registry: SessionRegistry,
         cluster: (any ClusterTransport)?, groups: GroupRosters, ultraGroups: UltraGroupRosters, clock: any WallClock,
         logger: Logger, node: String, options: Options = Options(), metrics: ServerMetrics? = nil, deliveryFirst: DeliveryFirst? = nil) {
        self.metrics = metrics
        self.deliveryFirst = deliveryFirst
        self.store = store
        self.transport = transport
        self.registry = registry
        self.cluster = cluster
        self.groups = groups
        self.ultraGroups = ultraGroups
        self.clock = clock
        self.logger = logger
        self.node = node
        self.options = options
    }

    // MARK: settings

    /// The app's push settings (cached for a few seconds; a change through this node drops the cache).
    public func settings(appId: Int64) async throws -> PushAppSettings {
        let now = clock.nowMilliseconds()
        if let cached = settingsCache.withLock({ $0[appId] }), now - cached.readAt < 5_000 { return cached.settings }
        let settings = try await store.pushSettings(appId: appId).map { try JSONDecoder().decode(PushAppSettings.self, from: $0) }
            ?? PushAppSettings()
        settingsCache.withLock { $0[appId] = (settings, now) }
        return settings
    }

    /// Changes the app's push settings.
    public func updateSettings(appId: Int64, _ change: (inout PushAppSettings) throws -> Void) async throws -> PushAppSettings {
        settingsCache.withLock { $0[appId] = nil }
        var settings = try await settings(appId: appId)
        try change(&settings)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try await store.setPushSettings(appId: appId, settings: try encoder.encode(settings))
        settingsCache.withLock { $0[appId] = nil }
        return settings
    }

    // MARK: running

    /// Decides and sends until cancelled. `events` is the server's event stream (subscribed before
    /// the first message can commit).
    /// `deciding` and `sending`: where the decisions and the sender run (a `BackgroundExecutor`
    /// each, so that the one's work never waits behind the other's on one thread); the batches the
    /// sender detaches from cancellation run on `sending` too.
    func run(events: AsyncStream<ServerEvent>, deciding: (any TaskExecutor)? = nil, sending: (any TaskExecutor)? = nil) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: deciding) { await self.decideLoop(events) }
            group.addTask(executorPreference: sending) { await self.sendLoop(executor: sending) }
        }
    }

    private func decideLoop(_ events: AsyncStream<ServerEvent>) async {
        do {
            try await recover()
        } catch {
            logger.error("push: the messages committed before this start could not be decided", metadata: ["error": "\(error)"])
        }
        // The events are read ahead: the messages committed while a decision was being made are
        // decided together next, with one transaction for several, so a group's messages at a
        // rate its decisions one at a time cannot follow are still all decided as they come.
        // Presence events keep their place: the messages before one are decided before it is seen.
        let backlog = EventBacklog(limit: 100_000)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await backlog.fill(from: events) }
            while let taken = await backlog.take() {
                var messages: [StoredMessage] = []
                for event in taken {
                    guard case .messageCommitted(let committed) = event else {
                        await decideLogged(messages)
                        messages = []
                        await handle(event)
                        continue
                    }
                    messages.append(committed.message)
                    if messages.count == Self.messagesPerDecision {
                        await decideLogged(messages)
                        messages = []
                    }
                }
                await decideLogged(messages)
            }
        }
    }

    /// Messages decided together at most (their records are written in transactions of about
    /// `writeChunk`).
    static let messagesPerDecision = 16

    /// A presence event: the service's view of who is online, and badges reset.
    private func handle(_ event: ServerEvent) async {
        switch event {
        case .sessionOnline(let presence):
            // A session whose end was seen first (its events raced) stays out.
            if let platform = Platform.allCases.first(where: { "\($0)" == presence.platform }),
               endedSessions.withLock({ $0.remove(presence.sessionId) == nil }) {
                self.presence.withLock { $0[UserKey(appId: presence.appId, userId: presence.userId), default: [:]][presence.sessionId] = platform }
            }
            reconcilePresence()
            // The device came online: its badge starts again (also when the session has ended
            // by the time this event is read; a badge that cannot be reset is left as it was).
            if !presence.deviceId.isEmpty {
                try? await store.resetPushBadge(appId: presence.appId, userId: presence.userId, deviceId: presence.deviceId)
            }
        case .sessionOffline(let presence):
            let known = self.presence.withLock { table -> Bool in
                let key = UserKey(appId: presence.appId, userId: presence.userId)
                defer { if table[key]?.isEmpty == true { table[key] = nil } }
                return table[key]?.removeValue(forKey: presence.sessionId) != nil
            }
            if !known { endedSessions.withLock { _ = $0.insert(presence.sessionId) } }
        default:
            break
        }
    }

    /// Every 30 s, drops from the presence view the sessions the registry has not had at two
    /// checks in a row (an end lost to an overflowing stream), and forgets the ends that never
    /// met their start.
    private func reconcilePresence() {
        let now = clock.nowMilliseconds()
        guard presenceCheckedAt.withLock({ checked in
            guard now - checked >= 30_000 else { return false }
            checked = now
            return true
        }) else { return }
        let snapshot = presence.withLock { $0 }
        var stale: [String: UserKey] = [:]
        for (key, sessions) in snapshot {
            let live = Set(registry.sessions(appId: key.appId, userId: key.userId).map(\.id))
            for session in sessions.keys where !live.contains(session) { stale[session] = key }
        }
        // Only what was already stale at the last check: a session whose end is still queued
        // behind messages being decided counts as online for them.
        let confirmed = staleSessions.withLock { suspects in
            defer { suspects = Set(stale.keys) }
            return stale.filter { suspects.contains($0.key) }
        }
        presence.withLock { table in
            for (session, key) in confirmed {
                table[key]?[session] = nil
                if table[key]?.isEmpty == true { table[key] = nil }
            }
        }
        endedSessions.withLock { $0.removeAll() }
    }

    /// Decides messages committed one after another (none: nothing to do). The cursor goes with
    /// every recorded decision, and otherwise at most once a second: a message that made no record
    /// costs no write, and a crash re-decides at most a second of them (a decision already
    /// recorded is kept).
    private func decideLogged(_ messages: [StoredMessage]) async {
        guard let last = messages.last else { return }
        await deliveryFirst?.stepAside()
        let now = clock.nowMilliseconds()
        let cursorDue = cursorWrittenAt.withLock { now - $0 >= 1_000 }
        // Tried until it is recorded: a later message's cursor must not pass one whose pushes were
        // never written. A retry goes on from the first message not wholly written: one decided
        // again would count its devices' badges up again (its records are kept, not written twice).
        var remaining = messages[...]
        var delay = 100
        while !Task.isCancelled {
            var written = 0
            do {
                let wroteCursor = try await decide(Array(remaining), cursor: last.seq, writeCursorAlone: cursorDue || remaining.count < messages.count,
                                                   written: &written)
                if wroteCursor { cursorWrittenAt.withLock { $0 = now } }
                return
            } catch {
                logger.error("push: a decision could not be recorded; trying again",
                             metadata: ["error": "\(error)", "uid": "\(remaining.map(\.uid).joined(separator: ","))"])
                remaining = remaining.dropFirst(written)
                try? await Task.sleep(for: .milliseconds(delay))
                delay = min(delay * 2, 10_000)
            }
        }
    }

    /// Decides the messages committed after this node's cursor (a crash cut their decision short).
    func recover() async throws {
        guard let cursor = try await store.pushCursor(node: node) else {
            // A new node: nothing before now is its to decide.
            let last = try await store.lastCommittedSeq()
            try await store.recordPushDecisions([], badges: [], node: node, cursor: last)
            return
        }
        var after = cursor
        let oldest = clock.nowMilliseconds() - options.recoveryWindowMilliseconds
        while true {
            let messages = try await store.committedMessages(afterSeq: after, limit: 200)
            guard let last = messages.last else { return }
            try await decide(messages.filter { $0.sentTime >= oldest }, cursor: last.seq)
            after = last.seq
        }
    }

    /// Writes decisions (records, the badges they set, the cursor), hands the pending ones to the
    /// sender and wakes it. The records are taken over: the pending ones are handed on in place,
    /// not copied one by one.
    private func record(_ records: consuming [PushRecord], _ badges: [PushBadge], cursor: UInt64?) async throws {
        await deliveryFirst?.stepAside()
        let ids = try await store.recordPushDecisions(records, badges: badges, node: node, cursor: cursor)
        // The pending ones moved to the front in their order, with their ids.
        var pending = 0
        for index in records.indices {
            metrics?.pushDecided(records[index].status)
            // A record not written (its key was stored before) is not this decision's to send.
            guard records[index].status == .pending, index < ids.count, ids[index] != 0 else { continue }
            records[index].id = ids[index]
            records.swapAt(pending, index)
            pending += 1
        }
        guard pending > 0 else { return }
        records.removeSubrange(pending...)
        let limit = options.handOffLimit
        handOff.withLock { queue in
            if queue.count + records.count <= limit { queue.append(records[...]) }
        }
        wake.signal()
    }

    /// Up to `limit` of the pushes handed over, oldest first.
    private func takeHandedOff(limit: Int) -> [ArraySlice<PushRecord>] {
        handOff.withLock { $0.take(limit: limit) }
    }

    /// Records the decisions for these messages with the cursor, in their order: the records of
    /// whole messages together in transactions of up to `writeChunk` records (a message with more
    /// is split); without any decision, the cursor alone only when `writeCursorAlone`. Returns
    /// whether the cursor was written. `written`: how many of the messages, from the first, had
    /// all their decisions written (when a write fails, those need no deciding again).
    @discardableResult
    func decide(_ messages: [StoredMessage], cursor: UInt64, writeCursorAlone: Bool = true) async throws -> Bool {
        var written = 0
        return try await decide(messages, cursor: cursor, writeCursorAlone: writeCursorAlone, written: &written)
    }

    func decide(_ messages: [StoredMessage], cursor: UInt64, writeCursorAlone: Bool, written: inout Int) async throws -> Bool {
        let chunk = options.writeChunk
        // Decided and not written yet: whole messages' records and the badges they set, with the
        // number of messages (from the first) that are all written once they are.
        var pending: (records: [PushRecord], badges: [PushBadge], through: Int) = ([], [], 0)
        var wroteAny = false
        func flush(cursor: UInt64? = nil) async throws {
            guard !pending.records.isEmpty || cursor != nil else { return }
            let wrote = !pending.records.isEmpty
            // Given up to `record`, which hands the pending ones on without copying them.
            let records = pending.records
            pending.records = []
            try await record(consume records, pending.badges, cursor: cursor)
            pending.badges = []
            wroteAny = wroteAny || wrote
            written = pending.through
        }
        // What the messages of this call share: the badges decided so far (not written yet) and
        // the devices last read.
        var shared = SharedReads()
        func decideMessage(_ message: StoredMessage) async throws {
            if let users = try await audience(of: message) {
                let (records, badges) = try await decisions(for: message, users: users, shared: &shared)
                if records.count > chunk {
                    // Its own transactions, after what was decided before it.
                    try await flush()
                    try await recordSplit(records, badges, chunk: chunk)
                    wroteAny = true
                } else {
                    if pending.records.count + records.count > chunk { try await flush() }
                    // (Taken whole when nothing is pending, as nearly always: not copied record by record.)
                    if pending.records.isEmpty { pending.records = records } else { pending.records += records }
                    pending.badges += badges
                }
                return
            }
            // A broadcast: every user with a device, a page at a time; long lists of decisions are
            // recorded as they come, after what was decided before them (a crash re-decides the
            // message, and keeps what was recorded).
            var after = ""
            while true {
                let page = try await store.pushDeviceUsers(appId: message.appId, afterUserId: after, limit: Self.directPage)
                guard let last = page.last else { break }
                after = last
                let (records, badges) = try await decisions(for: message, users: page.filter { $0 != message.senderId }, shared: &shared)
                pending.records += records
                pending.badges += badges
                if pending.records.count >= chunk { try await flush() }
            }
        }
        for (index, message) in messages.enumerated() {
            if PushDecision.isNotification(message) { try await decideMessage(message) }
            // Decided: written once what is pending is (now, when nothing is). A message written in
            // parts (split, or a broadcast's pages) counts only once its last part is.
            pending.through = index + 1
            if pending.records.isEmpty { written = index + 1 }
        }
        guard wroteAny || !pending.records.isEmpty || writeCursorAlone else { return false }
        // The cursor goes with the last transaction (alone when nothing is left to go with it).
        try await flush(cursor: cursor)
        return true
    }

    /// Writes one message's decisions in transactions of at most `chunk` records (a device has
    /// one record of a message, so its badge goes with it).
    private func recordSplit(_ records: [PushRecord], _ badges: [PushBadge], chunk: Int) async throws {
        var start = 0
        while start < records.count {
            let end = min(records.count, start + chunk)
            let part = Array(records[start..<end])
            let keys = Set(part.map { DeviceKey(appId: $0.appId, userId: $0.userId, deviceId: $0.deviceId) })
            let partBadges = badges.filter { keys.contains(DeviceKey(appId: $0.appId, userId: $0.userId, deviceId: $0.deviceId)) }
            try await record(part, partBadges, cursor: nil)
            start = end
        }
    }

    /// One device of one user of one app.
    struct DeviceKey: Hashable {
        var appId: Int64
        var userId: String
        var deviceId: String
    }

    /// What the messages decided in one call share. Their decisions are written together at the
    /// end, so a later message counts a device's badge on from an earlier one's; and consecutive
    /// messages to the same users (a group's) read their devices once.
    struct SharedReads {
        /// The badges decided so far, in order.
        var badges: [PushBadge] = []
        /// The devices last read, with the badges decided since.
        var devices: (appId: Int64, users: [String], byUser: [String: [PushDeviceRecord]])?
        /// `badges` by device, the last for each, as far as `indexed` of them: made only when a
        /// message's devices are read again (recipients that differ from the last message's), and
        /// then only extended.
        var badgeIndex: [DeviceKey: Int] = [:]
        var indexed = 0

        /// The badge decided last for each device, with those decided since the last call added.
        mutating func decidedBadges() -> [DeviceKey: Int] {
            for badge in badges[indexed...] {
                badgeIndex[DeviceKey(appId: badge.appId, userId: badge.userId, deviceId: badge.deviceId)] = badge.badge
            }
            indexed = badges.count
            return badgeIndex
        }
    }

    /// The users a message is for (its sender excluded); nil for a broadcast to every user.
    func audience(of message: StoredMessage) async throws -> [String]? {
        // An online broadcast is for the users online: nobody is pushed.
        guard !message.isOnlineBroadcast else { return [] }
        var users: [String]
        switch message.conversationType {
        case .group:
            if !message.directedUserIds.isEmpty {
                users = message.directedUserIds
            } else {
                users = try await groups.roster(appId: message.appId, groupId: message.targetId).map { Array($0.members.keys) } ?? []
            }
        case .ultraGroup:
            guard let roster = try await ultraGroups.roster(appId: message.appId, groupId: message.targetId) else { return [] }
            if !message.directedUserIds.isEmpty {
                users = message.directedUserIds
            } else if let channel = roster.channels[message.channelId], channel.type == .privateChannel {
                var members = channel.members
                for userGroup in channel.userGroups { members.formUnion(roster.userGroups[userGroup] ?? []) }
                users = Array(members)
            } else {
                users = Array(roster.members.keys)
            }
        case .chatroom:
            return []
        default:
            guard message.targetId != StoredMessage.everyone else { return nil }
            users = [message.targetId]
        }
        return users.filter { $0 != message.senderId }.sorted()
    }

    private func decisions(for message: StoredMessage, users: [String], shared: inout SharedReads) async throws -> ([PushRecord], [PushBadge]) {
        guard !users.isEmpty else { return ([], []) }
        let appId = message.appId
        // Who is online, on which platforms (every node).
        var online: [String: [Platform]] = [:]
        presence.withLock { table in
            for user in users {
                if let sessions = table[UserKey(appId: appId, userId: user)] { online[user] = Array(sessions.values) }
            }
        }
        if let cluster {
            for entry in try await cluster.sessions(appId: appId, userIds: users) where entry.nodeId != cluster.nodeId {
                if let platform = Platform(rawValue: entry.platform) { online[entry.userId, default: []].append(platform) }
            }
        }
        let offline = users.filter { !(online[$0]?.contains { $0.loginClass == .mobile } ?? false) }
        guard !offline.isEmpty else { return ([], []) }
        // Only users with a device are decided: one without gets no push and no record (the
        // troubleshooting view reports P23 for a user with no device), so a message to users who
        // never registered a token costs one read and no write.
        var devices: [String: [PushDeviceRecord]]
        if let last = shared.devices, last.appId == appId, last.users == offline {
            devices = last.byUser
        } else {
            devices = Dictionary(grouping: try await store.pushDevices(appId: appId, userIds: offline), by: \.userId)
            // The store has the badges written so far: those of this call's earlier messages go on.
            if !shared.badges.isEmpty {
                let decided = shared.decidedBadges()
                for (user, list) in devices {
                    for index in list.indices {
                        if let badge = decided[DeviceKey(appId: appId, userId: user, deviceId: list[index].deviceId)] {
                            devices[user]?[index].badge = badge
                        }
                    }
                }
            }
        }
        defer { shared.devices = (appId, offline, devices) }
        let away = offline.filter { devices[$0] != nil }
        guard !away.isEmpty else { return ([], []) }

        // What the rules read besides the devices, at once (each is a query of its own).
        let settings = try await settings(appId: appId)
        // A recipient's private or system conversation is named after the sender, and so is the push.
        let namedAfterSender = message.conversationType == .private || message.conversationType == .system
        // Private and system pushes are titled with the sender, group pushes name the sender in
        // their default text: with the name the recipient gave the sender, if any.
        let namesSender = namedAfterSender || message.conversationType == .group
        let config = (try? MessagePushConfig.decode(message.pushConfig)) ?? nil
        let store = self.store
        async let preferencesRead = store.pushPreferences(appId: appId, userIds: away, type: message.conversationType,
                                                          targetId: namedAfterSender ? message.senderId : message.targetId,
                                                          channelId: message.channelId)
        async let profilesRead = settings.userSettingsEnabled ? store.pushProfiles(appId: appId, userIds: away) : [:]
        async let remarksRead = namesSender ? store.remarks(appId: appId, owners: away, for: message.senderId) : [:]
        async let templatesRead = config?.templateId != nil ? store.pushTemplates(appId: appId) : []
        async let senderRead = store.user(appId: appId, userId: message.senderId)
        var conversationName: String?
        var senderAlias: String?
        var groupDefault = PushNotificationLevel.default
        switch message.conversationType {
        case .group:
            async let group = store.group(appId: appId, groupId: message.targetId)
            async let alias = store.groupRemark(appId: appId, groupId: message.targetId, userId: message.senderId)
            conversationName = try await group?.name
            senderAlias = try await alias
        case .ultraGroup:
            conversationName = try await ultraGroups.roster(appId: appId, groupId: message.targetId)?.name
            let channelDefault = message.channelId.isEmpty ? 0
                : try await store.ultraGroupUnpushLevel(appId: appId, groupId: message.targetId, channelId: message.channelId)
            let level = channelDefault != 0 ? channelDefault
                : try await store.ultraGroupUnpushLevel(appId: appId, groupId: message.targetId, channelId: "")
            groupDefault = PushNotificationLevel(rawValue: level) ?? .default
        default:
            break
        }
        let preferences = try await preferencesRead
        let profiles = try await profilesRead
        let remarks = try await remarksRead
        let templates = Dictionary(try await templatesRead.map { ($0.templateId, $0) }, uniquingKeysWith: { first, _ in first })
        let senderName = try await senderRead.flatMap { $0.name.isEmpty ? nil : $0.name } ?? message.senderId
        let now = clock.nowMilliseconds()
        let context = PushMessageContext(message: message, pushConfig: config,
                                         mentions: message.mentions ?? MentionedInfo.of(content: message.content),
                                         senderName: senderName, senderAlias: senderAlias, conversationName: conversationName, templates: templates,
                                         settings: settings, groupDefaultLevel: groupDefault, now: now)
        var records: [PushRecord] = []
        var badges: [PushBadge] = []
        for (place, user) in away.enumerated() {
            if place & 255 == 255 { await deliveryFirst?.stepAside() }
            // (Most of a group's members have no settings of their own: those lookups are skipped.)
            var recipient = PushRecipient(userId: user, devices: devices[user] ?? [], onlinePlatforms: online.isEmpty ? [] : online[user] ?? [],
                                          preferences: preferences.isEmpty ? nil : preferences[user],
                                          profile: profiles.isEmpty ? .default : profiles[user] ?? .default,
                                          remark: remarks.isEmpty ? nil : remarks[user])
            if message.conversationType == .ultraGroup && settings.ultraGroupPushLimit > 0 {
                recipient.overFrequency = !admitUltraGroupPush(appId: appId, groupId: message.targetId, userId: user, now: now,
                                                               limit: settings.ultraGroupPushLimit,
                                                               window: Int64(settings.ultraGroupPushWindowSeconds) * 1000)
            }
            let decided = PushDecision.decide(context, for: recipient)
            for record in decided where record.status == .pending {
                // The device's badge goes up, for this push and the next message's (a badge is the
                // device's, whatever the kind of its token).
                if let pushed = recipient.devices.first(where: { $0.deviceId == record.deviceId && $0.kind == record.kind }) {
                    let badge = pushed.badge + 1
                    badges.append(PushBadge(appId: appId, userId: user, deviceId: record.deviceId, badge: badge))
                    for index in recipient.devices.indices where recipient.devices[index].deviceId == record.deviceId {
                        devices[user]?[index].badge = badge
                    }
                }
            }
            records += decided
        }
        shared.badges += badges
        return (records, badges)
    }

    /// The ultra group push frequency: at most `limit` pushes per user and group in `window` ms
    /// (kept by this node; approximate across nodes).
    private func admitUltraGroupPush(appId: Int64, groupId: String, userId: String, now: Int64, limit: Int, window: Int64) -> Bool {
        frequency.withLock { table in
            let key = "\(appId)|\(groupId)|\(userId)"
            var times = table[key, default: []].filter { now - $0 < window }
            defer { table[key] = times }
            guard times.count < limit else { return false }
            times.append(now)
            return true
        }
    }

    // MARK: sending

    /// Takes due pushes a batch at a time and sends up to `batchesInFlight` batches at once: the
    /// next batch is taken and claimed while the last ones wait for their answers. A batch is the
    /// pushes this node just decided (`handOff`), or read from the store: when none was handed
    /// over, and at least every `pollMilliseconds` (retries that came due, another node's pushes,
    /// those past the hand-off's limit).
    private func sendLoop(executor: (any TaskExecutor)?) async {
        var lastSweep: Int64 = 0
        var lastRead: Int64 = 0
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            while !Task.isCancelled {
                // Before anything is claimed: a wait between a claim and its answers could outlast
                // the lease, and another node (or this one) would send those pushes again.
                await deliveryFirst?.stepAside()
                let now = clock.nowMilliseconds()
                var due: [ArraySlice<PushRecord>]
                do {
                    // Taken, then claimed: of several nodes that read the same pushes, one sends each,
                    // and a push handed over that a read here or elsewhere claimed first is not sent
                    // again. The lease outlasts a send's timeouts; a node that dies mid-send leaves
                    // them due after it.
                    due = now - lastRead < options.pollMilliseconds ? takeHandedOff(limit: options.batch) : []
                    if due.isEmpty {
                        lastRead = now
                        let read = try await store.duePushes(now: now, limit: options.batch)
                        due = read.isEmpty ? [] : [read[...]]
                    }
                    let ids = due.flatMap { $0.map(\.id) }
                    if !ids.isEmpty {
                        let claimed = try await store.claimPushes(ids: ids, now: now, leaseUntil: now + options.leaseMilliseconds)
                        // (A batch handed over shares its records' storage: it is changed, and copied, only
                        // when some push was claimed elsewhere first.)
                        if claimed.count < ids.count {
                            let kept = Set(claimed)
                            let left = due.joined().filter { kept.contains($0.id) }
                            due = left.isEmpty ? [] : [left[...]]
                        }
                        if due.isEmpty { continue }
                    }
                } catch is CancellationError {
                    break   // the server is stopping
                } catch {
                    logger.error("push: pending pushes could not be read", metadata: ["error": "\(error)"])
                    due = []
                }
                if due.isEmpty {
                    if now - lastSweep > 3_600_000 {
                        lastSweep = now
                        _ = try? await store.deletePushRecords(createdBefore: now - options.retentionMilliseconds)
                    }
                    // With nothing pending at all, only a new decision makes work: wait for it
                    // (and look again now and then, for another node's pushes left by its end).
                    let next: Int64?
                    do {
                        next = try await store.nextPushAttempt()
                    } catch {
                        next = now   // unknown: look again soon
                    }
                    await wake.wait(milliseconds: next == nil ? options.idleMilliseconds : options.pollMilliseconds)
                    continue
                }
                let batch = due
                // Not cancelled with the loop: a batch taken is sent and its answers recorded, so a
                // shutdown does not leave delivered pushes to be sent again when their lease ends.
                group.addTask { await Task(executorPreference: executor) { await self.send(batch) }.value }
                inFlight += 1
                if inFlight >= options.batchesInFlight {
                    await group.next()
                    inFlight -= 1
                }
            }
        }
    }

    /// Sends one batch and records every answer. The records are read where they are (a batch
    /// handed over shares them with the decision that made them), not copied.
    func send(_ batch: [ArraySlice<PushRecord>]) async {
        let records = batch.joined()
        var credentials: [Int64: PushCredentials] = [:]
        var unreadable: Set<Int64> = []
        var lastApp: Int64?
        for index in records.indices where records[index].appId != lastApp {
            let appId = records[index].appId
            lastApp = appId
            guard credentials[appId] == nil, !unreadable.contains(appId) else { continue }
            do {
                credentials[appId] = try await settings(appId: appId).credentials
            } catch {
                unreadable.insert(appId)
            }
        }
        let now = clock.nowMilliseconds()
        var waiting: [PushAttempt] = []
        // The outcome of each record (by its place in the batch), and the records the transport is given.
        let count = batch.reduce(0) { $0 + $1.count }
        var outcomes = [PushOutcome?](repeating: nil, count: count)
        var sent: [Int] = []
        var sends: [PushSend] = []
        sent.reserveCapacity(count)
        sends.reserveCapacity(count)
        var reader = StoredNotificationReader()
        for (place, index) in records.indices.enumerated() {
            if unreadable.contains(records[index].appId) {
                // Without the app's credentials nothing can be judged: its pushes wait, they do not fail.
                waiting.append(PushAttempt(id: records[index].id, status: .pending, code: "SETTINGS_UNREADABLE",
                                           attempts: records[index].attempts, nextAttemptAt: now + options.retryDelayMilliseconds, now: now))
                continue
            }
            guard let target = Self.target(of: records[index]), let read = reader.readApart(records[index].notification) else {
                outcomes[place] = .failed(code: "UNREADABLE_RECORD")
                continue
            }
            sent.append(place)
            sends.append(PushSend(read.notification, to: target, credentials: credentials[records[index].appId] ?? PushCredentials(),
                                  sharedPart: read.part, recipient: read.recipient))
        }
        if !waiting.isEmpty { try? await store.recordPushAttempts(waiting) }
        // One batch to the transport (its APNs requests go onto their connection together and are
        // awaited together, not as a task and two thread hops each).
        for (place, outcome) in zip(sent, await transport.send(batch: sends)) { outcomes[place] = outcome }
        let answeredAt = clock.nowMilliseconds()
        var attempts: [PushAttempt] = []
        attempts.reserveCapacity(count)
        defer { for attempt in attempts { metrics?.pushAnswered(attempt.status) } }
        for (place, index) in records.indices.enumerated() {
            guard let outcome = outcomes[place] else { continue }   // waiting for its app's settings
            let id = records[index].id
            let tries = records[index].attempts + 1
            switch outcome {
            case .delivered(let providerId):
                attempts.append(PushAttempt(id: id, status: .sent, code: providerId ?? "", attempts: tries, now: answeredAt))
            case .invalidToken(let code):
                attempts.append(PushAttempt(id: id, status: .invalidToken, code: code, attempts: tries, now: answeredAt))
                if let kind = records[index].kind {
                    do {
                        try await store.removePushToken(appId: records[index].appId, kind: kind, token: records[index].token)
                    } catch {
                        logger.warning("push: an invalid token could not be deleted", metadata: ["error": "\(error)"])
                    }
                }
            case .retry(let code, let after):
                if tries >= options.maxAttempts {
                    attempts.append(PushAttempt(id: id, status: .failed, code: code, attempts: tries, now: answeredAt))
                } else {
                    let backoff = min(options.retryDelayMilliseconds << min(Int64(tries - 1), 20), options.maxRetryDelayMilliseconds)
                    let delay = max(backoff, Int64(after ?? 0) * 1000)
                    attempts.append(PushAttempt(id: id, status: .pending, code: code, attempts: tries,
                                                nextAttemptAt: answeredAt + delay, now: answeredAt))
                }
            case .failed(let code):
                attempts.append(PushAttempt(id: id, status: .failed, code: code, attempts: tries, now: answeredAt))
            }
        }
        do {
            try await store.recordPushAttempts(attempts)
        } catch {
            logger.error("push: answers could not be recorded (the pushes will be sent again)", metadata: ["error": "\(error)"])
        }
    }

    static func target(of record: PushRecord) -> PushTarget? {
        switch record.kind {
        case .apns: .apns(token: record.token, environment: PushEnvironment(rawValue: record.environment) ?? .production, voip: false)
        case .apnsVoIP: .apns(token: record.token, environment: PushEnvironment(rawValue: record.environment) ?? .production, voip: true)
        case .fcm: .fcm(token: record.token)
        case .webhook: .webhook(url: record.token)
        case nil: nil
        }
    }
}

extension ServerEvents {
    /// The stream push decides from: every event, buffered deep enough that a busy decider loses
    /// none short of a million events behind.
    func pushStream() -> AsyncStream<ServerEvent> { subscribe(buffer: 1_000_000) }
}

/// Runs the push service as one of the server's services.
struct PushRunner: Service {
    let push: PushService
    let events: AsyncStream<ServerEvent>

    func run() async throws {
        let deciding = BackgroundExecutor(name: "imserver-push")
        let sending = BackgroundExecutor(name: "imserver-send")
        await withTaskExecutorPreference(deciding) {
            try? await cancelWhenGracefulShutdown {
                await push.run(events: events, deciding: deciding, sending: sending)
            }
        }
        deciding.stop()
        sending.stop()
        await push.transport.shutdown()
    }
}
