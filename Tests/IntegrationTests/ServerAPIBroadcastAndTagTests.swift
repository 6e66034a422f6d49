import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

@Suite("Server API: online broadcast and conversation tags")
struct ServerAPIBroadcastAndTagTests {
    @Test("online broadcast reaches the users online and those connecting within 10 minutes, as a system message; no history, no recall")
    func onlineBroadcast() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let (ann, annInbox) = try await server.syncedDevice("ann")
            let (status, body) = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"maintenance at noon"}"#])
            #expect(status == 200)
            let uid = try #require(body["messageUID"] as? String)
            let live = try #require(await annInbox.wait(for: 1).first?.message)
            #expect(live.messageUId == uid && live.conversationType == .system && live.targetId == "notice")
            #expect(live.content(as: TextMessage.self)?.content == "maintenance at noon")

            clock.advance(milliseconds: 9 * 60_000)
            let (bob, bobInbox) = try await server.syncedDevice("bob")
            #expect(bobInbox.items.map(\.message.messageUId) == [uid], "connected within 10 minutes")
            clock.advance(milliseconds: 2 * 60_000)
            let (carol, carolInbox) = try await server.syncedDevice("carol")
            #expect(carolInbox.items.isEmpty, "connected 11 minutes later")

            #expect(try await ann.getRemoteHistoryMessages(.system, targetId: "notice", count: 10).messages.isEmpty, "not in cloud history")
            let (recall, recallBody) = try await server.api.post("/message/broadcast/recall.json", form: ["fromUserId": "notice", "messageUID": uid])
            #expect(recall == 400 && recallBody["code"] as? Int != 200)
            await ann.disconnect(); await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("online broadcast answers 1009 when the server does not offer it, 1008 past onlineBroadcastsPerMinute, and refuses a bad content with 1002, sending nothing")
    func onlineBroadcastRefused() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.onlineBroadcastEnabled = false }) { server in
            let (status, body) = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"x"}"#])
            #expect(status == 400 && body["code"] as? Int == 1009)
        }
        try await withTestServer(try await TestServer.start { $0.serverAPI.onlineBroadcastsPerMinute = 1 }) { server in
            let form = ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"x"}"#]
            let (first, _) = try await server.api.post("/message/online/broadcast.json", form: form)
            let (second, secondBody) = try await server.api.post("/message/online/broadcast.json", form: form)
            #expect(first == 200 && second == 429 && secondBody["code"] as? Int == 1008, "one per minute")
        }
        try await withTestServer(try await TestServer.start()) { server in
            let (ann, inbox) = try await server.syncedDevice("ann")
            let (status, body) = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": "not json"])
            #expect(status == 400 && body["code"] as? Int == 1002)
            _ = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"after"}"#])
            #expect(await inbox.wait(for: 1).map { $0.message.content(as: TextMessage.self)?.content } == ["after"], "only the good one arrived")
            await ann.disconnect()
        }
    }

    @Test("conversation tags set by the app server reach the user's devices: tags added and renamed, conversations tagged and untagged, tags removed")
    func conversationTags() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let changes = EventRecorder(ann.conversationStateChanges())
            let (set, _) = try await server.api.post("/user/conversation/tag/set.json", json: [
                "userId": "ann", "tags": [["tagId": "work", "tagName": "Work"], ["tagId": "home", "tagName": "Home"]]])
            #expect(set == 200)
            #expect(await changes.first { $0 == .tag(tagId: "home", name: "Home") } != nil)
            _ = try await server.api.post("/user/conversation/tag/set.json", json: ["userId": "ann", "tags": [["tagId": "work", "tagName": "Office"]]])
            #expect(await changes.first { $0 == .tag(tagId: "work", name: "Office") } != nil)
            #expect(try await ann.getTags().map(\.tagName).sorted() == ["Home", "Office"])

            let bob = ConversationIdentifier(.private, targetId: "bob")
            let g1 = ConversationIdentifier(.group, targetId: "g1")
            let (tagged, _) = try await server.api.post("/tag/conversation/set.json", json: [
                "userId": "ann", "tagId": "work", "conversations": [["targetId": "bob", "conversationType": 1], ["targetId": "g1", "conversationType": 3]]])
            #expect(tagged == 200)
            #expect(await changes.first { $0 == .conversationTagged(tagId: "work", g1, isTopInTag: false) } != nil)
            #expect(try await ann.getTagsFromConversation(bob).map(\.tag.tagId) == ["work"])

            let (untagged, _) = try await server.api.post("/tag/conversation/del.json", json: [
                "userId": "ann", "tagId": "work", "conversations": [["targetId": "bob", "conversationType": 1]]])
            #expect(untagged == 200)
            #expect(await changes.first { $0 == .conversationUntagged(tagId: "work", bob) } != nil)

            // Refused, changing nothing: an unknown tag, a chatroom, too many conversations.
            let (unknown, unknownBody) = try await server.api.post("/tag/conversation/set.json", json: [
                "userId": "ann", "tagId": "nope", "conversations": [["targetId": "bob", "conversationType": 1]]])
            #expect(unknown == 400 && unknownBody["code"] as? Int == 1002)
            let (room, roomBody) = try await server.api.post("/tag/conversation/set.json", json: [
                "userId": "ann", "tagId": "work", "conversations": [["targetId": "r1", "conversationType": 4]]])
            #expect(room == 400 && roomBody["code"] as? Int == 34012)
            let many = (0...100).map { ["targetId": "u\($0)", "conversationType": 1] as [String: Any] }
            let (tooMany, tooManyBody) = try await server.api.post("/tag/conversation/set.json", json: ["userId": "ann", "tagId": "work", "conversations": many])
            #expect(tooMany == 400 && tooManyBody["code"] as? Int == 1005)
            let (badTag, badTagBody) = try await server.api.post("/user/conversation/tag/set.json", json: [
                "userId": "ann", "tags": [["tagId": "way-too-long-id", "tagName": "X"]]])
            #expect(badTag == 400 && badTagBody["code"] as? Int == 1002)

            let (removed, _) = try await server.api.post("/user/conversation/tag/del.json", json: ["userId": "ann", "tagIds": ["work", "never"]])
            #expect(removed == 200)
            #expect(await changes.first { $0 == .tagRemoved(tagId: "work") } != nil)
            #expect(try await ann.getTags().map(\.tagId) == ["home"])
            #expect(try await ann.getTagsFromConversation(g1).isEmpty)
            await ann.disconnect()
        }
    }
}
