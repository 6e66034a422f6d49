import Foundation
@testable import IMLib
@testable import IMServer
import IMCore
import IMServerTesting
import IMStore
import Testing

/// Chatrooms whose members are connected to different nodes of one cluster (docs/ARCHITECTURE.md,
/// "Chatrooms"): the room lives on the node that first needed it, the others forward to it.
@Suite("Cluster: chatrooms with members on several nodes", .serialized)
struct ClusterChatroomTests {
    static func configure(_ config: inout ServerConfig) {
        config.session.heartbeatIntervalSeconds = 3600
        config.session.clientSendsPerSecond = 1000
    }

    /// The text of a message, whatever its type (the tests send text contents under other types too).
    static func text(_ received: ReceivedMessage) -> String? {
        (try? JSONSerialization.jsonObject(with: received.message.contentData) as? [String: Any])?["content"] as? String
    }

    struct Member {
        let user: String
        let node: Int
        let client: IMClient
        let inbox: EventRecorder<ReceivedMessage>
        let status: EventRecorder<ChatRoomStatusEvent>
        let kv: EventRecorder<ChatRoomKVEvent>
    }

    /// A user connected to `node`, in `room` once this returns.
    static func member(_ user: String, on node: Int, of cluster: InProcessCluster, room: String) async throws -> Member {
        let client = try await cluster.nodes[node].connectedClient(user)
        let member = Member(user: user, node: node, client: client, inbox: EventRecorder(client.receivedMessages()),
                            status: EventRecorder(client.chatRoomStatusUpdates()), kv: EventRecorder(client.chatRoomKVUpdates()))
        try await client.joinChatRoom(room, messageCount: -1)
        return member
    }

    /// A message the Server API would publish into a room.
    static func message(_ server: TestServer, room: String, text: String, from sender: String = "admin",
                        objectName: String = TextMessage.objectName) throws -> StoredMessage {
        StoredMessage(appId: server.app.id, conversationType: .chatroom, conversationKey: chatroomConversationKey(room), targetId: room,
                      senderId: sender, objectName: objectName, content: try TextMessage(content: text).encode(),
                      flags: .persistedAndCounted, includeSender: false)
    }

    /// The node that holds the room, as the cluster records it (asked through `node`).
    static func owner(of room: String, in cluster: InProcessCluster, asking node: Int = 0) async throws -> String? {
        let node = cluster.nodes[node]
        return try await node.core.cluster?.chatroomOwner(appId: node.app.id, roomId: room, claim: false)?.nodeId
    }

