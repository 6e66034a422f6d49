import Foundation
import IMCore
import IMPushTesting
import IMStore
import IMStoreSQLite
import Logging
import NIOCore
import NIOEmbedded
import Testing
@testable import IMServer

/// On one node a sender is answered before its message's fan-out is queued; what could overtake
/// that fan-out waits for it (`FanOutOrder`, docs/ARCHITECTURE.md "Delivery and its order").
@Suite("The fan-out of an answered message comes first")
struct FanOutOrderTests {
    @Test("a group message is answered while its fan-out is held; a member removed after the answer is still among its recipients")
    func memberRemovalWaitsForFanOut() async throws {
        try await withTemporaryStore("fanout") { store in
            _ = try await store.joinGroup(appId: 1, groupId: "g", name: "g", userIds: ["alice", "bob"], maxMembers: 3000, preJoinHistory: 0, now: 1)
            let fanOut = FanOutOrder()
            let rosters = GroupRosters(store: store, registry: SessionRegistry(), peers: ClusterPeers(transport: nil), fanOut: fanOut)
            // Each batch's delivery reads the group's members as the fan-out does.
            let recipients = Locked<[String]>([])
            let held = HeldDeliveryLog(store: store, fanOut: fanOut) { _ in
                let roster = try? await rosters.roster(appId: 1, groupId: "g")
                recipients.withLock { $0 = (roster?.members.keys).map { Array($0).sorted() } ?? [] }
            }

            let message = StoredMessage(appId: 1, conversationType: .group, conversationKey: groupConversationKey("g"), targetId: "g",
                                        senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8), flags: .isPersisted)
            // Answered with the delivery held: the answer does not wait for the fan-out.
            guard case .stored = try await held.log.append(message, origin: .system) else {
                Issue.record("the message was not stored")
                return await held.stop()
            }
            #expect(recipients.value.isEmpty, "nothing delivered yet")

            // Bob is removed after the answer: the change waits for the fan-out.
            let removal = Task { try await rosters.changing(appId: 1, groupIds: ["g"]) { try await store.quitGroup(appId: 1, groupId: "g", userIds: ["bob"]) } }
            try await Self.waitUntil { fanOut.waitingCount == 1 }
            #expect(try await store.groupMembers(appId: 1, groupId: "g").map(\.userId).sorted() == ["alice", "bob"], "and has changed nothing yet")

            held.release()
            #expect(try await removal.value == 1, "the removal went ahead after the fan-out")
            #expect(recipients.value == ["alice", "bob"], "the fan-out read bob as a member")
            #expect(try await store.groupMembers(appId: 1, groupId: "g").map(\.userId) == ["alice"])
            await held.stop()
        }
    }

    @Test("a kick waits for the fan-out: a user blocked after a message's answer keeps their session until the message has gone out to it")
    func kickWaitsForFanOut() async throws {
        try await withTemporaryStore("fanout") { store in
            let appId = try await store.upsertApp(appKey: "fanout-key", appSecret: "fanout-secret", name: "fanout", now: 1).id
            let fanOut = FanOutOrder()
            let registry = SessionRegistry()
            // Bob is online (a session over an embedded channel).
            let channel = EmbeddedChannel()
            defer { _ = try? channel.finish() }
            try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            let bob = ClientSession(id: "bob-phone", appId: appId, userId: "bob", platform: .iOS, deviceId: "phone", now: 0,
                                    outbound: try SessionOutbound.attached(to: channel, maxQueuedBytes: 1 << 20), maxHeldBytes: 1 << 20)
            _ = try registry.register(bob, refuseIfClassTaken: false)
            // Each batch's delivery looks for bob's sessions as the fan-out does.
            let reached = Locked<[String]>([])
            let held = HeldDeliveryLog(store: store, fanOut: fanOut) { _ in
                reached.withLock { $0 = registry.sessions(appId: appId, userId: "bob").map(\.id) }
            }
            let peers = ClusterPeers(transport: nil)
            let directory = UserDirectory(store: store, registry: registry, peers: peers,
                                          apps: AppRegistry(store: store, peers: peers, config: ServerConfig(), logger: Logger(label: "imserver-test")),
                                          fanOut: fanOut)

            let message = StoredMessage(appId: appId, conversationType: .private, conversationKey: privateConversationKey("alice", "bob"), targetId: "bob",
                                        senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8), flags: .isPersisted)
            guard case .stored = try await held.log.append(message, origin: .system) else {
                Issue.record("the message was not stored")
                return await held.stop()
            }
            // Bob is blocked after the answer: the kick waits for the fan-out.
            let blocking = Task { try await directory.block(appId: appId, userIds: ["bob"], minutes: 10, now: 1) }
            try await Self.waitUntil { fanOut.waitingCount == 1 }
            #expect(registry.sessions(appId: appId, userId: "bob").map(\.id) == ["bob-phone"], "bob's session is kept while the message is on its way")

            held.release()
            try await blocking.value
            #expect(reached.value == ["bob-phone"], "the fan-out reached bob's session")
            #expect(registry.sessions(appId: appId, userId: "bob").isEmpty, "and then bob was kicked")
            #expect(try await store.userAccess(appId: appId, userId: "bob").blockedUntil > 1)
            await held.stop()
        }
    }

    @Test("a wait returns at once with nothing pending, otherwise once every batch committed before it is delivered, or when its task is cancelled")
    func order() async throws {
        let order = FanOutOrder()
        await order.behindCommitted()   // nothing committed: no wait
        let first = order.committing()
        let second = order.committing()
        let done = Locked(false)
        let waiter = Task {
            await order.behindCommitted()
            done.withLock { $0 = true }
        }
        try await Self.waitUntil { order.waitingCount == 1 }
        order.delivered(first)
        #expect(order.waitingCount == 1 && !done.value, "the second batch is still on its way")
        let third = order.committing()   // committed after the wait began: not waited for
        order.delivered(second)
        await waiter.value
        #expect(done.value && order.waitingCount == 0)

        // A wait whose task is cancelled (a shutdown out of time) ends without the delivery.
        let cancelled = Task { await order.behindCommitted() }
        try await Self.waitUntil { order.waitingCount == 1 }
        cancelled.cancel()
        await cancelled.value
        #expect(order.waitingCount == 0)
        order.delivered(third)
        await order.behindCommitted()
    }

    private static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(condition())
    }
}
