import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
@testable import IMLib
import IMServer
import IMServerTesting
import IMStore
import Synchronization
import Testing

/// A cluster of real `imserver` processes on one PostgreSQL database (a new one per test), as an
/// operator runs it: clients and the Server API reach nodes at their own addresses.
struct ProcessCluster {
    let nodes: [ChildServer]
    let databaseURL: String
    let dropDatabase: @Sendable () async -> Void
    let dataDir: URL
    static let app = AppRecord(id: 0, appKey: "clusterkey", appSecret: "clustersecret", name: "", createdAt: 0)

    static func start(nodes count: Int, nodeTimeoutSeconds: Int = 10) async throws -> ProcessCluster {
        let (databaseURL, dropDatabase) = try await makeClusterDatabase()
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-cluster-\(UUID().uuidString)")
        var nodes: [ChildServer] = []
        for index in 0..<count {
            nodes.append(try await ChildServer(dataDir: dataDir.appendingPathComponent("node\(index)"), appKey: app.appKey, appSecret: app.appSecret,
                                         environment: ["IMSERVER_DATABASE_URL": databaseURL, "IMSERVER_NODE_ID": "node\(index)",
                                                       "IMSERVER_CLUSTER_NODE_TIMEOUT_SECONDS": "\(nodeTimeoutSeconds)",
                                                       "IMSERVER_API_CALLS_PER_SECOND": "0"]))
        }
        let cluster = ProcessCluster(nodes: nodes, databaseURL: databaseURL, dropDatabase: dropDatabase, dataDir: dataDir)
        // Every node counts every other before the test begins (its bus listens by then).
        for node in nodes {
            try await waitUntil("\(node.baseURL) is in a cluster of \(count)") {
                let (data, _) = try await URLSession.shared.data(from: URL(string: node.baseURL + "/health")!)
                let body = try JSONSerialization.jsonObject(with: data) as? [String: Any]
                return body?["nodes"] as? Int == count
            }
        }
        return cluster
    }

    func api(_ node: Int) -> ServerAPIClient { ServerAPIClient(baseURL: nodes[node].baseURL, app: Self.app) }

    func token(_ user: String) async throws -> String {
        try #require(try await api(0).post("/user/getToken.json", form: ["userId": user]).1["token"] as? String)
    }

    /// A client that tries these nodes in this order.
    func client(_ user: String, nodes order: [Int], platform: Platform = .linux) -> IMClient {
        var options = IMClientOptions()
        options.platform = platform
        options.databaseDirectory = dataDir.appendingPathComponent("clients/\(user)-\(UUID().uuidString)")
        options.requestTimeout = .seconds(10)
        options.reconnectDelay = { attempt in .milliseconds(attempt == 0 ? 50 : 300) }
        return IMClient(appKey: Self.app.appKey, serverURLs: order.map { nodes[$0].baseURL }, options: options)
    }

    func stop() async {
        for node in nodes { node.kill() }
        await dropDatabase()
        try? FileManager.default.removeItem(at: dataDir)
    }
}

func withProcessCluster(nodes: Int, nodeTimeoutSeconds: Int = 10, _ body: (ProcessCluster) async throws -> Void) async throws {
    let cluster = try await ProcessCluster.start(nodes: nodes, nodeTimeoutSeconds: nodeTimeoutSeconds)
    do {
        try await body(cluster)
        await cluster.stop()
    } catch {
        await cluster.stop()
        throw error
    }
}

@Suite("Cluster of imserver processes", .serialized)
struct ClusterProcessTests {
    @Test("three processes: private, group and ultra group messages between clients on different nodes, each once")
    func threeNodes() async throws {
        try await withProcessCluster(nodes: 3) { cluster in
            var clients: [String: IMClient] = [:]
            var inboxes: [String: EventRecorder<ReceivedMessage>] = [:]
            for (user, node) in [("ann", 0), ("bob", 1), ("carol", 2)] {
                let client = cluster.client(user, nodes: [node])
                inboxes[user] = EventRecorder(client.receivedMessages())
                let synced = EventRecorder(client.offlineMessageSyncCompleted())
                try await client.connect(token: try await cluster.token(user))
                _ = await synced.wait(for: 1)
                clients[user] = client
            }
            let (ann, bob, carol) = (clients["ann"]!, clients["bob"]!, clients["carol"]!)

            let privateMessage = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "private"))
            #expect(await inboxes["carol"]!.wait(for: 1).map(\.message.messageUId) == [privateMessage.messageUId])

