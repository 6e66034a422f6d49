import Foundation
import IMCore
import IMLib
import IMProcess
import IMServer
import IMStore
import IMServerTesting
import Testing

/// RongCloud's official Python server SDK (`rongcloud` 2.0.1 from PyPI, installed into
/// .build/python-sdk by scripts/python-sdk.sh, which scripts/test.sh runs) drives a real imserver;
/// every effect is checked on the server side and with IMLib clients.
@Suite("Official Python SDK against imserver")
struct PythonSDKTests {
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("python")

    /// The virtualenv's python: IMSERVER_TEST_PYTHON, or the one scripts/python-sdk.sh installs.
    static func python() throws -> String {
        if let path = ProcessInfo.processInfo.environment["IMSERVER_TEST_PYTHON"] { return path }
        let root = scripts.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = root.appendingPathComponent(".build/python-sdk/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw IMError(.invalidParameter, "the Python SDK is not installed at \(path): run scripts/test.sh (or scripts/python-sdk.sh) first")
        }
        return path
    }

    /// Runs a process to its end without blocking a thread; returns its exit status and stdout.
    static func run(_ arguments: [String], environment: [String: String] = [:], directory: URL? = nil) async throws -> (Int32, String) {
        // The scripts print one JSON line on stdout; unittest's report and tracebacks go to stderr.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("py-\(UUID().uuidString).out")
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("py-\(UUID().uuidString).err")
        defer {
            try? FileManager.default.removeItem(at: output)
            try? FileManager.default.removeItem(at: errors)
        }
        let process = try ChildProcess(try python(), arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                       directory: directory?.path, standardOutput: .file(output.path), standardError: .file(errors.path))
        let status = await process.exit().status
        let text = String(decoding: try Data(contentsOf: output), as: UTF8.self)
        if status != 0 {
            Issue.record("python exited with \(status): \(String(decoding: try Data(contentsOf: errors), as: UTF8.self).suffix(4000))")
        }
        return (status, text)
    }

