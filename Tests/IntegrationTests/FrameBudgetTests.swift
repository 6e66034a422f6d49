import Foundation
import IMCore
@testable import IMLib
@testable import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing

/// Every reply that gathers stored data keeps to the frame budget (1 MB of messages, at least one),
/// so it fits the 4 MB frame IMLib accepts: before, 40 legal messages of 120 KB made a first sync
/// page of 4.8 MB that the client refused on every reconnect.
@Suite("Pages and replies fit the frame budget")
struct FrameBudgetTests {
    static let filler = String(repeating: "x", count: 120_000)
    static let budget = MessageLimits.frameBudgetBytes

    /// A text of about 120 KB, numbered.
    static func large(_ index: Int) -> Im_SendMessageRequest {
        MessageRulesTests.text(to: "bob", "\(index) \(filler)", clientId: "large-\(index)")
    }

    static func number(_ message: Im_Message) -> Int? {
        (try? JSONDecoder().decode(TextMessage.self, from: message.content)).flatMap { Int($0.content.prefix { $0 != " " }) }
    }

    @Test("40 one-to-one and 40 group messages of 120 KB reach an offline member in sync pages that each fit the budget, and IMLib syncs them all")
    func largeSync() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 1000 }) { server in
            try await GroupChatTests.createGroup(server, "g1", ["alice", "bob", "carol"])
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            for index in 0..<40 {
                _ = try await MessageRulesTests.send(alice, Self.large(index))
                var group = Self.large(100 + index)
                group.conversationType = 3
                group.targetID = "g1"
                _ = try await MessageRulesTests.send(alice, group)
            }

            // Over the wire: pages within the budget (one message over it at most), nothing lost, in order.
            let bob = try await MessageRulesTests.rawConnection(server, user: "bob")
            var since: UInt64 = 0
            var received: [Int] = []
            var pages = 0
            while true {
                var sync = Im_SyncRequest()
                sync.since = since
                let frame = try await bob.request(.sync, sync, timeout: .seconds(10))
                #expect(frame.payload.count <= Self.budget + 130_000, "a sync page of \(frame.payload.count) bytes")
                #expect(frame.payload.count < FrameCodec.maxFrameBytes)
                let page = try frame.body(Im_SyncReply.self)
                received += page.messages.compactMap(Self.number)
                since = page.watermark
                pages += 1
                if !page.morePackages { break }
                #expect(!page.messages.isEmpty, "a page that says more is waiting carries messages")
                #expect(pages < 100)
            }
            #expect(received == (0..<40).flatMap { [$0, 100 + $0] }, "every message once, in commit order")
            #expect(pages >= 9, "80 messages of 120 KB take several pages")
            await bob.close()

            // The real client syncs them all.
            let (_, inbox) = try await server.syncedDevice("bob")
            #expect(await inbox.wait(for: 80).count == 80)
            // And a group member who never connected gets the group's 40.
            let (_, carolInbox) = try await server.syncedDevice("carol")
            #expect(await carolInbox.wait(for: 40).count == 40)
        }
    }

    @Test("remote history of large messages comes in pages within the budget, through to the first message")
    func largeHistory() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 1000 }) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            for index in 0..<40 { _ = try await MessageRulesTests.send(alice, Self.large(index)) }
            var recordTime: Int64 = 0
            var numbers: [Int] = []
            while true {
                var request = Im_HistoryRequest()
                request.conversationType = 1
                request.targetID = "bob"
                request.recordTime = recordTime
                request.count = 100
                let frame = try await alice.request(.history, request, timeout: .seconds(10))
                #expect(frame.payload.count <= Self.budget + 130_000, "a history page of \(frame.payload.count) bytes")
                let page = try frame.body(Im_HistoryReply.self)
                numbers += page.messages.compactMap(Self.number)
                guard page.isRemaining, let last = page.messages.last else { break }
                recordTime = last.sentTime
            }
            #expect(numbers == Array((0..<40).reversed()), "newest first, each once")

            // IMLib pages through them the same way.
            let client = try await server.connectedClient("bob")
            var total = 0
            var time: Int64 = 0
            while true {
                let (messages, remaining) = try await client.getRemoteHistoryMessages(.private, targetId: "alice", recordTime: time, count: 100)
                total += messages.count
                guard remaining, let last = messages.last else { break }
                time = last.sentTime
            }
            #expect(total == 40)
        }
    }

    @Test("a system conversation's history, its own messages and broadcasts read together, loses none when one log's page is cut by bytes")
    func largeSystemHistory() async throws {
        let clock = ManualClock()
        try await withTestServer(try await TestServer.start(clock: clock) { $0.serverAPI.systemPublishPerSecond = 0 }) { server in
            // Large messages to bob and small broadcasts, interleaved in time.
            var expected: [String] = []
            for index in 0..<20 {
                clock.advance(milliseconds: 10)
                let large = StoredMessage(appId: server.app.id, conversationType: .system, conversationKey: "", targetId: "", senderId: "notice",
                                          objectName: TextMessage.objectName, content: try TextMessage(content: "big \(index) \(Self.filler)").encode(),
                                          flags: .persistedAndCounted, includeSender: false)
                _ = try await server.core.messages.publish(large, to: ["bob"], verifyBlacklist: false)
                expected.append("big \(index)")
                clock.advance(milliseconds: 10)
                let small = StoredMessage(appId: server.app.id, conversationType: .system, conversationKey: "", targetId: "", senderId: "notice",
                                          objectName: TextMessage.objectName, content: try TextMessage(content: "all \(index)").encode(),
                                          flags: .persistedAndCounted, includeSender: false)
                _ = try await server.core.messages.broadcast(small)
                expected.append("all \(index)")
            }
            let bob = try await MessageRulesTests.rawConnection(server, user: "bob")
            for ascending in [false, true] {
                var recordTime: Int64 = 0
                var texts: [String] = []
                for _ in 0..<40 {
                    var request = Im_HistoryRequest()
                    request.conversationType = 6
                    request.targetID = "notice"
                    request.recordTime = recordTime
                    request.count = 100
                    request.order = ascending ? 1 : 0
                    let frame = try await bob.request(.history, request, timeout: .seconds(10))
                    #expect(frame.payload.count <= Self.budget + 130_000)
                    let page = try frame.body(Im_HistoryReply.self)
                    texts += page.messages.compactMap { (try? JSONDecoder().decode(TextMessage.self, from: $0.content))?.content }
                        .map { String($0.split(separator: " ").prefix(2).joined(separator: " ")) }
                    guard page.isRemaining, let last = page.messages.last else { break }
                    recordTime = last.sentTime
                }
                #expect(texts == (ascending ? expected : expected.reversed()), "\(ascending ? "oldest" : "newest") first, every message once")
            }
        }
    }

    @Test("removing a tag that holds 15,000 conversations answers with its version only, and the device pulls the change in pages")
    func largeTagRemoval() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let before = try await Self.tagManyConversations(server, user: "alice")
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            var remove = Im_ConversationTagRequest()
            remove.action = .remove
            remove.tagID = "many"
            let frame = try await alice.request(.editConversationTag, remove, timeout: .seconds(30))
            #expect(frame.payload.count <= Self.budget)
            let delta = try frame.body(Im_ConversationStateDelta.self)
            #expect(delta.links.isEmpty && delta.previousVersion == UInt64.max && delta.version > 0, "the slim answer")

            // A device at the version before pulls every link back removed, in pages within the budget.
            var since = before
            var removed = 0
            while true {
                var sync = Im_ConversationStateSyncRequest()
                sync.since = since
                let frame = try await alice.request(.conversationStateSync, sync, timeout: .seconds(10))
                #expect(frame.payload.count <= Self.budget)
                let page = try frame.body(Im_ConversationStateDelta.self)
                removed += page.links.filter(\.removed).count
                since = page.version
                if !page.more { break }
            }
            #expect(removed == 15_000)
        }
    }

    @Test("IMLib removing a tag too large for one reply pulls the change and ends with the tag and its links gone")
    func largeTagRemovalThroughIMLib() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.tagManyConversations(server, user: "alice")
            // Removing 15,000 links is one large transaction: give it time on a busy machine.
            let client = server.client { $0.requestTimeout = .seconds(120) }
            let changes = EventRecorder(client.conversationStateChanges())
            try await client.connect(token: try await server.token("alice"))
            // The state sync after connecting brings the tag and its 15,000 conversations.
            #expect(await changes.first { if case .tag("many", _) = $0 { true } else { false } } != nil)
            #expect(try await client.getTags().map(\.tagId) == ["many"])
            try await client.removeTag(tagId: "many")
            // The pull of 15,000 removed links follows the reply: as long as the removal may take.
            let gone = await changes.first(timeout: .seconds(120)) { if case .tagRemoved("many") = $0 { true } else { false } }
            #expect(gone != nil, "the pull applied the removal")
            #expect(try await client.getTags().isEmpty)
        }
    }

    /// Puts 15,000 one-to-one conversations into the user's tag "many" (about 1.5 MB of links);
    /// returns the user's state version after it.
    @discardableResult
    static func tagManyConversations(_ server: TestServer, user: String) async throws -> UInt64 {
        var version: UInt64 = 0
        let alice = try await MessageRulesTests.rawConnection(server, user: user)
        defer { Task { await alice.close() } }
        var add = Im_ConversationTagRequest()
        add.action = .add
        add.tagID = "many"
        add.name = "many"
        _ = try await alice.request(.editConversationTag, add, timeout: .seconds(10))
        for batch in 0..<15 {
            var tag = Im_TagConversationsRequest()
            tag.action = .add
            tag.tagIds = ["many"]
            tag.conversations = (0..<1000).map { index in
                var ref = Im_ConversationRef()
                ref.conversationType = 1
                ref.targetID = "user-\(batch)-\(index)-" + String(repeating: "x", count: 48)
                return ref
            }
            version = try await alice.request(.tagConversations, tag, timeout: .seconds(30)).body(Im_ConversationStateDelta.self).version
        }
        return version
    }
}
