import Foundation
import IMCore
import IMPushTesting
import IMStore
import IMStoreSQLite
import Testing
@testable import IMServer

/// On one node a sender is answered before its message's fan-out is queued; what could overtake
/// that fan-out waits for it (`FanOutOrder`, docs/ARCHITECTURE.md "Delivery and its order").
@Suite("The fan-out of an answered message comes first")
struct FanOutOrderTests {
    @Test("a group message is answered while its fan-out is held; a member removed after the answer is still among its recipients")
    func memberRemovalWaitsForFanOut() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-fanout-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try SQLiteStore(directory: dir.path)
        defer { try? store.close() }
        _ = try await store.joinGroup(appId: 1, groupId: "g", name: "g", userIds: ["alice", "bob"], maxMembers: 3000, preJoinHistory: 0, now: 1)
        let fanOut = FanOutOrder()
        let rosters = GroupRosters(store: store, registry: SessionRegistry(), peers: ClusterPeers(transport: nil), fanOut: fanOut)
        // The delivery of each batch waits for the test's go, then reads the group's members as the
        // fan-out does.
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let recipients = Locked<[String]>([])
        let log = MessageLog(store: store, clock: SystemClock(), fanOut: fanOut) { _ in
            for await _ in gate { break }
            let roster = try? await rosters.roster(appId: 1, groupId: "g")
            recipients.withLock { $0 = (roster?.members.keys).map { Array($0).sorted() } ?? [] }
        }
        let writer = Task { await log.runWriter() }

        let message = StoredMessage(appId: 1, conversationType: .group, conversationKey: groupConversationKey("g"), targetId: "g",
                                    senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8), flags: .isPersisted)
        // Answered with the delivery held: the answer does not wait for the fan-out.
        guard case .stored = try await log.append(message, origin: .system) else {
            Issue.record("the message was not stored")
            return
        }
        #expect(recipients.value.isEmpty, "nothing delivered yet")

        // Bob is removed after the answer: the change waits for the fan-out.
        let removal = Task { try await rosters.changing(appId: 1, groupIds: ["g"]) { try await store.quitGroup(appId: 1, groupId: "g", userIds: ["bob"]) } }
        try await Self.waitUntil { fanOut.waitingCount == 1 }
        #expect(try await store.groupMembers(appId: 1, groupId: "g").map(\.userId).sorted() == ["alice", "bob"], "and has changed nothing yet")

        open.yield()
        #expect(try await removal.value == 1, "the removal went ahead after the fan-out")
        #expect(recipients.value == ["alice", "bob"], "the fan-out read bob as a member")
        #expect(try await store.groupMembers(appId: 1, groupId: "g").map(\.userId) == ["alice"])

        open.finish()
        log.stopWriting()
        _ = await writer.value
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
