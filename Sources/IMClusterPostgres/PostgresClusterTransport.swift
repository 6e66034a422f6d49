import Foundation
import IMServer
import Logging
import PostgresNIO
import IMStorePostgres
import Synchronization

/// The cluster bus and presence on PostgreSQL: the nodes' shared database is their bus
/// (LISTEN/NOTIFY on one channel) and holds who is online where (`cluster_sessions`), beside the
/// nodes' heartbeats (`cluster_nodes`) and which node holds each chatroom (`cluster_chatrooms`).
///
/// - **Bus.** A node's messages are queued and sent in order, many per notification (payloads up
///   to `maxInlinePayload` bytes; a larger message is written to `cluster_payloads` and its
///   notification carries the row's id). One statement sends a whole batch, so a busy node sends
///   one notification per batch, not per message. PostgreSQL delivers notifications of different
///   transactions in commit order, the same order to every listener: the bus is totally ordered.
///   A message for one node goes in a notification that names it first (`"t"`), which the other
///   nodes skip without reading it (nor its `cluster_payloads` row).
/// - **Chatrooms.** A room's row names the node that holds it, claimed by the first node that
///   needs the room (`INSERT ... ON CONFLICT`, so of two nodes claiming together one wins); rows of
///   nodes that left go with them.
/// - **Presence.** Each session is a row; a new login takes the user's advisory lock, so two
///   logins of one login class on two nodes cannot both keep their place. Presence tables are
///   UNLOGGED (soft state: after a crash of PostgreSQL every client reconnects anyway), and their
///   writes do not wait for a flush to disk.
/// - **Failure.** Every node beats every `heartbeatInterval`; a node silent for `deadAfter` is
///   removed by whichever node notices first, with its sessions, so its users are shown offline
///   and may log in elsewhere without being refused. A node that lost its listening connection
///   cannot know what it missed, so it has its sessions reconnect (`ClusterBusEvent.interrupted`).
public final class PostgresClusterTransport: ClusterTransport {
    public let nodeId: String
    let client: PostgresClient
    let listenConfiguration: PostgresConnection.Configuration
    let logger: Logger
    let heartbeatInterval: Duration
    let deadAfter: Duration

    static let channel = "imserver_cluster"
    /// NOTIFY payloads must stay under 8000 bytes.
    static let maxInlinePayload = 7_000

