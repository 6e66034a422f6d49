import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import Logging
import IMServerTesting
import Testing

/// Rules the server enforces on every send, checked over a raw protocol connection so that the
/// client SDK's own checks cannot hide a server that lets bad input through.
@Suite("Message rules enforced by the server")
struct MessageRulesTests {
    /// A raw, authenticated protocol connection.
    static func rawConnection(_ server: TestServer, user: String, deviceID: String = "") async throws -> WireConnection {
        let connection = WireConnection(url: server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws",
                                        logger: Logger(label: "raw"), onPush: { _, _ in }, onClose: { _, _ in })
        // The token first: the server closes a socket that sends no CONNECT within its handshake timeout.
        let token = try await server.token(user)
        try await connection.open()
        var connect = Im_ConnectRequest()
        connect.appKey = server.app.appKey
        connect.token = token
        connect.platform = .linux
        connect.deviceID = deviceID
        _ = try await connection.request(.connect, connect, timeout: .seconds(10))
        return connection
    }

    static func text(to target: String, _ text: String, clientId: String = UUID().uuidString) -> Im_SendMessageRequest {
        var request = Im_SendMessageRequest()
        request.conversationType = 1
        request.targetID = target
        request.objectName = TextMessage.objectName
        request.content = try! TextMessage(content: text).encode()
        request.flags = PersistentFlag.persistedAndCounted.rawValue
        request.clientMessageID = clientId
        return request
    }

    static func send(_ connection: WireConnection, _ request: Im_SendMessageRequest) async throws -> Im_SendMessageReply {
        try await connection.request(.sendMessage, request, timeout: .seconds(10)).body(Im_SendMessageReply.self)
    }

    static func historyCount(_ server: TestServer, _ a: String, _ b: String) async throws -> Int {
        try await server.core.store.history(appId: server.app.id, conversationKey: privateConversationKey(a, b),
                                            recordTime: 0, count: 100, ascending: false, viewer: nil).messages.count
    }

