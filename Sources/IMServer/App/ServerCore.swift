import Foundation
import IMCore
import IMPush
import IMStore
import Logging
import NIOPosix

/// The server's services wired together over one store and one clock: what the gateway and the
/// Server API call into. Built by `IMServerApp`; tests may build it around a `ManualClock`.
public final class ServerCore: Sendable {
    public let config: ServerConfig
    public let store: any IMStore
    public let clock: any WallClock
    public let logger: Logger
    /// The figures `/metrics` serves.
    public let metrics: ServerMetrics
    public let apps: AppRegistry
    public let tokens = TokenService()
    public let registry = SessionRegistry()
    /// What happened, for whoever acts on it: delivery first, then push, callbacks, metrics.
    public let events: ServerEvents
    /// The way to the client sessions: this process's, and in a cluster every node's.
    public let bus: any SessionBus
    /// This process's sessions (what the other nodes of a cluster reach through their bus).
    let localBus: LocalSessionBus
    /// The other nodes of a cluster and the cluster's presence; nil for a single server.
    public let cluster: (any ClusterTransport)?
    let peers: ClusterPeers
    /// Whether a graceful shutdown has begun, and the client requests and sessions it waits for.
    public let shutdown = ServerShutdown()
    public let log: MessageLog
    public let messages: MessageService
    public let groups: GroupService
    public let sync: SyncService
    public let lifecycle: MessageLifecycleService
    public let archive: MessageArchive
    public let directory: UserDirectory
    public let sensitiveWords: SensitiveWordFilter
    public let apiLimits: APIRateLimiter
    public let conversationState: ConversationStateService
    public let chatrooms: ChatroomService
    /// Where each chatroom call runs: here, or on the node of a cluster that holds the room.
    public let chatroomRouting: ChatroomRouting
    public let ultraGroups: UltraGroupService
    /// Push notifications, when the store keeps them and a transport to the providers is given.
    public let push: PushService?
    /// The events push decides from, subscribed before the first commit.
    let pushEvents: AsyncStream<ServerEvent>?
    /// Callbacks to the apps' servers, when a transport for them is given.
    public let callbacks: CallbackService?
    /// The events message routing follows, subscribed before the first commit.
    let callbackEvents: AsyncStream<ServerEvent>?
    /// Connections open per source address, against `maxConnectionsPerAddress`.
    let addressConnections: AddressConnections
    /// Each app's figures per day.
    public let statistics: ServerStatistics
    /// The console's operator and sessions.
    public let console: ConsoleAuth
    /// Media files: upload and download tokens, uploads, downloads, retention.
    public let media: MediaService

