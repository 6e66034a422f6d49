import Foundation
import IMCore
import IMLib
import IMProcess

extension Scenarios {
    struct IMChatParameters: Sendable {
        /// The local database imchat starts from: conversations, and messages spread over them.
        var conversations = 1_000
        var messages = 100_000
        /// imchat starts measured, each a new process on the same database.
        var starts = 5
        /// Messages per second arriving in the open conversation while keys are typed.
        var messageRate = 50.0
        /// Keys typed per second, and for how long.
        var keyRate = 10.0
        var duration = 20.0
        var quick = false
    }

    /// imchat, the terminal app, in a real terminal (tmux): the time from its start to the
    /// conversation list drawn from a local database of `conversations` and `messages`, before the
    /// connection; then key-to-screen (a key read to its frame written) while messages arrive in
    /// the open conversation. Figures come from imchat's event log; the server is a real one.
    static func imchat(_ p: IMChatParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "imchat")
        result.quick = p.quick
        let imchat = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("imchat").path
        guard FileManager.default.isExecutableFile(atPath: imchat) else {
            throw BenchError("imchat is not built beside imbench (\(imchat)): swift build --product imchat")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") else {
            throw BenchError("tmux is not installed: scripts/tmux.sh")
        }
        let harness = try await Harness.start("imchat", options: options)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imbench-imchat-\(UUID().uuidString.prefix(8))")
        let tmux = BenchTmux(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let token = try await harness.api.token("alice")

            // The local database: `messages` received over `conversations` one-to-one
            // conversations, written through IMLib as a device that has been in use would have.
            let seedStarted = ContinuousClock.now
            var settings = IMClientOptions()
            settings.databaseDirectory = directory.appendingPathComponent("data/imlib")
            let seeder = IMClient(appKey: harness.target.appKey, serverURL: harness.target.baseURL, options: settings)
            try await seeder.connect(token: token)
            let base = Int64(Date().timeIntervalSince1970 * 1000) - Int64(p.messages) * 10
            for index in 0..<p.messages {
                let peer = String(format: "u%05d", index % p.conversations)
                _ = try await seeder.insertIncomingMessage(.private, targetId: peer, senderUserId: peer,
                                                           content: TextMessage(content: "message \(index) from \(peer)"),
                                                           sentTime: base + Int64(index) * 10)
            }
            await seeder.disconnect()
            let seedSeconds = (ContinuousClock.now - seedStarted).seconds

            let arguments = [imchat, "--server", harness.target.baseURL, "--app-key", harness.target.appKey, "--token", token,
                             "--data-dir", directory.appendingPathComponent("data").path]

            // Starts: a new process each time, the list drawn from the database.
            var startMs: [Double] = []
            var wallMs: [Double] = []
            var rowsDrawn = 0
            for run in 0..<p.starts {
                let log = directory.appendingPathComponent("start-\(run).log").path
                let launched = ContinuousClock.now
                try await tmux.start("start\(run)", arguments + ["--event-log", log])
                let ready = try await tmux.waitForEvent("ready", in: log, timeout: .seconds(60))
                wallMs.append((ContinuousClock.now - launched).seconds * 1000)
                startMs.append(Double(ready["ms"] ?? "") ?? -1)
                rowsDrawn = Int(ready["rows"] ?? "") ?? 0
                await tmux.stop("start\(run)")
            }
            if rowsDrawn < min(p.conversations, 1_000) {
                result.problems.append("the first list drew \(rowsDrawn) rows of \(p.conversations) conversations")
            }

            // Key-to-screen while messages arrive in the open conversation.
            let log = directory.appendingPathComponent("keys.log").path
            try await tmux.start("keys", arguments + ["--event-log", log])
            _ = try await tmux.waitForEvent("ready", in: log, timeout: .seconds(60))
            _ = try await tmux.waitForEvent("connection", in: log, timeout: .seconds(60)) { $0["state"] == "[connected]" }
            try await tmux.keys("keys", ["o"])
            try await tmux.literal("keys", "bob")
            try await tmux.keys("keys", ["Enter"])
            _ = try await tmux.waitForEvent("open", in: log, timeout: .seconds(30))
            let pid = try await tmux.panePid("keys")
            let clientBefore = pid.flatMap(ProcessSample.read(pid:))
            let serverBefore = await harness.sampleServer()
            let loadStarted = ContinuousClock.now
            let api = harness.api
            let rate = p.messageRate
            let duration = p.duration
            let sender = Task { () -> (sent: Int, failed: Int) in
                var sent = 0
                var failed = 0
                let total = Int(rate * duration)
                for index in 0..<total {
                    let due = loadStarted + .seconds(Double(index) / rate)
                    if due > .now { try? await Task.sleep(until: due) }
                    do {
                        try await api.publishPrivate(from: "bob", to: "alice", text: "live \(index)")
                        sent += 1
                    } catch {
                        failed += 1
                    }
                }
                return (sent, failed)
            }
            let keys = Int(p.keyRate * p.duration)
            for index in 0..<keys {
                let due = loadStarted + .seconds(Double(index) / p.keyRate)
                if due > .now { try? await Task.sleep(until: due) }
                // Ten letters typed, then ten erased: the input stays short.
                if index % 20 < 10 { try await tmux.literal("keys", "k") } else { try await tmux.keys("keys", ["BSpace"]) }
            }
            let (sent, failed) = await sender.value
            let loadSeconds = (ContinuousClock.now - loadStarted).seconds
            let clientAfter = pid.flatMap(ProcessSample.read(pid:))
            let serverAfter = await harness.sampleServer()
            // The last key's frame is written before the log line: give it a moment to land.
            try? await Task.sleep(for: .milliseconds(500))
            let events = BenchTmux.events(in: log)
            var keyLatency = LatencyHistogram()
            var slowFrames = 0
            for event in events where event["event"] == "key" {
                guard let micros = Double(event["us"] ?? "") else { continue }
                keyLatency.record(nanos: UInt64(max(0, micros) * 1000))
                if micros > 50_000 { slowFrames += 1 }
            }
            let screen = try await tmux.capture("keys")
            await tmux.stop("keys")
            await harness.finish()

            if keyLatency.count < UInt64(keys) {
                result.problems.append("imchat logged \(keyLatency.count) keys of \(keys) typed")
            }
            if failed > 0 { result.problems.append("\(failed) publishes failed") }
            if !screen.contains("live \(sent - 1)") {
                result.problems.append("the last message (live \(sent - 1)) is not on alice's screen:\n\(screen)")
            }
            func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
            result.run = ["conversations": "\(p.conversations)", "localMessages": "\(p.messages)", "starts": "\(p.starts)",
                          "messageRate": "\(p.messageRate)", "keyRate": "\(p.keyRate)", "duration": "\(p.duration)",
                          "terminal": "tmux 120x40", "login": "--token (no info providers)"]
                .merging(harness.layout) { a, _ in a }
            result.figures["seedSeconds"] = rounded(seedSeconds, 1)
            result.figures["startToListMsMedian"] = rounded(median(startMs), 1)
            result.figures["startToListMsMax"] = rounded(startMs.max() ?? 0, 1)
            result.figures["launchToListWallMsMedian"] = rounded(median(wallMs), 1)
            result.figures["listRowsDrawn"] = Double(rowsDrawn)
            result.figures["messagesArrived"] = Double(sent)
            result.figures["framesOver50ms"] = Double(slowFrames)
            result.latencies["keyToScreen"] = keyLatency.summary
            if let before = clientBefore, let after = clientAfter {
                result.figures["imchatCpuPercentOfOneCore"] = rounded((after.cpuSeconds - before.cpuSeconds) / loadSeconds * 100, 1)
                result.figures["imchatCpuMsPerMessage"] = rounded((after.cpuSeconds - before.cpuSeconds) * 1000 / Double(max(1, sent)), 3)
                result.figures["imchatRssMiB"] = rounded(Double(after.rssKiB) / 1024, 1)
            }
            result.server = harness.serverFigures(baseline: serverBefore, windowStart: serverBefore, windowEnd: serverAfter)
            result.notes.append("startToListMs: imchat's own count from its start to the list drawn from the local database (the first frame with rows), before the connection; launchToListWallMs adds the process launch and the generator's polling of the event log.")
            result.notes.append("keyToScreen: from imchat reading a key from the terminal to that key's frame written, while \(p.messageRate) messages/s arrive in the open conversation (each one drawn, stored and reported read).")
            check(&result)
            return result
        } catch {
            await tmux.stopAll()
            await harness.finish()
            throw error
        }
    }
}