    @Test("the sixth message within one second gets 20604 and is not stored; a second later sending works")
    func rateLimit() async throws {
        let clock = ManualClock()
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let connection = try await Self.rawConnection(server, user: "alice")
            for index in 0..<5 {
                _ = try await Self.send(connection, Self.text(to: "bob", "m\(index)"))
            }
            do {
                _ = try await Self.send(connection, Self.text(to: "bob", "too fast"))
                Issue.record("the sixth message in a second was accepted")
            } catch let error as IMError {
                #expect(error.code == .sendRateTooHigh)
            }
            #expect(try await Self.historyCount(server, "alice", "bob") == 5)
            clock.advance(milliseconds: 1000)
            _ = try await Self.send(connection, Self.text(to: "bob", "later"))
            #expect(try await Self.historyCount(server, "alice", "bob") == 6)

            // The SDK reports the same code and keeps the message as failed.
            let sdk = try await server.connectedClient("carl")
            for index in 0..<5 { _ = try await sdk.sendMessage(.private, targetId: "bob", content: TextMessage(content: "\(index)")) }
            do {
                _ = try await sdk.sendMessage(.private, targetId: "bob", content: TextMessage(content: "sixth"))
                Issue.record("the SDK's sixth message in a second was accepted")
            } catch let error as SendMessageError {
                #expect(error.code == .sendRateTooHigh)
                #expect(error.message.sentStatus == .failed)
                #expect(error.message.messageId > 0)
            }
        }
    }

    @Test("content over 128 KB gets 30016 from the server and from the SDK, and is not stored")
    func tooLarge() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let connection = try await Self.rawConnection(server, user: "alice")
            let big = String(repeating: "x", count: MessageLimits.maxContentBytes)
            do {
                _ = try await Self.send(connection, Self.text(to: "bob", big))
                Issue.record("a message over 128 KB was accepted")
            } catch let error as IMError {
                #expect(error.code == .messageTooLarge)
            }
            let justFits = String(repeating: "y", count: MessageLimits.maxContentBytes - 20)
            _ = try await Self.send(connection, Self.text(to: "bob", justFits))
            #expect(try await Self.historyCount(server, "alice", "bob") == 1)

            let sdk = try await server.connectedClient("dana")
            do {
                _ = try await sdk.sendMessage(.private, targetId: "bob", content: TextMessage(content: big))
                Issue.record("the SDK sent a message over 128 KB")
            } catch let error as SendMessageError {
                #expect(error.code == .messageTooLarge)
                #expect(error.message.sentStatus == .failed)
            }
        }
    }

    @Test("bad targets, object names and bodies get 33003 and change nothing; the connection stays usable")
    func badInput() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let connection = try await Self.rawConnection(server, user: "alice")
            var badTarget = Self.text(to: "bob", "x")
            badTarget.targetID = "no spaces allowed"
            var badName = Self.text(to: "bob", "x")
            badName.objectName = String(repeating: "N", count: 33)
            var badBody = Self.text(to: "bob", "x")
            badBody.content = Data("not json".utf8)
            var trailingComma = Self.text(to: "bob", "x")
            trailingComma.content = Data(#"{"content":"x",}"#.utf8)
            var badUTF8 = Self.text(to: "bob", "x")
            badUTF8.content = Data(#"{"content":""#.utf8) + Data([0xC0, 0xAF]) + Data(#""}"#.utf8)
            var badType = Self.text(to: "bob", "x")
            badType.conversationType = 99
            for request in [badTarget, badName, badBody, trailingComma, badUTF8, badType] {
                do {
                    _ = try await Self.send(connection, request)
                    Issue.record("bad input was accepted")
                } catch let error as IMError {
                    #expect(error.code == .invalidParameter)
                }
            }
            #expect(try await Self.historyCount(server, "alice", "bob") == 0)
            _ = try await Self.send(connection, Self.text(to: "bob", "fine"))
            #expect(try await Self.historyCount(server, "alice", "bob") == 1)
        }
    }

    @Test("a resend with the same client message id returns the first messageUId and stores nothing twice")
    func resendIsIdempotent() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let connection = try await Self.rawConnection(server, user: "alice")
            let request = Self.text(to: "bob", "once", clientId: "client-msg-1")
            let first = try await Self.send(connection, request)
            let second = try await Self.send(connection, request)
            #expect(second.messageUid == first.messageUid)
            #expect(second.sentTime == first.sentTime)
            #expect(try await Self.historyCount(server, "alice", "bob") == 1)
            _ = try await Self.send(connection, Self.text(to: "bob", "marker"))
            let events = await inbox.wait(for: 2)
            #expect(events.map { $0.message.content(as: TextMessage.self)?.content } == ["once", "marker"])

            // After a reconnect (a new session) the same id still maps to the first message.
            await connection.close()
            let again = try await Self.rawConnection(server, user: "alice")
            #expect(try await Self.send(again, request).messageUid == first.messageUid)
            #expect(try await Self.historyCount(server, "alice", "bob") == 2)
        }
    }

    @Test("a send whose reply was lost is completed by the server's copy on the next sync, not duplicated")
    func lostReplyCompletedBySync() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let token = try await server.token("alice")
            let alice = server.client()
            try await alice.connect(token: token)
            await alice.disconnect()
            let local: Message
            do {
                _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "lost reply"))
                Issue.record("sent while disconnected")
                return
            } catch let error as SendMessageError {
                #expect(error.code == .connectionUnavailable)
                local = error.message
            }
            // The request did reach the server (only its reply was lost).
            let raw = try await Self.rawConnection(server, user: "alice")
            var request = Self.text(to: "bob", "lost reply", clientId: local.clientMessageId)
            request.content = local.contentData
            let stored = try await Self.send(raw, request)
            await raw.close()

            let synced = EventRecorder(alice.offlineMessageSyncCompleted())
            try await alice.connect(token: token)
            #expect(await synced.wait(for: 1).count == 1)
            let history = try await alice.getHistoryMessages(.private, targetId: "bob")
            #expect(history.count == 1)
            #expect(history.first?.messageId == local.messageId)
            #expect(history.first?.messageUId == stored.messageUid)
            #expect(history.first?.sentStatus == .sent)
        }
    }
}
