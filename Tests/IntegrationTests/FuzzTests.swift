import Foundation
import IMCore
@testable import IMLib
@testable import IMServer
import IMStore
import IMWire
import PropertyBased
import SwiftProtobuf
import IMServerTesting
import Testing

/// Values of the kinds that broke servers before: boundary numbers, ids holding separators,
/// control characters, huge text and single huge grapheme clusters, and the ids of objects that
/// exist (so requests reach deep into the services). Drawn from a seed, so a failing case is
/// reproduced from the seed the property check prints.
struct FuzzValues: RandomNumberGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { generator.next() }

    /// Ids, uids and names the fixture created.
    var known: [String] = []

    mutating func pick<T>(_ values: [T]) -> T { values[Int(next() % UInt64(values.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { next() % 100 < percent }

    mutating func string() -> String {
        switch next() % 14 {
        case 0: return ""
        case 1, 2: return known.isEmpty ? "alice" : pick(known)
        case 3: return pick(["a|b", "|", "||", "a|", "%7C", "%25", "a%|b", "*", "p|alice|bob", "g|g1", "RCDefault", "RC:TxtMsg"])
        case 4: return pick(["\u{0}", "\n", "\t", "\r\n", "a\u{0}b", "\u{7F}", "\u{FFFF}", "\u{10FFFF}", "\u{202E}"])
        case 5: return pick(["18446744073709551615", "9223372036854775808", "-9223372036854775808", "-1", "0", "1e300", "NaN", "+1"])
        case 6: return String(repeating: pick(["a", "推", "😀", "|"]), count: Int(next() % 5000))
        case 7: return "a" + String(repeating: "\u{0301}", count: Int(next() % 100_000))
        case 8: return String(repeating: "x", count: pick([64, 65, 128, 129, 1024, 1025, 4096, 4097, 131_072, 131_073]))
        case 9: return pick([#"{"content":"hi"}"#, #"{"content":"@all","mentionedInfo":{"type":1}}"#, "[]", "{", "null", #"{"a":{"b":[1,2,{}]}}"#])
        case 10: return String((0..<Int(next() % 40)).map { _ in Character(Unicode.Scalar(UInt8(truncatingIfNeeded: next() % 95 + 32))) })
        case 11: return pick(["alice", "bob", "carol", "g1", "ug", "room", "tag1", "c1"])
        case 12: return String(decoding: (0..<Int(next() % 64)).map { _ in UInt8(truncatingIfNeeded: next()) }, as: UTF8.self)
        default: return "id" + String(next() % 1000)
        }
    }

    mutating func strings() -> [String] { (0..<Int(pick([0, 1, 2, 3, 20, 101, 1001] as [UInt64]))).map { _ in string() } }

    mutating func int64() -> Int64 {
        pick([0, 1, -1, Int64.max, Int64.min, Int64.max / 2, 1_000_000_000_000, Int64(next() % 2_000_000_000_000), Int64(bitPattern: next())])
    }

    mutating func int32() -> Int32 { pick([0, 1, -1, 2, 3, 4, 5, 10, 50, 51, 100, 101, 200, 201, 1000, Int32.max, Int32.min, Int32(truncatingIfNeeded: next())]) }

    mutating func uint64() -> UInt64 { pick([0, 1, UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max, next() % 10_000, next()]) }

    mutating func bool() -> Bool { next() & 1 == 1 }

    mutating func content() -> Data {
        chance(70) ? Data(#"{"content":"\#(chance(10) ? string().replacingOccurrences(of: "\"", with: "") : "fuzz")"}"#.utf8) : Data(string().utf8)
    }

    mutating func dictionary() -> [String: String] {
        Dictionary((0..<Int(pick([0, 1, 2, 21, 301] as [UInt64]))).map { _ in (string(), string()) }) { first, _ in first }
    }

    mutating func conversation() -> Im_ConversationRef {
        var ref = Im_ConversationRef()
        ref.conversationType = pick([0, 1, 3, 4, 6, 7, 10, -1, 99])
        ref.targetID = string()
        ref.channelID = chance(30) ? string() : ""
        return ref
    }

    /// A request for one of the ops a client may send, every field drawn at random.
    mutating func request() -> (Im_Op, any SwiftProtobuf.Message) {
        switch next() % 29 {
        case 0: return (.ping, Im_Pong())
        case 1, 2:
            var r = Im_SendMessageRequest()
            r.conversationType = pick([1, 3, 4, 6, 10, 0, 2, 99])
            r.targetID = string(); r.objectName = chance(60) ? "RC:TxtMsg" : string(); r.content = content()
            r.clientMessageID = chance(50) ? UUID().uuidString : string(); r.flags = UInt32(truncatingIfNeeded: next() % 20)
            r.pushContent = chance(20) ? string() : ""; r.pushData = chance(20) ? string() : ""
            r.disableNotification = bool(); r.canIncludeExpansion = bool(); r.expansion = chance(30) ? dictionary() : [:]
            r.channelID = chance(30) ? string() : ""; r.directedUserIds = chance(20) ? strings() : []
            return (.sendMessage, r)
        case 3: var r = Im_SyncRequest(); r.since = uint64(); r.limit = int32(); return (.sync, r)
        case 4:
            var r = Im_HistoryRequest()
            r.conversationType = pick([1, 3, 6, 10, 4, 0]); r.targetID = string(); r.recordTime = int64(); r.count = int32()
            r.order = int32(); r.channelID = chance(30) ? string() : ""
            return (.history, r)
        case 5: var r = Im_UltraGroupSummaryRequest(); r.modifiedSince = int64(); return (.ultraGroupSummary, r)
        case 6: var r = Im_UltraGroupReadRequest(); r.groupID = string(); r.channelID = string(); return (.ultraGroupRead, r)
        case 7: var r = Im_ModifyMessageRequest(); r.messageUid = string(); r.content = content(); return (.modifyMessage, r)
        case 8:
            var r = Im_ReadReceiptRequest(); r.conversationType = pick([3, 1, 0]); r.targetID = string(); r.messageUid = string()
            return (.readReceiptRequest, r)
        case 9:
            var r = Im_ReadReceiptResponse(); r.conversationType = pick([3, 1, 0]); r.targetID = string(); r.messageUids = strings()
            return (.readReceiptResponse, r)
        case 10: var r = Im_ReadUsersRequest(); r.messageUid = string(); r.count = int32(); r.pageToken = string(); return (.readReceiptUsers, r)
        case 11: var r = Im_ReadReceiptSyncRequest(); r.since = uint64(); r.limit = int32(); return (.readReceiptSync, r)
        case 12:
            var r = Im_RecallRequest(); r.conversationType = pick([1, 3, 4, 10, 6, 0]); r.targetID = string(); r.messageUid = string()
            r.sentTime = int64(); r.pushContent = chance(20) ? string() : ""; r.channelID = chance(30) ? string() : ""
            return (.recallMessage, r)
        case 13:
            var r = Im_DeleteRemoteMessagesRequest(); r.conversationType = pick([1, 3, 6, 0]); r.targetID = string()
            r.channelID = chance(20) ? string() : ""; r.messageUids = strings()
            return (.deleteRemoteMessages, r)
        case 14:
            var r = Im_ClearRemoteHistoryRequest(); r.conversationType = pick([1, 3, 6, 10, 0]); r.targetID = string()
            r.channelID = chance(20) ? string() : ""; r.recordTime = int64()
            return (.clearRemoteHistory, r)
        case 15:
            var r = Im_ExpansionUpdate(); r.messageUid = string(); r.set = dictionary(); r.removeKeys = chance(40) ? strings() : []
            return (.updateExpansion, r)
        case 16: var r = Im_ConversationStateSyncRequest(); r.since = uint64(); r.limit = int32(); return (.conversationStateSync, r)
        case 17:
            var r = Im_SetConversationNotificationRequest(); r.conversation = conversation(); r.level = int32()
            return (.setConversationNotification, r)
        case 18: var r = Im_SetConversationTopRequest(); r.conversation = conversation(); r.isTop = bool(); return (.setConversationTop, r)
        case 19:
            var r = Im_SetQuietHoursRequest(); r.startTime = chance(50) ? pick(["22:00:00", "00:00:00", "23:59:59", "24:00:00"]) : string()
            r.spanMins = int32(); r.level = int32(); r.timeZone = chance(50) ? pick(["Asia/Shanghai", "UTC", ""]) : string()
            return (.setQuietHours, r)
        case 20: return (.removeQuietHours, Im_RemoveQuietHoursRequest())
        case 21:
            var r = Im_ConversationTagRequest(); r.action = Im_ConversationTagRequest.Action(rawValue: Int(next() % 4)) ?? .add
            r.tagID = string(); r.name = string()
            return (.editConversationTag, r)
        case 22:
            var r = Im_TagConversationsRequest(); r.action = Im_TagConversationsRequest.Action(rawValue: Int(next() % 5)) ?? .add
            r.tagIds = strings(); r.conversations = (0..<Int(pick([0, 1, 2, 1001] as [UInt64]))).map { _ in conversation() }; r.isTop = bool()
            return (.tagConversations, r)
        case 23:
            var r = Im_JoinChatroomRequest(); r.roomID = string(); r.messageCount = int32(); r.mustExist = bool(); r.rejoin = bool()
            r.since = int64()
            return (.joinChatroom, r)
        case 24: var r = Im_QuitChatroomRequest(); r.roomID = string(); return (.quitChatroom, r)
        case 25: var r = Im_ChatroomInfoRequest(); r.roomID = string(); r.count = int32(); r.order = int32(); return (.chatroomInfo, r)
        case 26:
            var r = Im_SetChatroomEntryRequest(); r.roomID = string(); r.key = string(); r.value = string()
            r.sendNotification = bool(); r.autoDelete = bool(); r.notificationExtra = chance(30) ? string() : ""; r.force = bool()
            return (.setChatroomEntry, r)
        case 27:
            var r = Im_RemoveChatroomEntryRequest(); r.roomID = string(); r.key = string(); r.sendNotification = bool()
            r.notificationExtra = chance(30) ? string() : ""; r.force = bool()
            return (.removeChatroomEntry, r)
        default:
            var r = Im_ChatroomHistoryRequest(); r.roomID = string(); r.recordTime = int64(); r.count = int32(); r.ascending = bool()
            return (.chatroomHistory, r)
        }
    }
}

/// The fuzz harness: random and boundary input through every request handler of the gateway,
/// every Server API endpoint, the frame decoder, the Server API's form and JSON readers and the
/// conversation-key functions. The suite runs a short pass (IMSERVER_FUZZ_ITERATIONS, default 150
/// per property); docs/FUZZING.md describes a long run.
@Suite("Fuzz: random and boundary input never crashes the server or gets an undocumented answer")
struct FuzzTests {
    static let iterations = Int(ProcessInfo.processInfo.environment["IMSERVER_FUZZ_ITERATIONS"] ?? "") ?? 150

    /// A server for the fuzz runs: no send or call limits in the way.
    static func fixtureServer() async throws -> TestServer {
        try await TestServer.start { config in
            config.session.clientSendsPerSecond = 1_000_000
            config.chatrooms.joinsPerSecond = 1000
            config.serverAPI.callsPerSecond = 0
            config.chatrooms.historyEnabled = true
        }
    }

    /// Something in the server: users, a group and its messages, an ultra group, a chatroom; returns
    /// alice's raw connection and the ids and uids made.
    static func fixture(_ server: TestServer) async throws -> (WireConnection, [String]) {
        try await GroupChatTests.createGroup(server, "g1", ["alice", "bob", "carol"])
        _ = try await server.api.post("/ultragroup/create.json", form: ["userId": "alice", "groupId": "ug", "groupName": "ug"])
        _ = try await server.api.post("/ultragroup/channel/create.json", form: ["groupId": "ug", "busChannel": "c1"])
        _ = try await server.api.post("/chatroom/create.json", rawForm: "chatroom[room]=room")
        let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
        var known = ["alice", "bob", "carol", "g1", "ug", "c1", "room"]
        for (type, target) in [(Int32(1), "bob"), (3, "g1"), (10, "ug")] {
            var request = MessageRulesTests.text(to: target, "seed")
            request.conversationType = type
            request.canIncludeExpansion = true
            known.append(try await MessageRulesTests.send(alice, request).messageUid)
        }
        return (alice, known)
    }

    @Test("random requests of every op get an answer with a documented code, never 31003, and the server serves on")
    func gatewayRequests() async throws {
        try await withTestServer(try await Self.fixtureServer()) { server in
            let (alice, known) = try await Self.fixture(server)
            await propertyCheck(count: Self.iterations, input: Gen.uint64()) { seed in
                var values = FuzzValues(seed: seed)
                values.known = known
                let (op, request) = values.request()
                guard let bytes = try? request.serializedData(), bytes.count < FrameCodec.maxFrameBytes - 1024 else { return }
                do {
                    _ = try await alice.request(op, request, timeout: .seconds(20))
                } catch let error as IMError {
                    #expect(error.code != .serverUnavailable, "\(op) answered 31003 (an unexpected failure): \(error.message)")
                    #expect(error.code != .responseTimeout && error.code != .socketDisconnected, "\(op): no answer: \(error)")
                }
            }
            try await NumericInputTests.stillServing(server, alice, to: "dave")
        }
    }

    @Test("garbage frames and garbage payloads are ignored or refused, and the connection keeps working")
    func garbageFrames() async throws {
        try await withTestServer(try await Self.fixtureServer()) { server in
            let (alice, _) = try await Self.fixture(server)
            await propertyCheck(count: Self.iterations, input: Gen.uint64()) { seed in
                var values = FuzzValues(seed: seed)
                let garbage = (0..<Int(values.next() % 2048)).map { _ in UInt8(truncatingIfNeeded: values.next()) }
                _ = try? FrameCodec.decode(garbage)
                // A payload of random bytes for a random op.
                let op = Im_Op(rawValue: Int(values.next() % 64)) ?? .ping
                guard op != .disconnect, op != .connect else { return }
                do {
                    _ = try await alice.request(op, AnyRequest(bytes: Data(garbage)), timeout: .seconds(20))
                } catch let error as IMError {
                    #expect(error.code != .serverUnavailable && error.code != .responseTimeout && error.code != .socketDisconnected,
                            "\(op) with \(garbage.count) random bytes: \(error)")
                }
            }
            try await NumericInputTests.stillServing(server, alice, to: "dave")
        }
    }

    @Test("random values for every Server API endpoint's parameters get the JSON envelope with a documented status, never 500")
    func serverAPI() async throws {
        try await withTestServer(try await Self.fixtureServer()) { server in
            let (_, known) = try await Self.fixture(server)
            let endpoints = ServerAPI(core: server.core).endpoints
            let documented: Set<Int> = Set([200] + OpenAPIDocument.commonFailures.keys) .union([430])
            await propertyCheck(count: Self.iterations, input: Gen.uint64()) { seed in
                var values = FuzzValues(seed: seed)
                values.known = known
                let endpoint = values.pick(endpoints)
                guard endpoint.path != "/message/broadcast.json" else { return }  // 2 per hour: one call would end the run's broadcasts
                var fields: [String: Any] = [:]
                for param in endpoint.params where param.required || values.chance(60) {
                    switch param.kind {
                    case .string: fields[param.name] = values.string()
                    case .integer: fields[param.name] = values.chance(80) ? String(values.int64()) : values.string()
                    case .boolean: fields[param.name] = values.pick(["true", "false", "1", "0", "True", values.string()])
                    case .list: fields[param.name] = values.strings()
                    case .json: fields[param.name] = values.pick([values.string(), #"{"content":"x"}"#, "[1,2]", #"{"k":"v"}"#])
                    }
                }
                let (status, body): (Int, [String: Any])
                do {
                    if endpoint.body == .json {
                        (status, body) = try await server.api.post(endpoint.path, json: fields)
                    } else {
                        let form = fields.flatMap { key, value -> [String] in
                            let list = value as? [String] ?? [value as? String ?? ""]
                            return list.map { "\(key)=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
                        }.joined(separator: "&")
                        (status, body) = try await server.api.post(endpoint.path, rawForm: form)
                    }
                } catch {
                    Issue.record("\(endpoint.path): no answer: \(error)")
                    return
                }
                #expect(documented.contains(status), "\(endpoint.path) answered HTTP \(status): \(body)")
                #expect(status != 500 && body["code"] as? Int != 1000, "\(endpoint.path) failed inside: \(body)")
                #expect(body["code"] is Int, "\(endpoint.path): not the JSON envelope")
            }
            #expect(try await server.api.post("/user/getToken.json", form: ["userId": "after"]).1["code"] as? Int == 200)
        }
    }

    @Test("the Server API's form and JSON readers take any body")
    func parameterReaders() async {
        await propertyCheck(count: Self.iterations * 10, input: Gen.uint64()) { seed in
            var values = FuzzValues(seed: seed)
            let parts = (0..<Int(values.next() % 12)).map { _ in
                values.pick(["&", "=", "%", "%2", "%zz", "+", "[", "]", "a[b]=c", ",", "%00", "%7C", values.string()])
            }
            let form = APIParameters(form: parts.joined())
            for key in form.values.keys.prefix(5) {
                _ = try? form.int(key)
                _ = try? form.bool(key)
                _ = form.list(key)
                _ = form.bracketed(key)
            }
            let object: [String: Any] = [values.string(): values.pick([values.string(), [values.string(), 1] as [Any], NSNull(), 1e300, ["a": [1]]] as [Any])]
            if JSONSerialization.isValidJSONObject(object), let data = try? JSONSerialization.data(withJSONObject: object) {
                let json = APIParameters(json: object, body: data)
                for key in json.values.keys {
                    _ = try? json.int(key)
                    _ = json.list(key)
                }
            }
        }
    }

    @Test("conversation keys are equal exactly when their conversations are")
    func keysAreInjective() async {
        await propertyCheck(count: Self.iterations * 100, input: Gen.uint64()) { seed in
            var values = FuzzValues(seed: seed)
            // Short ids over a small alphabet, so that different tuples often join to the same text.
            func id() -> String {
                String((0..<Int(values.next() % 5)).map { _ in values.pick(["a", "|", "%", "7", "C"] as [Character]) })
            }
            let (a, b, c, d) = (id(), id(), id(), id())
            #expect((privateConversationKey(a, b) == privateConversationKey(c, d)) == (Set([a, b]) == Set([c, d]) && (a == b) == (c == d)),
                    "private \(a)&\(b) vs \(c)&\(d)")
            #expect((systemConversationKey(sender: a, recipient: b) == systemConversationKey(sender: c, recipient: d)) == (a == c && b == d))
            #expect((ultraGroupConversationKey(a, b) == ultraGroupConversationKey(c, d)) == (a == c && b == d))
            #expect((groupConversationKey(a) == groupConversationKey(c)) == (a == c))
            #expect(privateConversationKey(a, b) != groupConversationKey(c) && privateConversationKey(a, b) != systemConversationKey(sender: c, recipient: d))
        }
    }
}

/// Raw bytes sent as a request's payload: they are written as they are (as the "unknown fields"
/// of an empty message), whether or not they are valid protobuf.
struct AnyRequest: SwiftProtobuf.Message {
    static let protoMessageName = "AnyRequest"
    var unknownFields = SwiftProtobuf.UnknownStorage()
    var bytes = Data()

    init() {}
    init(bytes: Data) { self.bytes = bytes }

    mutating func decodeMessage<D: SwiftProtobuf.Decoder>(decoder: inout D) throws {}
    func traverse<V: SwiftProtobuf.Visitor>(visitor: inout V) throws {
        if !bytes.isEmpty { try visitor.visitUnknown(bytes: bytes) }
    }
    func isEqualTo(message: any SwiftProtobuf.Message) -> Bool { (message as? AnyRequest)?.bytes == bytes }
}