    /// One SDK call: `Module.method` with keyword arguments; returns the HTTP status and the JSON result.
    static func call(_ server: TestServer, _ method: String, _ arguments: [String: Any]) async throws -> (Int, [String: Any]) {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: arguments), as: UTF8.self)
        let (_, text) = try await run([scripts.appendingPathComponent("rc_call.py").path, server.baseURL,
                                       server.app.appKey, server.app.appSecret, method, json])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "output: \(text)")
        return (object["status"] as? Int ?? 0, object["result"] as? [String: Any] ?? [:])
    }

    @Test("the SDK's calls take effect: its tokens connect, its messages arrive, its groups, blacklists, blocks and words apply")
    func callsTakeEffect() async throws {
        try await withTestServer(try await TestServer.start()) { server in

            let (status, token) = try await Self.call(server, "User.getToken", ["userId": "bob", "name": "Bob & Co+", "portraitUri": "http://x/b.png?a=1"])
            #expect(status == 200 && token["code"] as? Int == 200)
            let bob = server.client()
            let bobInbox = EventRecorder(bob.receivedMessages())
            #expect(try await bob.connect(token: try #require(token["token"] as? String)) == "bob")
            #expect(try await Self.call(server, "User.checkOnline", ["userId": "bob"]).1["status"] as? String == "1")
            let (_, info) = try await server.api.post("/user/info.json", form: ["userId": "bob"])
            #expect(info["userName"] as? String == "Bob & Co+" && info["userPortrait"] as? String == "http://x/b.png?a=1")

            let (published, reply) = try await Self.call(server, "Message.publishPrivate", [
                "fromUserId": "ann", "toUserId": ["bob", "carol"], "objectName": "RC:TxtMsg",
                "content": #"{"content":"hello from python","extra":"x"}"#, "pushContent": "push", "isPersisted": "1", "isCounted": "1",
            ])
            #expect(published == 200, "\(reply)")
            let message = try #require(await bobInbox.wait(for: 1).first?.message)
            #expect(message.senderUserId == "ann" && message.content(as: TextMessage.self)?.content == "hello from python")
            #expect(message.pushContent == "push")

            _ = try await Self.call(server, "Message.PublishSystem", [
                "fromUserId": "notice", "toUserId": ["bob"], "objectName": "RC:TxtMsg", "content": #"{"content":"system"}"#,
            ])
            let system = try #require(await bobInbox.wait(for: 2).last?.message)
            #expect(system.conversationType == .system && system.targetId == "notice")

            #expect(try await Self.call(server, "Group.create", ["userId": ["ann", "bob", "carol"], "groupId": "g1", "groupName": "G1"]).0 == 200)
            #expect(try await server.core.store.groupMembers(appId: server.app.id, groupId: "g1").map(\.userId).sorted() == ["ann", "bob", "carol"])
            _ = try await Self.call(server, "Group.sync", ["userId": "dave", "groupInfo": ["__tuples__": [["g1", "G1"], ["g2", "Group 2"]]]])
            #expect(try await server.core.store.groups(appId: server.app.id, ofUser: "dave").map(\.groupId) == ["g1", "g2"])
            let (_, members) = try await Self.call(server, "Group.queryUser", ["groupId": "g1"])
            #expect((members["users"] as? [[String: Any]])?.count == 4)

            _ = try await Self.call(server, "User.addBlacklist", ["userId": "bob", "blackUserId": "ann"])
            #expect(try await Self.call(server, "User.queryBlacklist", ["userId": "bob"]).1["users"] as? [String] == ["ann"])
            let ann = try await server.connectedClient("ann")
            await #expect { try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "x")) } throws: {
                ($0 as? SendMessageError)?.code == .rejectedByBlacklist
            }

            _ = try await Self.call(server, "Wordfilter.add", ["word": "secret"])
            #expect((try await Self.call(server, "Wordfilter.getList", [:]).1["words"] as? [[String: Any]])?.first?["word"] as? String == "secret")
            let carol = try await server.connectedClient("carol")
            let carolInbox = EventRecorder(carol.receivedMessages())
            _ = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "the secret plan"))
            _ = try await ann.sendMessage(.private, targetId: "carol", content: TextMessage(content: "harmless"))
            #expect(await carolInbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.content == "harmless", "the word blocked the first")
            await carol.disconnect()

            let statuses = EventRecorder(bob.connectionStatusUpdates())
            #expect(try await Self.call(server, "User.block", ["userId": "bob", "minute": "5"]).0 == 200)
            #expect(await statuses.first { $0 == .disconnectException } != nil, "bob was disconnected by the block")
            let (_, blocked) = try await Self.call(server, "User.queryBlock", [:])
            #expect((blocked["users"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["bob"])

            let (badStatus, bad) = try await Self.call(server, "User.getToken", ["userId": "has space", "name": "x", "portraitUri": ""])
            #expect(badStatus == 400 && bad["code"] as? Int == 1002)
            await ann.disconnect()
        }
    }

    /// Tests of the bundled module that fail against imserver, and why.
    static let expectedFailures: [String: String] = [
        "test_getImageCode": "SMS is out of scope",
        "test_sendCode": "SMS is out of scope",
        "test_verifyCode": "SMS is out of scope",
        "test_publishDiscussion": "discussions were retired by RongCloud in favour of groups",
        "test_publishChatroom": "it publishes to chatrooms nobody created (ChatroomId1-3): imserver answers 23410 and sends nothing",
    ]

    @Test("the SDK's bundled test module passes, except SMS, discussions and a publish to chatrooms that do not exist")
    func bundledTestModule() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            // The module reads jsonsource/*.json from its working directory; the package does not ship them.
            let directory = server.dataDir.appendingPathComponent("python-cwd")
            let sources = directory.appendingPathComponent("jsonsource")
            try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
            let template: [String: Any] = [
                "fromUserId": "userId1", "toUserId": ["userId2", "userId3"], "objectName": "RC:TxtMsg",
                "values": [["{name}": "Two"], ["{name}": "Three"]], "content": #"{"content":"hello {name}"}"#,
                "pushContent": ["push {name}", "push {name}"], "pushData": ["a", "b"], "verifyBlacklist": 0,
            ]
            try JSONSerialization.data(withJSONObject: template).write(to: sources.appendingPathComponent("TemplateMessage.json"))
            try JSONSerialization.data(withJSONObject: ["userId": "userId1", "tags": ["a", "b"]]).write(to: sources.appendingPathComponent("UserTag.json"))
            // A push that carries a message (a push-only one needs a push service: 1009, SystemConversationTests).
            try JSONSerialization.data(withJSONObject: [
                "platform": ["ios", "android"], "fromuserid": "notice", "audience": ["userid": ["userId2"], "is_to_all": false],
                "message": ["objectName": "RC:TxtMsg", "content": #"{"content":"pushed"}"#], "notification": ["alert": "pushed"],
            ]).write(to: sources.appendingPathComponent("PushMessage.json"))

            let (_, output) = try await Self.run([Self.scripts.appendingPathComponent("run_bundled_tests.py").path, server.baseURL],
                                                 environment: ["APP_KEY": server.app.appKey, "APP_SECRET": server.app.appSecret],
                                                 directory: directory)
            let line = try #require(output.split(separator: "\n").last, "no result line")
            let result = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let passed = Set(result["passed"] as? [String] ?? [])
            let failed = result["failed"] as? [String: String] ?? [:]
            #expect(passed.count + failed.count == 47, "the module defines 47 distinct tests")
            #expect(Set(failed.keys) == Set(Self.expectedFailures.keys),
                    "unexpected: \(failed.filter { Self.expectedFailures[$0.key] == nil }); now passing: \(Self.expectedFailures.keys.filter(passed.contains))")
            for name in ["test_getToken", "test_publishPrivate", "test_publishTemplate", "test_PublishSystem", "test_publishSystemTemplate",
                         "test_broadcast", "test_broadcastPush", "test_setUserPushTag", "test_sync", "test_dismiss", "test_block", "test_addBlacklist"] {
                #expect(passed.contains(name), "\(name)")
            }
            // And the calls took effect on the server.
            let (_, templated) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "userId1", "targetId": "userId2", "startTime": 0, "endTime": Int64.max / 2, "pageSize": 100])
            #expect((templated["data"] as? [[String: Any]])?.contains { ($0["content"] as? String)?.contains("hello Two") == true } == true)
            #expect(try await server.core.store.userTags(appId: server.app.id, userIds: ["userId1"])["userId1"] == ["a", "b"])
            let pushed = try await server.core.store.history(appId: server.app.id, conversationKey: "s|notice|userId2", recordTime: 0,
                                                              count: 10, ascending: false, viewer: nil)
            #expect(pushed.messages.map(\.objectName) == ["RC:TxtMsg"], "broadcastPush stored its system message")
            #expect(try await server.core.store.groups(appId: server.app.id, ofUser: "userId1").map(\.groupId) == ["groupId1", "groupId2", "groupId3"])
            // Its chatroom tests run in name order: create, destroy, then the legacy join recreates chatroomId1.
            let rooms = server.core.chatrooms
            #expect(rooms.roomIds(appId: server.app.id) == ["chatroomId1", "chatroomId3"])
            #expect(rooms.areMembers(appId: server.app.id, roomId: "chatroomId1", userIds: ["userId2", "userid3", "userId4", "userId1"]) == [true, true, true, false])
            #expect(try await rooms.settings(appId: server.app.id, kind: .lowPriority).map(\.item) == ["RC:ImgMsg", "RC:ImgTextMsg", "RC:VcMsg"])
            #expect(try await rooms.settings(appId: server.app.id, kind: .userWhitelist, roomId: "chatroomId").count == 5)
            #expect(try await rooms.settings(appId: server.app.id, kind: .block, roomId: "chatroomId1").isEmpty, "the block was rolled back")
        }
    }
}
