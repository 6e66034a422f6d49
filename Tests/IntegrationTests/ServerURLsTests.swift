import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMServerTesting
import IMStoreSQLite
import Testing

/// IMLib with several server URLs, the nodes of one cluster: servers here share one store, as the
/// nodes of a cluster share one database.
@Suite("Several server URLs")
struct ServerURLsTests {
    /// Reconnect waits under which only the first round can succeed in a test's time: a second
    /// round would wait an hour.
    static let oneRoundOnly: @Sendable (Int) -> Duration = { round in round == 0 ? .zero : .seconds(3600) }

    @Test("a URL with nothing listening is passed over at once: connect succeeds on the next one without a backoff")
    func refusedURLPassedOver() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let down = "http://127.0.0.1:\(try TestPorts.closed())"
            let client = server.client(serverURLs: [down, server.baseURL]) { $0.reconnectDelay = Self.oneRoundOnly }
            let statuses = EventRecorder(client.connectionStatusUpdates())
            // Waiting any backoff would run into the time limit (34006).
            #expect(try await client.connect(token: try await server.token("ann"), timeLimit: 20) == "ann")
            #expect(await client.connectedServerURL == server.baseURL)
            #expect(await statuses.wait(for: 2) == [.connecting, .connected])
            #expect(server.core.registry.isOnline(appId: server.app.id, userId: "ann"))
        }
    }

    @Test("a URL whose server takes the connection but never answers is left after the request timeout")
    func hangingURLPassedOver() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let hanging = try SilentListener()
            defer { hanging.close() }
            // The short timeout holds for the real server too, which may miss it on a busy machine:
            // then the next round tries again. Without the bound the client would wait on the
            // hanging URL until the time limit (34006).
            let client = server.client(serverURLs: [hanging.baseURL, server.baseURL]) { options in
                options.requestTimeout = .seconds(3)
                options.reconnectDelay = { _ in .zero }
            }
            #expect(try await client.connect(token: try await server.token("abe"), timeLimit: 60) == "abe")
            #expect(await client.connectedServerURL == server.baseURL)
        }
    }

    @Test("a dropped connection reconnects to the next URL, not the one that dropped; past the last it wraps to the first")
    func reconnectStartsWithNextURL() async throws {
        try await withSharedStore { store in
            try await withTestServer(try await TestServer.start(sharing: store)) { a in
                try await withTestServer(try await TestServer.start(sharing: store)) { b in
                    let bob = a.client(serverURLs: [a.baseURL, b.baseURL]) { $0.reconnectDelay = Self.oneRoundOnly }
                    let synced = EventRecorder(bob.offlineMessageSyncCompleted())
                    try await bob.connect(token: try await a.token("bob"))
                    #expect(await bob.connectedServerURL == a.baseURL)
                    #expect(await synced.wait(for: 1).count == 1)

                    // Both servers stay up: the drop alone moves the client.
                    a.core.dropConnections(appId: a.app.id, userId: "bob")
                    #expect(await synced.wait(for: 2).count == 2, "reconnected and synced")
                    #expect(await bob.connectedServerURL == b.baseURL)
                    #expect(b.core.registry.isOnline(appId: b.app.id, userId: "bob"))
                    #expect(!a.core.registry.isOnline(appId: a.app.id, userId: "bob"))

                    b.core.dropConnections(appId: b.app.id, userId: "bob")
                    #expect(await synced.wait(for: 3).count == 3, "reconnected and synced")
                    #expect(await bob.connectedServerURL == a.baseURL)
                }
            }
        }
    }

    @Test("a node that shuts down: its client moves to the next node by itself, syncs what it missed once, and sends there")
    func clientMovesWhenNodeStops() async throws {
        try await withSharedStore { store in
            try await withTestServer(try await TestServer.start(sharing: store)) { b in
                try await withTestServer(try await TestServer.start(sharing: store)) { a in
                    let alice = try await b.connectedClient("alice")
                    let aliceInbox = EventRecorder(alice.receivedMessages())
                    // Bob's local database lives under B's directory: A's is removed when A stops,
                    // and the client opens new readers of its database after the move.
                    let bob = b.client(serverURLs: [a.baseURL, b.baseURL]) { $0.reconnectDelay = Self.oneRoundOnly }
                    let inbox = EventRecorder(bob.receivedMessages())
                    let synced = EventRecorder(bob.offlineMessageSyncCompleted())
                    let statuses = EventRecorder(bob.connectionStatusUpdates())
                    try await bob.connect(token: try await a.token("bob"))
                    #expect(await synced.wait(for: 1).count == 1)
                    #expect(await bob.connectedServerURL == a.baseURL)

                    // Sent through A and stored: the client will resend it through B as if the
                    // acknowledgement had been lost.
                    let beforeMove = try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "before the move"))
                    // Sent through B while bob is on A: the nodes do not forward to each other
                    // (no cluster bus yet), so bob gets it by offline sync on B.
                    let missed = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "while on A"))

                    await a.stop()
                    // Sent while bob moves: live or synced, once.
                    let whileMoving = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "while moving"))

                    #expect(await synced.wait(for: 2).count == 2, "bob reconnected and synced")
                    #expect(await bob.connectedServerURL == b.baseURL)
                    #expect(await bob.connectionStatus == .connected)
                    // One reconnect, in the first round: suspended, connecting once more, then connected.
                    #expect(await statuses.wait(for: 5) == [.connecting, .connected, .suspend, .connecting, .connected])

                    let both = await inbox.wait(for: 2)
                    #expect(both.filter { $0.message.messageUId == missed.messageUId }.map(\.offline) == [true])
                    #expect(await inbox.first { $0.message.messageUId == whileMoving.messageUId } != nil)

                    // The resend of a stored message gets the stored one back from the other node.
                    try await bob.openStore().markFailed(beforeMove.messageId)
                    let resent = try await bob.resendMessage(messageId: beforeMove.messageId)
                    #expect(resent.messageUId == beforeMove.messageUId)
                    #expect(resent.sentStatus == .sent)

                    // A message sent after the move is acknowledged and delivered.
                    let afterMove = try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "after the move"))
                    #expect(afterMove.sentStatus == .sent && !afterMove.messageUId.isEmpty)
                    #expect(await aliceInbox.first { $0.message.messageUId == afterMove.messageUId } != nil)

                    // Everything once: in bob's inbox, and in the conversation's history on the server.
                    #expect(inbox.items.map(\.message.messageUId).sorted() == [missed.messageUId, whileMoving.messageUId].sorted())
                    let (history, _) = try await bob.getRemoteHistoryMessages(.private, targetId: "alice", count: 100)
                    #expect(history.map(\.messageUId).sorted()
                        == [beforeMove, missed, whileMoving, afterMove].map(\.messageUId).sorted())
                    #expect(try await bob.getHistoryMessages(.private, targetId: "alice").count == 4)
                }
            }
        }
    }

    @Test("a definitive refusal on the first URL is the cluster's answer: the next URL, which would accept, is not tried")
    func refusalNotRetriedElsewhere() async throws {
        // The same app key on both servers, with different secrets: B's tokens fail on A with 31004.
        try await withTestServer(try await TestServer.start()) { b in
            try await withTestServer(try await TestServer.start { $0.developmentApp.secret = "anothersecret" }) { a in
                let token = try await b.token("carl")
                let client = a.client(serverURLs: [a.baseURL, b.baseURL]) { $0.reconnectDelay = { _ in .zero } }
                let statuses = EventRecorder(client.connectionStatusUpdates())
                #expect(await failureCode { try await client.connect(token: token) } == ErrorCode.tokenIncorrect.rawValue)
                #expect(await client.connectionStatus == .tokenIncorrect)
                #expect(await client.connectedServerURL == nil)
                #expect(await statuses.wait(for: 2) == [.connecting, .tokenIncorrect])
                #expect(!b.core.registry.isOnline(appId: b.app.id, userId: "carl"))

                // The token is good on B: had the client asked B, it would have connected.
                let direct = b.client()
                #expect(try await direct.connect(token: token) == "carl")
                await direct.disconnect()
            }
        }
    }

    @Test("with no server URL, connect fails with 33003")
    func noURL() async throws {
        var options = IMClientOptions()
        options.databaseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("imlib-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: options.databaseDirectory!) }
        let client = IMClient(appKey: "k", serverURLs: [], options: options)
        let claims = ConnectTokenClaims(appKey: "k", userId: "u1", issuedAt: 0, nonce: "n")
        let token = Base64URL.encode(try JSONEncoder().encode(claims)) + ".AA"
        #expect(await failureCode { try await client.connect(token: token) } == ErrorCode.invalidParameter.rawValue)
    }

    /// Runs `body` with a SQLite store of its own, closed and removed afterwards.
    private func withSharedStore(_ body: (SQLiteStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-cluster-\(UUID().uuidString)")
        let store = try SQLiteStore(directory: directory.path)
        defer {
            try? store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        try await body(store)
    }
}