            let (created, body) = try await cluster.api(1).post("/group/create.json", rawForm: "userId=ann&userId=bob&userId=carol&groupId=g1&groupName=g1")
            #expect(created == 200, "\(body)")
            let groupMessage = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "group"))
            #expect(await inboxes["ann"]!.wait(for: 1).map(\.message.messageUId) == [groupMessage.messageUId])
            #expect(await inboxes["carol"]!.wait(for: 2).last?.message.messageUId == groupMessage.messageUId)

            let (ugCreated, ugBody) = try await cluster.api(2).post("/ultragroup/create.json", form: ["userId": "carol", "groupId": "ug1", "groupName": "ug1"])
            #expect(ugCreated == 200, "\(ugBody)")
            let (joined, joinBody) = try await cluster.api(0).post("/ultragroup/join.json", rawForm: "userId=ann&userId=bob&groupId=ug1")
            #expect(joined == 200, "\(joinBody)")
            let ultra = try await carol.sendMessage(.ultraGroup, targetId: "ug1", content: TextMessage(content: "ultra"))
            #expect(await inboxes["ann"]!.wait(for: 2).last?.message.messageUId == ultra.messageUId)
            #expect(await inboxes["bob"]!.wait(for: 1).last?.message.messageUId == ultra.messageUId)

            for (user, inbox) in inboxes {
                let uids = inbox.items.map(\.message.messageUId)
                #expect(Set(uids).count == uids.count, "\(user) got a message twice")
            }
            for client in clients.values { await client.disconnect() }
        }
    }

    @Test("SIGKILL of a node under load: its clients move on, nothing acknowledged is lost or arrives twice, its presence is cleared")
    func killOneNode() async throws {
        try await withProcessCluster(nodes: 3, nodeTimeoutSeconds: 3) { cluster in
            let receiver = cluster.client("receiver", nodes: [0, 2])
            let inbox = EventRecorder(receiver.receivedMessages())
            let synced = EventRecorder(receiver.offlineMessageSyncCompleted())
            try await receiver.connect(token: try await cluster.token("receiver"))
            _ = await synced.wait(for: 1)
            // Only on node 1: once it is dead, nobody has this user online.
            let watcher = cluster.client("watcher", nodes: [1])
            try await watcher.connect(token: try await cluster.token("watcher"))

            var senders: [IMClient] = []
            for user in ["s1", "s2", "s3", "s4"] {
                let sender = cluster.client(user, nodes: [1, 2, 0])
                try await sender.connect(token: try await cluster.token(user))
                #expect(await sender.connectedServerURL == cluster.nodes[1].baseURL)
                senders.append(sender)
            }

            let senderClients = senders
            let acked = Locked<[String]>([])
            let (killPoint, reached) = AsyncStream<Void>.makeStream()
            let (finishPoint, finished) = AsyncStream<Void>.makeStream()
            let load = Task {
                await withTaskGroup(of: Void.self) { group in
                    for sender in senderClients {
                        group.addTask {
                            let deadline = ContinuousClock.now + .seconds(60)
                            var index = 0
                            while ContinuousClock.now < deadline {
                                index += 1
                                do {
                                    let message = try await sender.sendMessage(.private, targetId: "receiver", content: TextMessage(content: "n\(index)"))
                                    let count = acked.withLock { $0.append(message.messageUId); return $0.count }
                                    if count == 400 { reached.yield() }
                                    if count >= 800 { finished.yield(); return }
                                } catch {
                                    // Not acknowledged (the node died with it): sent again as a new message.
                                    try? await Task.sleep(for: .milliseconds(50))
                                }
                            }
                        }
                    }
                }
                // However the load ended, nothing waits on its milestones any more.
                reached.finish()
                finished.finish()
            }
            var killIterator = killPoint.makeAsyncIterator()
            _ = await killIterator.next()
            cluster.nodes[1].kill()
            let ackedAtKill = acked.value.count
            var finishIterator = finishPoint.makeAsyncIterator()
            _ = await finishIterator.next()
            await load.value

            for sender in senders {
                let url = await sender.connectedServerURL
                #expect(url == cluster.nodes[2].baseURL || url == cluster.nodes[0].baseURL, "a sender of the dead node moved on (now \(url ?? "nowhere"))")
            }
            let ackedUIDs = acked.value
            #expect(ackedUIDs.count >= ackedAtKill + 50, "the senders went on through the other nodes after the kill (\(ackedAtKill) before, \(ackedUIDs.count) in all)")
            // The receiver stayed connected to node 0 all along: everything acknowledged reached it
            // live, through the bus, including what node 1 acknowledged just before it died.
            let ackedSet = Set(ackedUIDs)
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline && !ackedSet.isSubset(of: Set(inbox.items.map(\.message.messageUId))) {
                try await Task.sleep(for: .milliseconds(50))
            }
            let received = inbox.items.map(\.message.messageUId)
            let missing = ackedSet.subtracting(received)
            #expect(missing.isEmpty, "\(missing.count) of \(ackedSet.count) acknowledged messages never reached the receiver")
            #expect(Set(received).count == received.count, "no message reached the receiver twice")

            // The dead node's sessions leave the cluster's presence within its timeout (3 s) and a heartbeat.
            try await waitUntil("the watcher, online only on the dead node, shows offline", timeout: .seconds(15)) {
                let (_, body) = try await cluster.api(0).post("/user/checkOnline.json", form: ["userId": "watcher"])
                return body["status"] as? String == "0"
            }
            for sender in senders { await sender.disconnect() }
            await receiver.disconnect()
            await watcher.disconnect()
        }
    }
}
