import Foundation
import IMCore
import IMPushTesting
import IMServer
import IMStore
import IMStoreSQLite

/// The scenarios. Each starts (or points at) a server, creates its users through the Server API,
/// opens its connections in worker processes, runs its load for a bounded time and returns what it
/// measured. Parameters are the scenario's command-line options; `quick` marks a smoke run, whose
/// result is checked for completeness (every connection up, every message answered and delivered,
/// no errors) but never for speed.
enum Scenarios {
    // MARK: connections

    struct ConnectionsParameters: Sendable {
        var connections = 19_000
        var warmup = 5.0
        var duration = 60.0
        var quick = false
    }

    /// Holds N authenticated idle connections that ping at the server's heartbeat interval; reports
    /// server memory per connection and the CPU the heartbeats cost.
    static func connections(_ p: ConnectionsParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "connections")
        result.quick = p.quick
        // A quick run pings every second so that heartbeats happen inside its short window.
        let harness = try await Harness.start("connections", options: options,
                                              serverArguments: p.quick ? ["--heartbeat-interval-seconds", "1"] : [])
        do {
            let users = (0..<p.connections).map { "c\($0)" }
            note("connections: registering \(users.count) users through /user/getToken.json")
            let tokens = try await harness.api.tokens(for: users)
            let clients = harness.place(zip(users, tokens).map { ClientSpec(userId: $0, token: $1, role: .idle) })
            let baseline = await harness.sampleServer()
            let pool = try harness.launchWorkers(clients, template: harness.jobTemplate())
            note("connections: opening \(clients.count) connections in \(pool.count) worker(s)")
            let connectStart = monotonicNanos()
            let (connected, failed) = try await pool.waitReady()
            let connectSeconds = Double(monotonicNanos() - connectStart) / 1e9
            note("connections: \(connected) ready, \(failed) failed in \(fmt(connectSeconds, 1)) s; holding \(fmt(p.warmup, 0)) s + \(fmt(p.duration, 0)) s")
            let (stats, start, end) = try await measure(pool, warmup: p.warmup, duration: p.duration, harness: harness)
            let sessions = await harness.sessions()
            await pool.exit()
            await harness.finish()

            result.run = ["connections": "\(p.connections)", "warmupSeconds": fmt(p.warmup, 0),
                          "holdSeconds": fmt(p.duration, 0)].merging(harness.layout) { a, _ in a }
            result.take(stats)
            result.server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: p.duration)
            result.figures["connectionsHeld"] = Double(connected)
            result.figures["connectFailures"] = Double(failed)
            result.figures["setupSeconds"] = rounded(connectSeconds, 2)
            if let sessions { result.figures["serverSessions"] = Double(sessions) }
            if let end, connected > 0, baseline.nodes.allSatisfy({ $0 != nil }), end.nodes.allSatisfy({ $0 != nil }) {
                result.figures["serverRssPerConnectionKiB"] = rounded(Double(end.rssKiB - baseline.rssKiB) / Double(connected), 2)
            }
            if let cpu = result.server?.cpuPercentOfOneCore { result.figures["serverCpuPercentHolding"] = cpu }
            result.figures["pingsPerSecond"] = rounded(Double(stats[.pings]) / p.duration, 1)
            if p.quick {
                if connected != p.connections { result.problems.append("\(connected) of \(p.connections) connections came up") }
                if let sessions, sessions != p.connections { result.problems.append("the server counts \(sessions) sessions, expected \(p.connections)") }
                if stats[.pings] == 0 { result.problems.append("no heartbeat was answered") }
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }

    // MARK: private

    struct PrivateParameters: Sendable {
        var pairs = 5_000
        var rate = 10_000.0
        var warmup = 5.0
        var duration = 30.0
        var quick = false
        /// Full message routing to a local receiver imbench runs (`CallbackTarget`): every message
        /// is routed, and the run checks that each one arrived.
        var routing = false
        /// The message callback to the same receiver, which answers "pass" at once: every message
        /// waits for the answer before it is committed.
        var messageCallback = false
        /// How long the receiver takes to answer each callback (a slow app server).
        var receiverDelayMilliseconds = 0
    }

