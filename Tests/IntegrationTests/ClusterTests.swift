import Foundation
import IMClusterPostgres
import IMCore
@testable import IMLib
import IMServer
import IMServerTesting
import IMStore
import IMStoreSQLite
import Logging
import Testing

/// Nodes of one cluster in this process: each a real server on its own port with its own
/// PostgreSQL bus transport, all on one store and one database of their own (so that tests never
/// hear each other's bus). The cluster in separate processes is `ClusterProcessTests`.
struct InProcessCluster {
    let nodes: [TestServer]
    let databaseURL: String

    /// - Parameter wrap: what each node's transport is wrapped in (a test's probe).
    static func start(nodes count: Int, store: any IMStore, clock: any WallClock = SystemClock(),
                      configure: (inout ServerConfig) -> Void = { _ in },
                      wrap: (any ClusterTransport) -> any ClusterTransport = { $0 }) async throws -> InProcessCluster {
        let databaseURL = try await TestPostgres.makeDatabase()
        let (user, password, host, port, database) = TestPostgres.parts(databaseURL)
        var logger = Logger(label: "cluster-test")
        logger.logLevel = .warning
        var nodes: [TestServer] = []
        for index in 0..<count {
            let transport = PostgresClusterTransport.make(host: host, port: port, username: user, password: password, database: database,
                                                          nodeId: "node\(index)", logger: logger)
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
        await TestPostgres.dropDatabase(databaseURL)
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

func withCluster(nodes: Int, clock: any WallClock = SystemClock(), configure: (inout ServerConfig) -> Void = { _ in },
                 wrap: (any ClusterTransport) -> any ClusterTransport = { $0 },
                 _ body: (InProcessCluster) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-cluster-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try SQLiteStore(directory: directory.path)
    let cluster = try await InProcessCluster.start(nodes: nodes, store: store, clock: clock, configure: configure, wrap: wrap)
    do {
        try await body(cluster)
        await cluster.stop()
    } catch {
        await cluster.stop()
        throw error
    }
    try store.close()
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
            #expect(await carolInbox.wait(for: 3).last?.message.messageUId == after.messageUId)
            #expect(await annInbox.wait(for: 3).last?.message.messageUId == after.messageUId)
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
            #expect(await statuses.first { $0 == .kickedOfflineByOtherClient } == .kickedOfflineByOtherClient)
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
}
