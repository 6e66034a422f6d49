import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing

/// Chatroom reads need membership, and creating rooms by joining is limited per client and per app.
@Suite("Chatroom membership for reads, and the cost of creating rooms")
struct ChatroomAbuseTests {
    @Test("a user who has not joined a room reads neither its history nor its members (23406); a member does")
    func readsNeedMembership() async throws {
        try await withTestServer(try await ChatroomTests.server { $0.chatrooms.historyEnabled = true }) { server in
            let alice = try await server.connectedClient("alice")
            try await alice.joinChatRoom("r1", messageCount: -1)
            try await ChatroomTests.send(alice, room: "r1", ["kept in history"])
            let mallory = try await server.connectedClient("mallory")
            #expect(await failureCode { _ = try await mallory.getRemoteChatroomHistoryMessages("r1", recordTime: 0, count: 10, order: .descending) }
                    == ErrorCode.notInChatroom.rawValue)
            #expect(await failureCode { _ = try await mallory.getChatRoomInfo("r1", count: 20) } == ErrorCode.notInChatroom.rawValue)
            #expect(await failureCode { _ = try await mallory.getChatRoomInfo("no-such-room", count: 20) } == ErrorCode.chatroomNotFound.rawValue)
            let page = try await alice.getRemoteChatroomHistoryMessages("r1", recordTime: 0, count: 10, order: .descending)
            #expect(page.messages.compactMap { $0.content(as: TextMessage.self)?.content } == ["kept in history"])
            #expect(try await alice.getChatRoomInfo("r1", count: 20).members.map(\.userId) == ["alice"])
            // Once mallory joins, mallory reads too.
            try await mallory.joinChatRoom("r1", messageCount: -1)
            #expect(try await mallory.getChatRoomInfo("r1", count: 0).totalMemberCount == 2)
        }
    }

    @Test("one client joins at most chatroomJoinsPerSecond rooms per second (20607); a second later it joins again")
    func joinRate() async throws {
        let clock = ManualClock()
        try await withTestServer(try await ChatroomTests.server(clock: clock)) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            func join(_ room: String) async -> Int? {
                var request = Im_JoinChatroomRequest()
                request.roomID = room
                request.messageCount = -1
                return await NumericInputTests.code { _ = try await alice.request(.joinChatroom, request, timeout: .seconds(10)) }
            }
            for index in 0..<ChatroomLimits.defaultJoinsPerSecond { #expect(await join("fresh-\(index)") == nil) }
            #expect(await join("one-too-many") == ErrorCode.callFrequencyExceeded.rawValue)
            #expect(server.core.chatrooms.summary(appId: server.app.id, roomId: "one-too-many") == nil, "the refused join created nothing")
            clock.advance(milliseconds: 1000)
            #expect(await join("one-too-many") == nil)
        }
    }

    @Test("an app has at most chatroomMaxRooms rooms: past it a join cannot create one (23410) nor can the Server API (1002)")
    func roomsPerApp() async throws {
        try await withTestServer(try await ChatroomTests.server { $0.chatrooms.maxRooms = 3 }) { server in
            let clients = [try await server.connectedClient("a"), try await server.connectedClient("b"), try await server.connectedClient("c")]
            for (index, client) in clients.enumerated() { try await client.joinChatRoom("room-\(index)", messageCount: -1) }
            let late = try await server.connectedClient("d")
            #expect(await failureCode { try await late.joinChatRoom("room-3", messageCount: -1) } == ErrorCode.chatroomNotFound.rawValue)
            #expect(server.core.chatrooms.summary(appId: server.app.id, roomId: "room-3") == nil)
            let (_, created) = try await server.api.post("/chatroom/create.json", rawForm: "chatroom[room-4]=four")
            #expect(created["code"] as? Int == 1002, "\(created)")
            let (_, joinedByAPI) = try await server.api.post("/chatroom/join.json", form: ["chatroomId": "room-5", "userId": "d"])
            #expect(joinedByAPI["code"] as? Int == 1002, "\(joinedByAPI)")
            // Existing rooms can still be joined; destroying one makes room for another.
            try await late.joinChatRoom("room-0", messageCount: -1)
            #expect(try await server.api.post("/chatroom/destroy.json", form: ["chatroomId": "room-1"]).1["code"] as? Int == 200)
            try await late.joinChatRoom("room-3", messageCount: -1)
            #expect(server.core.chatrooms.summary(appId: server.app.id, roomId: "room-3") != nil)
        }
    }

    @Test("after a reconnect, a device in more rooms than the join limit allows per second rejoins every one of them")
    func rejoinIsNotLimited() async throws {
        let clock = ManualClock()
        try await withTestServer(try await ChatroomTests.server(clock: clock) { $0.chatrooms.multipleRooms = true }) { server in
            let rooms = (0..<(ChatroomLimits.defaultJoinsPerSecond + 5)).map { "multi-\($0)" }
            let client = try await server.connectedClient("alice")
            for (index, room) in rooms.enumerated() {
                if index % ChatroomLimits.defaultJoinsPerSecond == 0 { clock.advance(milliseconds: 1000) }
                try await client.joinChatRoom(room, messageCount: -1)
            }
            let status = EventRecorder(client.chatRoomStatusUpdates())
            #expect(server.core.dropConnections(appId: server.app.id, userId: "alice") == 1)
            // Each room reports joining then joined (and a reset where its seat was not kept).
            let isJoined: @Sendable (ChatRoomStatusEvent) -> Bool = { if case .joined = $0 { true } else { false } }
            // Generous: beside the whole suite on two cores, the reconnect itself may wait its turn.
            let rejoined = await status.wait(timeout: .seconds(60)) { $0.filter(isJoined).count >= rooms.count }.filter(isJoined)
            #expect(rejoined.count == rooms.count, "every room rejoined: \(status.items)")
            #expect(!status.items.contains { if case .joinFailed = $0 { true } else { false } })
            // Every room's next message reaches the device: it holds its seat in each.
            let inbox = EventRecorder(client.receivedMessages())
            for room in rooms { #expect(try await ChatroomTests.publish(server, room: room, text: "to \(room)")) }
            let got = await inbox.wait(for: rooms.count).compactMap(ChatroomTests.text)
            #expect(Set(got) == Set(rooms.map { "to \($0)" }))
        }
    }
}
