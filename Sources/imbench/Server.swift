import Crypto
import Foundation
import IMProcess
import IMServer
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The imserver a benchmark drives: one imbench started, or one already running (`--url`).
struct ServerTarget: Sendable {
    var host: String
    var port: Int
    var appKey: String
    var appSecret: String
    /// The server's process id, for RSS and CPU; nil when unknown (a `--url` server without `--server-pid`).
    var pid: Int32?

    var baseURL: String { "http://\(host):\(port)" }
}

/// An imserver child process with its own data directory; its output goes to `imserver.log` there.
final class ServerProcess: Sendable {
    let target: ServerTarget
    let binary: String
    let dataDir: String
    let logPath: String
    private let process: ChildProcess

    private init(target: ServerTarget, binary: String, dataDir: String, logPath: String, process: ChildProcess) {
        self.target = target
        self.binary = binary
        self.dataDir = dataDir
        self.logPath = logPath
        self.process = process
    }

    /// The imserver binary built beside this imbench (same build directory).
    static func defaultBinary() -> String {
        URL(fileURLWithPath: currentExecutablePath()).deletingLastPathComponent().appendingPathComponent("imserver").path
    }

    /// Starts `imserver serve` on 127.0.0.1 and a free port and waits for its "listening" line.
    static func start(binary: String, dataDir: String, appKey: String, appSecret: String,
                      extraArguments: [String], environment extraEnvironment: [String: String] = [:]) async throws -> ServerProcess {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("no imserver binary at \(binary): build it (swift build -c release) or pass --imserver PATH")
        }
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let logPath = (dataDir as NSString).appendingPathComponent("imserver.log")
        // Users are created through /user/getToken.json before the load: its per-app rate limit
        // (100 calls/s by default) would make a 19,000-user setup take minutes. Setup, not measured.
        var environment = ProcessInfo.processInfo.environment
        environment["IMSERVER_API_CALLS_PER_SECOND"] = "0"
        // Each worker process opens up to 15,000 connections from one loopback address.
        environment["IMSERVER_MAX_CONNECTIONS_PER_ADDRESS"] = "0"
        environment.merge(extraEnvironment) { _, new in new }
        let process = try ChildProcess(binary, ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir,
                                                "--app-key", appKey, "--app-secret", appSecret, "--log-level", "warning"] + extraArguments,
                                       environment: environment, standardOutput: .file(logPath), standardError: .standardOutput)
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("imserver listening on http://") }) {
                let address = line.dropFirst("imserver listening on http://".count).prefix { $0 != " " }
                guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { break }
                let target = ServerTarget(host: "127.0.0.1", port: port, appKey: appKey, appSecret: appSecret,
                                          pid: process.pid)
                return ServerProcess(target: target, binary: binary, dataDir: dataDir, logPath: logPath, process: process)
            }
            if let ended = process.termination {
                throw BenchError("imserver ended (\(ended)) before listening:\n\(text)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        throw BenchError("imserver did not print its listening line within 120 s; see \(logPath)")
    }

    /// Stops the server (SIGTERM, then SIGKILL after 15 s).
    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        if await process.exit(within: .seconds(15)) == nil { process.signal(SIGKILL) }
    }

    var isRunning: Bool { process.isRunning }
}

/// The Server API calls imbench makes, signed the RongCloud way.
struct ServerAPI: Sendable {
    let target: ServerTarget