    @Test("members on three nodes get every message once and in the room's one order, sent by clients on any node and by the Server API on any node")
    func deliveryAcrossNodes() async throws {
        try await withCluster(nodes: 3, configure: Self.configure) { cluster in
            var members: [Member] = []
            for node in 0..<3 {
                for index in 0..<2 { members.append(try await Self.member("u\(node)\(index)", on: node, of: cluster, room: "live")) }
            }
            #expect(try await Self.owner(of: "live", in: cluster) == "node0", "the first node that needed the room holds it")
            for member in members {
                let info = try await member.client.getChatRoomInfo("live", count: 20)
                #expect(info.totalMemberCount == 6 && info.members.count == 6, "\(member.user) on node \(member.node) sees every member")
            }

            // From every node at once: each node's first member sends 5, and each node's Server API publishes 5.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for node in 0..<3 {
                    let sender = members[node * 2]
                    group.addTask {
                        for index in 0..<5 {
                            try await sender.client.sendMessage(.chatroom, targetId: "live", content: TextMessage(content: "c\(node)-\(index)"))
                        }
                    }
                    let server = cluster.nodes[node]
                    group.addTask {
                        for index in 0..<5 {
                            let (status, body) = try await server.api.post("/message/chatroom/publish.json", form: [
                                "fromUserId": "admin", "toChatroomId": "live", "objectName": TextMessage.objectName,
                                "content": "{\"content\":\"a\(node)-\(index)\"}",
                            ])
                            #expect(status == 200, "publish through node \(node): \(body)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let all = (0..<3).flatMap { node in (0..<5).flatMap { ["c\(node)-\($0)", "a\(node)-\($0)"] } }
            var received: [String: [ReceivedMessage]] = [:]
            for (position, member) in members.enumerated() {
                let own = position % 2 == 0 ? 5 : 0
                let got = await member.inbox.wait(for: all.count - own)
                received[member.user] = got
                let texts = got.compactMap(Self.text)
                #expect(texts.count == all.count - own, "\(member.user) on node \(member.node) got \(texts.count) of \(all.count - own)")
                #expect(Set(texts).count == texts.count, "\(member.user) got each message once")
                #expect(Set(texts) == Set(all.filter { own == 0 || !$0.hasPrefix("c\(member.node)-") }), "\(member.user) got all but its own")
                #expect(got.map(\.message.sentTime) == got.map(\.message.sentTime).sorted(), "\(member.user) got them in the room's order")
            }
            // One order for everyone: the room stamped each message once, with a time of its own,
            // and every member got them in that order (checked above).
            var stamps: [String: Set<Int64>] = [:]
            for got in received.values {
                for message in got { stamps[Self.text(message) ?? "", default: []].insert(message.message.sentTime) }
            }
            #expect(stamps.values.allSatisfy { $0.count == 1 }, "every member saw the same stamp on each message")
            #expect(Set(stamps.values.compactMap(\.first)).count == all.count, "no two messages share a place in the room's order")
            // Nothing came twice: a last message from the owner's side arrives right after.
            _ = try await members[0].client.sendMessage(.chatroom, targetId: "live", content: TextMessage(content: "last"))
            for member in members.dropFirst() {
                let own = members.firstIndex { $0.user == member.user }! % 2 == 0 ? 5 : 0
                let got = await member.inbox.wait(for: all.count - own + 1)
                #expect(got.count == all.count - own + 1 && got.last.flatMap(Self.text) == "last", "\(member.user): nothing more than each message once")
            }
            for member in members { await member.client.disconnect() }
        }
    }

    @Test("the intake quota and its discard policy hold for the room as a whole when every node floods it")
    func quotaAcrossNodes() async throws {
        let clock = ManualClock()
        try await withCluster(nodes: 3, clock: clock, configure: Self.configure) { cluster in
            var listeners: [Member] = []
            for node in 0..<3 { listeners.append(try await Self.member("listener\(node)", on: node, of: cluster, room: "flood")) }
            let low = "App:Like"
            let (status, body) = try await cluster.nodes[1].api.post("/chatroom/message/priority/add.json", form: ["objectName": low])
            #expect(status == 200, "\(body)")
            // The node holding the room has applied it (the publishes below run there without the bus).
            let owner = cluster.nodes[0]
            try await waitUntil("node 0 has the new priority") {
                try await owner.core.chatrooms.settings(appId: owner.app.id, kind: .lowPriority).contains { $0.item == low }
            }

            // One window (the clock stands still): 30 publishes through each node at once.
            let admitted = Locked<[String]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (node, server) in cluster.nodes.enumerated() {
                    group.addTask {
                        for index in 0..<30 {
                            let text = "n\(node)-\(index)"
                            let outcome = try await server.core.chatroomRouting.publish(try Self.message(server, room: "flood", text: text))
                            if !outcome.discarded { admitted.withLock { $0.append(text) } }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(admitted.value.count == 40, "40 per 200 ms for the room, wherever the senders are; got \(admitted.value.count)")
            // Clients of every node in the same window: over the quota, answered but delivered to nobody.
            for listener in listeners {
                _ = try await listener.client.sendMessage(.chatroom, targetId: "flood", content: TextMessage(content: "late from \(listener.user)"))
            }

            // The next window: low-priority messages from every node only take the shared 20.
            clock.advance(milliseconds: 200)
            let lows = Locked(0), highs = Locked(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (node, server) in cluster.nodes.enumerated() {
                    group.addTask {
                        for index in 0..<20 {
                            if try await !server.core.chatroomRouting.publish(
                                try Self.message(server, room: "flood", text: "low n\(node)-\(index)", objectName: low)).discarded {
                                lows.withLock { $0 += 1 }
                            }
                            if index < 10, try await !server.core.chatroomRouting.publish(
                                try Self.message(server, room: "flood", text: "high n\(node)-\(index)")).discarded {
                                highs.withLock { $0 += 1 }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(lows.value + highs.value == 40, "40 in the second window too")
            #expect(lows.value <= 20 && highs.value >= 20, "low priority never takes the 20 reserved for the rest: \(lows.value) low, \(highs.value) high")

            // A marker in a third window: once it arrives, each listener has had everything before it.
            clock.advance(milliseconds: 200)
            _ = try await cluster.nodes[2].core.chatroomRouting.publish(try Self.message(cluster.nodes[2], room: "flood", text: "marker"))
            for listener in listeners {
                guard await listener.inbox.first(where: { Self.text($0) == "marker" }) != nil else {
                    Issue.record("\(listener.user) never got the marker")
                    continue
                }
                let texts = listener.inbox.items.compactMap(Self.text)
                #expect(texts.count == 81, "\(listener.user): the 80 admitted and the marker, got \(texts.count)")
                #expect(Set(texts.prefix(40)) == Set(admitted.value), "\(listener.user): exactly the first window's admitted messages")
                #expect(!texts.contains { $0.hasPrefix("late from") }, "messages over the quota reach nobody")
            }
            for listener in listeners { await listener.client.disconnect() }
        }
    }

    @Test("attributes set from several nodes follow the owner's rules and agree on every member")
    func attributesAcrossNodes() async throws {
        try await withCluster(nodes: 3, configure: Self.configure) { cluster in
            let a = try await Self.member("ann", on: 0, of: cluster, room: "kv")
            let b = try await Self.member("bob", on: 1, of: cluster, room: "kv")
            let c = try await Self.member("cat", on: 2, of: cluster, room: "kv")
            for member in [a, b, c] { #expect(await member.kv.first { $0 == .synced(roomId: "kv") } != nil) }

            try await b.client.setChatRoomEntry("kv", key: "host", value: "bob")
            #expect(await failureCode { try await c.client.setChatRoomEntry("kv", key: "host", value: "cat") } == ErrorCode.chatroomEntryNotOwned.rawValue,
                    "bob's attribute is bob's, whichever node asks")
            try await c.client.setChatRoomEntry("kv", key: "topic", value: "cats", autoDelete: true)
            let (status, body) = try await cluster.nodes[2].api.post("/chatroom/entry/set.json", form: [
                "chatroomId": "kv", "userId": "admin", "key": "rules", "value": "be nice"])
            #expect(status == 200, "\(body)")

            // Two nodes force the same key at once: whatever wins, everyone ends up with it.
            async let fromB: Void = b.client.forceSetChatRoomEntry("kv", key: "mood", value: "from bob")
            async let fromC: Void = c.client.forceSetChatRoomEntry("kv", key: "mood", value: "from cat")
            _ = try await (fromB, fromC)
            // A marker set through the owner's Server API comes after everything else in the room's order.
            let (markStatus, _) = try await cluster.nodes[1].api.post("/chatroom/entry/set.json", form: [
                "chatroomId": "kv", "userId": "admin", "key": "marker", "value": "1"])
            #expect(markStatus == 200)
            for member in [a, b, c] {
                #expect(await member.kv.first { if case .updated(_, let entries) = $0 { entries["marker"] == "1" } else { false } } != nil)
            }
            let (_, query) = try await cluster.nodes[2].api.post("/chatroom/entry/query.json", form: ["chatroomId": "kv"])
            let rows = (query["keys"] as? [[String: Any]]) ?? []
            let server = Dictionary(rows.map { ($0["key"] as? String ?? "", $0["value"] as? String ?? "") }) { first, _ in first }
            #expect(server.keys.sorted() == ["host", "marker", "mood", "rules", "topic"])
            #expect(server["mood"] == "from bob" || server["mood"] == "from cat")
            for member in [a, b, c] {
                let entries = try await member.client.getAllChatRoomEntries("kv")
                #expect(entries == server, "\(member.user) on node \(member.node) agrees with the room: \(entries) against \(server)")
            }

            // autoDelete: cat's attribute goes when cat (on node 2) leaves; every member sees it go.
            try await c.client.quitChatRoom("kv")
            for member in [a, b] {
                #expect(await member.kv.first { $0 == .removed(roomId: "kv", entries: ["topic": "cats"]) } != nil, "\(member.user) saw topic go")
            }
            for member in [a, b, c] { await member.client.disconnect() }
        }
    }

    @Test("Server API moderation through a node that does not hold the room: a block puts the user out wherever connected, mutes hold, destroy reaches every member")
    func moderationThroughOtherNodes() async throws {
        try await withCluster(nodes: 3, configure: Self.configure) { cluster in
            let host = try await Self.member("host", on: 0, of: cluster, room: "mod")
            let bob = try await Self.member("bob", on: 1, of: cluster, room: "mod")
            let cat = try await Self.member("cat", on: 2, of: cluster, room: "mod")
            #expect(try await Self.owner(of: "mod", in: cluster) == "node0")
            let (n1, n2) = (cluster.nodes[1], cluster.nodes[2])

            // Gag cat through node 1: the owner refuses cat's messages (23408).
            var (status, body) = try await n1.api.post("/chatroom/user/gag/add.json", form: ["chatroomId": "mod", "userId": "cat", "minute": "10"])
            #expect(status == 200, "\(body)")
            #expect(await failureCode { _ = try await cat.client.sendMessage(.chatroom, targetId: "mod", content: TextMessage(content: "hi")) }
                    == ErrorCode.mutedInChatroom.rawValue)
            (status, _) = try await n2.api.post("/chatroom/user/gag/rollback.json", form: ["chatroomId": "mod", "userId": "cat"])
            _ = try await cat.client.sendMessage(.chatroom, targetId: "mod", content: TextMessage(content: "free again"))
            #expect(await bob.inbox.first { Self.text($0) == "free again" } != nil)

            // Mute bob in every room through node 2.
            (status, body) = try await n2.api.post("/chatroom/user/ban/add.json", form: ["userId": "bob", "minute": "10"])
            #expect(status == 200, "\(body)")
            #expect(await failureCode { _ = try await bob.client.sendMessage(.chatroom, targetId: "mod", content: TextMessage(content: "hi")) }
                    == ErrorCode.mutedInChatroom.rawValue)

            // Block bob (on node 1) through node 2, telling the room: bob is out at once, the others hear it.
            (status, body) = try await n2.api.post("/chatroom/user/block/add.json",
                                                   form: ["chatroomId": "mod", "userId": "bob", "minute": "10", "needNotify": "1"])
            #expect(status == 200, "\(body)")
            #expect(await bob.status.first { $0 == .removed(roomId: "mod", reason: .banned) } != nil, "bob, on node 1, was put out")
            #expect(await cat.status.first { if case .notification(let note) = $0 { note.kind == .banned } else { false } } != nil,
                    "cat, on node 2, was told")
            (status, body) = try await n1.api.post("/chatroom/users/exist.json", form: ["chatroomId": "mod", "userId": "bob"])
            #expect((body["result"] as? [[String: Any]])?.first?["isInChrm"] as? Int == 0, "bob is no member: \(body)")
            #expect(await failureCode { try await bob.client.joinChatRoom("mod") } == ErrorCode.bannedFromChatroom.rawValue)
            _ = try await host.client.sendMessage(.chatroom, targetId: "mod", content: TextMessage(content: "after the block"))
            #expect(await cat.inbox.first { Self.text($0) == "after the block" } != nil)
            #expect(!bob.inbox.items.contains { Self.text($0) == "after the block" }, "nothing reaches bob any more")

            // Members and the room, read through the nodes that do not hold it.
            (status, body) = try await n1.api.post("/chatroom/user/query.json", form: ["chatroomId": "mod", "count": "10", "order": "1"])
            #expect(body["total"] as? Int == 2, "\(body)")
            (status, body) = try await n2.api.post("/chatroom/get.json", form: ["chatroomId": "mod"])
            #expect(status == 200 && body["memberCount"] as? Int == 2, "\(body)")

            // Destroy through node 1: every member online hears it.
            (status, body) = try await n1.api.post("/chatroom/destroy.json", form: ["chatroomId": "mod"])
            #expect(status == 200, "\(body)")
            for member in [host, cat] {
                #expect(await member.status.first { if case .destroyed(let room, _, _) = $0 { room == "mod" } else { false } } != nil,
                        "\(member.user) on node \(member.node) heard the room go")
            }
            (status, body) = try await n2.api.post("/chatroom/get.json", form: ["chatroomId": "mod"])
            #expect(body["code"] as? Int == ErrorCode.chatroomNotFound.rawValue, "\(body)")

            // Node 0 gives the destroyed room up at its next sweep; a join through node 2 claims it there.
            await cluster.nodes[0].core.chatroomRouting.releaseUnusedRooms()
            #expect(try await Self.owner(of: "mod", in: cluster) == nil)
            try await cat.client.joinChatRoom("mod", messageCount: -1)
            #expect(try await Self.owner(of: "mod", in: cluster) == "node2")
            _ = try await host.client.joinChatRoom("mod", messageCount: -1)
            _ = try await host.client.sendMessage(.chatroom, targetId: "mod", content: TextMessage(content: "on node 2 now"))
            #expect(await cat.inbox.first { Self.text($0) == "on node 2 now" } != nil, "node 0 forwards to the room's new owner")
            for member in [host, bob, cat] { await member.client.disconnect() }
        }
    }

    @Test("a room's pushes cost the bus a message per node with members, whatever the number of members")
    func busCost() async throws {
        let probes = Locked<[String: BusProbe]>([:])
        try await withCluster(nodes: 3, configure: Self.configure, wrap: { transport in
            let probe = BusProbe(transport)
            probes.withLock { $0[transport.nodeId] = probe }
            return probe
        }) { cluster in
            var members: [Member] = []
            for index in 0..<30 { members.append(try await Self.member("m\(index)", on: index % 3, of: cluster, room: "busy")) }
            #expect(try await Self.owner(of: "busy", in: cluster) == "node0")
            let owner = try #require(probes.value["node0"])
            let before = owner.relayed
            // 40 messages a second for 3 s, from the Server API of every node in turn.
            let count = 120
            let start = ContinuousClock.now
            for index in 0..<count {
                let server = cluster.nodes[index % 3]
                _ = try await server.core.chatroomRouting.publish(try Self.message(server, room: "busy", text: "p\(index)"))
                try await Task.sleep(until: start + .milliseconds(25 * (index + 1)))
            }
            _ = try await cluster.nodes[0].core.chatroomRouting.publish(try Self.message(cluster.nodes[0], room: "busy", text: "end"))
            for member in members {
                #expect(await member.inbox.first { Self.text($0) == "end" } != nil, "\(member.user) got everything")
                #expect(member.inbox.items.count == count + 1, "\(member.user) got \(member.inbox.items.count) of \(count + 1)")
            }
            let after = owner.relayed
            let messages = after.messages - before.messages
            // Each publish is relayed at most once to each of the 2 other nodes, with no session list,
            // and those that came through another node are answered once.
            let forwarded = (0..<count).filter { $0 % 3 != 0 }.count
            #expect(messages <= 2 * (count + 1) + forwarded, "\(messages) relay messages for \(count + 1) publishes")
            #expect(after.sessionsNamed == before.sessionsNamed, "no push named the sessions it goes to")
            print("bus cost: \(count + 1) publishes to 30 members on 3 nodes: \(messages) relay messages, \(after.bytes - before.bytes) bytes of JSON")
            for member in members { await member.client.disconnect() }
        }
    }

    @Test("when the node holding a room stops, the members on the other nodes rejoin it on another node and go on")
    func ownerStops() async throws {
        try await withCluster(nodes: 3, configure: Self.configure) { cluster in
            let host = try await Self.member("host", on: 0, of: cluster, room: "stay")
            let bob = try await Self.member("bob", on: 1, of: cluster, room: "stay")
            let cat = try await Self.member("cat", on: 2, of: cluster, room: "stay")
            #expect(try await Self.owner(of: "stay", in: cluster) == "node0")
            _ = try await bob.client.sendMessage(.chatroom, targetId: "stay", content: TextMessage(content: "before"))
            #expect(await cat.inbox.first { Self.text($0) == "before" } != nil)
            #expect(await host.inbox.first { Self.text($0) == "before" } != nil)

            await cluster.nodes[0].stop()
            await host.client.disconnect()
            // Bob and cat reconnect to their own nodes and rejoin by themselves: the room is claimed again.
            for member in [bob, cat] {
                #expect(await member.status.first { $0 == .reset(roomId: "stay") } != nil, "\(member.user) rejoined a room that lost what it had")
                try await waitUntil("\(member.user) is connected again") { await member.client.connectionStatus == .connected }
            }
            let owner = try await Self.owner(of: "stay", in: cluster, asking: 1)
            #expect(owner == "node1" || owner == "node2", "a live node holds the room now: \(owner ?? "none")")
            for member in [bob, cat] {
                let info = try await member.client.getChatRoomInfo("stay", count: 10)
                #expect(Set(info.members.map(\.userId)) == ["bob", "cat"], "\(member.user) sees the members that rejoined")
            }
            _ = try await bob.client.sendMessage(.chatroom, targetId: "stay", content: TextMessage(content: "after"))
            #expect(await cat.inbox.first { Self.text($0) == "after" } != nil, "cat gets bob's message through the new owner")
            _ = try await cat.client.sendMessage(.chatroom, targetId: "stay", content: TextMessage(content: "still here"))
            #expect(await bob.inbox.first { Self.text($0) == "still here" } != nil)
            let (status, body) = try await cluster.nodes[2].api.post("/chatroom/get.json", form: ["chatroomId": "stay"])
            #expect(status == 200 && body["memberCount"] as? Int == 2, "\(body)")
            for member in [bob, cat] { await member.client.disconnect() }
        }
    }
}

/// A node's transport that counts the chatroom relay messages it publishes.
final class BusProbe: ClusterTransport {
    struct Counts: Sendable {
        var messages = 0
        var bytes = 0
        /// Session ids named by frames and seat changes.
        var sessionsNamed = 0
    }

    let base: any ClusterTransport
    private let counts = Locked(Counts())

    init(_ base: any ClusterTransport) { self.base = base }

    var relayed: Counts { counts.value }

    private func count(_ message: ClusterMessage) {
        guard case .chatroomRelay(_, let items) = message else { return }
        let bytes = (try? JSONEncoder().encode(message).count) ?? 0
        let named = items.reduce(0) { total, item in
            switch item {
            case .frame(_, let sessions), .seated(_, _, let sessions), .unseated(_, _, let sessions): total + sessions.count
            default: total
            }
        }
        counts.withLock { counts in
            counts.messages += 1
            counts.bytes += bytes
            counts.sessionsNamed += named
        }
    }

    var nodeId: String { base.nodeId }
    func publish(_ message: ClusterMessage) {
        count(message)
        base.publish(message)
    }
    func publish(_ message: ClusterMessage, to node: String) {
        count(message)
        base.publish(message, to: node)
    }
    func flush() async { await base.flush() }
    func messages() -> AsyncStream<ClusterBusEvent> { base.messages() }
    func sessionOpened(_ session: PresenceEntry, refuseIfClassTaken: Bool) async throws -> PresenceOutcome {
        try await base.sessionOpened(session, refuseIfClassTaken: refuseIfClassTaken)
    }
    func sessionClosed(id: String) { base.sessionClosed(id: id) }
    func isOnline(appId: Int64, userId: String) async throws -> Bool { try await base.isOnline(appId: appId, userId: userId) }
    func sessions(appId: Int64, userIds: [String]) async throws -> [PresenceEntry] { try await base.sessions(appId: appId, userIds: userIds) }
    func liveNodes() -> Int { base.liveNodes() }
    func chatroomOwner(appId: Int64, roomId: String, claim: Bool) async throws -> ChatroomClaim? {
        try await base.chatroomOwner(appId: appId, roomId: roomId, claim: claim)
    }
    func releaseChatrooms(_ claims: [ChatroomClaim]) async throws { try await base.releaseChatrooms(claims) }
    func chatroomIds(appId: Int64) async throws -> [String] { try await base.chatroomIds(appId: appId) }
    func run() async throws { try await base.run() }
}
