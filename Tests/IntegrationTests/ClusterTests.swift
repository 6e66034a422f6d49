import Foundation
import IMClusterPostgres
import IMCore
@testable import IMLib
import IMServer
import IMServerTesting
import IMStore
import IMStorePostgres
import Logging
import Testing

/// Nodes of one cluster in this process: each a real server on its own port with its own
/// PostgreSQL bus transport, all on one store, a PostgreSQL database of the test's own (so that
/// tests never hear each other's bus). The cluster in separate processes is `ClusterProcessTests`.
struct InProcessCluster {
    let nodes: [TestServer]
    let databaseURL: String

    /// - Parameter wrap: what each node's transport is wrapped in (a test's probe).
    static func start(nodes count: Int, store: any IMStore, databaseURL: String, clock: any WallClock = SystemClock(),
                      configure: (inout ServerConfig) -> Void = { _ in },
                      wrap: (any ClusterTransport) -> any ClusterTransport = { $0 }) async throws -> InProcessCluster {
        let url = try PostgresURL(parsing: databaseURL)
        var logger = Logger(label: "cluster-test")
        logger.logLevel = .warning
        var nodes: [TestServer] = []
        for index in 0..<count {
            let transport = PostgresClusterTransport.make(host: url.host, port: url.port, username: url.user, password: url.password,
                                                          database: url.database, nodeId: "node\(index)",
                                                          // Under the whole suite's load a node's beat can be
                                                          // late by seconds; a node here leaves only by stopping
                                                          // (the timeout's own tests are ClusterProcessTests').
                                                          deadAfter: .seconds(60), logger: logger)
            nodes.append(try await TestServer.start(store: store, cluster: wrap(transport), clock: clock, configure: configure))
        }
        // Every node listens before the test begins.
        for node in nodes {
            try await waitUntil("node \(node.baseURL) sees every node") { node.core.cluster?.liveNodes() == count }
        }
        return InProcessCluster(nodes: nodes, databaseURL: databaseURL)
    }

    func stop() async {
        for node in nodes { await node.stop() }
    }
}

/// Polls `condition` until it holds (at most `timeout`): for state that no event announces.
func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: @Sendable () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting until \(what)")
    throw IMError(.serverUnavailable, "timed out waiting until \(what)")
}

/// A new database on the tests' PostgreSQL server for one test's cluster: its URL, and how to drop it.
func makeClusterDatabase() async throws -> (url: String, drop: @Sendable () async -> Void) {
    let databases = try await TestPostgres.shared.databases()
    let name = try await databases.makeDatabase()
    return (databases.url(of: name), { try? await databases.drop(name) })
}

/// Runs `body` with a cluster of `nodes` in-process nodes on a PostgresStore in a new database,
/// and drops the database afterwards.
func withCluster(nodes: Int, clock: any WallClock = SystemClock(), configure: (inout ServerConfig) -> Void = { _ in },
                 wrap: (any ClusterTransport) -> any ClusterTransport = { $0 },
                 _ body: (InProcessCluster) async throws -> Void) async throws {
    let (databaseURL, dropDatabase) = try await makeClusterDatabase()
    var logger = Logger(label: "cluster-store")
    logger.logLevel = .warning
    let store = try await PostgresStore.connect(url: databaseURL, logger: logger, poolSize: 8)
    let cluster: InProcessCluster
    do {
        cluster = try await InProcessCluster.start(nodes: nodes, store: store, databaseURL: databaseURL, clock: clock,
                                                   configure: configure, wrap: wrap)
    } catch {
        await store.close()
        await dropDatabase()
        throw error
    }
    do {
        try await body(cluster)
        await cluster.stop()
    } catch {
        await cluster.stop()
        await store.close()
        await dropDatabase()
        throw error
    }
    await store.close()
    await dropDatabase()
}

@Suite("Cluster: nodes on one store and one bus", .serialized)
struct ClusterTests {
    static func text(_ message: Message) -> String? { message.content(as: TextMessage.self)?.content }