    private struct Outbox {
        /// Messages waiting, each with the node it is for (nil: every node).
        var queued: [(to: String?, text: String)] = []
        /// Messages queued so far, and messages on the bus (or dropped by a failed send).
        var queuedCount: UInt64 = 0
        var sentCount: UInt64 = 0
        var flushWaiters: [(through: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        var closedSessions: [String] = []
        var openSessions: [String: PresenceEntry] = [:]
    }

    private let outbox = Mutex(Outbox())
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation
    private let inbound: AsyncStream<ClusterBusEvent>
    private let inboundContinuation: AsyncStream<ClusterBusEvent>.Continuation
    private let liveNodeCount = Atomic<Int>(1)
    private let batchNumber = Atomic<UInt64>(0)
    private let encoder = JSONEncoder()

    public init(nodeId: String, client: PostgresClient, listenConfiguration: PostgresConnection.Configuration, logger: Logger,
                heartbeatInterval: Duration = .seconds(2), deadAfter: Duration = .seconds(10)) {
        self.nodeId = nodeId
        self.client = client
        self.listenConfiguration = listenConfiguration
        self.logger = logger
        self.heartbeatInterval = heartbeatInterval
        self.deadAfter = deadAfter
        (wakeUps, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        (inbound, inboundContinuation) = AsyncStream.makeStream(of: ClusterBusEvent.self)
    }

    // MARK: the bus

    public func publish(_ message: ClusterMessage) {
        enqueue(message, to: nil)
    }

    public func publish(_ message: ClusterMessage, to node: String) {
        enqueue(message, to: node)
    }

    private func enqueue(_ message: ClusterMessage, to node: String?) {
        guard let data = try? encoder.encode(message) else {
            logger.error("a cluster message could not be encoded", metadata: ["message": "\(message)"])
            return
        }
        let text = String(decoding: data, as: UTF8.self)
        outbox.withLock { box in
            box.queued.append((node, text))
            box.queuedCount += 1
        }
        wakeUp.yield()
    }

    public func flush() async {
        await withCheckedContinuation { continuation in
            let done = outbox.withLock { box -> Bool in
                if box.sentCount >= box.queuedCount { return true }
                box.flushWaiters.append((box.queuedCount, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }

    public func messages() -> AsyncStream<ClusterBusEvent> { inbound }

    public func liveNodes() -> Int { liveNodeCount.load(ordering: .relaxed) }

    // MARK: presence

    public func sessionOpened(_ session: PresenceEntry, refuseIfClassTaken: Bool) async throws -> PresenceOutcome {
        // A session of the bare class displaces every slot of its class (`SessionRegistry.displaces`);
        // LIKE '' matches no slot.
        let classSlots = session.loginClass.contains("/") ? "" : session.loginClass + "/%"
        let outcome = try await client.withTransaction(logger: logger) { connection -> PresenceOutcome in
            let lockKey = "\(session.appId):\(session.userId)"
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(lockKey), 0))", logger: logger)
            var others: [PresenceEntry] = []
            let rows = try await connection.query("""
                SELECT node_id, session_id, platform, connected_at FROM cluster_sessions
                WHERE app_id = \(session.appId) AND user_id = \(session.userId)
                  AND (login_class = \(session.loginClass) OR login_class LIKE \(classSlots))
                  AND node_id <> \(nodeId)
                """, logger: logger)
            for try await (node, id, platform, connectedAt) in rows.decode((String, String, Int, Int64).self) {
                others.append(PresenceEntry(nodeId: node, sessionId: id, appId: session.appId, userId: session.userId,
                                            loginClass: session.loginClass, platform: platform, connectedAt: connectedAt))
            }
            if refuseIfClassTaken && !others.isEmpty { return .classTaken }
            if !others.isEmpty {
                let ids = others.map(\.sessionId)
                try await connection.query("DELETE FROM cluster_sessions WHERE session_id = ANY(\(ids))", logger: logger)
            }
            try await connection.query("""
                INSERT INTO cluster_sessions (session_id, node_id, app_id, user_id, login_class, platform, connected_at, device_id)
                VALUES (\(session.sessionId), \(nodeId), \(session.appId), \(session.userId), \(session.loginClass),
                        \(session.platform), \(session.connectedAt), \(session.deviceId))
                ON CONFLICT (session_id) DO NOTHING
                """, logger: logger)
            return .registered(displaced: others)
        }
        if case .registered = outcome {
            outbox.withLock { $0.openSessions[session.sessionId] = session }
        }
        return outcome
    }

    public func sessionClosed(id: String) {
        outbox.withLock { box in
            box.openSessions[id] = nil
            box.closedSessions.append(id)
        }
        wakeUp.yield()
    }

    // MARK: chatrooms

    public func chatroomOwner(appId: Int64, roomId: String, claim: Bool) async throws -> ChatroomClaim? {
        // Two nodes claiming at once: the one whose insert loses the race reads nothing in its
        // statement's snapshot, and reads again.
        for _ in 0..<3 {
            let rows: PostgresRowSequence
            if claim {
                rows = try await client.query("""
                    WITH claimed AS (
                        INSERT INTO cluster_chatrooms (app_id, room_id, node_id, claim)
                        VALUES (\(appId), \(roomId), \(nodeId), nextval('cluster_chatroom_claims'))
                        ON CONFLICT (app_id, room_id) DO UPDATE SET node_id = EXCLUDED.node_id, claim = EXCLUDED.claim
                        WHERE cluster_chatrooms.node_id = EXCLUDED.node_id
                           OR NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = cluster_chatrooms.node_id)
                        RETURNING node_id, claim)
                    SELECT node_id, claim FROM claimed
                    UNION ALL
                    SELECT node_id, claim FROM cluster_chatrooms
                    WHERE app_id = \(appId) AND room_id = \(roomId) AND NOT EXISTS (SELECT 1 FROM claimed)
                    """, logger: logger)
            } else {
                rows = try await client.query("""
                    SELECT c.node_id, c.claim FROM cluster_chatrooms c
                    WHERE c.app_id = \(appId) AND c.room_id = \(roomId)
                      AND EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = c.node_id)
                    """, logger: logger)
            }
            for try await (node, number) in rows.decode((String, Int64).self) {
                return ChatroomClaim(appId: appId, roomId: roomId, nodeId: node, claim: number)
            }
            if !claim { return nil }
        }
        throw PostgresClusterError.chatroomUnclaimed(roomId)
    }

    public func releaseChatrooms(_ claims: [ChatroomClaim]) async throws {
        guard !claims.isEmpty else { return }
        try await client.query("""
            DELETE FROM cluster_chatrooms c USING unnest(\(claims.map(\.appId)), \(claims.map(\.roomId)), \(claims.map(\.claim)))
                AS r(app_id, room_id, claim)
            WHERE c.app_id = r.app_id AND c.room_id = r.room_id AND c.claim = r.claim AND c.node_id = \(nodeId)
            """, logger: logger)
    }

    public func chatroomIds(appId: Int64) async throws -> [String] {
        let rows = try await client.query("""
            SELECT c.room_id FROM cluster_chatrooms c
            WHERE c.app_id = \(appId) AND EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = c.node_id)
            ORDER BY c.room_id
            """, logger: logger)
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    public func isOnline(appId: Int64, userId: String) async throws -> Bool {
        let rows = try await client.query("""
            SELECT 1 FROM cluster_sessions WHERE app_id = \(appId) AND user_id = \(userId) LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    public func sessions(appId: Int64, userIds: [String]) async throws -> [PresenceEntry] {
        guard !userIds.isEmpty else { return [] }
        let rows = try await client.query("""
            SELECT node_id, session_id, user_id, login_class, platform, connected_at, device_id FROM cluster_sessions
            WHERE app_id = \(appId) AND user_id = ANY(\(userIds))
            """, logger: logger)
        var entries: [PresenceEntry] = []
        for try await (node, id, user, loginClass, platform, connectedAt, device)
            in rows.decode((String, String, String, String, Int, Int64, String).self) {
            entries.append(PresenceEntry(nodeId: node, sessionId: id, appId: appId, userId: user, loginClass: loginClass,
                                         platform: platform, connectedAt: connectedAt, deviceId: device))
        }
        return entries
    }

    // MARK: running

    public func run() async throws {
        // The pool runs outside the group, so that leaving (below) still has it once the group is
        // cancelled; it stops after that. Detached: PostgresClient stops by itself on the server's
        // graceful shutdown, which a child task would inherit.
        let pool = await client.startRunning(detached: true)
        defer { pool.cancel() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await prepareTables()
            try await join()
            group.addTask { try await self.send() }
            group.addTask { await self.listen() }
            group.addTask { try await self.beat() }
            // Everything runs until cancelled (graceful shutdown of the node).
            do {
                while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
            } catch {}
            group.cancelAll()
            // Not a child of the cancelled task, so that its queries run.
            await Task { await self.leave() }.value
        }
        inboundContinuation.finish()
    }

    /// Creates the cluster's tables if missing (under a lock: nodes may start together).
    private func prepareTables() async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7311042)", logger: logger)
            try await connection.query("""
                CREATE UNLOGGED TABLE IF NOT EXISTS cluster_nodes (
                    node_id TEXT PRIMARY KEY, started_at TIMESTAMPTZ NOT NULL, heartbeat_at TIMESTAMPTZ NOT NULL)
                """, logger: logger)
            try await connection.query("""
                CREATE UNLOGGED TABLE IF NOT EXISTS cluster_sessions (
                    session_id TEXT PRIMARY KEY, node_id TEXT NOT NULL, app_id BIGINT NOT NULL, user_id TEXT NOT NULL,
                    login_class TEXT NOT NULL, platform INTEGER NOT NULL, connected_at BIGINT NOT NULL)
                """, logger: logger)
            try await connection.query("ALTER TABLE cluster_sessions ADD COLUMN IF NOT EXISTS device_id TEXT NOT NULL DEFAULT ''", logger: logger)
            try await connection.query("CREATE INDEX IF NOT EXISTS cluster_sessions_by_user ON cluster_sessions (app_id, user_id)", logger: logger)
            try await connection.query("CREATE INDEX IF NOT EXISTS cluster_sessions_by_node ON cluster_sessions (node_id)", logger: logger)
            try await connection.query("""
                CREATE UNLOGGED TABLE IF NOT EXISTS cluster_chatrooms (
                    app_id BIGINT NOT NULL, room_id TEXT NOT NULL, node_id TEXT NOT NULL, claim BIGINT NOT NULL,
                    PRIMARY KEY (app_id, room_id))
                """, logger: logger)
            try await connection.query("CREATE INDEX IF NOT EXISTS cluster_chatrooms_by_node ON cluster_chatrooms (node_id)", logger: logger)
            try await connection.query("CREATE SEQUENCE IF NOT EXISTS cluster_chatroom_claims", logger: logger)
            try await connection.query("""
                CREATE UNLOGGED TABLE IF NOT EXISTS cluster_payloads (
                    id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """, logger: logger)
        }
    }

    /// Registers this node (clearing what an earlier run under the same id left) and counts the nodes.
    private func join() async throws {
        try await client.query("DELETE FROM cluster_sessions WHERE node_id = \(nodeId)", logger: logger)
        try await client.query("DELETE FROM cluster_chatrooms WHERE node_id = \(nodeId)", logger: logger)
        try await client.query("""
            INSERT INTO cluster_nodes (node_id, started_at, heartbeat_at) VALUES (\(nodeId), now(), now())
            ON CONFLICT (node_id) DO UPDATE SET started_at = now(), heartbeat_at = now()
            """, logger: logger)
        try await countNodes()
        // What the other nodes had with an earlier run of this node (one that did not leave) is gone.
        publish(.nodeLeft(nodeId: nodeId))
        logger.notice("joined the cluster", metadata: ["node": "\(nodeId)", "nodes": "\(liveNodes())"])
    }

    /// Leaves the cluster: what is still queued goes out, then this node's sessions, rooms and
    /// row go at once, not after the timeout, and the other nodes are told it left.
    private func leave() async {
        let (messages, through) = outbox.withLock { box -> ([(to: String?, text: String)], UInt64) in
            defer { box.queued.removeAll() }
            return (box.queued, box.queuedCount)
        }
        if !messages.isEmpty { try? await notify(messages) }
        let waiters = outbox.withLock { box -> [CheckedContinuation<Void, Never>] in
            box.sentCount = max(box.sentCount, through)
            defer { box.flushWaiters.removeAll() }
            return box.flushWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
        do {
            try await client.query("DELETE FROM cluster_chatrooms WHERE node_id = \(nodeId)", logger: logger)
            try await client.query("DELETE FROM cluster_sessions WHERE node_id = \(nodeId)", logger: logger)
            try await client.query("DELETE FROM cluster_nodes WHERE node_id = \(nodeId)", logger: logger)
            if let left = try? String(decoding: encoder.encode(ClusterMessage.nodeLeft(nodeId: nodeId)), as: UTF8.self) {
                try await notify([(nil, left)])
            }
        } catch {
            logger.warning("could not leave the cluster's presence table; the other nodes clear it when this node's heartbeat is overdue",
                           metadata: ["error": "\(error)"])
        }
    }

    private func countNodes() async throws {
        let rows = try await client.query("SELECT count(*) FROM cluster_nodes", logger: logger)
        for try await count in rows.decode(Int.self) { liveNodeCount.store(max(1, count), ordering: .relaxed) }
    }

    /// This node's heartbeat, and the removal of nodes whose heartbeat is overdue.
    private func beat() async throws {
        let deadSeconds = Double(deadAfter.components.seconds)
        while !Task.isCancelled {
            try await Task.sleep(for: heartbeatInterval)
            do {
                let rows = try await client.query("""
                    UPDATE cluster_nodes SET heartbeat_at = now() WHERE node_id = \(nodeId) RETURNING node_id
                    """, logger: logger)
                var present = false
                for try await _ in rows { present = true }
                if !present { try await rejoin() }
                let dead = try await client.query("""
                    DELETE FROM cluster_nodes WHERE heartbeat_at < now() - make_interval(secs => \(deadSeconds)) RETURNING node_id
                    """, logger: logger)
                var deadNodes: [String] = []
                for try await node in dead.decode(String.self) { deadNodes.append(node) }
                try await client.query("""
                    DELETE FROM cluster_sessions s WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = s.node_id)
                    """, logger: logger)
                try await client.query("""
                    DELETE FROM cluster_chatrooms c WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = c.node_id)
                    """, logger: logger)
                if !deadNodes.isEmpty {
                    logger.warning("nodes stopped beating and were removed with their sessions and chatrooms", metadata: ["nodes": "\(deadNodes)"])
                    // Every node, this one too, drops what it had with them.
                    for node in deadNodes {
                        publish(.nodeLeft(nodeId: node))
                        inboundContinuation.yield(.message(.nodeLeft(nodeId: node)))
                    }
                }
                try await client.query("DELETE FROM cluster_payloads WHERE created_at < now() - interval '5 minutes'", logger: logger)
                try await countNodes()
            } catch is CancellationError {
                return
            } catch {
                logger.error("cluster heartbeat failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// This node was taken for dead (a pause longer than the timeout): it registers again with
    /// its sessions.
    private func rejoin() async throws {
        logger.warning("this node had been removed from the cluster as dead; registering it and its sessions again")
        // Its chatrooms went with it: the node drops them (another node may hold them by now).
        inboundContinuation.yield(.message(.nodeLeft(nodeId: nodeId)))
        try await client.query("""
            INSERT INTO cluster_nodes (node_id, started_at, heartbeat_at) VALUES (\(nodeId), now(), now())
            ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now()
            """, logger: logger)
        for session in outbox.withLock({ Array($0.openSessions.values) }) {
            try await client.query("""
                INSERT INTO cluster_sessions (session_id, node_id, app_id, user_id, login_class, platform, connected_at, device_id)
                VALUES (\(session.sessionId), \(nodeId), \(session.appId), \(session.userId), \(session.loginClass),
                        \(session.platform), \(session.connectedAt), \(session.deviceId))
                ON CONFLICT (session_id) DO NOTHING
                """, logger: logger)
        }
    }

    /// Sends what is queued, batch after batch, in order; removes closed sessions.
    private func send() async throws {
        for await _ in wakeUps {
            while true {
                let (messages, through, closed) = outbox.withLock { box -> ([(to: String?, text: String)], UInt64, [String]) in
                    let taken = (box.queued, box.queuedCount, box.closedSessions)
                    box.queued.removeAll(keepingCapacity: true)
                    box.closedSessions.removeAll(keepingCapacity: true)
                    return taken
                }
                if messages.isEmpty && closed.isEmpty { break }
                if !messages.isEmpty {
                    do {
                        try await notify(messages)
                    } catch {
                        // Recipients on other nodes miss these live; the messages are stored, and
                        // their clients get them at their next sync.
                        logger.error("cluster bus send failed; other nodes miss these live", metadata: [
                            "messages": "\(messages.count)", "error": "\(error)"])
                    }
                }
                if !closed.isEmpty {
                    do {
                        try await client.withTransaction(logger: logger) { connection in
                                            try await connection.query("DELETE FROM cluster_sessions WHERE session_id = ANY(\(closed))", logger: logger)
                        }
                    } catch {
                        logger.error("ended sessions not removed from the cluster's presence", metadata: ["error": "\(error)"])
                    }
                }
                let waiters = outbox.withLock { box -> [CheckedContinuation<Void, Never>] in
                    box.sentCount = max(box.sentCount, through)
                    let ready = box.flushWaiters.filter { $0.through <= box.sentCount }.map(\.continuation)
                    box.flushWaiters.removeAll { $0.through <= box.sentCount }
                    return ready
                }
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    /// One statement notifies every batch, in order. A batch is this node's id, a number and the
    /// messages (JSON), or a reference to a `cluster_payloads` row for a message too big to inline;
    /// a batch for one node names it first.
    private func notify(_ messages: [(to: String?, text: String)]) async throws {
        var payloads: [String] = []
        var current: [String] = []
        var currentTo: String?
        var size = 0
        func header(_ to: String?) -> String {
            let number = batchNumber.add(1, ordering: .relaxed).newValue
            return (to.map { "{\"t\":\"\($0)\"," } ?? "{") + "\"n\":\"\(nodeId)\",\"b\":\(number)"
        }
        func close() {
            guard !current.isEmpty else { return }
            payloads.append(header(currentTo) + ",\"m\":[\(current.joined(separator: ","))]}")
            current.removeAll(keepingCapacity: true)
            size = 0
        }
        var large: [(index: Int, to: String?, body: String)] = []
        for (to, message) in messages {
            if message.utf8.count > Self.maxInlinePayload - 200 {
                close()
                large.append((payloads.count, to, message))
                payloads.append("")   // filled with the reference below
                continue
            }
            if to != currentTo || size + message.utf8.count + 1 > Self.maxInlinePayload - 100 { close() }
            currentTo = to
            current.append(message)
            size += message.utf8.count + 1
        }
        close()
        if !large.isEmpty {
            let bodies = large.map(\.body)
            let rows = try await client.query("""
                INSERT INTO cluster_payloads (body) SELECT unnest(\(bodies)::text[]) RETURNING id
                """, logger: logger)
            var ids: [Int64] = []
            for try await id in rows.decode(Int64.self) { ids.append(id) }
            for (entry, id) in zip(large, ids) {
                payloads[entry.index] = header(entry.to) + ",\"r\":\(id)}"
            }
        }
        try await client.query("""
            SELECT pg_notify(\(Self.channel), p) FROM unnest(\(payloads)::text[]) WITH ORDINALITY AS t(p, i) ORDER BY i
            """, logger: logger)
    }

    private struct Batch: Decodable {
        var t: String?
        var n: String
        var m: [ClusterMessage]?
        var r: Int64?
    }

    /// Listens on a connection of its own, in the bus's order, until cancelled; a lost connection
    /// is opened again after telling the node that it may have missed messages.
    private func listen() async {
        let decoder = JSONDecoder()
        var attempt = 0
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration: listenConfiguration, id: 1, logger: logger)
                defer { Task { try? await connection.close() } }
                // Waiting for a notification does not end by itself when the node stops: closing
                // the connection ends it.
                try await withTaskCancellationHandler {
                    try await connection.listen(on: Self.channel) { notifications in
                        if attempt > 0 { inboundContinuation.yield(.interrupted) }
                        attempt += 1
                        let addressedHere = "{\"t\":\"\(nodeId)\","
                        let ownBroadcast = "{\"n\":\"\(nodeId)\","
                        for try await notification in notifications {
                            // A batch for another node, or this node's own broadcast, is skipped unread.
                            if notification.payload.hasPrefix("{\"t\":"), !notification.payload.hasPrefix(addressedHere) { continue }
                            if notification.payload.hasPrefix(ownBroadcast) { continue }
                            guard let batch = try? decoder.decode(Batch.self, from: Data(notification.payload.utf8)) else {
                                logger.error("an unreadable cluster notification was ignored", metadata: ["payload": "\(notification.payload.prefix(200))"])
                                continue
                            }
                            if batch.n == nodeId { continue }
                            if let messages = batch.m {
                                for message in messages { inboundContinuation.yield(.message(message)) }
                            } else if let id = batch.r {
                                let rows = try await client.query("SELECT body FROM cluster_payloads WHERE id = \(id)", logger: logger)
                                var found = false
                                for try await body in rows.decode(String.self) {
                                    found = true
                                    if let message = try? decoder.decode(ClusterMessage.self, from: Data(body.utf8)) {
                                        inboundContinuation.yield(.message(message))
                                    }
                                }
                                if !found { inboundContinuation.yield(.interrupted) }
                            }
                        }
                    }
                } onCancel: {
                    let closing: EventLoopFuture<Void> = connection.close()
                    _ = closing
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                logger.error("cluster bus connection lost; listening again", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}

extension PostgresClusterTransport {
    /// A transport for the node `nodeId` on this database: a small pool of its own for presence
    /// and sending, and one more connection for listening. Nothing connects before `run()`.
    /// - Parameters:
    ///   - clientTLS, connectionTLS: TLS of the pool and of the listening connection (the store's
    ///     `sslmode`); none by default.
    public static func make(host: String, port: Int, username: String, password: String?, database: String, nodeId: String,
                            clientTLS: PostgresClient.Configuration.TLS = .disable,
                            connectionTLS: PostgresConnection.Configuration.TLS = .disable,
                            deadAfter: Duration = .seconds(10), logger: Logger) -> PostgresClusterTransport {
        var configuration = PostgresClient.Configuration(host: host, port: port, username: username, password: password,
                                                         database: database, tls: clientTLS)
        configuration.options.maximumConnections = 4
        configuration.options.connectTimeout = .seconds(5)
        // Nothing the bus writes must survive a crash of PostgreSQL (the messages are durable in
        // their own commits; presence is rebuilt by the heartbeats), and a notifying commit holds
        // PostgreSQL's one notification lock until it returns: waiting there for a WAL flush
        // would serialize every node's bus on the disk.
        configuration.options.additionalStartupParameters = [("synchronous_commit", "off")]
        var listen = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                      database: database, tls: connectionTLS)
        listen.options.connectTimeout = .seconds(5)
        return PostgresClusterTransport(nodeId: nodeId, client: PostgresClient(configuration: configuration, backgroundLogger: logger),
                                        listenConfiguration: listen, logger: logger, deadAfter: deadAfter)
    }
}

/// What went wrong on the cluster's PostgreSQL beyond its own errors.
enum PostgresClusterError: Error, CustomStringConvertible {
    /// Claims of a chatroom kept crossing (it was claimed and given up between reads).
    case chatroomUnclaimed(String)

    var description: String {
        switch self {
        case .chatroomUnclaimed(let room): "chatroom \(room) could not be claimed: claims crossed"
        }
    }
}
