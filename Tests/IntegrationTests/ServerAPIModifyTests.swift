import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

@Suite("Server API: modifying private and group messages")
struct ServerAPIModifyTests {
    static func text(_ message: Message?) -> String? { message?.content(as: TextMessage.self)?.content }

    @Test("a private message modified through the Server API: history shows it, devices online get it at once, a device away at its next sync, a new device only the new content")
    func privateModify() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let (away, awayInbox) = try await server.syncedDevice("bob", platform: .iOS)
            let (bob, bobInbox) = try await server.syncedDevice("bob")
            let original = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "helo"))
            #expect(await bobInbox.wait(for: 1).count == 1)
            #expect(await awayInbox.wait(for: 1).count == 1)
            await away.disconnect()

            let bobEdits = EventRecorder(bob.messageModifications())
            let aliceEdits = EventRecorder(alice.messageModifications())
            let (status, body) = try await server.api.post("/message/private/modify.json", form: [
                "fromUserId": "alice", "targetId": "bob", "msgUID": original.messageUId, "objectName": "RC:TxtMsg",
                "content": #"{"content":"hello"}"#])
            #expect(status == 200, "\(body)")
            let edited = try #require(await bobEdits.wait(for: 1).first)
            #expect(edited.messageUId == original.messageUId && Self.text(edited) == "hello" && edited.sentTime == original.sentTime)
            let local = try await bob.getMessage(messageId: edited.messageId)
            #expect(Self.text(local) == "hello", "the local copy holds the new content")
            #expect(Self.text(await aliceEdits.wait(for: 1).first) == "hello", "the sender's devices too")
            #expect(try await bob.getRemoteHistoryMessages(.private, targetId: "alice", count: 10).messages.map(Self.text) == ["hello"])

            let awayEdits = EventRecorder(away.messageModifications())
            let synced = EventRecorder(away.offlineMessageSyncCompleted())
            try await away.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            #expect(await awayEdits.wait(for: 1).map(Self.text) == ["hello"], "the device away learns of it at its sync")

            let (fresh, freshInbox) = try await server.syncedDevice("bob", platform: .android)
            let freshEdits = EventRecorder(fresh.messageModifications())
            #expect(freshInbox.items.map { Self.text($0.message) } == ["hello"], "a new device syncs the new content, once")
            #expect(freshEdits.items.isEmpty)
            await fresh.disconnect(); await away.disconnect(); await bob.disconnect(); await alice.disconnect()
        }
    }

    @Test("modify refuses, changing nothing: another sender (20116), another conversation (20116), a new type (20116), an unknown uid (20116), a recalled message (20116), bad content (1002)")
    func refused() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let original = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "keep"))
            let recalled = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "gone"))
            _ = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "alice", "conversationType": "1", "targetId": "bob", "messageUID": recalled.messageUId,
                "sentTime": "\(recalled.sentTime)"])
            let cases: [([String: String], Int)] = [
                (["fromUserId": "bob", "targetId": "alice", "msgUID": original.messageUId], 20116),
                (["fromUserId": "alice", "targetId": "carol", "msgUID": original.messageUId], 20116),
                (["fromUserId": "alice", "targetId": "bob", "msgUID": original.messageUId, "objectName": "RC:ImgMsg"], 20116),
                (["fromUserId": "alice", "targetId": "bob", "msgUID": "NO-SUCH-UID"], 20116),
                (["fromUserId": "alice", "targetId": "bob", "msgUID": recalled.messageUId], 20116),
                (["fromUserId": "alice", "targetId": "bob", "msgUID": original.messageUId, "content": "[1]"], 1002),
            ]
            for (form, code) in cases {
                let (status, body) = try await server.api.post("/message/private/modify.json",
                                                               form: ["content": #"{"content":"changed"}"#].merging(form) { $1 })
                #expect(status == 400 && body["code"] as? Int == code, "\(form): \(body)")
            }
            let (_, group) = try await server.api.post("/message/group/modify.json", form: [
                "fromUserId": "alice", "groupId": "bob", "msgUID": original.messageUId, "content": #"{"content":"changed"}"#])
            #expect(group["code"] as? Int == 20116, "a private message is not a group message")
            let history = try await alice.getRemoteHistoryMessages(.private, targetId: "bob", count: 10).messages
            #expect(history.map(\.objectName) == ["RC:RcNtf", "RC:TxtMsg"] && Self.text(history.last) == "keep")
            await alice.disconnect()
        }
    }

    @Test("a group message modified through the Server API reaches every member's devices")
    func groupModify() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/group/create.json", form: ["userId": "alice,bob,carol", "groupId": "g1", "groupName": "G"])
            let alice = try await server.connectedClient("alice")
            let (bob, bobInbox) = try await server.syncedDevice("bob")
            let original = try await alice.sendMessage(.group, targetId: "g1", content: TextMessage(content: "meeting at 3"))
            #expect(await bobInbox.wait(for: 1).count == 1)
            let edits = EventRecorder(bob.messageModifications())
            let (status, _) = try await server.api.post("/message/group/modify.json", form: [
                "fromUserId": "alice", "groupId": "g1", "msgUID": original.messageUId, "content": #"{"content":"meeting at 4"}"#])
            #expect(status == 200)
            #expect(await edits.wait(for: 1).map(Self.text) == ["meeting at 4"])
            let (carol, carolInbox) = try await server.syncedDevice("carol")
            #expect(carolInbox.items.map { Self.text($0.message) } == ["meeting at 4"])
            await carol.disconnect(); await bob.disconnect(); await alice.disconnect()
        }
    }
}
