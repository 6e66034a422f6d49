import Foundation
import IMCore
import IMLib
import IMWire
import IMServerTesting
import IMStore
import IMStoreSQLite
import Logging
import Testing
@testable import IMServer

/// Graceful shutdown: SIGTERM to a real imserver process under send load.
@Suite("Graceful shutdown")
struct ShutdownTests {
    /// What one sender's calls ended with, by message text.
    private struct SenderRecord: Sendable {
        var acked: [String: String] = [:]   // text → messageUId
        var failed: [String: Int] = [:]     // text → error code
        var attempts = 0
    }

    @Test("SIGTERM under send load: exit 0, every call answered, every acknowledged message stored, nothing refused stored")
    func sigtermDrains() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-shutdown-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
        let logFile = dataDir.appendingPathComponent("imserver.log")
        let app = AppRecord(id: 0, appKey: "shutdownkey", appSecret: "shutdownsecret", name: "", createdAt: 0)

        // The raw session's CONNECT may wait long on a busy machine (the whole suite runs at once),
        // and the raw watcher never pings: with the default 30 s heartbeat it would be dropped as
        // silent (1000) after 90 s, which a loaded suite can take before the SIGTERM.
        let first = try await ChildServer(dataDir: dataDir.appendingPathComponent("data"), appKey: app.appKey, appSecret: app.appSecret,
                                    logLevel: "notice", logFile: logFile,
                                    environment: ["IMSERVER_HANDSHAKE_TIMEOUT_SECONDS": "120", "IMSERVER_HEARTBEAT_INTERVAL_SECONDS": "600"])
        defer { first.kill() }
        let api = ServerAPIClient(baseURL: first.baseURL, app: app)
        func token(_ user: String, _ api: ServerAPIClient) async throws -> String {
            try #require(try await api.post("/user/getToken.json", form: ["userId": user]).1["token"] as? String)
        }
        let receiverToken = try await token("receiver", api)

        // A raw connection, to see how the server closes it.
        let port = try #require(Int(first.baseURL.split(separator: ":").last ?? ""))
        let watcher = try await RawSocket.connected(port: port, appKey: app.appKey, token: try await token("watcher", api))

        let senders = ["s1", "s2", "s3", "s4", "s5"]
        var clients: [IMClient] = []
        for user in senders {
            var options = IMClientOptions()
            options.databaseDirectory = dataDir.appendingPathComponent("clients/\(user)")
            // Long enough that a call left unanswered shows up as a sender that never finishes,
            // not as a timeout error.
            options.requestTimeout = .seconds(120)
            let client = IMClient(appKey: app.appKey, serverURL: first.baseURL, options: options)
            try await client.connect(token: try await token(user, api))
            clients.append(client)
        }

