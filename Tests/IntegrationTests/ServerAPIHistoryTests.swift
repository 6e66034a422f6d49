import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// `/v3/message/{private,group,chatroom,ultragroup}/query.json`: cloud history between two times,
/// as the Go, Java and PHP SDKs and RongCloud's MCP server read it.
@Suite("Server API: /v3 history queries")
struct ServerAPIHistoryTests {
    static func text(_ value: String) -> String {
        (#"{"content":"\#(value)"}"#).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    }

    static func query(_ server: TestServer, _ kind: String, _ body: [String: any Sendable]) async throws -> (code: Int?, data: [[String: Any]]) {
        let (_, answer) = try await server.api.post("/v3/message/\(kind)/query.json", json: body)
        return (answer["code"] as? Int, answer["data"] as? [[String: Any]] ?? [])
    }

    static func contents(_ data: [[String: Any]]) -> [String] {
        data.compactMap { ($0["content"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["content"] as? String }
    }

    @Test("group: both directions between two times, includeStart, pageSize; a message directed to others is not shown to a member it was not for")
    func group() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (created, _) = try await server.api.post("/group/create.json", rawForm: "userId=ann&userId=bob&userId=carol&groupId=g1&groupName=g1")
            #expect(created == 200)
            let ann = try await server.connectedClient("ann")
            var times: [Int64] = []
            for word in ["one", "two", "three"] {
                times.append(try await ann.sendMessage(.group, targetId: "g1", content: TextMessage(content: word)).sentTime)
            }
            let (status, body) = try await server.api.post("/message/group/publish.json",
                                                           rawForm: "fromUserId=ann&toGroupId=g1&toUserId=bob&objectName=RC%3ATxtMsg&content=\(Self.text("for bob"))")
            #expect(status == 200, "\(body)")
            let everything: [String: any Sendable] = ["targetId": "g1", "startTime": 0, "endTime": Int64.max / 2, "pageSize": 100]

            var asBob = everything
            asBob["userId"] = "bob"
            #expect(Self.contents(try await Self.query(server, "group", asBob).data) == ["one", "two", "three", "for bob"])
            var asCarol = everything
            asCarol["userId"] = "carol"
            let carol = try await Self.query(server, "group", asCarol)
            #expect(carol.code == 200)
            #expect(Self.contents(carol.data) == ["one", "two", "three"], "carol sees the messages for everyone, not the one for bob")
            #expect(carol.data.first?["fromUserId"] as? String == "ann" && carol.data.first?["targetId"] as? String == "g1")
            #expect((carol.data.first?["msgTime"] as? NSNumber)?.int64Value == times[0])

            // Descending from the third message's time down to the first's, without the start.
            let down = try await Self.query(server, "group", ["userId": "carol", "targetId": "g1", "startTime": times[2], "endTime": times[0],
                                                              "includeStart": false, "pageSize": 10])
            #expect(Self.contents(down.data) == ["two", "one"])
            let page = try await Self.query(server, "group", ["userId": "carol", "targetId": "g1", "startTime": times[0], "endTime": times[2],
                                                              "pageSize": 2])
            #expect(Self.contents(page.data) == ["one", "two"])
            await ann.disconnect()
        }
    }

    @Test("chatroom: 23414 while the server keeps no chatroom history; with it, the room's messages between two times")
    func chatroom() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (_, refused) = try await server.api.post("/v3/message/chatroom/query.json", json: [
                "userId": "ann", "targetId": "room", "startTime": 0, "endTime": 1])
            #expect(refused["code"] as? Int == 23414, "\(refused)")
        }
        try await withTestServer(try await TestServer.start { $0.chatrooms.historyEnabled = true }) { server in
            #expect(try await server.api.post("/chatroom/create.json", rawForm: "chatroom[room]=room").1["code"] as? Int == 200)
            for word in ["one", "two", "three"] {
                let (status, body) = try await server.api.post("/message/chatroom/publish.json",
                                                               rawForm: "fromUserId=ann&toChatroomId=room&objectName=RC:TxtMsg&content=\(Self.text(word))")
                #expect(status == 200, "\(body)")
            }
            let all = try await Self.query(server, "chatroom", ["userId": "bob", "targetId": "room", "startTime": 0, "endTime": Int64.max / 2])
            #expect(all.code == 200)
            #expect(Self.contents(all.data) == ["one", "two", "three"])
            let times = all.data.compactMap { ($0["msgTime"] as? NSNumber)?.int64Value }
            #expect(times.count == 3)
            let down = try await Self.query(server, "chatroom", ["userId": "bob", "targetId": "room", "startTime": times[2], "endTime": times[1]])
            #expect(Self.contents(down.data) == ["three", "two"], "descending, both ends included")
            let up = try await Self.query(server, "chatroom", ["userId": "bob", "targetId": "room", "startTime": times[0], "endTime": times[2],
                                                               "includeStart": false])
            #expect(Self.contents(up.data) == ["two", "three"])
        }
    }

