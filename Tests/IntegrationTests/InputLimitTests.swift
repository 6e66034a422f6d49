import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing

/// Every field from outside has a limit, in bytes or in characters as RongCloud's SDKs count them
/// (UTF-16 code units), never in Swift `Character`s: "a" followed by combining marks is one
/// grapheme cluster of any size. A refused request stores nothing.
@Suite("Input limits in bytes and characters")
struct InputLimitTests {
    /// One grapheme cluster of about `bytes` UTF-8 bytes: "a" and combining acute accents (2 bytes each).
    static func cluster(bytes: Int) -> String {
        "a" + String(repeating: "\u{0301}", count: bytes / 2)
    }

    static func code(_ body: () async throws -> Void) async -> Int? { await NumericInputTests.code(body) }

    @Test("a device id that is not printable ASCII, or longer than 128 bytes, is refused at CONNECT (33003) by the server, and by IMLib before it reaches for a server; no session")
    func deviceIds() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            // "é" as e + combining acute (NFD): canonically equal to the NFC "é", other bytes.
            let refused = ["caf\u{65}\u{301}", "caf\u{e9}", "two words", "tab\tid", "设备", String(repeating: "d", count: 129)]
            for deviceID in refused {
                #expect(await Self.code { _ = try await MessageRulesTests.rawConnection(server, user: "alice", deviceID: deviceID) } == 33003,
                        "server: \(deviceID.debugDescription)")
                // No server at that URL: without IMLib's own check the connect would run into its time limit (34006).
                let client = server.client(serverURLs: ["http://127.0.0.1:1"]) { $0.deviceId = deviceID }
                #expect(await Self.code { try await client.connect(token: try await server.token("alice"), timeLimit: 5) } == 33003,
                        "IMLib: \(deviceID.debugDescription)")
            }
            #expect(server.core.registry.sessionCount == 0, "no refused device got a session")
            #expect(!server.core.registry.isOnline(appId: server.app.id, userId: "alice"))
            // At the limit, and the UUIDs IMLib makes, it works; so does no device id at all.
            _ = try await MessageRulesTests.rawConnection(server, user: "alice", deviceID: String(repeating: "d", count: 128))
            _ = try await MessageRulesTests.rawConnection(server, user: "bob", deviceID: "")
            let client = server.client()
            #expect(try await client.connect(token: try await server.token("carol")) == "carol")
            #expect(server.core.registry.isOnline(appId: server.app.id, userId: "alice"))
        }
    }

    @Test("a client's object name, push content, push data and extensions over their limits get their codes, and nothing is stored")
    func clientFields() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 1000 }) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            #expect(Self.cluster(bytes: 1000).count == 1, "one Character")
            let cases: [(String, (inout Im_SendMessageRequest) -> Void, Int)] = [
                ("object name of one 1 MB cluster", { $0.objectName = Self.cluster(bytes: 1_000_000) }, 33003),
                ("object name of 33 characters", { $0.objectName = String(repeating: "n", count: 33) }, 33003),
                ("push content of 3 MB", { $0.pushContent = String(repeating: "p", count: 3_000_000) }, 33003),
                ("push content of 1,025 bytes", { $0.pushContent = String(repeating: "p", count: 1025) }, 33003),
                ("push content of 342 Chinese characters (1,026 bytes)", { $0.pushContent = String(repeating: "推", count: 342) }, 33003),
                ("push data of 4,097 bytes", { $0.pushData = String(repeating: "d", count: 4097) }, 33003),
                ("an extension value of one 200 KB cluster", {
                    $0.canIncludeExpansion = true
                    $0.expansion = ["k": Self.cluster(bytes: 200_000)]
                }, 34010),
                ("an extension value of 4,097 characters", {
                    $0.canIncludeExpansion = true
                    $0.expansion = ["k": String(repeating: "v", count: 4097)]
                }, 34010),
            ]
            for (name, change, expected) in cases {
                var request = MessageRulesTests.text(to: "bob", name)
                change(&request)
                #expect(await Self.code { _ = try await MessageRulesTests.send(alice, request) } == expected, "\(name)")
            }
            #expect(try await MessageRulesTests.historyCount(server, "alice", "bob") == 0, "nothing was stored")
            // At the limits, it works.
            var atLimits = MessageRulesTests.text(to: "bob", "at the limits")
            atLimits.objectName = "app:" + String(repeating: "n", count: 28)
            atLimits.pushContent = String(repeating: "p", count: 1024)
            atLimits.pushData = String(repeating: "d", count: 4096)
            atLimits.canIncludeExpansion = true
            atLimits.expansion = ["k": String(repeating: "推", count: 4096)]
            _ = try await MessageRulesTests.send(alice, atLimits)
            #expect(try await MessageRulesTests.historyCount(server, "alice", "bob") == 1)
        }
    }

    @Test("a chatroom attribute value or notice extra of one huge cluster gets 23412, and the room keeps what it had")
    func chatroomAttributes() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            var join = Im_JoinChatroomRequest()
            join.roomID = "room"
            join.messageCount = -1
            _ = try await alice.request(.joinChatroom, join, timeout: .seconds(10))
            for (value, extra) in [(Self.cluster(bytes: 1_000_000), ""), ("ok", Self.cluster(bytes: 100_000)), (String(repeating: "v", count: 4097), "")] {
                var set = Im_SetChatroomEntryRequest()
                set.roomID = "room"
                set.key = "k"
                set.value = value
                set.notificationExtra = extra
                set.sendNotification = !extra.isEmpty
                #expect(await Self.code { _ = try await alice.request(.setChatroomEntry, set, timeout: .seconds(10)) } == 23412)
            }
            let (_, entries) = try await server.api.post("/chatroom/entry/query.json", form: ["chatroomId": "room"])
            #expect((entries["keys"] as? [Any])?.isEmpty == true, "\(entries)")
        }
    }

    @Test("the Server API measures object names, push fields and extensions the same way, and checks every value of a repeated key")
    func serverAPIFields() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            let base = ["fromUserId": "alice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"x"}"#]
            for (change, expected) in [
                (["objectName": Self.cluster(bytes: 100_000)], 1005),
                (["pushContent": String(repeating: "p", count: 1025)], 1005),
                (["pushData": String(repeating: "d", count: 4097)], 1005),
                (["extraContent": #"{"k":"\#(Self.cluster(bytes: 20_000))"}"#], 34010),
                (["extraContent": "{" + (0..<301).map { #""k\#($0)":"v""# }.joined(separator: ",") + "}"], 34010),
            ] {
                let (_, body) = try await api.post("/message/private/publish.json", form: base.merging(change) { _, new in new })
                #expect(body["code"] as? Int == expected, "\(change.keys.first!): \(body)")
            }
            #expect(try await MessageRulesTests.historyCount(server, "alice", "bob") == 0)
            // An empty first value cannot hide a list over its cap (1000 recipients).
            let tooMany = (0...1000).map { "u\($0)" }.joined(separator: ",")
            let (_, bypass) = try await api.post("/message/private/publish.json",
                                                 rawForm: "fromUserId=alice&objectName=RC:TxtMsg&content=%7B%7D&toUserId=&toUserId=\(tooMany)")
            #expect(bypass["code"] as? Int == 1005, "\(bypass)")
            let (_, longSecond) = try await api.post("/user/getToken.json", rawForm: "userId=alice&name=ok&name=\(String(repeating: "n", count: 2000))")
            #expect(longSecond["code"] as? Int == 1005, "every value of a repeated key is checked: \(longSecond)")
        }
    }

    @Test("ids that other endpoints refuse are refused by every endpoint that stores them (1002), and nothing is stored")
    func storedIds() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            for bad in ["bad user", "tab\tuser", "nul\u{0}user", "new\nline", String(repeating: "u", count: 65), "中文"] {
                for (path, form) in [
                    ("/group/user/gag/add.json", ["userId": bad, "groupId": "g1", "minute": "10"]),
                    ("/group/user/gag/add.json", ["userId": "alice", "groupId": bad, "minute": "10"]),
                    ("/group/ban/add.json", ["groupId": bad]),
                    ("/group/user/ban/whitelist/add.json", ["groupId": "g1", "userId": bad]),
                    ("/group/join.json", ["groupId": "g1", "userId": bad]),
                ] {
                    let (_, body) = try await server.api.post(path, form: form)
                    #expect(body["code"] as? Int == 1002, "\(path) with \(bad.debugDescription): \(body)")
                }
            }
            #expect(try await server.core.store.groupMutes(appId: server.app.id, groupId: nil, now: 0).isEmpty)
            #expect(try await server.core.store.groupMutes(appId: server.app.id, groupId: "g1", now: 0).isEmpty)
            #expect(try await server.core.store.mutedGroups(appId: server.app.id, groupIds: []).isEmpty)
        }
    }

    @Test("an error reply never echoes megabytes of the request")
    func boundedErrors() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            var request = MessageRulesTests.text(to: String(repeating: "t", count: 3_000_000), "x")
            request.objectName = String(repeating: "o", count: 500_000)
            let bytes = try FrameCodec.request(id: 7, op: .sendMessage, request)
            #expect(bytes.count < FrameCodec.maxFrameBytes)
            do {
                _ = try await MessageRulesTests.send(alice, request)
                Issue.record("accepted")
            } catch let error as IMError {
                #expect(error.code == .invalidParameter)
                #expect(error.message.utf8.count <= FrameCodec.maxErrorMessageBytes, "\(error.message.utf8.count) bytes")
            }
            let (_, body) = try await server.api.post("/user/info.json", form: ["userId": String(repeating: "x", count: 900_000)])
            #expect((body["errorMessage"] as? String)?.utf8.count ?? 0 <= FrameCodec.maxErrorMessageBytes)
        }
    }

    @Test("a token is accepted only in the form the server issued it: padding, the standard alphabet and length are refused (31004)")
    func canonicalTokens() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let token = try await server.token("alice")
            let parts = token.split(separator: ".").map(String.init)
            let variants = [
                parts[0] + "=." + parts[1], parts[0] + "." + parts[1] + "=", parts[0] + "." + parts[1] + "==",
                token + "A", token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/"),
                token + String(repeating: "A", count: 2000),
            ].filter { $0 != token }
            for variant in variants {
                let client = server.client()
                #expect(await failureCode { try await client.connect(token: variant) } == ErrorCode.tokenIncorrect.rawValue, "\(variant.suffix(12))")
            }
            let client = server.client()
            #expect(try await client.connect(token: token) == "alice")
        }
    }
}