    /// - Parameter cluster: the transport to the other nodes when this server is a node of a
    ///   cluster (`ClusterNode` runs it as one of the server's services).
    ///   - pushTransport: how pushes reach APNs, FCM and webhooks; none (or `pushEnabled` off): no
    ///     pushes are made. The server owns it: it is shut down when the server stops.
    ///   - pushOptions: the push service's timing; nil: from the `push` settings.
    ///   - callbackTransport: how callbacks reach the apps' servers; none (or `callbacksEnabled`
    ///     off): no callbacks are taken on and the message callback is not asked. The server owns it.
    ///   - callbackOptions: the callback service's timing; nil: from the `callback` settings.
    public init(config: ServerConfig, store: any IMStore, clock: any WallClock = SystemClock(), logger: Logger,
                cluster: (any ClusterTransport)? = nil, pushTransport: (any PushTransport)? = nil,
                pushOptions: PushService.Options? = nil, callbackTransport: (any CallbackTransport)? = nil,
                callbackOptions: CallbackService.Options? = nil) {
        self.config = config
        self.store = store
        self.clock = clock
        self.logger = logger
        self.metrics = ServerMetrics(enabled: config.logging.metricsEnabled)
        self.cluster = cluster
        let peers = ClusterPeers(transport: cluster)
        self.peers = peers
        let apps = AppRegistry(store: store, peers: peers, config: config, logger: logger)
        self.apps = apps
        self.addressConnections = AddressConnections(limit: config.network.maxConnectionsPerAddress)
        let statistics = ServerStatistics(store: store, apps: apps, registry: registry, clock: clock, logger: logger)
        self.statistics = statistics
        self.console = ConsoleAuth(store: store, clock: clock, settings: config.console)
        let mediaDirectory = config.media.directory.isEmpty
            ? URL(fileURLWithPath: config.storage.dataDir).appendingPathComponent("media").path : config.media.directory
        let mediaTools = MediaTools.find(in: config.media.toolsDirectory)
        if mediaTools == nil {
            logger.warning("media uploads are kept unchecked and without thumbnails: libvips's and ffmpeg's tools were not found (run scripts/media-tools.sh, or set mediaToolsDir)")
        }
        self.media = MediaService(store: store, blobs: FileSystemBlobStore(directory: mediaDirectory),
                                  processor: MediaProcessor(tools: mediaTools, workDirectory: mediaDirectory + "/.work/" + (cluster?.nodeId ?? "single"),
                                                            logger: logger),
                                  apps: apps, clock: clock, logger: logger)
        // On one node a sender is answered before its message's fan-out is queued; member changes,
        // kicks and the like wait here for the fan-outs of what was committed before them.
        let fanOut = FanOutOrder()
        // Push work steps aside while messages are on their way (between its pieces), up to their
        // frames written by the gateway's event loops (Hummingbird's, NIO's shared group). Without
        // push nothing steps aside: a batch then costs one lock, not a marker on each loop.
        let pushing = pushTransport != nil && config.push.enabled
        let deliveryFirst = DeliveryFirst(loops: pushing ? Array(MultiThreadedEventLoopGroup.singleton.makeIterator()) : [])
        let rosters = GroupRosters(store: store, registry: registry, peers: peers, fanOut: fanOut)
        let ultraRosters = UltraGroupRosters(store: store, registry: registry, peers: peers, fanOut: fanOut)
        let localBus = LocalSessionBus(registry: registry, rosters: rosters, ultraGroups: ultraRosters, logger: logger, metrics: metrics)
        self.localBus = localBus
        let bus: any SessionBus = cluster.map { ClusterSessionBus(local: localBus, transport: $0) } ?? localBus
        self.bus = bus
        let events = ServerEvents(handlers: [Delivery(bus: bus, clock: clock, metrics: metrics)])
        self.events = events
        let callbacks: CallbackService?
        if let callbackTransport, config.callbacks.enabled {
            callbacks = CallbackService(store: store, transport: callbackTransport, apps: apps, clock: clock, logger: logger,
                                        node: cluster?.nodeId ?? "single", options: callbackOptions ?? CallbackService.Options(config.callbacks))
            self.callbackEvents = events.callbackStream()
        } else {
            callbacks = nil
            self.callbackEvents = nil
        }
        self.callbacks = callbacks
        // In a cluster a batch is on the bus before its senders are answered: a message
        // acknowledged reaches the recipients online on other nodes even if this node dies now.
        var handedOn: (@Sendable () async -> Void)?
        if let cluster { handedOn = { await cluster.flush() } }
        let metrics = self.metrics
        self.log = MessageLog(store: store, clock: clock, metrics: metrics, fanOut: fanOut, deliveryFirst: deliveryFirst, committed: { batch in
            statistics.count(batch.lazy.compactMap { item in
                if case .stored(let message) = item.outcome { return message }
                return nil
            })
            for item in batch {
                guard case .stored(let message) = item.outcome else { continue }
                metrics.stored(type: message.conversationType)
                logger.debug("message stored", metadata: [
                    "msgUID": "\(message.uid)", "from": "\(message.senderId)", "target": "\(message.targetId)",
                    "conversationType": "\(message.conversationType.rawValue)", "seq": "\(message.seq)",
                ])
                await events.publish(.messageCommitted(CommittedMessageEvent(message: message, origin: item.origin)))
            }
        }, handedOn: handedOn)
        self.archive = MessageArchive(store: store)
        self.directory = UserDirectory(store: store, registry: registry, peers: peers, apps: apps, fanOut: fanOut)
        self.sensitiveWords = SensitiveWordFilter(store: store, peers: peers)
        self.apiLimits = APIRateLimiter(clock: clock, nodes: { cluster?.liveNodes() ?? 1 })
        let relay = cluster.map { ChatroomRelay(transport: $0) }
        let chatrooms = ChatroomService(store: store, clock: clock, config: config, apps: apps, logger: logger, peers: peers, relay: relay,
                                        callbacks: callbacks, statistics: statistics, metrics: metrics)
        self.chatrooms = chatrooms
        let chatroomCluster = cluster.flatMap { transport in
            relay.map { ChatroomCluster(transport: transport, relay: $0, chatrooms: chatrooms, clock: clock, logger: logger) }
        }
        let chatroomRouting = ChatroomRouting(chatrooms: chatrooms, cluster: chatroomCluster)
        self.chatroomRouting = chatroomRouting
        self.messages = MessageService(log: log, bus: bus, clock: clock, apps: apps,
                                       directory: directory, words: sensitiveWords, rosters: rosters, ultraGroups: ultraRosters,
                                       chatrooms: chatroomRouting, callbacks: callbacks)
        self.groups = GroupService(store: store, clock: clock, apps: apps, bus: bus, events: events, rosters: rosters,
                                   messages: messages, log: log)
        self.sync = SyncService(store: store, clock: clock, config: config, apps: apps, rosters: rosters)
        self.lifecycle = MessageLifecycleService(store: store, log: log, messages: messages, rosters: rosters, chatrooms: chatroomRouting, clock: clock,
                                                 apps: apps, ultraGroups: ultraRosters)
        self.ultraGroups = UltraGroupService(store: store, clock: clock, apps: apps, bus: bus, events: events, rosters: ultraRosters, messages: messages,
                                              words: sensitiveWords)
        self.conversationState = ConversationStateService(store: store, clock: clock, bus: bus, events: events, logger: logger)
        if let pushTransport, pushing {
            self.push = PushService(store: store, transport: pushTransport, registry: registry, cluster: cluster,
                                    groups: rosters, ultraGroups: ultraRosters, clock: clock, logger: logger,
                                    node: cluster?.nodeId ?? "single", options: pushOptions ?? PushService.Options(config.push),
                                    metrics: metrics, deliveryFirst: deliveryFirst)
            self.pushEvents = events.pushStream()
        } else {
            self.push = nil
            self.pushEvents = nil
        }
    }