    /// Pairs of users chat with each other at an aggregate target rate (open loop: sends are paced,
    /// not held back by acknowledgements). Reports ack latency (send → committed reply) and delivery
    /// latency (send → push read by the peer); with callbacks, what the app's server received.
    static func privateChat(_ p: PrivateParameters, options: CommonOptions) async throws -> ScenarioResult {
        let callbacks = [p.routing ? "routing" : nil, p.messageCallback ? "message-callback" : nil].compactMap { $0 }
        var result = ScenarioResult(scenario: callbacks.isEmpty ? "private" : "callbacks")
        result.quick = p.quick
        let target = callbacks.isEmpty ? nil : try await CallbackTarget.start(
            appKey: options.appKey, appSecret: options.appSecret, answerDelayMilliseconds: Int64(p.receiverDelayMilliseconds))
        let harness: Harness
        do {
            harness = try await Harness.start(result.scenario, options: options)
        } catch {
            await target?.stop()
            throw error
        }
        do {
            if let target {
                var form: [String] = []
                if p.routing { form.append("routingUrl=\(target.baseURL)/routing") }
                if p.messageCallback { form.append("messageCallbackUrl=\(target.baseURL)/review") }
                try await harness.api.setCallbacks(form: form.joined(separator: "&"))
                note("callbacks: \(callbacks.joined(separator: " and ")) to \(target.baseURL) (imbench's receiver, answering \(p.receiverDelayMilliseconds == 0 ? "at once" : "after \(p.receiverDelayMilliseconds) ms"))")
            }
            var users: [String] = []
            for pair in 0..<p.pairs { users += ["a\(pair)", "b\(pair)"] }
            note("private: registering \(users.count) users")
            let tokens = try await harness.api.tokens(for: users)
            // With N nodes, user i connects to node i mod N: the two users of a pair (2k, 2k+1) are
            // on different nodes, so every message crosses nodes.
            let clients = harness.place(users.indices.map { index in
                ClientSpec(userId: users[index], token: tokens[index], role: .chat(peer: users[index ^ 1]))
            })
            let baseline = await harness.sampleServer()
            let perClient = p.rate / Double(clients.count)
            if perClient >= 4 && options.url == nil && !options.serverArguments.contains(where: { $0.contains("client-sends-per-second") }) {
                note("private: \(fmt(perClient, 1)) messages/s per client is close to the server's per-client limit (5/s, 20604 beyond): use more --pairs or --server-arg=--client-sends-per-second=N")
            }
            let pool = try harness.launchWorkers(clients, template: harness.jobTemplate(chatRatePerClient: perClient))
            let (connected, failed) = try await pool.waitReady()
            let crossNode = harness.nodeCount > 1
            note("private: \(connected) connected (\(failed) failed)\(crossNode ? " over \(harness.nodeCount) nodes, the two users of each pair on different nodes: every message is cross-node" : ""); \(fmt(p.rate, 0)) msg/s for \(fmt(p.warmup, 0)) s warm-up + \(fmt(p.duration, 0)) s")
            // With callbacks: the backlog sampled every second while the load runs, and the messages
            // routed inside the window.
            let backlogPeak = Locked(0), routedAt = Locked((start: 0, end: 0))
            let api = harness.api
            let sampler = target == nil ? nil : Task {
                while !Task.isCancelled {
                    if let state = try? await api.callbackState() { backlogPeak.withLock { $0 = max($0, state.backlog) } }
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            let (stats, start, end) = try await measure(pool, warmup: p.warmup, duration: p.duration, harness: harness) { isStart in
                let routed = target?.routedCount ?? 0
                routedAt.withLock { if isStart { $0.start = routed } else { $0.end = routed } }
            }
            sampler?.cancel()
            await pool.exit()
            var drainSeconds: Double?
            var callbackState: (backlog: Int, delivered: Int, failedAttempts: Int, dropped: Int)?
            if let target {
                // Every message the server committed is routed (or was reviewed): wait up to 60 s for
                // what the load left in the backlog.
                let expected = stats[.ackedTotal]
                let drainStart = monotonicNanos()
                let deadline = drainStart + 60_000_000_000
                func done() -> Bool {
                    (!p.routing || target.routedCount >= expected) && (!p.messageCallback || target.reviewedCount >= expected)
                }
                while !done() && monotonicNanos() < deadline { try await Task.sleep(for: .milliseconds(100)) }
                drainSeconds = Double(monotonicNanos() - drainStart) / 1e9
                callbackState = try? await harness.api.callbackState()
            }
            await harness.finish()
            await target?.stop()

            result.run = ["pairs": "\(p.pairs)", "connections": "\(clients.count)", "targetRatePerSecond": fmt(p.rate, 0),
                          "perClientPerSecond": fmt(perClient, 3), "warmupSeconds": fmt(p.warmup, 0),
                          "durationSeconds": fmt(p.duration, 0), "payloadBytes": "\(options.payloadBytes)"]
                .merging(harness.layout) { a, _ in a }
            if crossNode {
                result.run["delivery"] = "cross-node"
                result.notes.append("cross-node: \(harness.nodeCount) nodes, user i on node (i mod \(harness.nodeCount)); the sender and the recipient of every message are on different nodes, so each delivery goes over the cluster bus (PostgreSQL NOTIFY)")
            }
            result.take(stats)
            result.server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: p.duration)
            perUnitOfWork(&result, units: stats[.ackedArrivingInWindow], unit: "Message", connections: connected)
            result.figures["connected"] = Double(connected)
            result.figures["sentPerSecond"] = rounded(Double(stats[.sent]) / p.duration, 1)
            result.figures["ackedPerSecond"] = rounded(Double(stats[.acked]) / p.duration, 1)
            result.figures["ackedArrivingPerSecond"] = rounded(Double(stats[.ackedArrivingInWindow]) / p.duration, 1)
            result.figures["deliveredPerSecond"] = rounded(Double(stats[.delivered]) / p.duration, 1)
            result.figures["unacknowledged"] = Double(stats[.sent] - stats[.acked])
            result.figures["undelivered"] = Double(stats[.sent] - stats[.delivered])
            if let target {
                result.run["callbacks"] = callbacks.joined(separator: "+")
                result.run["receiverAnswersAfterMilliseconds"] = "\(p.receiverDelayMilliseconds)"
                let tally = target.tally
                let committed = stats[.ackedTotal]
                result.figures["messagesAcknowledgedInRun"] = Double(committed)
                if let drainSeconds { result.figures["callbackDrainSecondsAfterLoad"] = rounded(drainSeconds, 2) }
                result.figures["callbackBacklogPeak"] = Double(backlogPeak.value)
                if let callbackState {
                    result.figures["callbackBacklogAtEnd"] = Double(callbackState.backlog)
                    result.figures["callbackFailedAttempts"] = Double(callbackState.failedAttempts)
                    result.figures["callbacksDropped"] = Double(callbackState.dropped)
                    if callbackState.dropped > 0 { result.problems.append("the server gave up \(callbackState.dropped) callbacks") }
                }
                if tally.badSignatures > 0 { result.problems.append("\(tally.badSignatures) callbacks had a wrong signature") }
                if tally.malformed > 0 { result.problems.append("\(tally.malformed) callbacks lacked their message's id or time") }
                if p.routing {
                    result.figures["routedMessages"] = Double(tally.routed.count)
                    result.figures["routedDuplicates"] = Double(tally.duplicates)
                    result.figures["routedPerSecondInWindow"] = rounded(Double(routedAt.value.end - routedAt.value.start) / p.duration, 1)
                    result.latencies["routingLag"] = tally.routingLag.summary
                    result.notes.append("routingLag: the receiver's clock at receipt minus the message's msgTimestamp (the server's commit time), in whole milliseconds")
                    // Messages answered after the load stopped are committed but not counted as
                    // acknowledged: more routed than acknowledged is expected, fewer is a loss.
                    if tally.routed.count < committed {
                        result.problems.append("\(committed - tally.routed.count) of \(committed) acknowledged messages were not routed within 60 s of the load's end")
                    }
                }
                if p.messageCallback {
                    result.figures["reviewedMessages"] = Double(tally.reviewed.count)
                    if tally.reviewed.count < committed {
                        result.problems.append("\(committed - tally.reviewed.count) of \(committed) acknowledged messages were never put to the message callback")
                    }
                }
            }
            if connected != clients.count { result.problems.append("\(connected) of \(clients.count) clients connected") }
            if stats[.sent] == 0 { result.problems.append("nothing was sent") }
            if p.quick {
                if stats[.acked] != stats[.sent] { result.problems.append("\(stats[.sent] - stats[.acked]) of \(stats[.sent]) messages were not acknowledged") }
                if stats[.delivered] != stats[.sent] { result.problems.append("\(stats[.sent] - stats[.delivered]) of \(stats[.sent]) messages were not delivered") }
                if crossNode, let bus = result.server?.database, bus.busMessagesPerSecond <= 0 {
                    result.problems.append("no message went over the cluster bus, though every pair is split across nodes")
                }
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            await target?.stop()
            throw error
        }
    }

    // MARK: connect-storm

    struct StormParameters: Sendable {
        var clients = 10_000
        /// Offline messages waiting for each client, sent before the storm.
        var pending = 5
        var quick = false
    }

    /// N clients, each with `pending` offline messages waiting, connect and sync as fast as the
    /// server lets them (`--connect-concurrency` in flight per worker).
    static func connectStorm(_ p: StormParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "connect-storm")
        result.quick = p.quick
        // The mailer is one connection sending every offline message; the server's per-client send
        // limit (5/s by default) is raised for it. The storm clients themselves send nothing.
        let harness = try await Harness.start("connect-storm", options: options,
                                              serverArguments: p.pending > 0 ? ["--client-sends-per-second", "1000000"] : [])
        do {
            // The offline messages come from mailer connections, one per 100 storm users (at most
            // 100): the server handles one connection's requests one at a time, so one mailer would
            // wait for a commit per message.
            let stormUsers = (0..<p.clients).map { "s\($0)" }
            let mailers = p.pending > 0 ? min(100, max(1, p.clients / 100)) : 0
            let mailerUsers = (0..<mailers).map { "mailer\($0)" }
            let users = mailerUsers + stormUsers
            note("connect-storm: registering \(users.count) users")
            let tokens = try await harness.api.tokens(for: users)
            var clients: [ClientSpec] = []
            for (index, (user, token)) in zip(users, tokens).enumerated() {
                let role: ClientRole = index < mailers
                    ? .mailer(targets: stride(from: index, to: stormUsers.count, by: mailers).map { stormUsers[$0] }, perTarget: p.pending)
                    : .storm
                clients.append(ClientSpec(userId: user, token: token, role: role))
            }
            clients = harness.place(clients)
            // Two workers by default: one generator thread opening connections as fast as it can
            // is itself the limit (about 1,000 connects/s here).
            let pool = try harness.launchWorkers(clients, template: harness.jobTemplate(), minimumWorkers: 2)
            if p.pending > 0 { note("connect-storm: storing \(p.pending) offline messages for each of \(p.clients) users from \(mailers) mailer connection(s)") }
            let mailStart = monotonicNanos()
            _ = try await pool.waitReady()
            let mailSeconds = Double(monotonicNanos() - mailStart) / 1e9
            let baseline = await harness.sampleServer()
            note("connect-storm: \(p.clients) clients connecting, \(options.connectConcurrency) at a time per worker")
            let start = monotonicNanos()
            pool.send(.start(measureFrom: start, measureUntil: start + 3_600_000_000_000))
            let windowStart = await harness.sampleServer()
            try await pool.waitStormDone()
            let windowEnd = await harness.sampleServer()
            let stats = try await pool.stop()
            await pool.exit()
            await harness.finish()

            let connected = stats[.connected]
            let stormSeconds = stats.stormLastDone > stats.stormFirstStart
                ? Double(stats.stormLastDone - stats.stormFirstStart) / 1e9 : 0
            result.run = ["clients": "\(p.clients)", "pendingPerClient": "\(p.pending)",
                          "connectConcurrencyPerWorker": "\(options.connectConcurrency)"].merging(harness.layout) { a, _ in a }
            result.take(stats)
            if p.pending > 0 {
                result.notes.append("the offline messages were stored before the storm by \(mailers) mailer connection(s); the server imbench starts for this scenario allows them 1,000,000 sends/s each (--client-sends-per-second)")
            }
            result.server = harness.serverFigures(baseline: baseline, windowStart: windowStart, windowEnd: windowEnd)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: stormSeconds)
            result.figures["connected"] = Double(connected)
            result.figures["stormSeconds"] = rounded(stormSeconds, 3)
            if stormSeconds > 0 { result.figures["connectsPerSecond"] = rounded(Double(connected) / stormSeconds, 1) }
            result.figures["offlineMessagesSynced"] = Double(stats[.syncedMessages])
            if p.pending > 0 { result.figures["mailingSeconds"] = rounded(mailSeconds, 2) }
            if connected != p.clients { result.problems.append("\(connected) of \(p.clients) clients connected and synced") }
            if p.quick && stats[.syncedMessages] != p.clients * p.pending {
                result.problems.append("\(stats[.syncedMessages]) offline messages synced, expected \(p.clients * p.pending)")
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }

    // MARK: history

    struct HistoryParameters: Sendable {
        /// Messages to seed into the store before the server starts (0: use what the store holds).
        var seedMessages = 10_000_000
        var seedConversations = 10_000
        var readers = 200
        /// History pages per second, all readers together.
        var rate = 2_000.0
        var count = 50
        /// Pairs writing messages meanwhile, and their aggregate rate.
        var writerPairs = 2_500
        var writeRate = 5_000.0
        var warmup = 5.0
        var duration = 30.0
        var quick = false
    }

    /// Readers page backwards through their (seeded) conversations while writers send messages.
    static func history(_ p: HistoryParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "history")
        result.quick = p.quick
        guard p.readers <= p.seedConversations else {
            throw BenchError("--readers (\(p.readers)) must not exceed --seed-conversations (\(p.seedConversations)): each reader pages through a conversation of its own")
        }
        var seedInfo: SeedPlan?
        var storePath: String?
        let harness = try await Harness.start("history", options: options) { site in
            if site.databaseURL == nil { storePath = (site.dataDir as NSString).appendingPathComponent("imserver.sqlite") }
            if p.seedMessages > 0 {
                seedInfo = try await Seeder.seed(site: site, plan: SeedPlan(
                    messages: p.seedMessages, conversations: p.seedConversations, appKey: options.appKey,
                    payloadBytes: options.payloadBytes), appSecret: options.appSecret)
            }
        }
        do {
            var users: [String] = []
            var roles: [ClientRole] = []
            for reader in 0..<p.readers {
                let (user, peer) = Seeder.pair(reader)
                users.append(user)
                roles.append(.history(peer: peer))
            }
            for pair in 0..<p.writerPairs {
                users += ["wa\(pair)", "wb\(pair)"]
                roles += [.chat(peer: "wb\(pair)"), .chat(peer: "wa\(pair)")]
            }
            note("history: registering \(users.count) users")
            let tokens = try await harness.api.tokens(for: users)
            let clients = harness.place(users.indices.map { ClientSpec(userId: users[$0], token: tokens[$0], role: roles[$0]) })
            let baseline = await harness.sampleServer()
            let template = harness.jobTemplate(
                chatRatePerClient: p.writerPairs > 0 ? p.writeRate / Double(2 * p.writerPairs) : 0,
                historyRatePerClient: p.readers > 0 ? p.rate / Double(p.readers) : 0, historyCount: p.count)
            let pool = try harness.launchWorkers(clients, template: template)
            let (connected, failed) = try await pool.waitReady()
            note("history: \(connected) connected (\(failed) failed); \(fmt(p.rate, 0)) pages/s of \(p.count) and \(fmt(p.writeRate, 0)) msg/s written, \(fmt(p.warmup, 0)) s warm-up + \(fmt(p.duration, 0)) s")
            let (stats, start, end) = try await measure(pool, warmup: p.warmup, duration: p.duration, harness: harness)
            await pool.exit()
            let storeBytes = storePath.map { path in
                [path, path + "-wal"].compactMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int }.reduce(0, +)
            }
            await harness.finish()

            result.run = ["readers": "\(p.readers)", "targetPagesPerSecond": fmt(p.rate, 0), "pageSize": "\(p.count)",
                          "writerPairs": "\(p.writerPairs)", "targetWritesPerSecond": fmt(p.writeRate, 0),
                          "warmupSeconds": fmt(p.warmup, 0), "durationSeconds": fmt(p.duration, 0),
                          "seededMessages": seedInfo.map { "\($0.messages)" } ?? "none (store used as found)",
                          "seededConversations": seedInfo.map { "\($0.conversations)" } ?? "-"]
                .merging(harness.layout) { a, _ in a }
            result.take(stats)
            result.server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
            perUnitOfWork(&result, units: stats[.historyPages] + stats[.ackedArrivingInWindow], unit: "PageOrWrite", connections: connected)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: p.duration)
            result.figures["pagesPerSecond"] = rounded(Double(stats[.historyPages]) / p.duration, 1)
            if stats[.historyPages] > 0 {
                result.figures["messagesPerPage"] = rounded(Double(stats[.historyMessages]) / Double(stats[.historyPages]), 1)
            }
            result.figures["writesAckedPerSecond"] = rounded(Double(stats[.acked]) / p.duration, 1)
            result.figures["writesAckedArrivingPerSecond"] = rounded(Double(stats[.ackedArrivingInWindow]) / p.duration, 1)
            if let storeBytes, storeBytes > 0 { result.figures["storeMiB"] = rounded(Double(storeBytes) / 1_048_576, 1) }
            if connected != clients.count { result.problems.append("\(connected) of \(clients.count) clients connected") }
            if stats[.historyPages] == 0 { result.problems.append("no history page was answered") }
            if p.quick {
                if stats[.historyMessages] == 0 { result.problems.append("history pages came back empty") }
                if stats[.acked] != stats[.sent] { result.problems.append("\(stats[.sent] - stats[.acked]) writes were not acknowledged") }
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }

    // MARK: group

    struct GroupParameters: Sendable {
        /// Members of the group; the first `online` of them connect, the others are members only.
        var members = 3_000
        var onlineFraction = 0.1
        /// Online members that send (nil: every online member); the rate is shared among them.
        var senders: Int?
        /// Group messages per second, all senders together.
        var rate = 200.0
        var warmup = 5.0
        var duration = 30.0
        var quick = false
        /// An ultra group (messages to its default channel) instead of a group. Its membership is
        /// seeded into the store before the server starts, one transaction per 10,000 members.
        var ultra = false
        /// The offline members have APNs device tokens (SEEDED), the app has credentials for a
        /// local APNs server imbench runs, and every message is pushed to them.
        var push = false
    }

    static let groupId = "imbench-group"

    /// One group of `members` members, a fraction of them online (one connection each); senders
    /// among the online members send group messages at an aggregate target rate (open loop). Every
    /// online member but the sender should receive each message once. Reports ack latency (send →
    /// committed reply), deliveries per second, and delivery latency (send → push read by each
    /// member), and counts deliveries missing or received twice.
    static func group(_ p: GroupParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: p.ultra ? "ultragroup" : "group")
        result.quick = p.quick
        let online = Int((Double(p.members) * p.onlineFraction).rounded())
        guard p.members >= 2, (2...p.members).contains(online) else {
            throw BenchError("--members \(p.members) with --online-fraction \(p.onlineFraction) puts \(online) members online: at least 2, at most all of them")
        }
        let senders = p.senders ?? online
        guard (1...online).contains(senders) else {
            throw BenchError("--senders must be 1…\(online) (the online members), got \(senders)")
        }
        let perSender = p.rate / Double(senders)
        // The server's per-client send limit (5/s by default) is a rule, not the capacity measured
        // here: a server imbench starts gets it raised when the senders' share comes close to it.
        let raiseSendLimit = perSender >= 4 && options.url == nil
            && !options.serverArguments.contains(where: { $0.contains("client-sends-per-second") })
        var environment: [String: String] = [:]
        if !p.ultra && p.members > GroupLimits.defaultMaxMembers { environment["IMSERVER_MAX_GROUP_MEMBERS"] = "\(p.members)" }
        let members = (0..<p.members).map { "g\($0)" }
        var seedSeconds = 0.0
        var serverArguments = raiseSendLimit ? ["--client-sends-per-second", "1000000"] : []
        let pushTarget = p.push ? try await PushTarget.start(options: options) : nil
        if let pushTarget { serverArguments += pushTarget.serverArguments }
        let offlineUsers = Array(members.dropFirst(online))
        let harness: Harness
        do {
            harness = try await Harness.start(p.push ? "push" : p.ultra ? "ultragroup" : "group", options: options,
                                              serverArguments: serverArguments, serverEnvironment: environment) { site in
                if let pushTarget { try await pushTarget.seed(site: site, users: offlineUsers, options: options) }
                guard p.ultra else { return }
                let started = monotonicNanos()
                try await seedUltraGroup(site: site, members: members, options: options)
                seedSeconds = Double(monotonicNanos() - started) / 1e9
            }
        } catch {
            await pushTarget?.stop()
            throw error
        }
        if p.push { result.scenario = "push" }
        do {
            let onlineUsers = Array(members.prefix(online))
            note("\(result.scenario): registering \(online) online members (the other \(p.members - online) members are only listed in the group)")
            let tokens = try await harness.api.tokens(for: onlineUsers)
            let setupStart = monotonicNanos()
            if !p.ultra {
                note("group: creating group \(groupId) with \(p.members) members")
                try await harness.api.createGroup(groupId, name: "imbench", members: members)
                let listed = try await harness.api.groupMemberCount(groupId)
                guard listed == p.members else {
                    throw BenchError("group \(groupId) was created with \(p.members) members but the server lists \(listed)")
                }
            }
            let createSeconds = p.ultra ? seedSeconds : Double(monotonicNanos() - setupStart) / 1e9
            let clients = harness.place(onlineUsers.indices.map { index in
                ClientSpec(userId: onlineUsers[index], token: tokens[index],
                           role: .groupMember(group: groupId, sender: index < senders, ultra: p.ultra))
            })
            let baseline = await harness.sampleServer()
            // Two workers at least: every message comes back as a push to each online member, and
            // one generator thread reading them would be a limit of its own.
            let pool = try harness.launchWorkers(clients, template: harness.jobTemplate(chatRatePerClient: perSender), minimumWorkers: 2)
            let (connected, failed) = try await pool.waitReady()
            note("\(result.scenario): \(connected) members connected (\(failed) failed) in \(pool.count) worker(s); \(senders) of them send \(fmt(p.rate, 0)) msg/s together for \(fmt(p.warmup, 0)) s warm-up + \(fmt(p.duration, 0)) s")
            let pushesAtStart = Locked(0), pushesAtEnd = Locked(0)
            let (stats, start, end) = try await measure(pool, warmup: p.warmup, duration: p.duration, harness: harness) { isStart in
                let count = pushTarget?.apns.requestCount ?? 0
                (isStart ? pushesAtStart : pushesAtEnd).withLock { $0 = count }
            }
            await pool.exit()
            var pushesDrained = 0
            if let pushTarget {
                // Every message sent is pushed to every offline member: wait (up to 60 s) for the
                // pushes still being decided or sent when the load stopped.
                let expected = pushesExpected(stats, receivers: max(0, connected - 1), offline: offlineUsers.count)
                let deadline = monotonicNanos() + 60_000_000_000
                while pushTarget.apns.requestCount < expected && monotonicNanos() < deadline {
                    try await Task.sleep(for: .milliseconds(200))
                }
                pushesDrained = pushTarget.apns.requestCount
            }
            await harness.finish()
            await pushTarget?.stop()

            let receivers = max(0, connected - 1)
            let expected = stats[.sent] * receivers
            let missing = expected - stats[.delivered]
            result.run = ["groupMembers": "\(p.members)", "onlineMembers": "\(online)", "onlineFraction": fmt(p.onlineFraction, 3),
                          "senders": "\(senders)", "targetRatePerSecond": fmt(p.rate, 0), "perSenderPerSecond": fmt(perSender, 3),
                          "warmupSeconds": fmt(p.warmup, 0), "durationSeconds": fmt(p.duration, 0),
                          "payloadBytes": "\(options.payloadBytes)"].merging(harness.layout) { a, _ in a }
            result.take(stats)
            if raiseSendLimit {
                result.notes.append("\(fmt(perSender, 1)) messages/s per sender is close to the server's per-client limit (5/s); the server imbench started allows 1,000,000 sends/s per client (--client-sends-per-second)")
            }
            if p.ultra {
                result.notes.append("SEEDED: the ultra group's \(p.members) members were written into the store (\(harness.storeKind)) before the server started (\(fmt(seedSeconds, 1)) s), not through the Server API; messages go to its default channel RCDefault")
            }
            if !environment.isEmpty && options.url == nil {
                result.notes.append("the server imbench started allows \(p.members) members per group (IMSERVER_MAX_GROUP_MEMBERS; default \(GroupLimits.defaultMaxMembers))")
            }
            result.server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: p.duration)
            if let pushTarget {
                // The server's cost per push: its CPU in the window over the pushes APNs took in it
                // (the online deliveries' cost is in the same CPU; `imbench group` with the same
                // parameters and no push gives it alone).
                let pushes = pushesAtEnd.value - pushesAtStart.value
                let expectedPushes = pushesExpected(stats, receivers: receivers, offline: offlineUsers.count)
                perUnitOfWork(&result, units: pushes, unit: "Push")
                result.figures["offlineMembersWithTokens"] = Double(offlineUsers.count)
                result.figures["pushesExpected"] = Double(expectedPushes)
                result.figures["pushesSent"] = Double(pushesDrained)
                result.figures["pushesMissing"] = Double(max(0, expectedPushes - pushesDrained))
                if pushesDrained < expectedPushes {
                    result.problems.append("\(pushesDrained) pushes reached APNs of \(expectedPushes) expected (\(expectedPushes / max(1, offlineUsers.count)) messages, warm-up included, × \(offlineUsers.count) offline members) within 60 s of the load's end")
                }
                let refused = pushTarget.apns.refusedCount
                result.figures["pushesRefusedByAPNs"] = Double(refused)
                if refused > 0 { result.problems.append("the local APNs refused \(refused) pushes (provider token, topic or path)") }
                result.notes.append("SEEDED: \(offlineUsers.count) offline members' APNs device tokens and the app's APNs credentials (p8) were written into the store before the server started; the local APNs server (HTTP/2, TLS, JWT checked) runs in imbench's process, so its CPU is the generator's")
            }
            perUnitOfWork(&result, units: stats[.pushesArrivingInWindow], unit: "Delivery", connections: connected)
            result.figures["connected"] = Double(connected)
            result.figures["groupSetupSeconds"] = rounded(createSeconds, 2)
            result.figures["sentPerSecond"] = rounded(Double(stats[.sent]) / p.duration, 1)
            result.figures["ackedPerSecond"] = rounded(Double(stats[.acked]) / p.duration, 1)
            result.figures["ackedArrivingPerSecond"] = rounded(Double(stats[.ackedArrivingInWindow]) / p.duration, 1)
            result.figures["unacknowledged"] = Double(stats[.sent] - stats[.acked])
            result.figures["deliveredPerSecond"] = rounded(Double(stats[.delivered]) / p.duration, 1)
            result.figures["deliveriesArrivingPerSecond"] = rounded(Double(stats[.pushesArrivingInWindow]) / p.duration, 1)
            result.figures["deliveriesExpected"] = Double(expected)
            result.figures["deliveriesMissing"] = Double(missing)
            result.figures["deliveriesDuplicate"] = Double(stats[.duplicateDeliveries])
            if stats[.sent] > 0 { result.figures["deliveriesPerMessage"] = rounded(Double(stats[.delivered]) / Double(stats[.sent]), 2) }
            if connected != clients.count { result.problems.append("\(connected) of \(clients.count) online members connected") }
            if stats[.sent] == 0 { result.problems.append("nothing was sent") }
            if stats[.duplicateDeliveries] > 0 { result.problems.append("\(stats[.duplicateDeliveries]) deliveries were duplicates (a member received a message more than once)") }
            if stats[.ownMessagePushed] > 0 { result.problems.append("\(stats[.ownMessagePushed]) messages were pushed back to the session that sent them") }
            if missing != 0 && (p.quick || stats[.acked] == stats[.sent]) {
                result.problems.append("\(stats[.delivered]) deliveries of \(expected) expected (\(stats[.sent]) messages × \(receivers) other online members)")
            } else if missing > 0 {
                result.notes.append("\(missing) deliveries missing of \(expected): \(stats[.sent] - stats[.acked]) messages were not acknowledged (refused, or unanswered after \(fmt(options.requestTimeout, 0)) s)")
            }
            if p.quick && stats[.acked] != stats[.sent] {
                result.problems.append("\(stats[.sent] - stats[.acked]) of \(stats[.sent]) messages were not acknowledged")
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }

    /// SEEDING: ultra group `groupId` with these members (the first is its owner), written through
    /// `SQLiteStore` into a server's data directory before the server starts.
    static func seedUltraGroup(site: SeedSite, members: [String], options: CommonOptions) async throws {
        let opened = try await SeedStore.open(site)
        do {
            try await seedUltraGroup(store: opened.store, members: members, options: options)
        } catch {
            await opened.close()
            throw error
        }
        await opened.close()
    }

    private static func seedUltraGroup(store: any IMStore, members: [String], options: CommonOptions) async throws {
        let now = SystemClock().nowMilliseconds()
        let app = try await store.upsertApp(appKey: options.appKey, appSecret: options.appSecret, name: "imbench", now: now)
        note("ultragroup: SEEDING ultra group \(groupId) with \(members.count) members through the store (not a measurement)")
        guard case .joined = try await store.createUltraGroup(appId: app.id, groupId: groupId, name: "imbench", ownerId: members[0], now: now,
                                                              maxGroupsPerUser: UltraGroupLimits.maxGroupsPerUser) else {
            throw BenchError("seeding ultra group \(groupId) failed")
        }
        var start = 1
        while start < members.count {
            let chunk = Array(members[start..<min(members.count, start + 10_000)])
            guard case .joined = try await store.joinUltraGroup(appId: app.id, groupId: groupId, userIds: chunk, now: now,
                                                                maxGroupsPerUser: UltraGroupLimits.maxGroupsPerUser) else {
                throw BenchError("seeding members \(start)… of ultra group \(groupId) failed")
            }
            start += chunk.count
        }
        let listed = try await store.ultraGroupRoster(appId: app.id, groupId: groupId)?.members.count ?? 0
        guard listed == members.count else {
            throw BenchError("ultra group \(groupId) was seeded with \(members.count) members but the store lists \(listed)")
        }
    }

    // MARK: chatroom

    struct ChatroomParameters: Sendable {
        /// Members of the room, each one connection (users r0…r(n-1)).
        var members = 10_000
        /// Members that publish, sharing the rate (the first ones: r0…r(p-1)).
        var publishers = 100
        /// Chatroom messages per second, all publishers together.
        var rate = 40.0
        var warmup = 5.0
        var duration = 30.0
        var quick = false
    }

    static let chatroomId = "imbench-room"

    /// One chatroom with `members` online members (one connection each, joined with JOIN_CHATROOM
    /// and no history), `publishers` of them sending at an aggregate open-loop rate. Every member but
    /// the publishing session should receive each message the room accepted (not discarded by its
    /// intake quota) exactly once. Reports publications issued, acknowledged and discarded,
    /// deliveries per second, the messages delivered to every member, delivery latency (send → push
    /// read, per member and message) and publish-to-last-recipient latency (per message, the latest
    /// of its member receipts).
    static func chatroom(_ p: ChatroomParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "chatroom")
        result.quick = p.quick
        guard p.members >= 2, (1...p.members).contains(p.publishers) else {
            throw BenchError("--members must be at least 2 and --publishers 1…members; got \(p.members) and \(p.publishers)")
        }
        let perPublisher = p.rate / Double(p.publishers)
        // The server's per-client limit (5 messages/s) stays in force: the rate is spread over
        // enough publishers instead of raising it.
        guard perPublisher <= 4 else {
            throw BenchError("\(fmt(p.rate, 0)) messages/s over \(p.publishers) publishers is \(fmt(perPublisher, 1))/s each, over the 4/s imbench allows under the server's limit of 5/s per client: raise --publishers to at least \(Int((p.rate / 4).rounded(.up)))")
        }
        let harness = try await Harness.start("chatroom", options: options)
        do {
            let users = (0..<p.members).map { "r\($0)" }
            note("chatroom: registering \(users.count) members")
            let tokens = try await harness.api.tokens(for: users)
            let clients = harness.place(users.indices.map { index in
                ClientSpec(userId: users[index], token: tokens[index],
                           role: .chatroomMember(room: chatroomId, publisher: index < p.publishers ? index : nil,
                                                 publishers: p.publishers))
            })
            let baseline = await harness.sampleServer()
            // The publishers have a worker process of their own, so that reading the room's pushes
            // on thousands of connections never holds their pacer back; the other members are spread
            // over `--workers` more (at least two: one generator thread reading every delivery would
            // be a limit of its own).
            let listeners = Array(clients.dropFirst(p.publishers))
            let listenerWorkers = max(1, min(harness.workerCount(connections: listeners.count, minimum: 2), listeners.count))
            var buckets = [Array(clients.prefix(p.publishers))] + [[ClientSpec]](repeating: [], count: listenerWorkers)
            for (index, client) in listeners.enumerated() { buckets[1 + index % listenerWorkers].append(client) }
            let pool = try harness.launchWorkers(buckets: buckets, template: harness.jobTemplate(chatRatePerClient: perPublisher))
            let setupStart = monotonicNanos()
            let (connected, failed) = try await pool.waitReady()
            let setupSeconds = Double(monotonicNanos() - setupStart) / 1e9
            note("chatroom: \(connected) members connected (\(failed) failed) and joined the room in \(pool.count) worker(s), \(fmt(setupSeconds, 1)) s; \(p.publishers) of them publish \(fmt(p.rate, 0)) msg/s together for \(fmt(p.warmup, 0)) s warm-up + \(fmt(p.duration, 0)) s")
            let (measured, start, end) = try await measure(pool, warmup: p.warmup, duration: p.duration, harness: harness)
            var stats = measured
            await pool.exit()
            await harness.finish()

            // Per message: did every member but the sender get it, and when did the last one?
            let recipients = max(0, connected - 1)
            let tally = stats.chatroom
            var complete = 0, incomplete = 0, discardedDelivered = 0, unknownDelivered = 0, unanswered = 0, refused = 0
            var missing = 0
            for publication in tally.publications.values {
                let receipts = tally.receipts[publication.number]
                switch publication.outcome {
                case .acked:
                    let got = receipts?.members ?? 0
                    if got == recipients, let receipts {
                        complete += 1
                        stats.record(.lastRecipient, nanos: receipts.lastAt &- publication.sentAt)
                    } else {
                        incomplete += 1
                        missing += max(0, recipients - got)
                    }
                case .discarded:
                    if let receipts { discardedDelivered += receipts.members }
                case .pending: unanswered += 1
                case .refused: refused += 1
                }
            }
            for number in tally.receipts.keys where tally.publications[number] == nil { unknownDelivered += 1 }

            result.run = ["members": "\(p.members)", "publishers": "\(p.publishers)", "targetRatePerSecond": fmt(p.rate, 0),
                          "perPublisherPerSecond": fmt(perPublisher, 3), "warmupSeconds": fmt(p.warmup, 0),
                          "durationSeconds": fmt(p.duration, 0), "payloadBytes": "\(options.payloadBytes)", "room": chatroomId]
                .merging(harness.layout) { a, _ in a }
            result.take(stats)
            result.server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
            result.generator = generatorFigures(stats, harness: harness, pool: pool, seconds: p.duration)
            perUnitOfWork(&result, units: stats[.pushesArrivingInWindow], unit: "Delivery", connections: connected)
            result.figures["connected"] = Double(connected)
            // Each join's reply carries the room's member count then; the last join saw them all.
            let roomMembers = stats.roomMembersAtJoin
            result.figures["roomMembersAtLastJoin"] = Double(roomMembers)
            result.figures["setupSeconds"] = rounded(setupSeconds, 2)
            result.figures["publishedPerSecond"] = rounded(Double(stats[.sent]) / p.duration, 1)
            result.figures["ackedPerSecond"] = rounded(Double(stats[.acked]) / p.duration, 1)
            result.figures["discardedPerSecond"] = rounded(Double(stats[.discarded]) / p.duration, 1)
            result.figures["discarded"] = Double(stats[.discarded])
            result.figures["answersArrivingPerSecond"] = rounded(Double(stats[.ackedArrivingInWindow]) / p.duration, 1)
            result.figures["unanswered"] = Double(unanswered)
            result.figures["refused"] = Double(refused)
            result.figures["deliveredPerSecond"] = rounded(Double(stats[.delivered]) / p.duration, 1)
            result.figures["deliveriesArrivingPerSecond"] = rounded(Double(stats[.pushesArrivingInWindow]) / p.duration, 1)
            result.figures["deliveriesExpected"] = Double(stats[.acked] * recipients)
            result.figures["deliveriesMissing"] = Double(missing)
            result.figures["deliveriesDuplicate"] = Double(stats[.duplicateDeliveries])
            result.figures["messagesDeliveredInFull"] = Double(complete)
            result.figures["messagesIncomplete"] = Double(incomplete)
            result.figures["fullyDeliveredPerSecond"] = rounded(Double(complete) / p.duration, 1)
            if stats[.chatroomFrames] > 0 {
                result.figures["messagesPerPushFrame"] = rounded(Double(stats[.pushes]) / Double(stats[.chatroomFrames]), 2)
            }
            if connected != clients.count { result.problems.append("\(connected) of \(clients.count) members connected and joined") }
            if roomMembers != connected {
                result.problems.append("the server counted \(roomMembers) members in the room at the last join, \(connected) joined")
            }
            if stats[.sent] == 0 { result.problems.append("nothing was sent") }
            if stats[.duplicateDeliveries] > 0 { result.problems.append("\(stats[.duplicateDeliveries]) deliveries were duplicates (a member received a message more than once)") }
            if stats[.ownMessagePushed] > 0 { result.problems.append("\(stats[.ownMessagePushed]) messages were pushed back to the session that sent them") }
            if discardedDelivered > 0 { result.problems.append("\(discardedDelivered) deliveries of messages the room said it discarded") }
            if unknownDelivered > 0 { result.problems.append("\(unknownDelivered) messages were received that no publisher sent in the window") }
            if incomplete > 0 {
                result.problems.append("\(incomplete) acknowledged messages did not reach every member: \(missing) deliveries missing of \(stats[.acked] * recipients)")
            }
            if unanswered + refused > 0 {
                let text = "\(unanswered) messages unanswered after \(fmt(options.requestTimeout, 0)) s, \(refused) refused"
                if p.quick { result.problems.append(text) } else { result.notes.append(text) }
            }
            let target = Int(p.rate * p.duration)
            if stats[.sent] < target * 99 / 100 {
                result.notes.append("the generator issued \(stats[.sent]) of the \(target) messages the rate asks for in the window (\(stats[.pacerSkipped]) skipped by its pacer): the box was too busy to keep the open loop")
            }
            if p.quick && stats[.discarded] > 0 {
                result.problems.append("\(stats[.discarded]) messages were discarded by the room's intake quota at \(fmt(p.rate, 0))/s")
            }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }

    // MARK: shared

    /// Starts the load, samples the server at the window's ends, stops and collects.
    /// The pushes every message of the run (warm-up included) should make: the messages, counted by
    /// the deliveries the online members received of them, times the offline members.
    static func pushesExpected(_ stats: WorkerStats, receivers: Int, offline: Int) -> Int {
        (receivers > 0 ? stats[.pushes] / receivers : stats[.sent]) * offline
    }

    /// `mark` is told when the window starts (true) and ends (false), for counts of the scenario's own.
    static func measure(_ pool: WorkerPool, warmup: Double, duration: Double, harness: Harness,
                        mark: (Bool) -> Void = { _ in }) async throws
        -> (WorkerStats, ServerSample?, ServerSample?) {
        let from = monotonicNanos() + UInt64(warmup * 1e9)
        let until = from + UInt64(duration * 1e9)
        pool.send(.start(measureFrom: from, measureUntil: until))
        await Harness.sleep(until: from)
        mark(true)
        let start = await harness.sampleServer()
        await Harness.sleep(until: until)
        mark(false)
        let end = await harness.sampleServer()
        return (try await pool.stop(), start, end)
    }

    static func generatorFigures(_ stats: WorkerStats, harness: Harness, pool: WorkerPool, seconds: Double) -> GeneratorFigures {
        let addresses = harness.sourceAddressList().map { "\($0.count) shared address(es) \($0.first ?? "")…" }
            ?? "127.0.0.2…127.0.0.\(1 + pool.count) (one per worker)"
        return GeneratorFigures(workers: pool.count, threadsPerWorker: harness.options.threads, sourceAddresses: addresses,
                                cpuSecondsInWindow: rounded(stats.cpuSeconds, 2),
                                cpuPercentOfOneCore: seconds > 0 ? rounded(stats.cpuSeconds / seconds * 100, 1) : 0)
    }

    /// The server's cost per unit of work in the window: CPU µs of the nodes (and of PostgreSQL,
    /// and both together) per unit, and the RSS the connections added (loaded minus baseline) per
    /// connection.
    static func perUnitOfWork(_ result: inout ScenarioResult, units: Int, unit: String, connections: Int? = nil) {
        guard units > 0, let server = result.server, let window = server.windowSeconds, window > 0 else { return }
        if let cpu = server.cpuSecondsInWindow {
            result.figures["serverCpuMicrosPer\(unit)"] = rounded(cpu * 1e6 / Double(units), 1)
        }
        if let db = server.database?.cpuSecondsInWindow {
            result.figures["postgresCpuMicrosPer\(unit)"] = rounded(db * 1e6 / Double(units), 1)
            if let cpu = server.cpuSecondsInWindow {
                result.figures["serverAndPostgresCpuMicrosPer\(unit)"] = rounded((cpu + db) * 1e6 / Double(units), 1)
            }
        }
        if let connections, connections > 0, let loaded = server.rssLoadedKiB, let base = server.rssBaselineKiB {
            result.figures["serverRssKiBPerConnection"] = rounded(Double(loaded - base) / Double(connections), 2)
        }
        result.figures["\(unit.prefix(1).lowercased() + unit.dropFirst())sPerSecondInWindow"] = rounded(Double(units) / window, 1)
    }

    /// Errors are problems; a result with problems has status "failed".
    static func check(_ result: inout ScenarioResult) {
        if !result.errors.isEmpty {
            result.problems.append("errors: " + result.errors.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", "))
        }
        if !result.problems.isEmpty { result.status = "failed" }
    }
}