    @Test("ultra group: a channel's history (busChannel), nothing past ultraGroupHistoryRetentionDays")
    func ultraGroup() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            #expect(try await server.api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "ug", "groupName": "ug"]).1["code"] as? Int == 200)
            #expect(try await server.api.post("/ultragroup/channel/create.json", form: ["groupId": "ug", "busChannel": "news"]).1["code"] as? Int == 200)
            func publish(_ word: String, channel: String) async throws {
                let (status, body) = try await server.api.post("/message/ultragroup/publish.json", json: [
                    "fromUserId": "ann", "toGroupIds": ["ug"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"\(word)\"}", "busChannel": channel])
                #expect(status == 200, "\(body)")
            }
            try await publish("old", channel: "news")
            clock.advance(milliseconds: 8 * 86_400_000)
            try await publish("new", channel: "news")
            try await publish("elsewhere", channel: "")
            let news = try await Self.query(server, "ultragroup", ["userId": "ann", "targetId": "ug", "busChannel": "news",
                                                                   "startTime": 0, "endTime": Int64.max / 2])
            #expect(news.code == 200)
            #expect(Self.contents(news.data) == ["new"], "the message of 8 days ago is past the 7-day retention")
            #expect(news.data.first?["busChannel"] as? String == "news")
            let down = try await Self.query(server, "ultragroup", ["userId": "ann", "targetId": "ug", "busChannel": "news",
                                                                   "startTime": Int64.max / 2, "endTime": 0])
            #expect(Self.contents(down.data) == ["new"])
            let main = try await Self.query(server, "ultragroup", ["userId": "ann", "targetId": "ug", "startTime": 0, "endTime": Int64.max / 2])
            #expect(Self.contents(main.data) == ["elsewhere"])
        }
    }

    @Test("bad input is refused with 1002 on every /v3 query: pageSize out of 1-100, an invalid user or target id, a missing field")
    func badInput() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            for kind in ["private", "group", "chatroom", "ultragroup"] {
                let base: [String: any Sendable] = ["userId": "ann", "targetId": "t1", "startTime": 0, "endTime": 1]
                var cases: [[String: any Sendable]] = []
                for size in [0, 101] {
                    var body = base
                    body["pageSize"] = size
                    cases.append(body)
                }
                var badUser = base
                badUser["userId"] = "a b"
                var badTarget = base
                badTarget["targetId"] = String(repeating: "x", count: 65)
                var missing = base
                missing["targetId"] = nil
                cases += [badUser, badTarget, missing]
                for body in cases {
                    let (status, answer) = try await server.api.post("/v3/message/\(kind)/query.json", json: body)
                    #expect(status == 400 && answer["code"] as? Int == 1002, "\(kind) \(body): \(answer)")
                }
            }
        }
    }
}