    /// 26001 when a message's push config names a template the app does not have.
    func checkPushTemplate(_ encodedConfig: Data, appId: Int64) async throws {
        guard let templateId = (try? MessagePushConfig.decode(encodedConfig))??.templateId else { return }
        guard try await store.pushTemplates(appId: appId).contains(where: { $0.templateId == templateId }) else {
            throw IMError(.invalidPushParameter, "invalid push config: the app has no push template '\(templateId.prefix(64))': create it with /push/template/set.json, or send without templateId")
        }
    }

    /// The push service, or the error a client sees on a server that makes no pushes.
    func requirePush() throws -> PushService {
        guard let push else {
            throw IMError(.apiServiceNotEnabled, "this server makes no push notifications (it was started without a push transport)")
        }
        return push
    }

    /// Loads the apps and makes sure the development app exists: the configured key and secret, or
    /// the first app in the store, or a new one with a random key and secret.
    @discardableResult
    public func prepare() async throws -> AppRecord {
        try await apps.load()
        let now = clock.nowMilliseconds()
        if let key = config.developmentApp.key {
            let existing = apps.app(key: key)
            let secret = config.developmentApp.secret ?? existing?.appSecret ?? AppRegistry.randomCredential(length: 16)
            if let existing, existing.appSecret == secret { return existing }
            return try await apps.upsert(appKey: key, appSecret: secret, name: existing?.name ?? "development", now: now)
        }
        if let first = apps.all.first {
            if let secret = config.developmentApp.secret, secret != first.appSecret {
                return try await apps.upsert(appKey: first.appKey, appSecret: secret, name: first.name, now: now)
            }
            return first
        }
        return try await apps.upsert(appKey: AppRegistry.randomCredential(length: 13),
                                     appSecret: config.developmentApp.secret ?? AppRegistry.randomCredential(length: 16),
                                     name: "development", now: now)
    }

