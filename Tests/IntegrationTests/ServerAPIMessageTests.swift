import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Server API: publishing, recall, message logs, history")
struct ServerAPIMessageTests {
    @Test("private publish reaches online and offline recipients, in RongCloud's response shape")
    func privatePublish() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let annPhone = try await server.connectedClient("ann")
            let annInbox = EventRecorder(annPhone.receivedMessages())
            let content = #"{"content":"hello from the backend","extra":"x"}"#
            // Repeated keys and a comma-joined value in one call; "carol" is offline.
            let body = "fromUserId=ann&toUserId=bob&toUserId=carol,dave&objectName=RC%3ATxtMsg&content=" +
                content.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&pushContent=&count=0&isIncludeSender=1"
            let (status, reply) = try await server.api.post("/message/private/publish.json", rawForm: body)
            #expect(status == 200, "\(reply)")
            let uids = try #require(reply["messageUIDs"] as? [[String: Any]])
            #expect(uids.map { $0["userId"] as? String } == ["bob", "carol", "dave"])
            #expect(uids.allSatisfy { ($0["messageUID"] as? String)?.isEmpty == false })

            let live = try #require(await bobInbox.wait(for: 1).first)
            #expect(live.message.senderUserId == "ann" && live.message.targetId == "ann")
            #expect(live.message.content(as: TextMessage.self)?.content == "hello from the backend")
            #expect(live.message.messageUId == uids[0]["messageUID"] as? String)
            // isIncludeSender=1: the sender's own devices get a copy of each.
            #expect(await annInbox.wait(for: 3).map(\.message.direction) == [.send, .send, .send])