/// A private tmux server for imchat sessions of 120×40.
struct BenchTmux: Sendable {
    let directory: URL
    var socket: String { "imbench-\(directory.lastPathComponent)" }

    @discardableResult
    func run(_ arguments: [String]) async throws -> String {
        let output = directory.appendingPathComponent("tmux-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = try ChildProcess("/usr/bin/tmux", ["-L", socket] + arguments, standardOutput: .file(output.path), standardError: .null)
        _ = await process.exit()
        return String(decoding: (try? Data(contentsOf: output)) ?? Data(), as: UTF8.self)
    }

    func start(_ session: String, _ command: [String]) async throws {
        let line = "exec " + command.map { "'\($0)'" }.joined(separator: " ")
        try await run(["new-session", "-d", "-s", session, "-x", "120", "-y", "40", line])
    }

    func keys(_ session: String, _ keys: [String]) async throws { try await run(["send-keys", "-t", session] + keys) }
    func literal(_ session: String, _ text: String) async throws { try await run(["send-keys", "-t", session, "-l", text]) }
    func capture(_ session: String) async throws -> String { try await run(["capture-pane", "-p", "-t", session]) }

    func panePid(_ session: String) async throws -> Int32? {
        Int32(try await run(["display-message", "-p", "-t", session, "#{pane_pid}"]).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func stop(_ session: String) async {
        _ = try? await keys(session, ["C-c"])
        try? await Task.sleep(for: .milliseconds(300))
        _ = try? await run(["kill-session", "-t", session])
    }

    func stopAll() async { _ = try? await run(["kill-server"]) }

    static func events(in path: String) -> [[String: String]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]) ?? nil
        }
    }

    /// The first event named `name` (and matching `where`) in the log, polled every 2 ms.
    func waitForEvent(_ name: String, in path: String, timeout: Duration,
                      where matches: ([String: String]) -> Bool = { _ in true }) async throws -> [String: String] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let event = Self.events(in: path).first(where: { $0["event"] == name && matches($0) }) { return event }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw BenchError("imchat logged no \(name) event within \(timeout) (\(path))")
    }
}