    /// Closes the user's connections without a kick, as a network failure would: their clients
    /// reconnect by themselves. Returns how many were closed.
    @discardableResult
    public func dropConnections(appId: Int64, userId: String) -> Int {
        let sessions = registry.sessions(appId: appId, userId: userId)
        for session in sessions { session.close() }
        peers.disconnect(appId: appId, userIds: [userId], code: nil, reason: "connections dropped")
        return sessions.count
    }

    /// Whether the user has a live session on this server (in a cluster: on any node).
    public func isOnline(appId: Int64, userId: String) async throws -> Bool {
        if registry.isOnline(appId: appId, userId: userId) { return true }
        guard let cluster else { return false }
        return try await cluster.isOnline(appId: appId, userId: userId)
    }

    /// Adds a session under the login rules (see `SessionRegistry.register`) and to its groups'
    /// online members; returns the displaced sessions of this node to kick. In a cluster the rule
    /// holds across nodes: the cluster's presence table is asked too, and sessions of the same
    /// class on other nodes are kicked by their nodes (or this one refused with 31023).
    func sessionStarted(_ session: ClientSession, refuseIfClassTaken: Bool) async throws -> [ClientSession] {
        let displaced = try registry.register(session, refuseIfClassTaken: refuseIfClassTaken)
        groups.rosters.sessionOpened(session)
        ultraGroups.rosters.sessionOpened(session)
        // Told before the cluster is asked: a refusal below ends the session, which tells its end.
        events.observe(.sessionOnline(session.presence))
        if let cluster {
            let entry = PresenceEntry(nodeId: cluster.nodeId, sessionId: session.id, appId: session.appId, userId: session.userId,
                                      loginClass: session.loginSlot, platform: session.platform.rawValue,
                                      connectedAt: clock.nowMilliseconds(), deviceId: session.deviceId)
            let outcome: PresenceOutcome
            do {
                outcome = try await cluster.sessionOpened(entry, refuseIfClassTaken: refuseIfClassTaken)
            } catch {
                sessionEnded(session)
                logger.error("the cluster's presence table could not be written", metadata: ["error": "\(error)"])
                throw IMError(.serverUnavailable, "the server could not record the connection: reconnect in a moment")
            }
            switch outcome {
            case .classTaken:
                sessionEnded(session)
                throw IMError(.otherDeviceLogin, "another \(session.loginClass.rawValue) device of user \(session.userId) is online; this reconnect was refused because reconnect-kick is enabled")
            case .registered(let others):
                let reason = "user \(session.userId) logged in on another \(session.loginClass.rawValue) device"
                for sessionIds in Dictionary(grouping: others, by: \.nodeId).values {
                    cluster.publish(.kickSessions(appId: session.appId, userId: session.userId, sessionIds: sessionIds.map(\.sessionId),
                                                  code: ErrorCode.kickedByOtherClient.rawValue, reason: reason))
                }
            }
        }
        return displaced
    }

    /// Removes a session from the registry and from its groups' online members.
    /// Kicks every session of the app with `code`, on this node and the others (a banned app).
    func disconnectApp(appId: Int64, code: ErrorCode, reason: String) {
        for session in registry.sessions(appId: appId) {
            session.kick(code: code, reason: reason)
            registry.remove(session)
        }
        peers.disconnect(appId: appId, code: code, reason: reason)
    }

    func sessionEnded(_ session: ClientSession) {
        registry.remove(session)
        groups.rosters.sessionClosed(session)
        ultraGroups.rosters.sessionClosed(session)
        chatrooms.sessionClosed(session)
        chatroomRouting.sessionEnded(session)
        if session.markEnded() {
            metrics.sessionEnded(reason: session.closeReason)
            cluster?.sessionClosed(id: session.id)
            events.observe(.sessionOffline(session.presence))
            callbacks?.sessionEnded(session)
        }
    }

    /// Drops sessions silent for three heartbeat intervals (dead peers). Returns how many.
    @discardableResult
    public func sweepIdleSessions() -> Int {
        let deadline = clock.nowMilliseconds() - Int64(config.session.heartbeatIntervalSeconds) * 3000
        var dropped = 0
        for session in registry.allSessions() where session.lastSeen() < deadline {
            session.close()
            sessionEnded(session)
            dropped += 1
        }
        return dropped
    }
}
