import Foundation
import IMCore
import IMPushTesting
import IMStore
import IMStoreSQLite
import NIOCore
import NIOPosix
import Testing
@testable import IMServer

/// Push work steps aside while messages are on their way (`DeliveryFirst`, docs/ARCHITECTURE.md
/// "Push"): it waits for the messages on their way when it asks, not for later ones.
@Suite("Push work steps aside for messages on their way")
struct DeliveryFirstTests {
    @Test("stepAside waits for the messages on their way at the call (commit and fan-out), not for one appended after")
    func waitsForMessagesOnTheirWay() async throws {
        try await withTemporaryStore("deliveryfirst") { store in
            let first = DeliveryFirst()
            // Nothing on its way: at once.
            #expect(first.onTheirWay == 0)
            await first.stepAside()

            let delivered = Locked<[String]>([])
            let held = HeldDeliveryLog(store: store, deliveryFirst: first) { batch in
                for item in batch { if case .stored(let message) = item.outcome { delivered.withLock { $0.append(message.clientMessageId) } } }
            }
            func message(_ id: String) -> StoredMessage {
                StoredMessage(appId: 1, conversationType: .private, conversationKey: privateConversationKey("alice", "bob"), targetId: "bob",
                              senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"hi"}"#.utf8), flags: .isPersisted,
                              clientMessageId: id)
            }
            // m1 is answered, its fan-out held: it is still on its way.
            _ = try await held.log.append(message("m1"), origin: .system)
            #expect(first.onTheirWay == 1)
            let aside = Task { await first.stepAside() }
            try await waitUntil("a wait pending") { first.waitingCount == 1 }
            // m2 comes after the wait began; it is answered and fanned out after m1.
            let m2 = Task { try await held.log.append(message("m2"), origin: .system) }
            try await waitUntil("m2 on its way") { first.onTheirWay == 2 }

            // m1's fan-out goes: the wait ends although m2 is still on its way.
            held.release()
            try await waitUntil("the first wait ended") { first.waitingCount == 0 }
            await aside.value
            _ = try await m2.value
            #expect(delivered.value == ["m1"])
            #expect(first.onTheirWay == 1, "m2 is still on its way")
            #expect(first.waitingCount == 0)

            // A wait begun now is for m2.
            let second = Task { await first.stepAside() }
            try await waitUntil("a wait pending") { first.waitingCount == 1 }
            held.release()
            try await waitUntil("the second wait ended") { first.waitingCount == 0 }
            await second.value
            #expect(delivered.value == ["m1", "m2"])
            #expect(first.onTheirWay == 0)
            await held.stop()
        }
    }

    @Test("a fan-out is out once each event loop has run what was queued on it before: a wait lasts until then")
    func fanOutIsOutAfterTheEventLoopsWrote() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        // The second loop is busy (writing frames queued before the fan-out was handed on).
        let release = DispatchSemaphore(value: 0)
        loops[1].execute { release.wait() }
        defer { release.signal() }
        let first = DeliveryFirst(loops: loops)
        first.appended(1)
        let aside = Task { await first.stepAside() }
        try await waitUntil("a wait pending") { first.waitingCount == 1 }
        first.fannedOut(1)
        // The first loop ran its marker; the second has not got to it.
        try await loops[0].submit {}.get()
        #expect(first.onTheirWay == 1, "the message is on its way until the busy loop has run its marker")
        #expect(first.waitingCount == 1)
        release.signal()
        try await waitUntil("the wait ended") { first.waitingCount == 0 }
        await aside.value
        #expect(first.onTheirWay == 0)
        try await group.shutdownGracefully()
    }

    @Test("a wait ends when its task is cancelled")
    func cancelledWaitEnds() async throws {
        let first = DeliveryFirst()
        first.appended(1)
        let aside = Task { await first.stepAside() }
        try await waitUntil("a wait pending") { first.waitingCount == 1 }
        aside.cancel()
        try await waitUntil("the cancelled wait ended") { first.waitingCount == 0 }
        await aside.value
        #expect(first.waitingCount == 0)
        #expect(first.onTheirWay == 1, "the message is still on its way")
        first.finished(1)
        #expect(first.onTheirWay == 0)
    }
}
