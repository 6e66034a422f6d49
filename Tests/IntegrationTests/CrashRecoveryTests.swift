import Foundation
import IMCore
import IMLib
import IMProcess
import IMServer
import IMStore
import Synchronization
import IMServerTesting
import Testing

/// `kill -9` of a real imserver process under send load: every message acknowledged to its sender
/// must be in history after a restart and reach its recipient.
@Suite("Crash recovery")
struct CrashRecoveryTests {
    @Test("nothing acknowledged is lost when the server is killed with SIGKILL")
    func killNine() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-crash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let app = AppRecord(id: 0, appKey: "crashkey", appSecret: "crashsecret", name: "", createdAt: 0)

        let first = try await ChildServer(dataDir: dataDir, appKey: app.appKey, appSecret: app.appSecret)
        defer { first.kill() }
        let api = ServerAPIClient(baseURL: first.baseURL, app: app)
        func token(_ user: String, _ api: ServerAPIClient) async throws -> String {
            try #require(try await api.post("/user/getToken.json", form: ["userId": user]).1["token"] as? String)
        }
        let receiverToken = try await token("receiver", api)
        let senders = ["s1", "s2", "s3", "s4"]
        var clients: [IMClient] = []
        for user in senders {
            var options = IMClientOptions()
            options.databaseDirectory = dataDir.appendingPathComponent("clients/\(user)")
            options.requestTimeout = .seconds(5)
            let client = IMClient(appKey: app.appKey, serverURL: first.baseURL, options: options)
            try await client.connect(token: try await token(user, api))
            clients.append(client)
        }

        let acked = Locked<[String]>([])
        let enough = AsyncStream<Void>.makeStream()
        let senderClients = clients
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for client in senderClients {
                    group.addTask {
                        for index in 0..<100_000 {
                            do {
                                let message = try await client.sendMessage(.private, targetId: "receiver", content: TextMessage(content: "n\(index)"))
                                let count = acked.withLock { $0.append(message.messageUId); return $0.count }
                                if count == 400 { enough.continuation.yield() }
                            } catch {
                                return
                            }
                        }
                    }
                }
            }
        }
        var waiter = enough.stream.makeAsyncIterator()
        _ = await waiter.next()
        first.kill()
        await load.value
        for client in clients { await client.disconnect() }
        let ackedUIDs = acked.value
        #expect(ackedUIDs.count >= 400)

        let second = try await ChildServer(dataDir: dataDir, appKey: app.appKey, appSecret: app.appSecret)
        defer { second.kill() }
        var options = IMClientOptions()
        options.databaseDirectory = dataDir.appendingPathComponent("clients/receiver")
        let receiver = IMClient(appKey: app.appKey, serverURL: second.baseURL, options: options)
        let inbox = EventRecorder(receiver.receivedMessages())
        try await receiver.connect(token: receiverToken)
        let done = await inbox.first(timeout: .seconds(60)) { $0.left == 0 && !$0.hasPackage }
        #expect(done != nil, "offline sync finished")
        let received = Set(inbox.items.map(\.message.messageUId))
        let missing = ackedUIDs.filter { !received.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) of \(ackedUIDs.count) acknowledged messages were lost")
        #expect(received.count == inbox.items.count, "no message arrived twice")

        // And the history of one sender's conversation holds each of its acknowledged messages.
        var history: Set<String> = []
        var recordTime: Int64 = 0
        while true {
            let page = try await receiver.getRemoteHistoryMessages(.private, targetId: "s1", recordTime: recordTime, count: 100)
            history.formUnion(page.messages.map(\.messageUId))
            guard page.isRemaining, let last = page.messages.last else { break }
            recordTime = last.sentTime
        }
        let s1Acked = inbox.items.filter { $0.message.senderUserId == "s1" }.map(\.message.messageUId)
        #expect(!s1Acked.isEmpty)
        #expect(s1Acked.allSatisfy(history.contains))
        await receiver.disconnect()
    }
}

/// An `imserver` executable started as a child process.
final class ChildServer: Sendable {
    let process: ChildProcess
    let baseURL: String

    /// - Parameters:
    ///   - logFile: where its log (stderr) goes, at `logLevel`; nowhere when nil.
    ///   - environment: `IMSERVER_*` settings added to this process's environment.
    init(dataDir: URL, appKey: String, appSecret: String, logLevel: String = "error", logFile: URL? = nil,
         environment: [String: String] = [:]) async throws {
        let binary = ChildServer.binaryURL()
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw IMError(.serverUnavailable, "imserver binary not found at \(binary.path): run `swift build` before the tests")
        }
        let process = try ChildProcess(binary.path, ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir.path,
                                                     "--app-key", appKey, "--app-secret", appSecret, "--client-sends-per-second", "100000",
                                                     "--log-level", logLevel],
                                       environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                       standardOutput: .pipe, standardError: logFile.map { .file($0.path) } ?? .null)
        self.process = process
        // Read stdout until the server says where it listens (waiting off the cooperative pool: a
        // debug build on a busy machine takes seconds to start).
        var text = ""
        let descriptor = process.standardOutput!
        while !text.contains("\n") {
            guard let chunk = await ChildProcess.nextChunk(descriptor), !chunk.isEmpty else { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: #"http://127\.0\.0\.1:\d+"#, options: .regularExpression) else {
            process.terminate()
            throw IMError(.serverUnavailable, "imserver did not report its address; it printed: \(text)")
        }
        baseURL = String(text[range])
    }

    func kill() {
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    /// Sends SIGTERM: the server shuts down gracefully.
    func terminate() {
        process.terminate()
    }

    /// The exit status once the process has exited, or nil if it is still running after `limit`.
    func exitStatus(within limit: Duration) async -> Int32? {
        await process.exit(within: limit)?.status
    }

    static func binaryURL() -> URL {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        // On macOS the test bundle is a directory tree (…/debug/X.xctest/Contents/MacOS/X).
        while directory.path != "/" && !FileManager.default.fileExists(atPath: directory.appendingPathComponent("imserver").path) {
            directory = directory.deletingLastPathComponent()
        }
        return directory.appendingPathComponent("imserver")
    }
}
