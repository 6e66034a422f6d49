import Foundation
import IMCore
@testable import IMLib
import IMProcess
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("Connection, login rules and errors")
struct ConnectionTests {
    @Test("a second login of the same platform class kicks the first with status 6; other classes stay")
    func kickSamePlatformClass() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let iPhone = try await server.connectedClient("ivy", platform: .iOS)
            let desktop = try await server.connectedClient("ivy", platform: .linux)
            let statuses = EventRecorder(iPhone.connectionStatusUpdates())
            let android = try await server.connectedClient("ivy", platform: .android)

            let kicked = await statuses.first { $0 == .kickedOfflineByOtherClient }
            #expect(kicked == .kickedOfflineByOtherClient)
            #expect(await iPhone.connectionStatus == .kickedOfflineByOtherClient)
            #expect(await android.connectionStatus == .connected)
            #expect(await desktop.connectionStatus == .connected)
            #expect(server.core.registry.sessions(appId: server.app.id, userId: "ivy").count == 2)
            // The kicked client does not come back by itself.
            _ = try await server.connectedClient("jack")
            #expect(!statuses.items.contains(.connecting))
        }
    }

    @Test("an automatic reconnect with reconnect-kick enabled is refused with 31023 and kicks nobody")
    func reconnectKickRefused() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let first = try await server.connectedClient("kim", platform: .iOS) { options in
                options.reconnectKickEnable = true
                // Give the second device time to log in before the first one's reconnect.
                options.reconnectDelay = { attempt in attempt == 0 ? .milliseconds(1500) : ReconnectSchedule.delay(attempt: attempt) }
            }
            let statuses = EventRecorder(first.connectionStatusUpdates())
            // The network drops the first device's connection.
            server.core.dropConnections(appId: server.app.id, userId: "kim")
            _ = await statuses.first { $0 == .connecting }
            let second = try await server.connectedClient("kim", platform: .android)
            let final = await statuses.first { $0 == .kickedOfflineByOtherClient }
            #expect(final == .kickedOfflineByOtherClient)
            #expect(await second.connectionStatus == .connected, "the device that is online stays online")
        }
    }

    @Test("bad tokens fail with 31004 once and are not retried")
    func invalidToken() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let garbage = server.client()
            do {
                try await garbage.connect(token: "not-a-token")
                Issue.record("a malformed token connected")
            } catch let error as IMError {
                #expect(error.code == .tokenIncorrect)
            }
            #expect(await garbage.connectionStatus == .tokenIncorrect)

            // A token of another app, re-labelled with this app's key: the server checks the signature.
            let otherApp = try await server.core.apps.upsert(appKey: "otherapp", appSecret: "othersecret", name: "other", now: 0)
            let foreign = try await server.token("mallory", app: otherApp)
            let parts = foreign.split(separator: ".")
            var claims = try #require(ConnectTokenClaims.unverified(foreign))
            claims.appKey = server.app.appKey
            let forged = Base64URL.encode(try JSONEncoder().encode(claims)) + "." + parts[1]
            let client = server.client()
            let statuses = EventRecorder(client.connectionStatusUpdates())
            do {
                try await client.connect(token: forged)
                Issue.record("a forged token connected")
            } catch let error as IMError {
                #expect(error.code == .tokenIncorrect)
            }
            #expect(server.core.registry.sessionCount == 0)
            #expect(statuses.items.filter { $0 == .connecting }.count == 1, "one attempt, no retry")

            // The genuine token of the other app fails on this app (client side) and works on its own.
            let wrongApp = server.client()
            await #expect(throws: IMError.self) { try await wrongApp.connect(token: foreign) }
            let rightApp = server.client(app: otherApp)
            #expect(try await rightApp.connect(token: foreign) == "mallory")
            #expect(server.core.registry.isOnline(appId: otherApp.id, userId: "mallory"))
            #expect(!server.core.registry.isOnline(appId: server.app.id, userId: "mallory"))
        }
    }

    @Test("a client the app lets go without disconnecting is freed, and its connection closes with it")
    func releasedClientIsFreed() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            final class WeakClient: Sendable {
                nonisolated(unsafe) weak var client: IMClient?
            }
            let released = WeakClient()
            do {
                let client = try await server.connectedClient("alice")
                _ = try await client.getConversationList(types: [.private])
                released.client = client
            }
            try await waitUntil("the released client is freed", timeout: .seconds(20)) { released.client == nil }
            try await waitUntil("its session ends", timeout: .seconds(20)) {
                !server.core.registry.isOnline(appId: server.app.id, userId: "alice")
            }
        }
    }

    @Test("dbOpened comes before the network; each reconnect wait is announced, and a network change starts the schedule again")
    func reconnectScheduleRestarts() async throws {
        var options = IMClientOptions()
        options.databaseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("imlib-\(UUID().uuidString)")
        // Short waits, then a long one that only a network change cuts short.
        options.reconnectDelay = { round in round == 0 ? .zero : round < 4 ? .milliseconds(20) : .seconds(600) }
        options.requestTimeout = .seconds(2)
        // Port 9 (discard) has no listener here: every attempt is refused at once. (A port freed by
        // TestPorts.closed() may be taken by a parallel test's server meanwhile.)
        let client = IMClient(appKey: "k", serverURL: "http://127.0.0.1:9", options: options)
        let waits = EventRecorder(client.reconnectWaits())
        let opened = Locked(false)
        let claims = ConnectTokenClaims(appKey: "k", userId: "u1", issuedAt: 0, nonce: "n")
        let token = Base64URL.encode(try JSONEncoder().encode(claims)) + ".AA"
        let connecting = Task { try await client.connect(token: token, dbOpened: { opened.withLock { $0 = true } }) }
        let long = await waits.first(timeout: .seconds(60)) { $0.round == 4 }
        #expect(long?.delay == .seconds(600))
        #expect(opened.withLock { $0 }, "the local database opened although no server answers")
        #expect(try await client.getConversationList(types: [.private]).isEmpty, "and it can be read")
        await client.networkDidChange()
        let restarted = await waits.wait(for: 5, timeout: .seconds(60))
        #expect(restarted.map(\.round) == [1, 2, 3, 4, 1], "after the change the schedule starts again: \(restarted.map(\.round))")
        await client.disconnect()
        _ = await connecting.result
    }

    @Test("connect with a time limit against no server fails with 34006 and stops")
    func connectTimeLimit() async throws {
        var options = IMClientOptions()
        options.databaseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("imlib-\(UUID().uuidString)")
        options.reconnectDelay = { _ in .milliseconds(100) }
        // Port 9 (discard) has no listener here: every attempt is refused.
        let client = IMClient(appKey: "k", serverURL: "http://127.0.0.1:9", options: options)
        let claims = ConnectTokenClaims(appKey: "k", userId: "u1", issuedAt: 0, nonce: "n")
        let token = Base64URL.encode(try JSONEncoder().encode(claims)) + ".AA"
        do {
            try await client.connect(token: token, timeLimit: 1)
            Issue.record("connected to nothing")
        } catch let error as IMError {
            #expect(error.code == .connectTimeout)
        }
        #expect(await client.connectionStatus == .timeout)
    }

    @Test("the time limit holds to the second: a client process gives up 1 s after it starts connecting")
    func connectTimeLimitTiming() async throws {
        // A process of its own: inside the test process the client would share two cooperative
        // threads with every other test's clients, and its timers would fire late.
        let demo = ChildServer.binaryURL().deletingLastPathComponent().appendingPathComponent("imlib-demo")
        let claims = ConnectTokenClaims(appKey: "k", userId: "u1", issuedAt: 0, nonce: "n")
        let token = Base64URL.encode(try JSONEncoder().encode(claims)) + ".AA"
        let started = ContinuousClock.now
        let process = try ChildProcess(demo.path, ["send", "--server", "http://127.0.0.1:9", "--app-key", "k", "--token", token,
                                                   "--time-limit", "1", "--to", "u2", "hello"],
                                       standardOutput: .null, standardError: .pipe)
        let status = await process.exit().status
        let elapsed = ContinuousClock.now - started
        let text = String(decoding: await ChildProcess.readToEnd(process.standardError!), as: UTF8.self)
        #expect(status != 0)
        #expect(text.contains("34006"), "\(text)")
        #expect(elapsed >= .milliseconds(900), "the process gave up after \(elapsed), before the limit")
        // The client reports how long it tried, from the start of connecting: the limit, within a second.
        let range = try #require(text.range(of: #"after [0-9.]+ s"#, options: .regularExpression), "\(text)")
        let seconds = try #require(Double(text[range].dropFirst("after ".count).dropLast(" s".count)))
        #expect(seconds >= 0.9 && seconds < 2, "tried for \(seconds) s")
    }

    @Test("a connection the server dropped reconnects by itself and gets what was sent meanwhile")
    func reconnectAfterDrop() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let bob = try await server.connectedClient("bob")
            let statuses = EventRecorder(bob.connectionStatusUpdates())
            let inbox = EventRecorder(bob.receivedMessages())
            server.core.dropConnections(appId: server.app.id, userId: "bob")
            let sent = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "while away"))
            _ = await statuses.first { $0 == .connecting }
            _ = await statuses.first { $0 == .connected }
            let received = await inbox.first { $0.message.messageUId == sent.messageUId }
            #expect(received != nil)
            #expect(inbox.items.count == 1)
        }
    }

    @Test("a silent connection is dropped after three heartbeat intervals")
    func heartbeatTimeout() async throws {
        let clock = ManualClock()
        try await withTestServer(try await TestServer.start(clock: clock) { $0.session.heartbeatIntervalSeconds = 30 }) { server in
            _ = try await server.connectedClient("lee")
            #expect(server.core.sweepIdleSessions() == 0)
            clock.advance(milliseconds: 89_000)
            #expect(server.core.sweepIdleSessions() == 0)
            clock.advance(milliseconds: 2_000)
            #expect(server.core.sweepIdleSessions() == 1)
            #expect(!server.core.registry.isOnline(appId: server.app.id, userId: "lee"))
        }
    }

    @Test("disconnect stops reconnecting; logout signs out")
    func disconnectStops() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let client = try await server.connectedClient("mia")
            let statuses = EventRecorder(client.connectionStatusUpdates())
            await client.disconnect()
            #expect(await client.connectionStatus == .unconnected)
            _ = try await server.connectedClient("other")
            #expect(!statuses.items.contains(.connecting))
            let again = try await server.connectedClient("mia")
            await again.logout()
            #expect(await again.connectionStatus == .signOut)
            try await again.connect(token: try await server.token("mia"))
            do {
                try await again.connect(token: try await server.token("mia"))
                Issue.record("a second connect while connected succeeded")
            } catch let error as IMError {
                #expect(error.code == .connectionExists)
            }
            #expect(await again.connectionStatus == .connected)
        }
    }

    @Test("the reconnect schedule is 0, 0.25, 0.5, 1, 2, 4, 8, 16, 32 s, then 64 s")
    func reconnectSchedule() {
        let expected: [Duration] = [.zero, .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4),
                                    .seconds(8), .seconds(16), .seconds(32), .seconds(64), .seconds(64)]
        #expect((0..<11).map(ReconnectSchedule.delay(attempt:)) == expected)
    }
}
