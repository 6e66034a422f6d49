import Crypto
import Foundation
import IMCore
@testable import IMLib
@testable import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing

/// What one connection can hold is bounded: bytes held for a client that never finishes its sync,
/// bytes queued for a client that never reads, sockets that never send a whole request or never
/// answer a close, and connections from one address.
@Suite("Per-connection memory and sockets are bounded")
struct ConnectionResourceTests {
    static let smallestQueue = ConnectionLimits.queuedBytesRange.lowerBound

    /// A private message of about 100 KB from alice to `to`, sent the way the Server API sends one
    /// (stored, then delivered to the recipient's sessions before this returns).
    static func publish(_ server: TestServer, to: String, _ index: Int) async throws {
        let content = Data(#"{"content":"\#(index) \#(String(repeating: "x", count: 100_000))"}"#.utf8)
        let message = StoredMessage(appId: server.app.id, conversationType: .private, conversationKey: "", targetId: "", senderId: "alice",
                                    objectName: TextMessage.objectName, content: content, flags: .persistedAndCounted, includeSender: false)
        #expect(try await server.core.messages.publish(message, to: [to], verifyBlacklist: false).count == 1)
    }

    @Test("a session that never finishes its first sync holds at most its byte bound, and its sync still gets every message")
    func heldWhileSyncing() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.network.maxQueuedBytesPerConnection = Self.smallestQueue
            config.serverAPI.callsPerSecond = 0
        }) { server in
            let bob = try await MessageRulesTests.rawConnection(server, user: "bob")
            let session = try #require(server.core.registry.sessions(appId: server.app.id, userId: "bob").first)
            var most = 0
            for index in 0..<100 {
                try await Self.publish(server, to: "bob", index)
                most = max(most, session.heldBytes)
            }
            #expect(most <= ConnectionLimits.heldBytes(forQueue: Self.smallestQueue), "held \(most) bytes for a client that never synced (10 MB were sent)")
            #expect(!session.isClosed, "stored messages let go are synced, so the session stays")

            // Now it syncs: every message once, in order, pages within the frame budget.
            var since: UInt64 = 0
            var numbers: [Int] = []
            while true {
                var sync = Im_SyncRequest()
                sync.since = since
                let page = try await bob.request(.sync, sync, timeout: .seconds(10)).body(Im_SyncReply.self)
                numbers += page.messages.compactMap(FrameBudgetTests.number)
                since = page.watermark
                if !page.morePackages { break }
            }
            #expect(numbers == Array(0..<100))
            #expect(session.heldBytes == 0)
        }
    }

    @Test("a client that never reads is closed once its queue passes the byte bound: offline at once, its queue let go, its socket dropped")
    func slowReader() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.network.maxQueuedBytesPerConnection = Self.smallestQueue
            config.serverAPI.callsPerSecond = 0
        }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)
            // The token first: the server closes a socket that sends no CONNECT within its handshake timeout.
            let token = try await server.token("bob")
            let socket = try RawSocket(port: port, receiveBuffer: 4096)
            try await socket.upgradeToWebSocket()
            try socket.sendConnect(appKey: server.app.appKey, token: token)
            _ = await socket.receive(timeout: .seconds(5))
            var sync = Im_SyncRequest()
            sync.since = 0
            try socket.sendFrame(try FrameCodec.request(id: 2, op: .sync, sync))
            _ = await socket.receive(timeout: .seconds(5))
            let session = try #require(server.core.registry.sessions(appId: server.app.id, userId: "bob").first)
            // From here on the client reads nothing.
            // The queue decides at once (`wasSlowReader`); the session goes offline when the closing
            // task has run, which a busy machine may delay, so that is awaited rather than raced.
            var sent = 0
            while !session.outbound.wasSlowReader && sent < 500 {
                try await Self.publish(server, to: "bob", sent)
                sent += 1
            }
            #expect(session.outbound.wasSlowReader, "closed as a slow reader after \(sent) messages of 100 KB")
            #expect(sent < 300, "the bound (8 MB) and what the sockets hold, not the whole flood, closed it: \(sent) messages of 100 KB")
            #expect(session.outbound.queuedBytes == 0, "its queue was let go")
            try await waitUntil { !server.core.registry.isOnline(appId: server.app.id, userId: "bob") }
            #expect(await socket.readUntilClosed(timeout: .seconds(60)) != nil, "the server dropped the TCP connection (a loose bound: the socket first drains what was queued, slowly on a loaded machine)")
            #expect(server.core.registry.sessions(appId: server.app.id, userId: "bob").isEmpty)
            // bob reconnects and syncs what he missed.
            let again = try await MessageRulesTests.rawConnection(server, user: "bob")
            var since: UInt64 = 0
            var synced = 0
            while true {
                var request = Im_SyncRequest()
                request.since = since
                let page = try await again.request(.sync, request, timeout: .seconds(10)).body(Im_SyncReply.self)
                synced += page.messages.count
                since = page.watermark
                if !page.morePackages { break }
            }
            #expect(synced == sent)
        }
    }

    @Test("half-sent and trickled request heads, slow bodies and idle connections are closed after their timeouts")
    func httpTimeouts() async throws {
        try await withTestServer(try await TestServer.start { config in
            // Short, but with room for a machine busy with the rest of the suite; the body's limit
            // below the idle one, as by default, so the 408 comes before the idle close.
            config.network.httpIdleTimeoutSeconds = 3
            config.network.httpRequestTimeoutSeconds = 1
            config.session.handshakeTimeoutSeconds = 1
            config.network.closeTimeoutSeconds = 1
        }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)

            let half = try RawSocket(port: port)
            try half.send("POST /user/getToken.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            #expect(await half.readUntilClosed(timeout: .seconds(10)) != nil, "a half-sent head is closed")

            let trickle = try RawSocket(port: port)
            let head = Array("POST /user/getToken.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: \(String(repeating: "p", count: 100))\r\n\r\n".utf8)
            var closedEarly = false
            for byte in head {
                do { try trickle.send([byte]) } catch { closedEarly = true; break }
                if await trickle.receive(timeout: .milliseconds(100)) == nil { closedEarly = true; break }
            }
            #expect(closedEarly, "a head trickled a byte at a time is closed before it completes")

            // Signed, so the endpoint waits for the body rather than refusing the call at once.
            let slowBody = try RawSocket(port: port)
            let nonce = "1", timestamp = String(Int(Date().timeIntervalSince1970))
            let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp)
            try slowBody.send("POST /user/getToken.json HTTP/1.1\r\nHost: 127.0.0.1\r\nApp-Key: \(server.app.appKey)\r\nNonce: \(nonce)\r\n"
                              + "Timestamp: \(timestamp)\r\nSignature: \(signature)\r\n"
                              + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nuserId=al")
            let answer = await slowBody.readUntilClosed(timeout: .seconds(10))
            let text = String(decoding: answer ?? [], as: UTF8.self)
            #expect(answer != nil && text.hasPrefix("HTTP/1.1 408") && text.contains(#""code":1003"#), "\(text.prefix(300))")

            let idle = try RawSocket(port: port)
            try idle.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await idle.read(until: "\r\n\r\n", timeout: .seconds(5)).hasPrefix("HTTP/1.1 200"))
            #expect(await idle.readUntilClosed(timeout: .seconds(10)) != nil, "an idle keep-alive connection is closed")

            let upgraded = try RawSocket(port: port)
            try await upgraded.upgradeToWebSocket()
            try upgraded.send(Array("\u{0}".utf8))
            #expect(await upgraded.readUntilClosed(timeout: .seconds(30)) != nil, "a WebSocket that sends no CONNECT is closed")
        }
    }

    @Test("a close the peer never answers drops the TCP connection after closeTimeoutSeconds: no CONNECT, and a kicked session")
    func closeGrace() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.session.handshakeTimeoutSeconds = 1
            config.network.closeTimeoutSeconds = 1
        }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)

            let silent = try RawSocket(port: port)
            try await silent.upgradeToWebSocket()
            let bytes = await silent.readUntilClosed(timeout: .seconds(15))
            #expect(bytes?.first == 0x88, "a close frame came first, then the TCP close")

            let token = try await server.token("alice")
            let kicked = try RawSocket(port: port)
            try await kicked.upgradeToWebSocket()
            try kicked.sendConnect(appKey: server.app.appKey, token: token)
            _ = await kicked.receive(timeout: .seconds(5))
            // The same login class: the raw session is kicked. (The client is held: a client let go
            // closes its connection.)
            let alice = try await server.connectedClient("alice")
            #expect(await kicked.readUntilClosed(timeout: .seconds(15)) != nil, "the kicked peer's socket was dropped")
            #expect(server.core.registry.sessions(appId: server.app.id, userId: "alice").count == 1)
            await alice.disconnect()
        }
    }

    @Test("one address holds at most maxConnectionsPerAddress connections; past it, 503 with 1008 and the socket closed")
    func connectionsPerAddress() async throws {
        try await withTestServer(try await TestServer.start { $0.network.maxConnectionsPerAddress = 3 }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)
            var held = try await Self.answeredConnections(3, port: port)
            let fourth = try RawSocket(port: port)
            let refused = String(decoding: await fourth.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            #expect(refused.hasPrefix("HTTP/1.1 503") && refused.contains(#""code":1008"#), "\(refused.prefix(300))")
            // Closing one makes room.
            held.removeLast().close()
            var answer = ""
            for _ in 0..<50 where !answer.hasPrefix("HTTP/1.1 200") {
                let next = try RawSocket(port: port)
                try next.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                answer = String(decoding: await next.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
            _ = held
        }
    }

    @Test("a request whose body missed its deadline is never run, even if the rest of its body arrives just after the 408")
    func lateBodyNotRun() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.network.httpIdleTimeoutSeconds = 3
            config.network.httpRequestTimeoutSeconds = 1
        }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)
            let body = "fromUserId=alice&toUserId=bob&objectName=RC:TxtMsg&content=%7B%22content%22%3A%22late%22%7D"
            let socket = try RawSocket(port: port)
            try socket.send(Self.signedHead(server, "/message/private/publish.json", contentLength: body.utf8.count) + String(body.prefix(10)))
            let answer = await socket.read(until: "1003", timeout: .seconds(10))
            #expect(answer.hasPrefix("HTTP/1.1 408"), "\(answer.prefix(200))")
            try? socket.send(String(body.dropFirst(10)))
            #expect(await socket.readUntilClosed(timeout: .seconds(10)) != nil)
            // The next call is answered after anything the late body could have started.
            #expect(try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "alice", "toUserId": "bob", "objectName": "RC:TxtMsg", "content": #"{"content":"on time"}"#]).1["code"] as? Int == 200)
            let texts = try await server.core.store.history(appId: server.app.id, conversationKey: privateConversationKey("alice", "bob"),
                                                            recordTime: 0, count: 10, ascending: true, viewer: nil).messages
                .map { String(decoding: $0.content, as: UTF8.self) }
            #expect(texts == [#"{"content":"on time"}"#], "the timed-out publish was not sent")
        }
    }

    @Test("a connection refused by the per-address limit runs none of what it sent")
    func refusedConnectionRunsNothing() async throws {
        try await withTestServer(try await TestServer.start { $0.network.maxConnectionsPerAddress = 2 }) { server in
            let port = try #require(URL(string: server.baseURL)?.port)
            let held = try await Self.answeredConnections(2, port: port)
            let body = "userId=refused-user"
            let refused = try RawSocket(port: port)
            try refused.send(Self.signedHead(server, "/user/getToken.json", contentLength: body.utf8.count) + body)
            let answer = String(decoding: await refused.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer.prefix(200))")
            #expect(try await server.core.store.user(appId: server.app.id, userId: "refused-user") == nil,
                    "the refused connection's getToken did not run")
            for socket in held { socket.close() }
        }
    }

    @Test("with closeTimeoutSeconds 0, a refused CONNECT still gets its code before the connection drops")
    func refusedConnectWithoutGrace() async throws {
        try await withTestServer(try await TestServer.start { $0.network.closeTimeoutSeconds = 0 }) { server in
            let client = server.client()
            #expect(await failureCode { try await client.connect(token: "not-a-token.at-all") } == ErrorCode.tokenIncorrect.rawValue)
        }
    }

    /// Keep-alive connections, each answered once (so each is counted before the next is opened).
    static func answeredConnections(_ count: Int, port: Int) async throws -> [RawSocket] {
        var sockets: [RawSocket] = []
        for _ in 0..<count {
            let socket = try RawSocket(port: port)
            try socket.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await socket.read(until: "\r\n\r\n", timeout: .seconds(10)).hasPrefix("HTTP/1.1 200"))
            sockets.append(socket)
        }
        return sockets
    }

    /// A signed Server API request head for a form body of `contentLength` bytes.
    static func signedHead(_ server: TestServer, _ path: String, contentLength: Int) -> String {
        let nonce = "7", timestamp = String(Int(Date().timeIntervalSince1970))
        let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp)
        return "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nApp-Key: \(server.app.appKey)\r\nNonce: \(nonce)\r\nTimestamp: \(timestamp)\r\n"
            + "Signature: \(signature)\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(contentLength)\r\n\r\n"
    }
}