        // Each sender sends as fast as its acknowledgements come back, until a call fails.
        let records = Locked<[String: SenderRecord]>([:])
        let ackedTotal = Locked(0)
        let finished = Locked(0)
        let enough = AsyncStream<Void>.makeStream()
        let senderClients = clients
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for (user, client) in zip(senders, senderClients) {
                    group.addTask {
                        defer { finished.withLock { $0 += 1 } }
                        for index in 0... {
                            let text = "\(user)-\(index)"
                            records.withLock { $0[user, default: SenderRecord()].attempts += 1 }
                            do {
                                let message = try await client.sendMessage(.private, targetId: "receiver", content: TextMessage(content: text))
                                records.withLock { $0[user, default: SenderRecord()].acked[text] = message.messageUId }
                                if ackedTotal.withLock({ $0 += 1; return $0 }) == 300 { enough.continuation.yield() }
                            } catch let error as SendMessageError {
                                records.withLock { $0[user, default: SenderRecord()].failed[text] = error.code.rawValue }
                                return
                            } catch {
                                records.withLock { $0[user, default: SenderRecord()].failed[text] = -1 }
                                return
                            }
                        }
                    }
                }
            }
        }
        var waiter = enough.stream.makeAsyncIterator()
        _ = await waiter.next()

        first.terminate()
        let watcherClose = await watcher.readClose(timeout: .seconds(15))
        let status = await first.exitStatus(within: .seconds(15))
        #expect(status == 0, "imserver exited with \(status.map(String.init) ?? "nothing: still running 15 s after SIGTERM")")

        // No call is left hanging: every sender's last call ended (acknowledged or failed).
        let deadline = ContinuousClock.now + .seconds(30)
        while finished.value < senders.count && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(finished.value == senders.count, "\(senders.count - finished.value) senders still wait for an answer")
        load.cancel()
        for client in clients { await client.disconnect() }
        watcher.close()

        // The server closed the session with 1001 (going away) and said why.
        #expect(watcherClose?.code == 1001, "close frame: \(String(describing: watcherClose))")
        #expect(watcherClose?.reason.contains("shutting down") == true)

        let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        #expect(log.contains("closing the client sessions"), "\(log)")
        #expect(log.contains("message log drained: every message it accepted is committed and answered"), "\(log)")
        #expect(log.contains("store closed"), "\(log)")

        let byUser = records.value
        let acked = byUser.values.reduce(into: [String: String]()) { $0.merge($1.acked) { a, _ in a } }
        #expect(acked.count >= 300)
        for (user, record) in byUser {
            // Each sender stops at its first failure: the shutdown's refusal (31003), or the
            // connection closing under a call (30011) or already closed (30002). Never a timeout.
            #expect(record.failed.count == 1, "\(user): \(record.failed)")
            for code in record.failed.values {
                #expect([31003, 30011, 30002].contains(code), "\(user) failed with \(code)")
            }
            #expect(record.acked.count + record.failed.count == record.attempts)
        }

        // Restarted on the same data: everything acknowledged is there.
        let second = try await ChildServer(dataDir: dataDir.appendingPathComponent("data"), appKey: app.appKey, appSecret: app.appSecret)
        defer { second.kill() }
        var options = IMClientOptions()
        options.databaseDirectory = dataDir.appendingPathComponent("clients/receiver")
        let receiver = IMClient(appKey: app.appKey, serverURL: second.baseURL, options: options)
        let inbox = EventRecorder(receiver.receivedMessages())
        try await receiver.connect(token: receiverToken)
        let done = await inbox.first(timeout: .seconds(60)) { $0.left == 0 && !$0.hasPackage }
        #expect(done != nil, "offline sync finished")
        await receiver.disconnect()
        let received = inbox.items.map(\.message)
        let receivedUIDs = Set(received.map(\.messageUId))
        #expect(receivedUIDs.count == received.count, "no message arrived twice")
        let missing = acked.filter { !receivedUIDs.contains($0.value) }
        #expect(missing.isEmpty, "\(missing.count) of \(acked.count) acknowledged messages are not stored: \(missing.keys.sorted().prefix(10))")

        // Stored but not acknowledged: only a call whose connection closed under it (30011), at
        // most one per sender. Nothing refused (31003) or never sent (30002) is stored.
        var unacknowledged: [String: Int] = [:]
        for message in received {
            let text = (message.content as? TextMessage)?.content ?? ""
            let user = message.senderUserId
            guard let record = byUser[user] else {
                Issue.record("a message from \(user), who sent nothing: \(text)")
                continue
            }
            if let uid = record.acked[text] {
                #expect(uid == message.messageUId, "\(text) is stored under another uid than it was acknowledged with")
            } else if let code = record.failed[text] {
                #expect(code == 30011, "\(text) is stored although its sender was told \(code)")
                unacknowledged[user, default: 0] += 1
            } else {
                Issue.record("\(text) is stored but was never sent")
            }
        }
        #expect(unacknowledged.values.allSatisfy { $0 <= 1 }, "\(unacknowledged)")
    }

    @Test("once the shutdown has begun, requests get 31003 and new connections 503, and the sessions still close with 1001")
    func refusesOnceStopping() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let alice = try await server.connectedClient("alice")
            let port = try #require(Int(server.baseURL.split(separator: ":").last ?? ""))
            let watcher = try await RawSocket.connected(port: port, appKey: server.app.appKey, token: try await server.token("watcher"))
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "before"))

            // The first step of the shutdown alone: nothing is closed yet.
            server.core.shutdown.stop()
            let code = await failureCode {
                _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after"))
            }
            #expect(code == ErrorCode.serverUnavailable.rawValue)
            let late = try RawSocket(port: port)
            try late.send("POST /user/getToken.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            let answer = String(decoding: await late.readUntilClosed(timeout: .seconds(10)) ?? [], as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
            #expect(answer.contains("31003"), "\(answer)")

            // The rest of the shutdown closes the session with 1001.
            async let stopped: Void = server.stop()
            let close = await watcher.readClose(timeout: .seconds(10))
            await stopped
            #expect(close?.code == 1001, "\(String(describing: close))")
            await alice.disconnect()
        }
    }

    @Test("the message log, told to stop, commits and answers every append made before and refuses later ones")
    func messageLogDrains() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-drain-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try SQLiteStore(directory: dir.path)
        let delivered = Locked(0)
        // The seqs of each batch handed to delivery, in the order handed.
        let batches = Locked<[[UInt64]]>([])
        let log = MessageLog(store: store, clock: SystemClock(), maxBatch: 16) { batch in
            delivered.withLock { $0 += batch.count }
            batches.withLock { list in
                list.append(batch.compactMap { if case .stored(let stored) = $0.outcome { stored.seq } else { nil } })
            }
        }
        func message(_ index: Int) -> StoredMessage {
            StoredMessage(appId: 1, conversationType: .private, conversationKey: privateConversationKey("a", "b"), targetId: "b",
                          senderId: "a", objectName: "RC:TxtMsg", content: Data(#"{"content":"\#(index)"}"#.utf8), flags: .isPersisted)
        }
        // Appended while no writer runs: they wait in the queue.
        let appends = Task {
            try await withThrowingTaskGroup(of: CommitOutcome.self) { group in
                for index in 0..<100 { group.addTask { try await log.append(message(index), origin: .system) } }
                return try await group.reduce(into: [CommitOutcome]()) { $0.append($1) }
            }
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while await log.queuedCount < 100 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(await log.queuedCount == 100)

        log.stopWriting()
        let (committed, failed) = await log.runWriter()
        #expect(committed == 100 && failed == 0)
        let outcomes = try await appends.value
        #expect(outcomes.count == 100 && delivered.value == 100)
        // The backlog is committed 16 at a time and each batch delivered in commit order.
        let handed = batches.value
        #expect(handed.map(\.count) == [16, 16, 16, 16, 16, 16, 4])
        let seqs = handed.flatMap { $0 }
        #expect(seqs == seqs.sorted() && Set(seqs).count == 100)
        for outcome in outcomes {
            guard case .stored(let stored) = outcome else {
                Issue.record("not stored: \(outcome)")
                continue
            }
            #expect(try await store.message(appId: 1, uid: stored.uid) != nil)
        }
        do {
            _ = try await log.append(message(100), origin: .system)
            Issue.record("an append after the drain was accepted")
        } catch let error as IMError {
            #expect(error.code == .serverUnavailable)
        }
        try store.close()
    }
}
