import Crypto
import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import Logging
import IMServerTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A raw protocol session that joins chatrooms and records what the rooms push to it: messages,
/// events (kicked, muted, destroyed...) and attribute changes.
struct RoomClient {
    let user: String
    let connection: WireConnection
    let messages: EventRecorder<Im_Message>
    let events: EventRecorder<Im_ChatroomEvent>
    let entryChanges: EventRecorder<Im_ChatroomEntryChanges>

    static func connect(_ server: TestServer, _ user: String, platform: Im_Platform = .web) async throws -> RoomClient {
        let (messageStream, messageSink) = AsyncStream<Im_Message>.makeStream()
        let (eventStream, eventSink) = AsyncStream<Im_ChatroomEvent>.makeStream()
        let (entryStream, entrySink) = AsyncStream<Im_ChatroomEntryChanges>.makeStream()
        let connection = WireConnection(
            url: server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws", logger: Logger(label: "room"),
            onPush: { _, frame in
                switch frame.op {
                case .chatroomMessages:
                    for message in (try? frame.body(Im_ChatroomMessages.self))?.messages ?? [] { messageSink.yield(message) }
                case .chatroomEvent:
                    if let event = try? frame.body(Im_ChatroomEvent.self) { eventSink.yield(event) }
                case .chatroomEntriesChanged:
                    if let changes = try? frame.body(Im_ChatroomEntryChanges.self) { entrySink.yield(changes) }
                default:
                    break
                }
            },
            onClose: { _, _ in
                messageSink.finish()
                eventSink.finish()
                entrySink.finish()
            })
        let client = RoomClient(user: user, connection: connection, messages: EventRecorder(messageStream),
                                events: EventRecorder(eventStream), entryChanges: EventRecorder(entryStream))
        // The token first: the server closes a socket that sends no CONNECT within its handshake timeout.
        let token = try await server.token(user)
        try await connection.open()
        var connect = Im_ConnectRequest()
        connect.appKey = server.app.appKey
        connect.token = token
        connect.platform = platform
        connect.deviceID = "\(user)-\(platform)"
        _ = try await connection.request(.connect, connect, timeout: .seconds(10))
        return client
    }

    @discardableResult
    func join(_ roomId: String, mustExist: Bool = false) async throws -> Im_JoinChatroomReply {
        var request = Im_JoinChatroomRequest()
        request.roomID = roomId
        request.messageCount = -1
        request.mustExist = mustExist
        return try await connection.request(.joinChatroom, request, timeout: .seconds(10)).body(Im_JoinChatroomReply.self)
    }

    @discardableResult
    func send(_ roomId: String, _ text: String) async throws -> Im_SendMessageReply {
        var request = Im_SendMessageRequest()
        request.conversationType = Int32(ConversationType.chatroom.rawValue)
        request.targetID = roomId
        request.objectName = TextMessage.objectName
        request.content = try TextMessage(content: text).encode()
        request.flags = PersistentFlag.persistedAndCounted.rawValue
        request.clientMessageID = UUID().uuidString
        return try await connection.request(.sendMessage, request, timeout: .seconds(10)).body(Im_SendMessageReply.self)
    }

    /// The RongCloud code a send failed with, nil when it succeeded.
    func sendCode(_ roomId: String, _ text: String) async -> Int? {
        await failureCode { try await send(roomId, text) }
    }

    func setEntry(_ roomId: String, key: String, value: String) async throws {
        var request = Im_SetChatroomEntryRequest()
        request.roomID = roomId
        request.key = key
        request.value = value
        _ = try await connection.request(.setChatroomEntry, request, timeout: .seconds(10))
    }

    /// The texts of the room messages received so far, once at least `count` arrived.
    func texts(atLeast count: Int) async -> [String] {
        await messages.wait(for: count).map { Self.text($0) }
    }

    static func text(_ message: Im_Message) -> String {
        (try? JSONDecoder().decode(TextMessage.self, from: message.content))?.content ?? message.objectName
    }
}

@Suite("Server API: chatrooms")
struct ServerAPIChatroomTests {
    static let start: Int64 = 1_800_000_000_000   // 2027-01-15 08:00:00 UTC