    /// Registers the users and returns their tokens (POST /user/getToken.json), `concurrency` calls at a time.
    func tokens(for users: [String], concurrency: Int = 16) async throws -> [String] {
        var tokens = [String](repeating: "", count: users.count)
        let started = ContinuousClock.now
        var iterator = users.indices.makeIterator()
        var done = 0
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for _ in 0..<concurrency {
                guard let index = iterator.next() else { break }
                group.addTask { (index, try await self.token(users[index])) }
            }
            while let (index, token) = try await group.next() {
                tokens[index] = token
                done += 1
                if done % 5000 == 0 { note("  tokens: \(done)/\(users.count)") }
                if let next = iterator.next() {
                    group.addTask { (next, try await self.token(users[next])) }
                }
            }
        }
        if users.count >= 1000 {
            note("  \(users.count) tokens in \(fmt((ContinuousClock.now - started).seconds, 1)) s")
        }
        return tokens
    }

    func token(_ userId: String) async throws -> String {
        let body = try await post("/user/getToken.json", form: "userId=\(userId)&name=\(userId)")
        guard let token = body["token"] as? String else {
            throw BenchError("getToken for \(userId) failed: \(body)")
        }
        return token
    }

    /// A text from one user to another through /message/private/publish.json.
    func publishPrivate(from: String, to: String, text: String) async throws {
        let content = String(decoding: try JSONSerialization.data(withJSONObject: ["content": text]), as: UTF8.self)
        let encoded = content.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let body = try await post("/message/private/publish.json", form: "fromUserId=\(from)&toUserId=\(to)&objectName=RC:TxtMsg&content=\(encoded)")
        guard (body["code"] as? NSNumber)?.intValue == 200 else { throw BenchError("publish from \(from) to \(to) failed: \(body)") }
    }

    /// Creates a group with these members: /group/create.json with the first 1,000 (the most one
    /// call takes), /group/join.json with each further 1,000.
    func createGroup(_ groupId: String, name: String, members: [String]) async throws {
        var start = 0
        repeat {
            let chunk = members[start..<min(members.count, start + 1000)]
            let path = start == 0 ? "/group/create.json" : "/group/join.json"
            let form = chunk.map { "userId=\($0)" }.joined(separator: "&") + "&groupId=\(groupId)&groupName=\(name)"
            let body = try await post(path, form: form)
            guard (body["code"] as? NSNumber)?.intValue == 200 else {
                throw BenchError("\(path) for group \(groupId) (members \(start)…\(start + chunk.count - 1)) failed: \(body)")
            }
            start += chunk.count
        } while start < members.count
    }

    /// How many members the server lists for the group (/group/user/query.json).
    func groupMemberCount(_ groupId: String) async throws -> Int {
        let body = try await post("/group/user/query.json", form: "groupId=\(groupId)")
        guard (body["code"] as? NSNumber)?.intValue == 200, let users = body["users"] as? [Any] else {
            throw BenchError("/group/user/query.json for group \(groupId) failed: \(body)")
        }
        return users.count
    }

    /// Sets the app's callbacks (/callback/settings/set.json), e.g. `routingUrl=…&messageCallbackUrl=…`.
    func setCallbacks(form: String) async throws {
        let body = try await post("/callback/settings/set.json", form: form)
        guard (body["code"] as? NSNumber)?.intValue == 200 else {
            throw BenchError("/callback/settings/set.json failed: \(body)")
        }
    }

    /// The app's callbacks waiting to be sent and what the node that answers counted so far
    /// (/callback/settings/get.json): backlog, delivered, failedAttempts, dropped.
    func callbackState() async throws -> (backlog: Int, delivered: Int, failedAttempts: Int, dropped: Int) {
        let body = try await post("/callback/settings/get.json", form: "")
        guard (body["code"] as? NSNumber)?.intValue == 200, let backlog = (body["backlog"] as? NSNumber)?.intValue,
              let stats = body["stats"] as? [String: Any] else {
            throw BenchError("/callback/settings/get.json failed: \(body)")
        }
        func count(_ name: String) -> Int { (stats[name] as? NSNumber)?.intValue ?? 0 }
        return (backlog, count("delivered"), count("failedAttempts"), count("dropped"))
    }

    /// The live sessions the server counts (GET /health).
    func sessions() async -> Int? {
        await health()?.sessions
    }

    /// What GET /health says: this node's live sessions and the cluster's live nodes (1 alone).
    func health() async -> (sessions: Int, nodes: Int)? {
        guard let url = URL(string: target.baseURL + "/health"),
              let (data, _) = try? await URLSession.shared.data(from: url),
              let body = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let sessions = (body["sessions"] as? NSNumber)?.intValue else { return nil }
        return (sessions, (body["nodes"] as? NSNumber)?.intValue ?? 1)
    }

    private func post(_ path: String, form: String) async throws -> [String: Any] {
        var request = URLRequest(url: URL(string: target.baseURL + path)!)
        request.httpMethod = "POST"
        let nonce = String(UInt64.random(in: 0..<UInt64.max))
        let timestamp = String(Int(Date().timeIntervalSince1970 * 1000))
        let signature = APISignature.sign(secret: target.appSecret, nonce: nonce, timestamp: timestamp)
        request.setValue(target.appKey, forHTTPHeaderField: "App-Key")
        request.setValue(nonce, forHTTPHeaderField: "Nonce")
        request.setValue(timestamp, forHTTPHeaderField: "Timestamp")
        request.setValue(signature, forHTTPHeaderField: "Signature")
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(form.utf8)
        var lastError: (any Error)?
        var attempt = 0
        var rateLimited = 0
        while attempt < 5 && rateLimited < 600 {
            do {
                let (data, response) = try await URLSession.shared.data(for: request)
                let body = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                if status == 429 {
                    // The server's Server API rate limit (a --url server): wait for the next window.
                    rateLimited += 1
                    try await Task.sleep(for: .seconds(1))
                    continue
                }
                guard status == 200 else { throw BenchError("\(path) answered \(status): \(body)") }
                return body
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(100 << attempt))
                attempt += 1
            }
        }
        throw lastError ?? BenchError("\(path) stayed rate-limited for 10 minutes")
    }
}
