import Crypto
import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Numbers a client or an app server sends reach no trapping conversion or overflowing arithmetic:
/// out-of-range values get 33003 (client) or 1002 (Server API), and the server goes on serving.
/// Every test here stopped the whole process (a Swift trap) before these checks.
@Suite("Numbers from outside never stop the server")
struct NumericInputTests {
    /// The RongCloud code a raw request failed with (nil when it succeeded).
    static func code(_ body: () async throws -> Void) async -> Int? {
        do {
            try await body()
            return nil
        } catch let error as IMError {
            return error.code.rawValue
        } catch {
            return -1
        }
    }

    /// The server still works: a message from `from` reaches `to`, and the sender's own sync works.
    static func stillServing(_ server: TestServer, _ connection: WireConnection, to user: String) async throws {
        let bob = try await server.connectedClient(user)
        let inbox = EventRecorder(bob.receivedMessages())
        _ = try await MessageRulesTests.send(connection, MessageRulesTests.text(to: user, "still here"))
        #expect(await inbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.content == "still here")
        var sync = Im_SyncRequest()
        sync.since = 0
        _ = try await connection.request(.sync, sync, timeout: .seconds(10))
        await bob.disconnect()
    }

    @Test("SYNC, READ_RECEIPT_SYNC and CONVERSATION_STATE_SYNC with a watermark past Int64.max get 33003, and the server serves on")
    func watermarks() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            for since in [UInt64(Int64.max) + 1, UInt64.max - 1, UInt64.max] {
                var sync = Im_SyncRequest()
                sync.since = since
                #expect(await Self.code { _ = try await alice.request(.sync, sync, timeout: .seconds(10)) } == 33003, "SYNC since \(since)")
                var receipts = Im_ReadReceiptSyncRequest()
                receipts.since = since
                #expect(await Self.code { _ = try await alice.request(.readReceiptSync, receipts, timeout: .seconds(10)) } == 33003,
                        "READ_RECEIPT_SYNC since \(since)")
                var state = Im_ConversationStateSyncRequest()
                state.since = since
                #expect(await Self.code { _ = try await alice.request(.conversationStateSync, state, timeout: .seconds(10)) } == 33003,
                        "CONVERSATION_STATE_SYNC since \(since)")
            }
            // The largest watermark a store can hold still works (nothing newer: an empty last page).
            var sync = Im_SyncRequest()
            sync.since = UInt64(Int64.max)
            let page = try await alice.request(.sync, sync, timeout: .seconds(10)).body(Im_SyncReply.self)
            #expect(page.messages.isEmpty && !page.morePackages)
            try await Self.stillServing(server, alice, to: "bob")
        }
    }

    @Test("READ_RECEIPT_USERS with a page token past Int64.max, negative or not a number gets 33003 on one's own group message")
    func readUsersPageToken() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["alice", "bob"])
            let alice = try await MessageRulesTests.rawConnection(server, user: "alice")
            var send = MessageRulesTests.text(to: "g1", "read me")
            send.conversationType = 3
            let sent = try await MessageRulesTests.send(alice, send)
            for token in ["18446744073709551615", "9223372036854775808", "-1", "12abc", "99999999999999999999999"] {
                var request = Im_ReadUsersRequest()
                request.messageUid = sent.messageUid
                request.pageToken = token
                request.count = 10
                #expect(await Self.code { _ = try await alice.request(.readReceiptUsers, request, timeout: .seconds(10)) } == 33003, "token \(token)")
            }
            var first = Im_ReadUsersRequest()
            first.messageUid = sent.messageUid
            first.count = 10
            let reply = try await alice.request(.readReceiptUsers, first, timeout: .seconds(10)).body(Im_ReadUsersReply.self)
            #expect(reply.users.isEmpty && reply.total == 0)
            try await Self.stillServing(server, alice, to: "carol")
        }
    }

    @Test("Server API numbers at the ends of Int64 get 1002 or a well-defined answer, never a crash")
    func serverAPIExtremes() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            let min = String(Int64.min), max = String(Int64.max)
            #expect(try await api.post("/ultragroup/create.json", form: ["userId": "alice", "groupId": "ug", "groupName": "ug"]).1["code"] as? Int == 200)
            for (start, end) in [(min, max), (min, "0"), ("-1", max), ("0", max)] {
                let (_, body) = try await api.post("/ultragroup/hismsg/query.json",
                                                   form: ["groupId": "ug", "busChannel": "RCDefault", "startTime": start, "endTime": end])
                #expect(body["code"] as? Int == 1002, "hismsg \(start)...\(end): \(body)")
            }
            // A far-future end time (what callers write as Long.MAX_VALUE) still means "until now".
            let (_, query) = try await api.post("/v3/message/private/query.json", json: [
                "userId": "alice", "targetId": "bob", "startTime": 0, "endTime": Int64.max, "pageSize": 10])
            #expect(query["code"] as? Int == 200, "\(query)")
            // Pages past the end are empty, however far.
            let alice = try await server.connectedClient("alice")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "x"), canIncludeExpansion: true)
            for page in [max, "92233720368547759", "2"] {
                let (_, body) = try await api.post("/message/expansion/query.json", form: ["msgUID": sent.messageUId, "pageNo": page])
                #expect(body["code"] as? Int == 200, "pageNo \(page): \(body)")
            }
            #expect(try await api.post("/chatroom/create.json", rawForm: "chatroom[room]=room").1["code"] as? Int == 200)
            for (count, code) in [(min, 23412), (max, 200)] {
                let (_, body) = try await api.post("/chatroom/user/query.json", form: ["chatroomId": "room", "count": count, "order": "1"])
                #expect(body["code"] as? Int == code, "count \(count): \(body)")
            }
            let (_, gag) = try await api.post("/group/user/gag/add.json", form: ["userId": "alice", "groupId": "g1", "minute": max])
            #expect(gag["code"] as? Int == 1002)
            #expect(try await server.core.store.groupMutes(appId: server.app.id, groupId: "g1", now: 0).isEmpty)
        }
    }

    @Test("a Timestamp header at the ends of Int64, with the freshness window on, is refused with 1004")
    func timestampHeader() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.timestampWindowSeconds = 300 }) { server in
            for timestamp in [String(Int64.min), String(Int64.max), "-9223372036854775", "-1", "0"] {
                let (status, body) = try await Self.signedPost(server, "/user/getToken.json", form: "userId=alice", timestamp: timestamp)
                #expect(status == 401 && body["code"] as? Int == 1004, "Timestamp \(timestamp): \(body)")
            }
            let now = String(Int(Date().timeIntervalSince1970))
            #expect(try await Self.signedPost(server, "/user/getToken.json", form: "userId=alice", timestamp: now).1["code"] as? Int == 200)
        }
    }

    /// A Server API call signed with a chosen Timestamp header.
    static func signedPost(_ server: TestServer, _ path: String, form: String, timestamp: String) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: server.baseURL + path)!)
        request.httpMethod = "POST"
        let nonce = "42"
        let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp)
        request.setValue(server.app.appKey, forHTTPHeaderField: "App-Key")
        request.setValue(nonce, forHTTPHeaderField: "Nonce")
        request.setValue(timestamp, forHTTPHeaderField: "Timestamp")
        request.setValue(signature, forHTTPHeaderField: "Signature")
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(form.utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }
}