            let carol = server.client()
            let carolInbox = EventRecorder(carol.receivedMessages())
            _ = try await carol.connect(token: try await server.token("carol"))
            let offline = try #require(await carolInbox.wait(for: 1).first)
            #expect(offline.offline && offline.message.senderUserId == "ann")
            #expect(offline.message.messageUId == uids[1]["messageUID"] as? String)
            await bob.disconnect(); await annPhone.disconnect(); await carol.disconnect()
        }
    }

    @Test("publish errors: missing fields, bad JSON content, too large, bad booleans; nothing is sent")
    func publishErrors() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let cases: [([String: String], Int, Int)] = [
                (["toUserId": "bob", "objectName": "RC:TxtMsg", "content": "{}"], 400, 1002),
                (["fromUserId": "ann", "objectName": "RC:TxtMsg", "content": "{}"], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": "not json"], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": "[1,2]"], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"x",}"#], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"n":1e999}"#], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": String(repeating: "X", count: 33), "content": "{}"], 400, 1005),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": "{}", "isPersisted": "maybe"], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bad id", "objectName": "RC:TxtMsg", "content": "{}"], 400, 1002),
                (["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg",
                  "content": #"{"content":""# + String(repeating: "a", count: 128 * 1024) + #""}"#], 400, 1002),
            ]
            for (form, status, code) in cases {
                let (gotStatus, body) = try await server.api.post("/message/private/publish.json", form: form)
                #expect(gotStatus == status && body["code"] as? Int == code, "\(form.keys.sorted()) -> \(body)")
            }
            let (ok, _) = try await server.api.post("/message/private/publish.json",
                                                   form: ["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"valid"}"#])
            #expect(ok == 200)
            #expect(await bobInbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.content == "valid", "the refused calls sent nothing")
            await bob.disconnect()
        }
    }

    @Test("verifyBlacklist skips recipients who blacklisted the sender; template messages are filled per recipient")
    func blacklistAndTemplate() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/user/blacklist/add.json", form: ["userId": "bob", "blackUserId": "ann"])
            let (_, skipped) = try await server.api.post("/message/private/publish.json", rawForm:
                "fromUserId=ann&toUserId=bob&toUserId=carol&objectName=RC:TxtMsg&content=%7B%22content%22%3A%22x%22%7D&verifyBlacklist=1")
            #expect((skipped["messageUIDs"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["carol"])

            let bob = server.client()
            let bobInbox = EventRecorder(bob.receivedMessages())
            let (status, reply) = try await server.api.post("/message/private/publish_template.json", json: [
                "fromUserId": "system", "objectName": "RC:TxtMsg",
                "content": #"{"content":"Hello {name}, your code is {code}"}"#,
                "toUserId": ["bob", "carol"],
                // The SDKs' form: keys with their braces. A bare key works too.
                "values": [["{name}": "Bob", "{code}": "111"], ["name": "Carol", "code": "222"]],
                "pushContent": ["push for {name}", "push for {name}"], "pushData": ["b", "c"],
                "verifyBlacklist": 0, "isPersisted": 1, "isCounted": 1, "contentAvailable": 0,
            ])
            #expect(status == 200, "\(reply)")
            #expect((reply["messageUIDs"] as? [[String: Any]])?.count == 2)
            _ = try await bob.connect(token: try await server.token("bob"))
            let received = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(received.content(as: TextMessage.self)?.content == "Hello Bob, your code is 111")
            #expect(received.pushContent == "push for Bob" && received.pushData == "b")

            let (mismatch, body) = try await server.api.post("/message/private/publish_template.json", json: [
                "fromUserId": "system", "objectName": "RC:TxtMsg", "content": "{}", "toUserId": ["bob", "carol"], "values": [["a": "b"]],
            ])
            #expect(mismatch == 400 && body["code"] as? Int == 1002, "one values object per recipient")
            await bob.disconnect()
        }
    }

    @Test("status messages reach online users only and are never stored")
    func statusMessage() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let (status, _) = try await server.api.post("/statusmessage/private/publish.json",
                                                       form: ["fromUserId": "ann", "toUserId": "bob,carol", "objectName": "App:Typing", "content": "{}"])
            #expect(status == 200)
            #expect(await bobInbox.wait(for: 1).first?.message.objectName == "App:Typing")
            // carol was offline: she gets the stored message sent after it, not the status message.
            _ = try await server.api.post("/message/private/publish.json",
                                          form: ["fromUserId": "ann", "toUserId": "carol", "objectName": "RC:TxtMsg", "content": #"{"content":"stored"}"#])
            let carol = server.client()
            let carolInbox = EventRecorder(carol.receivedMessages())
            _ = try await carol.connect(token: try await server.token("carol"))
            #expect(await carolInbox.wait(for: 1).map(\.message.objectName) == ["RC:TxtMsg"], "the earlier status message was not kept for her")
            await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("system messages and broadcasts arrive in the system conversation named after the sender; broadcasts are limited to 2 per hour")
    func systemAndBroadcast() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let (status, reply) = try await server.api.post("/message/system/publish.json",
                                                           form: ["fromUserId": "notice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"welcome"}"#])
            #expect(status == 200, "\(reply)")
            let system = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(system.conversationType == .system && system.targetId == "notice")

            let (b1, first) = try await server.api.post("/message/broadcast.json",
                                                       form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": #"{"content":"to everyone"}"#, "os": "iOS"])
            #expect(b1 == 200)
            #expect((first["messageUID"] as? String)?.isEmpty == false)
            let broadcast = try #require(await bobInbox.wait(for: 2).last?.message)
            #expect(broadcast.conversationType == .system && broadcast.targetId == "notice")
            #expect(broadcast.content(as: TextMessage.self)?.content == "to everyone")
            // A user who was offline gets it at the next connect.
            let carol = server.client()
            let carolInbox = EventRecorder(carol.receivedMessages())
            let carolRecalls = EventRecorder(carol.recalledMessages())
            _ = try await carol.connect(token: try await server.token("carol"))
            #expect(await carolInbox.wait(for: 1).first?.message.messageUId == first["messageUID"] as? String)
            let conversations = try await carol.getConversationList(types: [.system])
            #expect(conversations.map(\.targetId) == ["notice"])

            // The Go SDK recalls a broadcast by broadcasting RC:RcCmd; it is a recall, not a new broadcast.
            let recallContent = #"{"messageUId":"\#(first["messageUID"] as! String)","conversationType":6,"isAdmin":1,"isDelete":0}"#
            let (recalled, _) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:RcCmd", "content": recallContent])
            #expect(recalled == 200)
            let recalledBroadcast = await carolRecalls.wait(for: 1).first
            #expect(recalledBroadcast?.messageUId == first["messageUID"] as? String)
            #expect(recalledBroadcast?.content(as: RecallNotificationMessage.self)?.isAdmin == true)
            #expect(carolInbox.items.count == 1, "the recall command is not a message of the conversation")
            let (_, log) = try await server.api.post("/v3/message/private/query.json", json: ["userId": "x", "targetId": "y", "startTime": 0, "endTime": 1])
            #expect(log["code"] as? Int == 200)
            let stored = try await server.core.store.message(appId: server.app.id, uid: first["messageUID"] as! String)
            #expect(stored?.objectName == "RC:RcNtf", "the broadcast was replaced by a recall notification")

            let (b2, _) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": "{}"])
            #expect(b2 == 200, "the recall did not use up the broadcast quota")
            let (b3, limited) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": "{}"])
            #expect(b3 == 429 && limited["code"] as? Int == 1008)
            clock.advance(milliseconds: 3_600_000)
            let (b4, _) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": "{}"])
            #expect(b4 == 200, "a new hour")
            clock.advance(milliseconds: 3_600_000)
            let (b5, daily) = try await server.api.post("/message/broadcast.json", form: ["fromUserId": "notice", "objectName": "RC:TxtMsg", "content": "{}"])
            #expect(b5 == 429 && daily["code"] as? Int == 1008, "at most 3 per day")
            await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("private publish is limited per app per minute; the refused call sends nothing")
    func publishRateLimit() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { $0.serverAPI.privatePublishPerMinute = 5 }) { server in
            let form = ["fromUserId": "ann", "toUserId": "a,b,c", "objectName": "RC:TxtMsg", "content": "{}"]
            let (first, _) = try await server.api.post("/message/private/publish.json", form: form)
            #expect(first == 200)
            let (second, body) = try await server.api.post("/message/private/publish.json", form: form)
            #expect(second == 429 && body["code"] as? Int == 1008, "3 + 3 recipients > 5 per minute")
            let (_, history) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "ann", "targetId": "a", "startTime": 0, "endTime": clock.nowMilliseconds() + 1, "pageSize": 10,
            ])
            #expect((history["data"] as? [Any])?.count == 1, "the refused call stored nothing")
            clock.advance(milliseconds: 60_000)
            let (third, _) = try await server.api.post("/message/private/publish.json", form: form)
            #expect(third == 200)
        }
    }

    @Test("recall: the recipient gets RC:RcCmd and replaces its copy, cloud history keeps an RC:RcNtf in place; only the sender may recall")
    func recall() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let bobRecalls = EventRecorder(bob.recalledMessages())
            let sent = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "oops"))
            _ = await bobInbox.wait(for: 1)

            let (denied, deniedBody) = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "bob", "conversationType": "1", "targetId": "ann", "messageUID": sent.messageUId, "sentTime": "\(sent.sentTime)",
            ])
            #expect(denied == 400 && deniedBody["code"] as? Int == 25101, "bob did not send it")
            let (wrongTime, _) = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "ann", "conversationType": "1", "targetId": "bob", "messageUID": sent.messageUId, "sentTime": "\(sent.sentTime + 1)",
            ])
            #expect(wrongTime == 400)

            let (status, body) = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "ann", "conversationType": "1", "targetId": "bob", "messageUID": sent.messageUId,
                "sentTime": "\(sent.sentTime)", "isAdmin": "0", "isDelete": "0", "disablePush": "false",
            ])
            #expect(status == 200, "\(body)")
            let recalled = try #require(await bobRecalls.wait(for: 1).first)
            #expect(recalled.messageUId == sent.messageUId && recalled.objectName == "RC:RcNtf")
            #expect(recalled.content(as: RecallNotificationMessage.self)?.operatorId == "ann")

            let history = try await bob.getRemoteHistoryMessages(.private, targetId: "ann", count: 10)
            #expect(history.messages.map(\.objectName) == ["RC:RcNtf"], "the recall command itself is not in cloud history")
            #expect(history.messages.first?.messageUId == sent.messageUId)

            let (again, againBody) = try await server.api.post("/message/recall.json", form: [
                "fromUserId": "ann", "conversationType": "1", "targetId": "bob", "messageUID": sent.messageUId,
            ])
            #expect(again == 400 && againBody["code"] as? Int == 25101, "a recalled message cannot be recalled twice")
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("hourly message log: a signed URL to one JSON line per message; deleted logs have no URL; bad dates get 1002")
    func messageLog() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)   // 2027-01-15 08:00:00 UTC
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            for text in ["one", "two"] {
                _ = try await server.api.post("/message/private/publish.json",
                                              form: ["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#])
            }
            let (status, body) = try await server.api.post("/message/history.json", form: ["date": "2027011508"])
            #expect(status == 200)
            let url = try #require(body["url"] as? String)
            #expect(url.hasPrefix(server.baseURL + "/message-logs/"))
            let (data, response) = try await URLSession.shared.data(from: URL(string: url)!)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
            #expect(lines.count == 2)
            let first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
            #expect(first?["fromUserId"] as? String == "ann" && first?["targetId"] as? String == "bob")
            #expect((first?["content"] as? [String: Any])?["content"] as? String == "one")

            let (tampered, _) = try await URLSession.shared.data(from: URL(string: url.replacingOccurrences(of: "sig=", with: "sig=0"))!)
            #expect((try JSONSerialization.jsonObject(with: tampered) as? [String: Any])?["code"] as? Int == 404)
            let (otherHour, _) = try await URLSession.shared.data(from: URL(string: url.replacingOccurrences(of: "2027011508.jsonl", with: "2027011509.jsonl"))!)
            #expect((try JSONSerialization.jsonObject(with: otherHour) as? [String: Any])?["code"] as? Int == 404, "the link names one hour")
            clock.advance(milliseconds: 86_401_000)
            let (expired, _) = try await URLSession.shared.data(from: URL(string: url)!)
            #expect((try JSONSerialization.jsonObject(with: expired) as? [String: Any])?["code"] as? Int == 404, "links expire after a day")

            let (_, empty) = try await server.api.post("/message/history.json", form: ["date": "2027011509"])
            #expect(empty["url"] as? String == "")
            let (deleted, _) = try await server.api.post("/message/history/delete.json", form: ["date": "2027011508"])
            #expect(deleted == 200)
            let (_, gone) = try await server.api.post("/message/history.json", form: ["date": "2027011508"])
            #expect(gone["url"] as? String == "")
            for date in ["2027", "2027011524", "20271315aa", "x", "2027023108", "+202701150"] {
                let (bad, badBody) = try await server.api.post("/message/history.json", form: ["date": date])
                #expect(bad == 400 && badBody["code"] as? Int == 1002, "date \(date)")
            }
        }
    }

    @Test("v3 private history query: ascending and descending ranges, includeStart, pageSize")
    func historyQuery() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            var times: [Int64] = []
            for index in 0..<5 {
                clock.advance(milliseconds: 1000)
                times.append(clock.nowMilliseconds())
                _ = try await server.api.post("/message/private/publish.json",
                                              form: ["fromUserId": index % 2 == 0 ? "ann" : "bob", "toUserId": index % 2 == 0 ? "bob" : "ann",
                                                     "objectName": "RC:TxtMsg", "content": #"{"content":"m\#(index)"}"#])
            }
            // Go sends every value as a string; MCP sends numbers.
            let (status, ascending) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "ann", "targetId": "bob", "startTime": "\(times[1])", "endTime": "\(times[4])", "pageSize": "2", "includeStart": "true",
            ])
            #expect(status == 200)
            let up = try #require(ascending["data"] as? [[String: Any]])
            #expect(up.map { $0["msgTime"] as? Int64 } == [times[1], times[2]])
            #expect(up.first?["fromUserId"] as? String == "bob" && up.first?["objectName"] as? String == "RC:TxtMsg")
            #expect(up.first?["expansion"] as? Bool == false)
            // MCP's default: endTime is 24 hours before startTime.
            let (_, descending) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "bob", "targetId": "ann", "startTime": times[3], "endTime": times[3] - 86_400_000, "pageSize": 10, "includeStart": false,
            ])
            #expect((descending["data"] as? [[String: Any]])?.map { $0["msgTime"] as? Int64 } == [times[2], times[1], times[0]])
            let (bad, badBody) = try await server.api.post("/v3/message/private/query.json", json: ["userId": "ann", "targetId": "bob", "startTime": 0, "endTime": 1, "pageSize": 101])
            #expect(bad == 400 && badBody["code"] as? Int == 1002)
        }
    }

    @Test("sensitive words: a blocking word stops delivery, a replaced word is rewritten, for client and Server API sends")
    func sensitiveWords() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "forbidden"])
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "darn", "replaceWord": "***"])
            let (_, list) = try await server.api.post("/sensitiveword/list.json", form: ["type": "2"])
            let words = try #require(list["words"] as? [[String: Any]])
            #expect(Set(words.compactMap { $0["word"] as? String }) == ["forbidden", "darn"])
            #expect(words.first { $0["word"] as? String == "darn" }?["type"] as? String == "0")

            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            let blocked = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "this is Forbidden talk"))
            #expect(blocked.sentStatus == .sent, "the sender is not told")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "oh darn it"))
            let first = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(first.content(as: TextMessage.self)?.content == "oh *** it", "the blocked message never arrived; the other was rewritten")
            _ = try await server.api.post("/message/private/publish.json",
                                          form: ["fromUserId": "ann", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"darn api"}"#])
            #expect(await bobInbox.wait(for: 2).last?.message.content(as: TextMessage.self)?.content == "*** api")

            _ = try await server.api.post("/sensitiveword/batch/delete.json", rawForm: "words=forbidden&words=darn")
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "forbidden no more"))
            #expect(await bobInbox.wait(for: 3).last?.message.content(as: TextMessage.self)?.content == "forbidden no more")
            let (long, body) = try await server.api.post("/sensitiveword/add.json", form: ["word": String(repeating: "w", count: 33)])
            #expect(long == 400 && body["code"] as? Int == 1005)
            await ann.disconnect(); await bob.disconnect()
        }
    }
}
