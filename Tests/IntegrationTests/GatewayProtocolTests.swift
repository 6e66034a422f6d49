import Foundation
import IMCore
import IMLib
import IMServerTesting
import IMWire
import Testing

/// The gateway's WebSocket handling (channel handlers on the event loop, `GatewayConnectionHandler`):
/// frames that break the protocol, the peer's close, an upgrade on a used connection, requests
/// after a session's end, and shutdown with connections that never sent CONNECT.
@Suite("Gateway WebSocket protocol")
struct GatewayProtocolTests {
    static func port(_ server: TestServer) throws -> Int {
        try #require(URL(string: server.baseURL)?.port)
    }

    static func online(_ server: TestServer, _ user: String) -> Int {
        server.core.registry.sessions(appId: server.app.id, userId: user).count
    }

    @Test("a PING is answered on the event loop with its id and the server's time; one with fields past the envelope's too")
    func pingAnswered() async throws {
        let clock = ManualClock(milliseconds: 1_764_000_000_123)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let socket = try await RawSocket.connected(port: try Self.port(server), appKey: server.app.appKey, token: try await server.token("alice"))
            // Read by hand (id, op, payload), a zero time, a time past 2^56, then one with an
            // unknown field the hand-written reader leaves to SwiftProtobuf.
            var unknownField = try FrameCodec.request(id: 9, op: .ping, Im_Pong())
            unknownField += [0x30, 0x05]
            let cases: [(bytes: [UInt8], id: UInt32, time: Int64)] = [
                (try FrameCodec.request(id: 300, op: .ping, Im_Pong()), 300, 1_764_000_000_123),
                (try FrameCodec.request(id: 1, op: .ping, Im_Pong()), 1, 0),
                (try FrameCodec.request(id: UInt32.max, op: .ping, Im_Pong()), UInt32.max, Int64(1) << 57),
                (unknownField, 9, 42),
            ]
            for (bytes, id, time) in cases {
                clock.set(milliseconds: time)
                try socket.sendFrame(bytes)
                var received: [UInt8] = []
                let deadline = ContinuousClock.now + .seconds(10)
                while RawSocket.frames(in: received).isEmpty, ContinuousClock.now < deadline {
                    guard let chunk = await socket.receive(timeout: deadline - .now) else { break }
                    received += chunk
                }
                let frames = RawSocket.frames(in: received)
                #expect(frames.count == 1)
                let reply = try FrameCodec.decode(try #require(frames.first).payload)
                #expect(reply.id == id)
                #expect(reply.op == .ping)
                #expect(reply.code == 0)
                #expect(try reply.body(Im_Pong.self).serverTime == time)
                // The bytes are SwiftProtobuf's.
                var pong = Im_Pong()
                pong.serverTime = time
                var expected = Im_Frame()
                expected.id = id
                expected.op = .ping
                expected.payload = try pong.serializedData()
                #expect(frames.first?.payload == (try expected.serializedBytes() as [UInt8]))
            }
            #expect(Self.online(server, "alice") == 1)
        }
    }

