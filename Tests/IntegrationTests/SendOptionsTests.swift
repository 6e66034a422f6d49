import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import IMStore
import Testing

/// IMLib send options that are not push, and their Server API counterparts.
@Suite("Send options")
struct SendOptionsTests {
    @Test("disableUpdateLastMessage: the message is delivered, stored and counted, but the conversation's last message stays, for sender, recipient online and recipient syncing; disableUpdateLastMsg of the Server API the same")
    func disableUpdateLastMessage() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())

            let first = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "first"))
            let quiet = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "quiet"), disableUpdateLastMessage: true)
            let (status, body) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "alice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"from the app"}"#,
                "disableUpdateLastMsg": "true"])
            #expect(status == 200, "\(body)")
            let received = await bobInbox.wait(for: 3)
            let published = (body["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String
            #expect(received.map(\.message.messageUId) == [first.messageUId, quiet.messageUId, published ?? "?"])
            let bobsFirst = try #require(received.first?.message)

            let bobs = try #require(try await bob.getConversation(.private, targetId: "alice"))
            #expect(bobs.latestMessageId == bobsFirst.messageId, "the recipient's last message is still the first")
            #expect(bobs.sentTime == first.sentTime)
            #expect(bobs.unreadMessageCount == 3, "the quiet messages still count as unread")
            let alices = try #require(try await alice.getConversation(.private, targetId: "bob"))
            #expect(alices.latestMessageId == first.messageId, "the sender's last message is still the first")

            // A device that was away syncs the same way.
            await bob.disconnect()
            let later = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "later"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "quiet again"), disableUpdateLastMessage: true)
            let bobAgain = try await server.connectedClient("bob")
            let synced = try await bobAgain.getHistoryMessages(.private, targetId: "alice", count: 10)
            #expect(synced.count >= 2)
            let afterSync = try #require(try await bobAgain.getConversation(.private, targetId: "alice"))
            let latest = try #require(synced.first { $0.messageId == afterSync.latestMessageId })
            #expect(latest.messageUId == later.messageUId, "after sync the last message is the last one that may be")

            // A conversation that did not exist starts with it.
            _ = try await alice.sendMessage(.private, targetId: "dave", content: TextMessage(content: "hello dave"), disableUpdateLastMessage: true)
            #expect(try await alice.getConversation(.private, targetId: "dave") != nil)

            // The flag is the server's own fact in the message's high bits: a client never sees it in flags.
            #expect(received[1].message.flags.rawValue <= StoredMessage.clientFlagBits)
            for client in [alice, bobAgain] { await client.disconnect() }
        }
    }
}