// MARK: bus-probe

extension Scenarios {
    struct BusProbeParameters: Sendable {
        var pairs = 5_000
        /// The aggregate cross-node rates tried, in order, until one fails.
        var rates: [Double] = [1_000, 2_000, 4_000, 8_000, 16_000]
        var warmup = 3.0
        var duration = 15.0
        /// A step fails when its delivery p99 passes this (ms), or errors appear.
        var p99LimitMs = 100.0
    }

    /// Where the cluster bus saturates: cross-node one-to-one pairs on a cluster (2 nodes by
    /// default), one setup, then the rate raised step by step, each step measured on its own, until
    /// delivery p99 passes the limit or errors appear. Per step: the rate achieved, latencies, each
    /// node's CPU, PostgreSQL's CPU, and the bus's notifications per second (heard by a LISTEN of
    /// imbench's own on the bus channel).
    static func busProbe(_ p: BusProbeParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "bus-probe")
        guard options.database != nil else {
            throw BenchError("bus-probe needs --database: the cluster bus is PostgreSQL's LISTEN/NOTIFY")
        }
        guard !p.rates.isEmpty, p.pairs > 0 else { throw BenchError("bus-probe needs --pairs and at least one rate") }
        var options = options
        if options.nodes < 2 { options.nodes = 2 }
        let clientCount = 2 * p.pairs
        if let top = p.rates.max(), top / Double(clientCount) > 4, !options.serverArguments.contains(where: { $0.contains("client-sends-per-second") }) {
            throw BenchError("\(fmt(top, 0)) msg/s over \(clientCount) clients is over 4/s each, close to the server's limit of 5/s per client: raise --pairs")
        }
        let harness = try await Harness.start("bus-probe", options: options)
        do {
            var users: [String] = []
            for pair in 0..<p.pairs { users += ["a\(pair)", "b\(pair)"] }
            note("bus-probe: registering \(users.count) users")
            let tokens = try await harness.api.tokens(for: users)
            let clients = harness.place(users.indices.map { index in
                ClientSpec(userId: users[index], token: tokens[index], role: .chat(peer: users[index ^ 1]))
            })
            let baseline = await harness.sampleServer()
            let pool = try harness.launchWorkers(clients, template: harness.jobTemplate(chatRatePerClient: p.rates[0] / Double(clientCount)))
            let (connected, failed) = try await pool.waitReady()
            note("bus-probe: \(connected) connected (\(failed) failed) over \(harness.nodeCount) nodes, every pair split across nodes (cross-node); steps " + p.rates.map { fmt($0, 0) }.joined(separator: ", ") + " msg/s, \(fmt(p.warmup, 0)) s warm-up + \(fmt(p.duration, 0)) s each, until delivery p99 > \(fmt(p.p99LimitMs, 0)) ms or errors")
            var steps: [[String: Double]] = []
            var lastGood: [String: Double]?
            var stoppedBy: String?
            var firstServer: ServerFigures?
            for rate in p.rates {
                let from = monotonicNanos() + UInt64(p.warmup * 1e9)
                let until = from + UInt64(p.duration * 1e9)
                pool.send(.restart(measureFrom: from, measureUntil: until, chatRatePerClient: rate / Double(clientCount)))
                await Harness.sleep(until: from)
                let start = await harness.sampleServer()
                await Harness.sleep(until: until)
                let end = await harness.sampleServer()
                let stats = try await pool.stop()
                let server = harness.serverFigures(baseline: baseline, windowStart: start, windowEnd: end)
                if firstServer == nil { firstServer = server }
                var step: [String: Double] = ["offeredPerSecond": rate]
                step["sentPerSecond"] = rounded(Double(stats[.sent]) / p.duration, 1)
                step["ackedArrivingPerSecond"] = rounded(Double(stats[.ackedArrivingInWindow]) / p.duration, 1)
                step["deliveredPerSecond"] = rounded(Double(stats[.delivered]) / p.duration, 1)
                step["unacknowledged"] = Double(stats[.sent] - stats[.acked])
                step["undelivered"] = Double(stats[.sent] - stats[.delivered])
                step["errors"] = Double(stats.errors.values.reduce(0, +))
                if let delivery = stats.summary(.delivery), delivery.count > 0 {
                    step["deliveryP50Ms"] = delivery.p50
                    step["deliveryP99Ms"] = delivery.p99
                }
                if let ack = stats.summary(.ack), ack.count > 0 { step["ackP99Ms"] = ack.p99 }
                if let cpu = server.cpuPercentOfOneCore { step["nodesCpuPercent"] = cpu }
                for node in server.nodes ?? [] {
                    if let cpu = node.cpuPercentOfOneCore { step["\(node.node)CpuPercent"] = cpu }
                }
                if let db = server.database {
                    if let cpu = db.cpuPercentOfOneCore { step["postgresCpuPercent"] = cpu }
                    step["notificationsPerSecond"] = db.notificationsPerSecond
                    step["busMessagesPerSecond"] = db.busMessagesPerSecond
                    if let per = db.busMessagesPerNotification { step["busMessagesPerNotification"] = per }
                    step["notificationKiBPerSecond"] = db.notificationKiBPerSecond
                    if let commits = db.commitsPerSecond { step["postgresCommitsPerSecond"] = commits }
                    if let syncs = db.walSyncsPerSecond { step["walSyncsPerSecond"] = syncs }
                }
                if let total = server.serverAndDatabaseCpuPercentOfOneCore { step["nodesAndPostgresCpuPercent"] = total }
                step["generatorCpuPercent"] = rounded(stats.cpuSeconds / p.duration * 100, 1)
                if let busy = server.machineBusyPercentOfOneCore {
                    step["machineBusyPercent"] = busy
                    if let ours = server.serverAndDatabaseCpuPercentOfOneCore ?? server.cpuPercentOfOneCore {
                        step["outsideRunCpuPercent"] = rounded(busy - ours - (step["generatorCpuPercent"] ?? 0), 1)
                    }
                }
                steps.append(step)
                let p99 = step["deliveryP99Ms"] ?? .infinity
                note("bus-probe: \(fmt(rate, 0)) msg/s offered → \(fmt(step["deliveredPerSecond"] ?? 0, 0)) delivered/s, delivery p99 \(fmt(p99, 1)) ms, nodes \(fmt(step["nodesCpuPercent"] ?? 0, 0))%, postgres \(fmt(step["postgresCpuPercent"] ?? 0, 0))%, \(fmt(step["notificationsPerSecond"] ?? 0, 0)) NOTIFY/s")
                if !stats.errors.isEmpty {
                    stoppedBy = "errors at \(fmt(rate, 0)) msg/s: " + stats.errors.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ")
                } else if p99 > p.p99LimitMs {
                    stoppedBy = "delivery p99 \(fmt(p99, 1)) ms > \(fmt(p.p99LimitMs, 0)) ms at \(fmt(rate, 0)) msg/s"
                } else if stats[.sent] < Int(rate * p.duration * 0.98) {
                    stoppedBy = "the generator issued only \(stats[.sent]) of \(Int(rate * p.duration)) messages at \(fmt(rate, 0)) msg/s (the box is full)"
                }
                if stoppedBy != nil { break }
                lastGood = step
            }
            await pool.exit()
            await harness.finish()

            result.run = ["pairs": "\(p.pairs)", "connections": "\(clientCount)", "delivery": "cross-node",
                          "rates": p.rates.map { fmt($0, 0) }.joined(separator: ","), "warmupSecondsPerStep": fmt(p.warmup, 0),
                          "durationSecondsPerStep": fmt(p.duration, 0), "p99LimitMs": fmt(p.p99LimitMs, 0),
                          "payloadBytes": "\(options.payloadBytes)"].merging(harness.layout) { a, _ in a }
            result.steps = steps
            result.server = firstServer
            result.figures["connected"] = Double(connected)
            result.figures["stepsRun"] = Double(steps.count)
            if let lastGood {
                result.figures["highestRateWithinLimitPerSecond"] = lastGood["offeredPerSecond"] ?? 0
                result.figures["deliveredPerSecondAtHighestRate"] = lastGood["deliveredPerSecond"] ?? 0
                result.figures["deliveryP99MsAtHighestRate"] = lastGood["deliveryP99Ms"] ?? 0
                result.figures["notificationsPerSecondAtHighestRate"] = lastGood["notificationsPerSecond"] ?? 0
            }
            result.notes.append("every message crosses nodes (user i on node i mod \(harness.nodeCount), the two users of a pair on different nodes)")
            result.notes.append("notifications/s: counted by a LISTEN connection of imbench's own on the bus channel \(DatabaseMonitor.busChannel) in the run's database (one more listener than the nodes; bus messages per notification by scanning each payload's \"m\" array); commits/s from pg_stat_database.xact_commit, WAL fsyncs/s from pg_stat_wal.wal_sync; PostgreSQL CPU from /proc: the postmaster, its \"postgres:\" children and the children it reaped")
            result.notes.append(stoppedBy.map { "stopped: \($0)" } ?? "every step stayed within the limit: raise --rates to find the saturation")
            if connected != clients.count { result.problems.append("\(connected) of \(clients.count) clients connected") }
            check(&result)
            return result
        } catch {
            await harness.finish()
            throw error
        }
    }
}