    /// Posts a signed form and returns the raw body, for checks of JSON types (Go decodes strictly).
    static func rawPost(_ server: TestServer, _ path: String, _ form: String) async throws -> Data {
        var request = URLRequest(url: URL(string: server.baseURL + path)!)
        request.httpMethod = "POST"
        let nonce = String(Int.random(in: 0..<1_000_000_000)), timestamp = String(Int(Date().timeIntervalSince1970))
        let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp)
        for (name, value) in ["App-Key": server.app.appKey, "Nonce": nonce, "Timestamp": timestamp, "Signature": signature,
                              "Content-Type": "application/x-www-form-urlencoded"] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        request.httpBody = Data(form.utf8)
        return try await URLSession.shared.data(for: request).0
    }

    /// The call's business code (200 on success).
    static func code(_ server: TestServer, _ path: String, _ form: String) async throws -> Int {
        try await server.api.post(path, rawForm: form).1["code"] as? Int ?? -1
    }

    static func quoted(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    @Test("chatroomPublishPerSecond: 100 by default, from IMSERVER_CHATROOM_PUBLISH_PER_SECOND or the config file, never negative")
    func publishRateSetting() throws {
        var config = ServerConfig()
        #expect(config.serverAPI.chatroomPublishPerSecond == 100)
        try config.apply(environment: ["IMSERVER_CHATROOM_PUBLISH_PER_SECOND": "250"])
        #expect(config.serverAPI.chatroomPublishPerSecond == 250)
        #expect(try JSONDecoder().decode(ServerConfig.self, from: Data(#"{"chatroomPublishPerSecond": 7}"#.utf8)).serverAPI.chatroomPublishPerSecond == 7)
        config.serverAPI.chatroomPublishPerSecond = -1
        #expect(throws: IMError.self) { try config.validate() }
    }

    @Test("create with chatroom[<id>]=<name>, create_new, query, get, destroy/set, destroy; bad input changes nothing")
    func rooms() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            // Python 3.x sends the brackets raw; the other SDKs percent-encode them.
            #expect(try await Self.code(server, "/chatroom/create.json", "chatroom[r1]=Room One&chatroom%5Br2%5D=Room%20Two") == 200)
            let (_, query) = try await api.post("/chatroom/query.json", rawForm: "chatroomId=r1&chatroomId=r2,nope")
            let rooms = try #require(query["chatRooms"] as? [[String: Any]])
            #expect(rooms.map { $0["chrmId"] as? String } == ["r1", "r2"] && rooms.map { $0["chatroomId"] as? String } == ["r1", "r2"])
            #expect(rooms.map { $0["name"] as? String } == ["Room One", "Room Two"])
            #expect(rooms.first?["time"] as? String == "2027-01-15 08:00:00")

            struct Room: Decodable {
                let code: Int, chatroomId: String, createTime: Int64, memberCount: Int, destroyType: Int, destroyTime: Int, ban: Bool
            }
            let r1 = try JSONDecoder().decode(Room.self, from: try await Self.rawPost(server, "/chatroom/get.json", "chatroomId=r1"))
            #expect(r1.chatroomId == "r1" && r1.createTime == Self.start && r1.memberCount == 0)
            #expect(r1.destroyType == 0 && r1.destroyTime == 60 && !r1.ban)
            let (missing, missingBody) = try await api.post("/chatroom/get.json", form: ["chatroomId": "nope"])
            #expect(missing == 400 && missingBody["code"] as? Int == 23410)
            #expect((missingBody["errorMessage"] as? String)?.contains("nope") == true)
            #expect(try await Self.code(server, "/chatroom/get.json", "") == 1002, "a missing parameter")

            let info = Self.quoted(#"{"k1":"v1","k2":"v2"}"#)
            #expect(try await Self.code(server, "/chatroom/create_new.json",
                                        "chatroomId=r3&destroyType=1&destroyTime=30&isBan=true&whiteUserIds=ann,bob&entryOwnerId=ann&entryInfo=\(info)") == 200)
            let r3 = try JSONDecoder().decode(Room.self, from: try await Self.rawPost(server, "/chatroom/get.json", "chatroomId=r3"))
            #expect(r3.destroyType == 1 && r3.destroyTime == 30 && r3.ban)
            #expect(try await api.post("/chatroom/user/ban/whitelist/query.json", form: ["chatroomId": "r3"]).1["userIds"] as? [String] == ["ann", "bob"])
            let entries = try await api.post("/chatroom/entry/query.json", form: ["chatroomId": "r3"]).1["keys"] as? [[String: Any]]
            #expect(entries?.map { "\($0["key"]!)=\($0["value"]!) by \($0["userId"]!)" } == ["k1=v1 by ann", "k2=v2 by ann"])

            // Refused whole: nothing is created, muted or stored.
            for form in ["chatroomId=r4&destroyType=2", "chatroomId=bad id", "chatroomId=r4&destroyType=1",
                         "chatroomId=r4&destroyType=0&destroyTime=1441", "chatroomId=r4&isBan=1&entryOwnerId=ann&entryInfo=\(Self.quoted(#"{"k":1}"#))",
                         "chatroomId=r4&whiteUserIds=ok,bad%20user&isBan=1"] {
                #expect(try await Self.code(server, "/chatroom/create_new.json", form) == 23412, "\(form)")
            }
            #expect(try await Self.code(server, "/chatroom/create_new.json", "chatroomId=r4&entryInfo=\(info)") == 1002, "entryInfo needs entryOwnerId")
            #expect(try await Self.code(server, "/chatroom/create.json", "chatroom[ok]=fine&chatroom[bad id]=x") == 23412)
            #expect(try await Self.code(server, "/chatroom/create.json", "name=x") == 1002)
            for id in ["r4", "ok"] { #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=\(id)") == 23410, "\(id)") }
            #expect(try await api.post("/chatroom/ban/check.json", form: ["chatroomId": "r4"]).1["status"] as? Int == 0)

            #expect(try await Self.code(server, "/chatroom/destroy/set.json", "chatroomId=r1&destroyType=0&destroyTime=2000") == 23412)
            #expect(try await Self.code(server, "/chatroom/destroy/set.json", "chatroomId=nope&destroyType=0&destroyTime=5") == 23410)
            #expect(try await Self.code(server, "/chatroom/destroy/set.json", "chatroomId=r1&destroyType=0&destroyTime=5") == 200)
            #expect(try await api.post("/chatroom/get.json", form: ["chatroomId": "r1"]).1["destroyTime"] as? Int == 5)

            // r1 goes after 5 idle minutes, r3 at its fixed time (30 minutes), r2 after the default hour.
            // (The server's own sweeper may get there first.)
            clock.advance(milliseconds: 6 * 60_000)
            _ = await server.core.chatrooms.sweep()
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=r1") == 23410)
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=r3") == 200)
            clock.advance(milliseconds: 25 * 60_000)
            _ = await server.core.chatrooms.sweep()
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=r3") == 23410)
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=r2") == 200)

            #expect(try await Self.code(server, "/chatroom/destroy.json", "chatroomId=r2&chatroomId=never") == 200)
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=r2") == 23410)
            #expect(try await Self.code(server, "/chatroom/destroy.json", "chatroomId=bad id") == 23412)
        }
    }

    @Test("members: user/query by join time, user/exist (bool) and users/exist (int), the legacy join")
    func members() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            let ann = try await RoomClient.connect(server, "ann")
            try await ann.join("room")
            clock.advance(milliseconds: 1000)
            let bob = try await RoomClient.connect(server, "bob")
            try await bob.join("room")

            let (_, all) = try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": "500", "order": "1"])
            #expect(all["total"] as? Int == 2)
            let users = try #require(all["users"] as? [[String: Any]])
            #expect(users.map { $0["id"] as? String } == ["ann", "bob"])
            #expect(users.map { $0["time"] as? String } == ["2027-01-15 08:00:00", "2027-01-15 08:00:01"])
            let (_, latest) = try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": "1", "order": "2"])
            #expect((latest["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bob"] && latest["total"] as? Int == 2)
            #expect((try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": "900", "order": "1"]).1["users"] as? [Any])?.count == 2)
            for form in ["chatroomId=room&count=0&order=1", "chatroomId=room&count=5&order=3", "chatroomId=bad id&count=5&order=1"] {
                #expect(try await Self.code(server, "/chatroom/user/query.json", form) == 23412, "\(form)")
            }
            #expect(try await Self.code(server, "/chatroom/user/query.json", "chatroomId=room&order=1") == 1002)
            #expect(try await Self.code(server, "/chatroom/user/query.json", "chatroomId=nope&count=5&order=1") == 23410)

            struct Exists: Decodable { let isInChrm: Bool }
            struct Each: Decodable { let userId: String, isInChrm: Int }
            struct ExistsMany: Decodable { let result: [Each] }
            #expect(try JSONDecoder().decode(Exists.self, from: try await Self.rawPost(server, "/chatroom/user/exist.json", "chatroomId=room&userId=ann")).isInChrm)
            #expect(try !JSONDecoder().decode(Exists.self, from: try await Self.rawPost(server, "/chatroom/user/exist.json", "chatroomId=room&userId=carol")).isInChrm)
            let many = try JSONDecoder().decode(ExistsMany.self, from: try await Self.rawPost(server, "/chatroom/users/exist.json", "chatroomId=room&userId=ann,carol&userId=bob"))
            #expect(many.result.map { "\($0.userId):\($0.isInChrm)" } == ["ann:1", "carol:0", "bob:1"])
            #expect(try await Self.code(server, "/chatroom/user/exist.json", "chatroomId=nope&userId=ann") == 23410)

            // The legacy join: members with no device online, until the room's next message after 30 s.
            #expect(try await Self.code(server, "/chatroom/join.json", "userId=carol&userId=dave&chatroomId=room") == 200)
            #expect(try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": "10", "order": "1"]).1["total"] as? Int == 4)
            #expect(try await Self.code(server, "/chatroom/join.json", "userId=erin&chatroomId=lobby") == 200)
            #expect(try await api.post("/chatroom/get.json", form: ["chatroomId": "lobby"]).1["memberCount"] as? Int == 1, "the room was created")
            #expect(try await Self.code(server, "/chatroom/join.json", "userId=erin,bad user&chatroomId=lobby2") == 23412)
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=lobby2") == 23410)
            _ = try await api.post("/chatroom/user/block/add.json", form: ["chatroomId": "lobby", "userId": "frank", "minute": "5"])
            #expect(try await Self.code(server, "/chatroom/join.json", "userId=gina,frank&chatroomId=lobby") == 23409)
            #expect(try await api.post("/chatroom/get.json", form: ["chatroomId": "lobby"]).1["memberCount"] as? Int == 1, "all or none")

            clock.advance(milliseconds: 31_000)
            try await ann.send("room", "after a while")
            #expect(await bob.texts(atLeast: 1) == ["after a while"])
            let (_, after) = try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": "10", "order": "1"])
            #expect((after["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["ann", "bob"], "carol and dave had no device online")
        }
    }

    @Test("block kicks and bans, gag mutes one member; other members are unaffected; bad minutes store nothing")
    func blockAndGag() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            let ann = try await RoomClient.connect(server, "ann")
            let bob = try await RoomClient.connect(server, "bob")
            try await ann.join("room")
            try await bob.join("room")

            #expect(try await Self.code(server, "/chatroom/user/block/add.json", "userId=bob&chatroomId=room&minute=10&needNotify=true&extra=spam") == 200)
            let kicked = await bob.events.first { $0.kind == .chatroomKicked }
            #expect(kicked?.userIds == ["bob"] && kicked?.durationMinutes == 10 && kicked?.extra == "spam")
            #expect(await ann.events.first { $0.kind == .chatroomKicked }?.userIds == ["bob"], "with needNotify the room is told")
            #expect(await failureCode { try await bob.join("room") } == ErrorCode.bannedFromChatroom.rawValue)
            #expect(try await api.post("/chatroom/user/exist.json", form: ["chatroomId": "room", "userId": "bob"]).1["isInChrm"] as? Bool == false)
            let (_, blocked) = try await api.post("/chatroom/user/block/list.json", form: ["chatroomId": "room"])
            let list = try #require(blocked["users"] as? [[String: Any]])
            #expect(list.map { $0["userId"] as? String } == ["bob"] && list.first?["time"] as? String == "2027-01-15 08:10:00")

            for form in ["userId=carol&chatroomId=room&minute=0", "userId=carol&chatroomId=room&minute=43201", "userId=bad user&chatroomId=room&minute=5",
                         "userId=carol&chatroomId=bad id&minute=5"] {
                #expect(try await Self.code(server, "/chatroom/user/block/add.json", form) == 23412, "\(form)")
            }
            let many = (1...21).map { "userId=u\($0)" }.joined(separator: "&")
            #expect(try await Self.code(server, "/chatroom/user/block/add.json", "\(many)&chatroomId=room&minute=5") == 1005)
            #expect(try await Self.code(server, "/chatroom/user/block/add.json", "userId=carol&chatroomId=room") == 1002)
            #expect((try await api.post("/chatroom/user/block/list.json", form: ["chatroomId": "room"]).1["users"] as? [Any])?.count == 1, "nothing stored")

            try await ann.send("room", "still here")
            #expect(await failureCode { try await bob.send("room", "x") } == ErrorCode.notInChatroom.rawValue)
            #expect(try await Self.code(server, "/chatroom/user/block/rollback.json", "userId=bob&chatroomId=room") == 200)
            try await bob.join("room")
            #expect((try await api.post("/chatroom/user/block/list.json", form: ["chatroomId": "room"]).1["users"] as? [Any])?.isEmpty == true)

            #expect(try await Self.code(server, "/chatroom/user/gag/add.json", "userId=bob&chatroomId=room&minute=5") == 200)
            #expect(await bob.sendCode("room", "muted") == ErrorCode.mutedInChatroom.rawValue)
            try await ann.send("room", "bob still hears this")
            #expect(await bob.texts(atLeast: 1) == ["bob still hears this"])
            let gagged = try await api.post("/chatroom/user/gag/list.json", form: ["chatroomId": "room"]).1["users"] as? [[String: Any]]
            #expect(gagged?.map { "\($0["userId"]!) \($0["time"]!)" } == ["bob 2027-01-15 08:05:00"])
            #expect(try await Self.code(server, "/chatroom/user/gag/add.json", "userId=ann&chatroomId=room&minute=43201") == 23412)
            #expect(await ann.sendCode("room", "ann was not muted") == nil)
            #expect(try await Self.code(server, "/chatroom/user/gag/rollback.json", "userId=bob&chatroomId=room") == 200)
            #expect(await bob.sendCode("room", "free again") == nil)

            // Settings are kept by room id: they can be listed and set for a room that does not exist now.
            #expect(try await Self.code(server, "/chatroom/user/gag/list.json", "chatroomId=later") == 200)
            #expect(try await Self.code(server, "/chatroom/user/gag/add.json", "userId=ann&chatroomId=later&minute=5") == 200)
            let later = try await RoomClient.connect(server, "ann", platform: .linux)
            try await later.join("later")
            #expect(await later.sendCode("later", "x") == ErrorCode.mutedInChatroom.rawValue)
        }
    }

    @Test("whole-room mute with its whitelist, ban/query and ban/check, and the global mute in every room")
    func mutes() async throws {
        try await withTestServer(try await TestServer.start { $0.chatrooms.multipleRooms = true }) { server in
            let api = server.api
            let ann = try await RoomClient.connect(server, "ann")
            let bob = try await RoomClient.connect(server, "bob")
            for client in [ann, bob] {
                try await client.join("room")
                try await client.join("other")
            }

            #expect(try await Self.code(server, "/chatroom/ban/add.json", "chatroomId=room") == 200)
            #expect(try await api.post("/chatroom/ban/check.json", form: ["chatroomId": "room"]).1["status"] as? Int == 1)
            #expect(await ann.sendCode("room", "x") == ErrorCode.mutedInChatroom.rawValue)
            #expect(try await Self.code(server, "/chatroom/user/ban/whitelist/add.json", "chatroomId=room&userId=ann") == 200)
            #expect(await ann.sendCode("room", "whitelisted") == nil)
            #expect(await bob.sendCode("room", "x") == ErrorCode.mutedInChatroom.rawValue)
            #expect(await bob.sendCode("other", "another room") == nil)
            #expect(try await Self.code(server, "/chatroom/user/ban/whitelist/add.json", "chatroomId=room&userId=bad user") == 23412)
            #expect(try await api.post("/chatroom/user/ban/whitelist/query.json", form: ["chatroomId": "room"]).1["userIds"] as? [String] == ["ann"])
            #expect(try await Self.code(server, "/chatroom/user/ban/whitelist/rollback.json", "chatroomId=room&userId=ann") == 200)
            #expect(await ann.sendCode("room", "x") == ErrorCode.mutedInChatroom.rawValue)

            for id in ["m1", "m2"] { _ = try await api.post("/chatroom/ban/add.json", form: ["chatroomId": id]) }
            #expect(try await api.post("/chatroom/ban/query.json", form: [:]).1["chatroomIds"] as? [String] == ["m1", "m2", "room"])
            #expect(try await api.post("/chatroom/ban/query.json", form: ["page": "2", "size": "2"]).1["chatroomIds"] as? [String] == ["room"])
            #expect(try await api.post("/chatroom/ban/query.json", form: ["page": "9", "size": "2"]).1["chatroomIds"] as? [String] == [])
            #expect(try await Self.code(server, "/chatroom/ban/query.json", "size=0") == 23412)
            #expect(try await Self.code(server, "/chatroom/ban/rollback.json", "chatroomId=room") == 200)
            #expect(try await api.post("/chatroom/ban/check.json", form: ["chatroomId": "room"]).1["status"] as? Int == 0)
            #expect(await ann.sendCode("room", "unmuted") == nil)

            #expect(try await Self.code(server, "/chatroom/user/ban/add.json", "userId=bob&minute=5") == 200)
            #expect(await bob.sendCode("room", "x") == ErrorCode.mutedInChatroom.rawValue)
            #expect(await bob.sendCode("other", "x") == ErrorCode.mutedInChatroom.rawValue)
            #expect(await ann.sendCode("other", "ann speaks") == nil)
            #expect((try await api.post("/chatroom/user/ban/query.json", form: [:]).1["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["bob"])
            #expect(try await Self.code(server, "/chatroom/user/ban/add.json", "userId=carol&minute=0") == 23412)
            #expect(try await Self.code(server, "/chatroom/user/ban/remove.json", "userId=bob") == 200)
            #expect(await bob.sendCode("other", "free") == nil)
            #expect((try await api.post("/chatroom/user/ban/query.json", form: [:]).1["users"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("publish: online members get it, isIncludeSender, a missing room sends nothing, 100 per second against the group's 20")
    func publish() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            let ann = try await RoomClient.connect(server, "ann")
            let bob = try await RoomClient.connect(server, "bob")
            let carol = try await RoomClient.connect(server, "carol")
            try await ann.join("room1")
            try await bob.join("room1")
            try await carol.join("room2")
            func text(_ value: String) -> String { Self.quoted(#"{"content":"\#(value)"}"#) }

            let (status, body) = try await api.post("/message/chatroom/publish.json",
                                                    rawForm: "fromUserId=ann&toChatroomId=room1&toChatroomId=room2&objectName=RC:TxtMsg&content=\(text("one"))")
            #expect(status == 200, "\(body)")
            let uids = try #require(body["messageUIDs"] as? [[String: Any]])
            #expect(uids.map { $0["chatroomId"] as? String } == ["room1", "room2"] && uids.allSatisfy { ($0["messageUID"] as? String)?.isEmpty == false })
            #expect(await bob.texts(atLeast: 1) == ["one"] && bob.messages.items.first?.senderUserID == "ann")
            #expect(await carol.texts(atLeast: 1) == ["one"])
            #expect(bob.messages.items.first?.messageUid == uids.first?["messageUID"] as? String)
            _ = try await api.post("/message/chatroom/publish.json",
                                   rawForm: "fromUserId=ann&toChatroomId=room1&objectName=RC:TxtMsg&content=\(text("two"))&isIncludeSender=1")
            #expect(await ann.texts(atLeast: 1) == ["two"], "only the message with isIncludeSender reached the sender")

            // Refused whole: nothing reaches anyone.
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&toChatroomId=room1,nope&objectName=RC:TxtMsg&content=\(text("lost"))") == 23410)
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&toChatroomId=room1,bad id&objectName=RC:TxtMsg&content=\(text("lost"))") == 23412)
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&toChatroomId=room1&objectName=RC:TxtMsg&content=not-json") == 1002)
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&toChatroomId=room1&objectName=RC:TxtMsg&content=\(text("lost"))&expansion=true") == 1002)
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&objectName=RC:TxtMsg&content=\(text("lost"))") == 1002)
            let eleven = (1...11).map { "toChatroomId=r\($0)" }.joined(separator: "&")
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&\(eleven)&objectName=RC:TxtMsg&content=\(text("lost"))") == 1005)

            #expect(try await Self.code(server, "/chatroom/message/stopDistribution.json", "chatroomId=room1") == 200)
            _ = try await api.post("/message/chatroom/publish.json", rawForm: "fromUserId=ann&toChatroomId=room1&objectName=RC:TxtMsg&content=\(text("held back"))")
            #expect(try await Self.code(server, "/chatroom/message/resumeDistribution.json", "chatroomId=room1") == 200)
            #expect(try await Self.code(server, "/chatroom/message/stopDistribution.json", "chatroomId=nope") == 23410)
            _ = try await api.post("/message/chatroom/publish.json", rawForm: "fromUserId=ann&toChatroomId=room1&objectName=RC:TxtMsg&content=\(text("marker"))")
            #expect(await bob.texts(atLeast: 3) == ["one", "two", "marker"], "neither the refused calls nor the undistributed message arrived")

            // 100 chatroom messages per second per app, each room counted; the group publish stops at 20.
            clock.advance(milliseconds: 1000)
            let rooms = (0..<10).map { "chatroom[c\($0)]=c\($0)" }.joined(separator: "&")
            _ = try await api.post("/chatroom/create.json", rawForm: rooms)
            let ten = (0..<10).map { "toChatroomId=c\($0)" }.joined(separator: "&")
            var codes: [Int] = []
            for _ in 0..<11 {
                codes.append(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&\(ten)&objectName=RC:TxtMsg&content=\(text("load"))"))
            }
            #expect(codes == Array(repeating: 200, count: 10) + [1008])
            _ = try await api.post("/group/create.json", rawForm: "userId=ann&groupId=g1")
            var groupCodes: [Int] = []
            for _ in 0..<21 {
                groupCodes.append(try await Self.code(server, "/message/group/publish.json", "fromUserId=ann&toGroupId=g1&objectName=RC:TxtMsg&content=\(text("g"))"))
            }
            #expect(groupCodes == Array(repeating: 200, count: 20) + [1008])
            clock.advance(milliseconds: 1000)
            #expect(try await Self.code(server, "/message/chatroom/publish.json", "fromUserId=ann&\(ten)&objectName=RC:TxtMsg&content=\(text("load"))") == 200)
        }
    }

    @Test("broadcast reaches every room; over 128 KB is refused and sends nothing; one per second")
    func broadcast() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let bob = try await RoomClient.connect(server, "bob")
            let carol = try await RoomClient.connect(server, "carol")
            try await bob.join("room1")
            try await carol.join("room2")
            func text(_ value: String) -> String { Self.quoted(#"{"content":"\#(value)"}"#) }

            let (status, body) = try await server.api.post("/message/chatroom/broadcast.json", rawForm: "fromUserId=admin&objectName=RC:TxtMsg&content=\(text("to all"))")
            #expect(status == 200)
            #expect(Set((body["messageUIDs"] as? [[String: Any]] ?? []).compactMap { $0["chatroomId"] as? String }) == ["room1", "room2"])
            #expect(await bob.texts(atLeast: 1) == ["to all"])
            #expect(await carol.texts(atLeast: 1) == ["to all"])

            let big = text(String(repeating: "x", count: MessageLimits.maxContentBytes))
            clock.advance(milliseconds: 1000)
            #expect(try await Self.code(server, "/message/chatroom/broadcast.json", "fromUserId=admin&objectName=RC:TxtMsg&content=\(big)") == 1002)
            #expect(try await Self.code(server, "/message/chatroom/broadcast.json", "fromUserId=admin&objectName=RC:TxtMsg&content=\(text("second"))") == 200)
            #expect(try await Self.code(server, "/message/chatroom/broadcast.json", "fromUserId=admin&objectName=RC:TxtMsg&content=\(text("too soon"))") == 1008)
            #expect(await bob.texts(atLeast: 2) == ["to all", "second"], "the oversized and the too-soon broadcasts reached nobody")
            clock.advance(milliseconds: 1000)
            #expect(try await Self.code(server, "/message/chatroom/broadcast.json", "fromUserId=admin&objectName=RC:TxtMsg&content=\(text("third"))") == 200)
            #expect(await carol.texts(atLeast: 3) == ["to all", "second", "third"])
        }
    }

    @Test("/message/recall.json with conversationType 4 recalls a chatroom message for the members online")
    func recall() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await RoomClient.connect(server, "ann")
            let bob = try await RoomClient.connect(server, "bob")
            try await ann.join("room")
            try await bob.join("room")
            let sent = try await ann.send("room", "oops")
            #expect(await bob.texts(atLeast: 1) == ["oops"])

            let form = "conversationType=4&targetId=room&messageUID=\(sent.messageUid)&sentTime=\(sent.sentTime)"
            #expect(try await Self.code(server, "/message/recall.json", "fromUserId=bob&\(form)") == 25101, "only the sender, unless isAdmin")
            #expect(try await Self.code(server, "/message/recall.json", "fromUserId=ann&conversationType=4&targetId=room&messageUID=nope") == 25101)
            #expect(try await Self.code(server, "/message/recall.json", "fromUserId=ann&conversationType=5&targetId=room&messageUID=\(sent.messageUid)") == 1002)
            #expect(try await Self.code(server, "/message/recall.json", "fromUserId=ann&\(form)") == 200)
            let command = try #require(await bob.messages.first { $0.objectName == RecallCommandMessage.objectName })
            #expect(try JSONDecoder().decode(RecallCommandMessage.self, from: command.content).messageUId == sent.messageUid)

            let second = try await ann.send("room", "moderated")
            #expect(try await Self.code(server, "/message/recall.json", "fromUserId=admin&isAdmin=1&conversationType=4&targetId=room&messageUID=\(second.messageUid)") == 200)
            #expect(await bob.messages.first { $0.objectName == RecallCommandMessage.objectName
                && (try? JSONDecoder().decode(RecallCommandMessage.self, from: $0.content))?.messageUId == second.messageUid } != nil)
        }
    }

    @Test("attributes: set (overriding the owner), a message with the change, query with string autoDelete, remove, batch set; bad input stores nothing")
    func entries() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            let ann = try await RoomClient.connect(server, "ann")
            try await ann.join("room")
            try await ann.setEntry("room", key: "annKey", value: "mine")

            #expect(try await Self.code(server, "/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k1&value=v1&autoDelete=false") == 200)
            #expect(await ann.entryChanges.first { $0.set.contains { $0.key == "k1" && $0.value == "v1" } } != nil)
            let note = Self.quoted(#"{"content":"k2 changed"}"#)
            #expect(try await Self.code(server, "/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k2&value=v2&autoDelete=1&objectName=RC:TxtMsg&content=\(note)") == 200)
            #expect(await ann.texts(atLeast: 1) == ["k2 changed"])
            #expect(try await Self.code(server, "/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=annKey&value=taken") == 200,
                    "the app server may change any attribute")

            struct Entry: Decodable { let key: String, value: String, userId: String, autoDelete: String, lastSetTime: String }
            struct Entries: Decodable { let keys: [Entry] }
            let all = try JSONDecoder().decode(Entries.self, from: try await Self.rawPost(server, "/chatroom/entry/query.json", "chatroomId=room")).keys
            #expect(all.map { "\($0.key)=\($0.value) \($0.userId) \($0.autoDelete)" } == ["annKey=taken admin 0", "k1=v1 admin 0", "k2=v2 admin 1"])
            #expect(all.allSatisfy { Int64($0.lastSetTime) ?? 0 > 0 })
            let some = try await api.post("/chatroom/entry/query.json", rawForm: "chatroomId=room&keys=k1&keys=missing").1["keys"] as? [[String: Any]]
            #expect(some?.map { $0["key"] as? String } == ["k1"])

            let info = Self.quoted(#"{"a":"1","b":"2"}"#)
            #expect(try await Self.code(server, "/chatroom/entry/batch/set.json", "chatroomId=room&entryOwnerId=bob&entryInfo=\(info)&autoDelete=1") == 200)
            #expect(try await Self.code(server, "/chatroom/entry/remove.json", "chatroomId=room&userId=admin&key=k1") == 200)
            let keys = try await api.post("/chatroom/entry/query.json", form: ["chatroomId": "room"]).1["keys"] as? [[String: Any]]
            #expect(keys?.map { "\($0["key"]!) \($0["userId"]!) \($0["autoDelete"]!)" } == ["a bob 1", "annKey admin 0", "b bob 1", "k2 admin 1"])

            // Bad input: documented codes, and the attributes are as they were.
            let long = String(repeating: "v", count: ChatroomEntryLimits.maxValueLength + 1)
            for (path, form, code) in [
                ("/chatroom/entry/remove.json", "chatroomId=room&userId=admin&key=missing", 23427),
                ("/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=bad%20key&value=v", 23412),
                ("/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k3&value=\(long)", 23412),
                ("/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k3&value=v&objectName=RC:TxtMsg", 23412),
                ("/chatroom/entry/set.json", "chatroomId=room&userId=bad%20user&key=k3&value=v", 23412),
                ("/chatroom/entry/set.json", "chatroomId=nope&userId=admin&key=k3&value=v", 23410),
                ("/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k3", 1002),
                ("/chatroom/entry/batch/set.json", "chatroomId=room&entryOwnerId=bob&entryInfo=\(Self.quoted("[1]"))", 23412),
                ("/chatroom/entry/batch/set.json", "chatroomId=room&entryOwnerId=bob&entryInfo=\(Self.quoted(#"{"ok":"1","bad key":"2"}"#))", 23412),
                ("/chatroom/entry/query.json", "chatroomId=nope", 23410),
            ] {
                #expect(try await Self.code(server, path, form) == code, "\(path) \(form.prefix(120))")
            }
            let unchanged = try await api.post("/chatroom/entry/query.json", form: ["chatroomId": "room"]).1["keys"] as? [[String: Any]]
            #expect(unchanged?.map { $0["key"] as? String } == ["a", "annKey", "b", "k2"])

            try await withTestServer(try await TestServer.start { $0.chatrooms.entriesEnabled = false }) { off in
                _ = try await off.api.post("/chatroom/create.json", rawForm: "chatroom[room]=room")
                #expect(try await Self.code(off, "/chatroom/entry/set.json", "chatroomId=room&userId=admin&key=k&value=v") == 23426)
                #expect(try await Self.code(off, "/chatroom/entry/query.json", "chatroomId=room") == 23426)
            }
        }
    }

    @Test("app settings: low-priority types, keep-alive (1015 for a room not kept), message whitelist (whitlistMsgType), user whitelist of 5")
    func settings() async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api

            #expect(try await Self.code(server, "/chatroom/message/priority/add.json", "objectName=RC:ImgMsg&objectName=RC:VcMsg") == 200)
            #expect(try await api.post("/chatroom/message/priority/query.json", form: [:]).1["objectNames"] as? [String] == ["RC:ImgMsg", "RC:VcMsg"])
            #expect(try await Self.code(server, "/chatroom/message/priority/add.json", "objectName=a,b,c,d,e,f") == 1005)
            #expect(try await Self.code(server, "/chatroom/message/priority/add.json", "objectName=\(String(repeating: "x", count: 33))") == 23412)
            for batch in 0..<3 {
                let names = (0..<5).map { "objectName=T\(batch)x\($0)" }.joined(separator: "&")
                #expect(try await Self.code(server, "/chatroom/message/priority/add.json", names) == 200)
            }
            #expect(try await Self.code(server, "/chatroom/message/priority/add.json", "objectName=one,two,three,four") == 23412, "17 + 4 is over 20 types")
            #expect((try await api.post("/chatroom/message/priority/query.json", form: [:]).1["objectNames"] as? [String])?.count == 17)
            #expect(try await Self.code(server, "/chatroom/message/priority/remove.json", "objectName=RC:ImgMsg") == 200)
            #expect((try await api.post("/chatroom/message/priority/query.json", form: [:]).1["objectNames"] as? [String])?.contains("RC:ImgMsg") == false)

            _ = try await api.post("/chatroom/create.json", rawForm: "chatroom[kept]=kept&chatroom[idle]=idle")
            #expect(try await Self.code(server, "/chatroom/keepalive/add.json", "chatroomId=kept") == 200)
            #expect(try await api.post("/chatroom/keepalive/query.json", form: [:]).1["chatroomIds"] as? [String] == ["kept"])
            let (status, notKept) = try await api.post("/chatroom/keepalive/remove.json", form: ["chatroomId": "idle"])
            #expect(status == 200 && notKept["code"] as? Int == 1015)
            #expect(try await Self.code(server, "/chatroom/keepalive/add.json", "chatroomId=bad id") == 23412)
            clock.advance(milliseconds: 61 * 60_000)
            _ = await server.core.chatrooms.sweep()
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=kept") == 200)
            #expect(try await Self.code(server, "/chatroom/get.json", "chatroomId=idle") == 23410)
            #expect(try await Self.code(server, "/chatroom/keepalive/remove.json", "chatroomId=kept") == 200)
            #expect(try await api.post("/chatroom/keepalive/query.json", form: [:]).1["chatroomIds"] as? [String] == [])

            #expect(try await Self.code(server, "/chatroom/whitelist/add.json", "objectnames=RC:TxtMsg,App:Gift") == 200)
            #expect(try await api.post("/chatroom/whitelist/query.json", form: [:]).1["whitlistMsgType"] as? [String] == ["App:Gift", "RC:TxtMsg"])
            #expect(try await Self.code(server, "/chatroom/whitelist/delete.json", "objectnames=RC:TxtMsg") == 200)
            #expect(try await api.post("/chatroom/whitelist/query.json", form: [:]).1["whitlistMsgType"] as? [String] == ["App:Gift"])
            #expect(try await Self.code(server, "/chatroom/whitelist/add.json", "objectNames=RC:TxtMsg") == 1002, "RongCloud spells it objectnames")

            #expect(try await Self.code(server, "/chatroom/user/whitelist/add.json", "chatroomId=kept&userId=u1,u2,u3,u4") == 200)
            #expect(try await Self.code(server, "/chatroom/user/whitelist/add.json", "chatroomId=kept&userId=u5,u6") == 23412, "a room has at most 5")
            #expect(try await Self.code(server, "/chatroom/user/whitelist/add.json", "chatroomId=kept&userId=a,b,c,d,e,f") == 1005)
            #expect(try await api.post("/chatroom/user/whitelist/query.json", form: ["chatroomId": "kept"]).1["users"] as? [String] == ["u1", "u2", "u3", "u4"])
            #expect(try await Self.code(server, "/chatroom/user/whitelist/add.json", "chatroomId=kept&userId=u4,u5") == 200)
            #expect(try await Self.code(server, "/chatroom/user/whitelist/remove.json", "chatroomId=kept&userId=u1") == 200)
            #expect(try await api.post("/chatroom/user/whitelist/query.json", form: ["chatroomId": "kept"]).1["users"] as? [String] == ["u2", "u3", "u4", "u5"])
        }
    }
}