    @Test("a frame with a reserved bit set ends the session with 1002; it is offline at once")
    func reservedBits() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let socket = try await RawSocket.connected(port: try Self.port(server), appKey: server.app.appKey, token: try await server.token("alice"))
            #expect(Self.online(server, "alice") == 1)
            // FIN + RSV1 + binary: no extension was negotiated.
            try socket.send(RawSocket.maskedFrame(first: 0xC2, [1, 2, 3]))
            let close = await socket.readClose(timeout: .seconds(10))
            #expect(close?.code == 1002, "\(String(describing: close))")
            #expect(Self.online(server, "alice") == 0)
        }
    }

    @Test("a message over the frame limit in fragments ends the session with 1009")
    func oversizedFragments() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let socket = try await RawSocket.connected(port: try Self.port(server), appKey: server.app.appKey, token: try await server.token("alice"))
            let piece = [UInt8](repeating: 7, count: 60_000)
            // binary without FIN, then continuations without FIN, past FrameCodec.maxFrameBytes.
            var bytes = RawSocket.maskedFrame(first: 0x02, piece)
            for _ in 0..<(FrameCodec.maxFrameBytes / piece.count + 1) { bytes += RawSocket.maskedFrame(first: 0x00, piece) }
            try socket.send(bytes)
            let close = await socket.readClose(timeout: .seconds(10))
            #expect(close?.code == 1009, "\(String(describing: close))")
            #expect(Self.online(server, "alice") == 0)
        }
    }

    @Test("the peer's close is answered with its code; a code no peer may send (1005) with 1002")
    func peerClose() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let port = try Self.port(server)
            for (sent, answered) in [(UInt16(1000), UInt16(1000)), (4001, 4001), (1005, 1002)] {
                let socket = try await RawSocket.connected(port: port, appKey: server.app.appKey, token: try await server.token("alice"))
                try socket.send(RawSocket.maskedFrame(first: 0x88, [UInt8(sent >> 8), UInt8(sent & 0xFF)]))
                let bytes = await socket.readUntilClosed(timeout: .seconds(10)) ?? []
                let close = RawSocket.frames(in: bytes).first { $0.opcode == 0x8 }
                let code = close.map { UInt16($0.payload[0]) << 8 | UInt16($0.payload[1]) }
                #expect(code == answered, "sent \(sent), answered \(String(describing: code))")
            }
        }
    }

    @Test("an upgrade asked for after another request on the same connection is answered 307 to /ws and closed; elsewhere 400")
    func upgradeOnUsedConnection() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let port = try Self.port(server)
            let socket = try RawSocket(port: port)
            try socket.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let health = await socket.read(until: "\r\n\r\n", timeout: .seconds(10))
            #expect(health.hasPrefix("HTTP/1.1 200"), "\(health.prefix(200))")
            _ = await socket.receive(timeout: .milliseconds(200))
            try socket.send("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            let answer = String(decoding: await socket.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            #expect(answer.contains("HTTP/1.1 307") && answer.lowercased().contains("location: /ws"), "\(answer.prefix(300))")

            let elsewhere = try RawSocket(port: port)
            try elsewhere.send("GET /socket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            let refused = String(decoding: await elsewhere.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            #expect(refused.hasPrefix("HTTP/1.1 400") && refused.contains("33003"), "\(refused.prefix(300))")
        }
    }

    @Test("100 requests in one write are all answered, in the order sent: reading pauses at 32 waiting and resumes")
    func burstInOrder() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let socket = try await RawSocket.connected(port: try Self.port(server), appKey: server.app.appKey, token: try await server.token("alice"))
            var burst: [UInt8] = []
            for id in UInt32(2)...101 {
                burst += RawSocket.maskedFrame(first: 0x82, try FrameCodec.request(id: id, op: .conversationStateSync, Im_ConversationStateSyncRequest()))
            }
            try socket.send(burst)
            // Under the whole suite's load each request may take long: the test waits while replies
            // keep coming, and fails when none comes for 30 s (reading never resumed).
            var bytes: [UInt8] = []
            while RawSocket.frames(in: bytes).count < 100 {
                guard let chunk = await socket.receive(timeout: .seconds(30)), !chunk.isEmpty else { break }
                bytes += chunk
            }
            let replies = try RawSocket.frames(in: bytes).filter { $0.opcode == 0x2 }.map { try FrameCodec.decode($0.payload) }
            #expect(replies.map(\.id) == Array(UInt32(2)...101), "replies in the order of their requests")
            #expect(replies.allSatisfy { $0.code == 0 }, "\(replies.first { $0.code != 0 }.map { "\($0.code) \($0.errorMessage)" } ?? "")")
            #expect(Self.online(server, "alice") == 1)
        }
    }

    @Test("a send that arrives with the DISCONNECT before it, in one write, is not run")
    func nothingRunsAfterDisconnect() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let socket = try await RawSocket.connected(port: try Self.port(server), appKey: server.app.appKey, token: try await server.token("alice"))
            var disconnect = Im_DisconnectRequest()
            disconnect.receivePush = true
            var send = Im_SendMessageRequest()
            send.conversationType = Int32(ConversationType.private.rawValue)
            send.targetID = "bob"
            send.objectName = TextMessage.objectName
            send.content = try TextMessage(content: "after goodbye").encode()
            send.flags = TextMessage.persistentFlag.rawValue
            send.clientMessageID = UUID().uuidString
            try socket.send(RawSocket.maskedFrame(first: 0x82, try FrameCodec.request(id: 2, op: .disconnect, disconnect))
                            + RawSocket.maskedFrame(first: 0x82, try FrameCodec.request(id: 3, op: .sendMessage, send)))
            #expect(await socket.readClose(timeout: .seconds(10))?.code == 1000)
            // A message sent later is bob's first: the one after the goodbye was never stored.
            let alice = try await server.connectedClient("alice")
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "fence"))
            let bob = try await server.connectedClient("bob")
            let history = try await bob.getHistoryMessages(.private, targetId: "alice", oldestMessageId: -1, count: 10)
            #expect(history.compactMap { ($0.content as? TextMessage)?.content } == ["fence"])
            await alice.disconnect()
            await bob.disconnect()
        }
    }

    @Test("a graceful shutdown closes a connection that never sent CONNECT with 1001, not at its handshake timeout (300 s)")
    func shutdownBeforeConnect() async throws {
        let server = try await TestServer.start { $0.session.handshakeTimeoutSeconds = 300 }
        let socket = try RawSocket(port: try Self.port(server))
        try await socket.upgradeToWebSocket()
        let started = ContinuousClock.now
        async let stopped: Void = server.stop()
        let close = await socket.readClose(timeout: .seconds(240))
        await stopped
        #expect(close?.code == 1001, "\(String(describing: close))")
        // Seconds when the machine is quiet; the bound leaves room for the whole suite's load.
        #expect(ContinuousClock.now - started < .seconds(200), "the shutdown did not wait for the 300 s handshake timeout")
    }
}