    @Test("private and group messages reach sessions on other nodes once; a roster changed on one node is current on the others")
    func messagesAcrossNodes() async throws {
        try await withCluster(nodes: 3) { cluster in
            let (n0, n1, n2) = (cluster.nodes[0], cluster.nodes[1], cluster.nodes[2])
            let ann = try await n0.connectedClient("ann")
            let bob = try await n1.connectedClient("bob")
            let carol = try await n2.connectedClient("carol")
            let annInbox = EventRecorder(ann.receivedMessages())
            let bobInbox = EventRecorder(bob.receivedMessages())
            let carolInbox = EventRecorder(carol.receivedMessages())

            let hello = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hi bob"))
            let got = try #require(await bobInbox.wait(for: 1).first)
            #expect(got.message.messageUId == hello.messageUId && Self.text(got.message) == "hi bob")

            try await GroupChatTests.createGroup(n1, "g1", ["ann", "bob", "carol"])
            let group = try await carol.sendMessage(.group, targetId: "g1", content: TextMessage(content: "to the group"))
            #expect(await annInbox.wait(for: 1).map(\.message.messageUId) == [group.messageUId])
            #expect(await bobInbox.wait(for: 2).last?.message.messageUId == group.messageUId)

            // dave joins through node 2's Server API; node 0 had g1's roster cached from the message above.
            let dave = try await n0.connectedClient("dave")
            let daveInbox = EventRecorder(dave.receivedMessages())
            let (status, body) = try await n2.api.post("/group/join.json", form: ["userId": "dave", "groupId": "g1", "groupName": "g1"])
            #expect(status == 200, "join: \(body)")
            let welcome = try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: "welcome dave"))
            #expect(await daveInbox.wait(for: 1).map(\.message.messageUId) == [welcome.messageUId])
            // ...and once dave leaves through node 1, node 0 no longer delivers to him.
            let (quitStatus, _) = try await n1.api.post("/group/quit.json", form: ["userId": "dave", "groupId": "g1"])
            #expect(quitStatus == 200)
            let after = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "dave left"))
            #expect(await carolInbox.wait(for: 2).map(\.message.messageUId) == [welcome.messageUId, after.messageUId])
            #expect(await annInbox.wait(for: 2).map(\.message.messageUId) == [group.messageUId, after.messageUId])
            #expect(daveInbox.items.count == 1, "dave got nothing after leaving")

            // Every message exactly once per device.
            #expect(Set(bobInbox.items.map(\.message.messageUId)).count == bobInbox.items.count)
            #expect(Set(annInbox.items.map(\.message.messageUId)).count == annInbox.items.count)
            for client in [ann, bob, carol, dave] { await client.disconnect() }
        }
    }

    @Test("a login on one node kicks the same login class on another (31010); other classes stay; presence is the cluster's")
    func kickAcrossNodes() async throws {
        try await withCluster(nodes: 2) { cluster in
            let (n0, n1) = (cluster.nodes[0], cluster.nodes[1])
            let phone = try await n0.connectedClient("kim", platform: .iOS)
            let desktop = try await n0.connectedClient("kim", platform: .macOS)
            let statuses = EventRecorder(phone.connectionStatusUpdates())
            let (_, online) = try await n1.api.post("/user/checkOnline.json", form: ["userId": "kim"])
            #expect(online["status"] as? String == "1", "node 1 sees kim online on node 0")

            let android = try await n1.connectedClient("kim", platform: .android)
            #expect(await statuses.first { $0 == .kickedOfflineByOtherClient } == .kickedOfflineByOtherClient)
            #expect(await desktop.connectionStatus == .connected)
            #expect(await android.connectionStatus == .connected)

            await android.disconnect()
            await desktop.disconnect()
            try await waitUntil("kim is offline on every node") {
                let (_, body) = try await n0.api.post("/user/checkOnline.json", form: ["userId": "kim"])
                return body["status"] as? String == "0"
            }
        }
    }

    @Test("an automatic reconnect with reconnect-kick enabled is refused (31023) when the same class is online on another node")
    func reconnectKickRefusedAcrossNodes() async throws {
        try await withCluster(nodes: 2) { cluster in
            let (n0, n1) = (cluster.nodes[0], cluster.nodes[1])
            let first = try await n0.connectedClient("kim", platform: .iOS) { options in
                options.reconnectKickEnable = true
                options.reconnectDelay = { attempt in attempt == 0 ? .milliseconds(1500) : ReconnectSchedule.delay(attempt: attempt) }
            }
            let statuses = EventRecorder(first.connectionStatusUpdates())
            n0.core.dropConnections(appId: n0.app.id, userId: "kim")
            _ = await statuses.first { $0 == .connecting }
            let second = try await n1.connectedClient("kim", platform: .android)
            let final = await statuses.first { $0 == .kickedOfflineByOtherClient }
            #expect(final == .kickedOfflineByOtherClient, "statuses: \(statuses.items)")
            #expect(await second.connectionStatus == .connected, "the device online on node 1 stays online")
            await second.disconnect()
        }
    }

    @Test("sensitive words, blacklists and blocks changed on one node hold on the others at once")
    func cachesAcrossNodes() async throws {
        try await withCluster(nodes: 2) { cluster in
            let (n0, n1) = (cluster.nodes[0], cluster.nodes[1])
            let ann = try await n0.connectedClient("ann")
            let bob = try await n0.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            // Node 0 caches the (empty) word list and bob's blacklist with this first message.
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "first"))
            #expect(await bobInbox.wait(for: 1).count == 1)

            _ = try await n1.api.post("/sensitiveword/add.json", form: ["word": "darn", "replaceWord": "***"])
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "darn it"))
            #expect(await bobInbox.wait(for: 2).last.flatMap { Self.text($0.message) } == "*** it")

            _ = try await n1.api.post("/user/blacklist/add.json", form: ["userId": "bob", "blackUserId": "ann"])
            let code = await failureCode { _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hello?")) }
            #expect(code == ErrorCode.rejectedByBlacklist.rawValue)

            let statuses = EventRecorder(ann.connectionStatusUpdates())
            _ = try await n1.api.post("/user/block.json", form: ["userId": "ann", "minute": "10"])
            #expect(await statuses.first { $0 == .disconnectException || $0 == .kickedOfflineByOtherClient } == .disconnectException,
                    "ann, on node 0, is put out by a block made through node 1")
            await bob.disconnect()
        }
    }

    @Test("sentTime and seq increase strictly in a conversation whichever node committed its messages")
    func orderingAcrossNodes() async throws {
        try await withCluster(nodes: 3, configure: { $0.session.clientSendsPerSecond = 10_000 }) { cluster in
            try await GroupChatTests.createGroup(cluster.nodes[0], "busy", ["u0", "u1", "u2"])
            var clients: [IMClient] = []
            for index in 0..<3 { clients.append(try await cluster.nodes[index].connectedClient("u\(index)")) }
            let senders = clients
            // Every member sends at once, each through its own node, to the group and to the next member.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, client) in senders.enumerated() {
                    group.addTask {
                        for round in 0..<40 {
                            _ = try await client.sendMessage(.group, targetId: "busy", content: TextMessage(content: "g\(index)-\(round)"))
                            _ = try await client.sendMessage(.private, targetId: "u\((index + 1) % 3)", content: TextMessage(content: "p\(round)"))
                        }
                    }
                }
                try await group.waitForAll()
            }
            let store = cluster.nodes[0].core.store
            let appId = cluster.nodes[0].app.id
            let group = groupConversationKey("busy")
            for key in [group, privateConversationKey("u0", "u1"), privateConversationKey("u1", "u2"), privateConversationKey("u2", "u0")] {
                let messages = try await store.conversationMessages(appId: appId, conversationKey: key, start: 0, end: Int64.max,
                                                                    includeStart: true, ascending: true, limit: 1_000)
                #expect(messages.count == (key == group ? 120 : 40), "\(key)")
                let bySeq = messages.sorted { $0.seq < $1.seq }
                for (earlier, later) in zip(bySeq, bySeq.dropFirst()) {
                    #expect(later.sentTime > earlier.sentTime, "\(key): seq \(later.seq) has sentTime \(later.sentTime), not after seq \(earlier.seq)'s \(earlier.sentTime)")
                }
            }
            for client in clients { await client.disconnect() }
        }
    }

    @Test("typing, recall, conversation state and system broadcasts reach devices on other nodes")
    func lifecycleAcrossNodes() async throws {
        try await withCluster(nodes: 3) { cluster in
            let (n0, n1, n2) = (cluster.nodes[0], cluster.nodes[1], cluster.nodes[2])
            let ann = try await n0.connectedClient("ann")
            let bob = try await n1.connectedClient("bob")
            let bobPhone = try await n2.connectedClient("bob", platform: .iOS)
            let bobInbox = EventRecorder(bob.receivedMessages())
            let typing = EventRecorder(bob.typingStatusUpdates())
            let recalls = EventRecorder(bob.recalledMessages())
            let phoneState = EventRecorder(bobPhone.conversationStateChanges())
            let annInbox = EventRecorder(ann.receivedMessages())

            _ = try await ann.sendTypingStatus(.private, targetId: "bob", typingContentType: "RC:TxtMsg")
            #expect(await typing.wait(for: 1).first?.userId == "ann", "bob on node 1 sees ann, on node 0, typing")

            let sent = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "oops"))
            #expect(await bobInbox.wait(for: 1).first?.message.messageUId == sent.messageUId)
            _ = try await ann.recallMessage(sent)
            #expect(await recalls.wait(for: 1).first?.messageUId == sent.messageUId, "the recall reached node 1")

            _ = try await bob.setConversationToTop(.private, targetId: "ann", isTop: true)
            #expect(await phoneState.wait(for: 1).count == 1, "bob's phone on node 2 heard of the pin made on node 1")

            let (status, body) = try await n2.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg",
                                                                                      "content": #"{"content":"to everyone"}"#])
            #expect(status == 200, "\(body)")
            #expect(await annInbox.first { Self.text($0.message) == "to everyone" } != nil, "the broadcast reached node 0")
            #expect(await bobInbox.first { Self.text($0.message) == "to everyone" } != nil, "the broadcast reached node 1")
            for client in [ann, bob, bobPhone] { await client.disconnect() }
        }
    }

    @Test("an ultra group message modified on one node reaches its members' devices on the other live, after the message")
    func ultraGroupEditAcrossNodes() async throws {
        try await withCluster(nodes: 2) { cluster in
            let (n0, n1) = (cluster.nodes[0], cluster.nodes[1])
            try await n0.core.ultraGroups.create(appId: n0.app.id, groupId: "ug", name: "ug", ownerId: "ann")
            try await n0.core.ultraGroups.join(appId: n0.app.id, groupId: "ug", userIds: ["bob"])
            let ann = try await n0.connectedClient("ann")
            let bob = try await n1.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobChanges = EventRecorder(bob.messageModifications())

            let sent = try await ann.sendMessage(.ultraGroup, targetId: "ug", channelId: "", content: TextMessage(content: "tpyo"))
            _ = try await ann.modifyUltraGroupMessage(messageUId: sent.messageUId, content: TextMessage(content: "typo"))
            let seen = await bobChanges.wait(for: 1)
            #expect(seen.first.map(Self.text) == "typo" && seen.first?.messageUId == sent.messageUId,
                    "the edit made on node 0 reached bob on node 1")
            #expect(await bobInbox.wait(for: 1).first?.message.messageUId == sent.messageUId)
            #expect(try await bob.getHistoryMessages(.ultraGroup, targetId: "ug").compactMap(Self.text) == ["typo"],
                    "bob's device applied the edit to the message it had")
            for client in [ann, bob] { await client.disconnect() }
        }
    }

    @Test("a per-app Server API limit is shared by the live nodes: each admits its share, so the cluster admits the limit")
    func rateLimitAcrossNodes() async throws {
        let clock = ManualClock()
        try await withCluster(nodes: 2, clock: clock, configure: { $0.serverAPI.callsPerSecond = 10 }) { cluster in
            func admitted(_ node: TestServer, _ calls: Int) async throws -> Int {
                var admitted = 0
                for _ in 0..<calls {
                    let (_, body) = try await node.api.post("/user/checkOnline.json", form: ["userId": "ann"])
                    if body["code"] as? Int == 200 { admitted += 1 } else { #expect(body["code"] as? Int == ErrorCode.apiRateLimited.rawValue) }
                }
                return admitted
            }
            // 10 per second for the app, two nodes: 5 each within one second of the manual clock.
            let first = try await admitted(cluster.nodes[0], 8)
            let second = try await admitted(cluster.nodes[1], 8)
            #expect(first == 5 && second == 5, "node 0 admitted \(first), node 1 \(second)")
            clock.advance(milliseconds: 1000)
            let later = try await admitted(cluster.nodes[0], 6)
            #expect(later == 5, "a new second, a new share")
        }
    }
}
