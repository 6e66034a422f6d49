import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import IMStore
import Testing

/// The server's event seam, seen by an observer the way push, callbacks and metrics will see it.
@Suite("Server events")
struct ServerEventsTests {
    @Test("an observer sees devices go online and offline, membership changes, committed messages with their recipients, and state changes")
    func observerSeesEvents() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let events = EventRecorder(server.core.events.subscribe())
            let appId = server.app.id

            let ann = try await server.connectedClient("ann")
            let online = await events.first { event in
                if case .sessionOnline(let presence) = event { return presence.userId == "ann" && presence.appId == appId }
                return false
            }
            #expect(online != nil, "no sessionOnline for ann")

            try await GroupChatTests.createGroup(server, "g-events", ["ann", "bob"])
            let joined = await events.first { event in
                if case .membershipChanged(let change) = event { return change.groupId == "g-events" }
                return false
            }
            guard case .membershipChanged(let change)? = joined else {
                Issue.record("no membershipChanged for g-events")
                return
            }
            #expect(change.kind == .group && change.appId == appId && change.joined.sorted() == ["ann", "bob"] && change.left.isEmpty)
            #expect(change.origin == .serverAPI && !change.dismissed)

            let sent = try await ann.sendMessage(.group, targetId: "g-events", content: TextMessage(content: "seen by the seam"))
            let committed = await events.first { event in
                if case .messageCommitted(let item) = event { return item.message.uid == sent.messageUId }
                return false
            }
            guard case .messageCommitted(let item)? = committed else {
                Issue.record("no messageCommitted for \(sent.messageUId)")
                return
            }
            #expect(item.recipients == .group(groupId: "g-events", directed: []))
            #expect(item.message.senderId == "ann" && item.message.seq > 0 && item.message.appId == appId)
            guard case .session(_, let originApp, let originUser) = item.origin else {
                Issue.record("a client's message has origin \(item.origin)")
                return
            }
            #expect(originApp == appId && originUser == "ann")

            let (status, _) = try await server.api.post("/group/quit.json", form: ["userId": "bob", "groupId": "g-events"])
            #expect(status == 200)
            let left = await events.first { event in
                if case .membershipChanged(let change) = event { return change.groupId == "g-events" && change.left == ["bob"] }
                return false
            }
            #expect(left != nil, "no membershipChanged for bob leaving")

            let (pinStatus, pinBody) = try await server.api.post("/conversation/top/set.json", form: [
                "userId": "ann", "conversationType": "1", "targetId": "bob", "setTop": "true",
            ])
            #expect(pinStatus == 200, "\(pinBody)")
            let state = await events.first { event in
                if case .conversationStateChanged(let change) = event { return change.userId == "ann" }
                return false
            }
            guard case .conversationStateChanged(let stateChange)? = state else {
                Issue.record("no conversationStateChanged for ann")
                return
            }
            #expect(stateChange.version > 0 && stateChange.origin == .serverAPI)

            await ann.disconnect()
            let offline = await events.first { event in
                if case .sessionOffline(let presence) = event { return presence.userId == "ann" }
                return false
            }
            guard case .sessionOnline(let on)? = online, case .sessionOffline(let off)? = offline else {
                Issue.record("no sessionOffline for ann")
                return
            }
            #expect(on.sessionId == off.sessionId, "online and offline name the same session")
        }
    }

    @Test("a private message from the Server API names its target and, with isIncludeSender, the sender")
    func privateRecipients() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let events = EventRecorder(server.core.events.subscribe())
            let (status, body) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"hi"}"#,
                "isIncludeSender": "1",
            ])
            #expect(status == 200, "\(body)")
            let committed = await events.first { event in
                if case .messageCommitted = event { return true }
                return false
            }
            guard case .messageCommitted(let item)? = committed else {
                Issue.record("no messageCommitted for the published message")
                return
            }
            #expect(item.recipients == .users(["bob", "ann"]) && item.origin == .serverAPI)
        }
    }
}
