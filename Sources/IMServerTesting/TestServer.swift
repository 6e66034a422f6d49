import Crypto
import Foundation
import IMCore
import IMLib
import IMPush
import IMServer
import IMStore
import IMStoreSQLite
import Logging
import ServiceLifecycle
import Synchronization
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs `body` with `server` and stops the server afterwards, however `body` ends: the teardown is
/// awaited, so one test's server never outlives it.
public func withTestServer<T: Sendable>(_ server: TestServer, _ body: (TestServer) async throws -> T) async throws -> T {
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// A real imserver running in this process on a free port, with its own SQLite database in a
/// temporary directory, or on a store it shares with other test servers (the nodes of a cluster).
public final class TestServer: Sendable {
    public let core: ServerCore
    public let baseURL: String
    public let dataDir: URL
    public let app: AppRecord
    private let group: ServiceGroup
    private let runner: Task<Void, any Error>

    /// Starts a server on a fresh data directory and a free port. With a `ManualClock` no heartbeat
    /// sweep runs on its own: the test moves time, and calls `core.sweepIdleSessions()` to drop
    /// the sessions that time made silent.
    public static func start(clock: any WallClock = SystemClock(), configure: (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        try await start(store: nil, clock: clock, configure: configure)
    }

    /// Starts a server that sends its pushes through `push` (e.g. a `ProviderPushTransport` aimed
    /// at `TestAPNsServer`, `TestFCMServer` and `TestWebhookReceiver`; the server shuts it down).
    public static func start(push: any PushTransport, pushOptions: PushService.Options? = nil, store: (any IMStore)? = nil,
                             clock: any WallClock = SystemClock(), configure: (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        try await start(store: store, clock: clock, pushTransport: push, pushOptions: pushOptions, configure: configure)
    }

    /// Starts a server on `store`, which the caller owns and closes: stopping the server leaves the
    /// store open, so several servers on one store are the nodes of a cluster, and one can stop while
    /// the others serve.
    public static func start(sharing store: any IMStore, clock: any WallClock = SystemClock(),
                             configure: (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        try await start(store: .some(store), clock: clock, configure: configure)
    }

    /// Starts a server on a store it is given (and does not close): several servers on one store,
    /// each with its own `cluster` transport, are the nodes of a cluster. With no store, a SQLite
    /// store of its own in a fresh data directory (closed when the server stops).
    public static func start(store given: (any IMStore)?, cluster: (any ClusterTransport)? = nil, clock: any WallClock = SystemClock(),
                             pushTransport: (any PushTransport)? = nil, pushOptions: PushService.Options? = nil,
                             callbackTransport: (any CallbackTransport)? = nil, callbackOptions: CallbackService.Options? = nil,
                             logger customLogger: Logger? = nil,
                             configure: (inout ServerConfig) -> Void = { _ in }) async throws -> TestServer {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-test-\(UUID().uuidString)")
        var config = ServerConfig()
        config.network.host = "127.0.0.1"
        config.network.port = 0
        config.storage.dataDir = dataDir.path
        config.developmentApp.key = "testappkey"
        config.developmentApp.secret = "testsecret"
        configure(&config)
        var logger = Logger(label: "imserver-test")
        logger.logLevel = .warning
        if let customLogger { logger = customLogger }
        let store: any IMStore
        let closeStore: @Sendable () async throws -> Void
        if let given {
            store = given
            closeStore = {}
        } else {
            let own = try SQLiteStore(directory: config.storage.dataDir)
            store = own
            closeStore = { try own.close() }
        }
        let core = ServerCore(config: config, store: store, clock: clock, logger: logger, cluster: cluster,
                              pushTransport: pushTransport, pushOptions: pushOptions, callbackTransport: callbackTransport,
                              callbackOptions: callbackOptions)
        let app = try await core.prepare()
        // Only a test that gives a console password has one (hashing it takes a while).
        if config.console.password != nil { _ = try await core.console.prepare() }
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let group = IMServerApp(core: core).serviceGroup(handlesSignals: false, sweepsIdleSessions: !(clock is ManualClock), closeStore: closeStore) { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let runner = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw IMError(.serverUnavailable, "test server did not start") }
        return TestServer(core: core, baseURL: "http://127.0.0.1:\(port)", dataDir: dataDir, app: app, group: group, runner: runner)
    }

    private init(core: ServerCore, baseURL: String, dataDir: URL, app: AppRecord, group: ServiceGroup, runner: Task<Void, any Error>) {
        self.core = core
        self.baseURL = baseURL
        self.dataDir = dataDir
        self.app = app
        self.group = group
        self.runner = runner
    }

    /// Shuts the server down as SIGTERM does imserver (`IMServerApp.serviceGroup`): the client
    /// sessions are closed, the message log drained and the store closed (unless shared); then the
    /// data directory is removed.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = await runner.result
        try? FileManager.default.removeItem(at: dataDir)
    }

    /// A Server API client of the test app.
    public var api: ServerAPIClient { ServerAPIClient(baseURL: baseURL, app: app) }

    /// A token for the user, through the Server API exactly as an app server gets one.
    public func token(_ userId: String, app: AppRecord? = nil) async throws -> String {
        let (status, body) = try await ServerAPIClient(baseURL: baseURL, app: app ?? self.app).post("/user/getToken.json", form: ["userId": userId, "name": userId])
        #expect(status == 200, "getToken failed: \(body)")
        return try #require(body["token"] as? String)
    }

    /// A client with its own temporary database directory, of this server or of the given servers
    /// (`serverURLs`, the nodes of a cluster, in order).
    public func client(platform: Platform = .linux, app: AppRecord? = nil, serverURLs: [String]? = nil,
                       configure: (inout IMClientOptions) -> Void = { _ in }) -> IMClient {
        var options = IMClientOptions()
        options.platform = platform
        options.databaseDirectory = dataDir.appendingPathComponent("clients/\(UUID().uuidString)")
        // Generous: the suite runs its tests side by side on two cores, and a request can wait its
        // turn for seconds; a server that does not answer at all still fails the test.
        options.requestTimeout = .seconds(30)
        configure(&options)
        return IMClient(appKey: (app ?? self.app).appKey, serverURLs: serverURLs ?? [baseURL], options: options)
    }

    /// A new device of a user, connected, with the recorder of everything it has received, returned
    /// once its offline sync is done: the recorder then holds exactly what the sync delivered.
    public func syncedDevice(_ userId: String, platform: Platform = .linux) async throws -> (IMClient, EventRecorder<ReceivedMessage>) {
        let client = client(platform: platform)
        let inbox = EventRecorder(client.receivedMessages())
        let synced = EventRecorder(client.offlineMessageSyncCompleted())
        try await client.connect(token: try await token(userId))
        #expect(await synced.wait(for: 1).count == 1, "offline sync of \(userId) completed")
        // The two streams are read by tasks of their own: the sync's event can be seen before the
        // last offline message has been taken from the other stream.
        let delivered = client.receivedMessageCount
        #expect(await inbox.wait(for: delivered).count >= delivered, "the inbox of \(userId) holds what the sync delivered")
        return (client, inbox)
    }

    /// A connected client of a user, returned once its offline sync is done (so what is sent next
    /// arrives live).
    public func connectedClient(_ userId: String, platform: Platform = .linux, configure: (inout IMClientOptions) -> Void = { _ in }) async throws -> IMClient {
        let client = client(platform: platform, configure: configure)
        let synced = EventRecorder(client.offlineMessageSyncCompleted())
        try await client.connect(token: try await token(userId))
        #expect(await synced.wait(for: 1).count == 1, "offline sync of \(userId) completed")
        return client
    }
}

/// Calls the Server API with RongCloud's signature headers.
public struct ServerAPIClient: Sendable {
    public let baseURL: String
    public let app: AppRecord

    public init(baseURL: String, app: AppRecord) {
        self.baseURL = baseURL
        self.app = app
    }

    public func post(_ path: String, form: [String: String], signatureSecret: String? = nil) async throws -> (Int, [String: Any]) {
        let body = form.map { key, value in
            "\(key)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
        }.joined(separator: "&")
        return try await post(path, body: Data(body.utf8), contentType: "application/x-www-form-urlencoded", signatureSecret: signatureSecret)
    }

    /// Posts a form body exactly as written (repeated keys, unencoded values, bracket keys).
    public func post(_ path: String, rawForm: String) async throws -> (Int, [String: Any]) {
        try await post(path, body: Data(rawForm.utf8), contentType: "application/x-www-form-urlencoded")
    }

    /// Posts a JSON body.
    public func post(_ path: String, json: [String: Any]) async throws -> (Int, [String: Any]) {
        try await post(path, body: try JSONSerialization.data(withJSONObject: json), contentType: "application/json")
    }

    public func post(_ path: String, body: Data, contentType: String, signatureSecret: String? = nil) async throws -> (Int, [String: Any]) {
        try await send("POST", path, body: body, contentType: contentType, signatureSecret: signatureSecret)
    }

    /// A signed call with any method (the `/v2` family uses GET, PUT and DELETE too); a JSON body when given.
    public func send(_ method: String, _ path: String, json: [String: Any]? = nil) async throws -> (Int, [String: Any]) {
        try await send(method, path, body: try json.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data(), contentType: "application/json")
    }

    public func send(_ method: String, _ path: String, body: Data, contentType: String, signatureSecret: String? = nil) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: baseURL + path)!)
        request.httpMethod = method
        let nonce = String(Int.random(in: 0..<1_000_000_000))
        let timestamp = String(Int(Date().timeIntervalSince1970))
        let signature = APISignature.sign(secret: signatureSecret ?? app.appSecret, nonce: nonce, timestamp: timestamp)
        request.setValue(app.appKey, forHTTPHeaderField: "App-Key")
        request.setValue(nonce, forHTTPHeaderField: "Nonce")
        request.setValue(timestamp, forHTTPHeaderField: "Timestamp")
        request.setValue(signature, forHTTPHeaderField: "Signature")
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.setValue(UUID().uuidString, forHTTPHeaderField: "X-Request-Id")
        if !body.isEmpty { request.httpBody = body }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, object)
    }
}

/// Collects events from a stream in the background, for assertions that await them.
public final class EventRecorder<Element: Sendable>: Sendable {
    private final class State: Sendable {
        let mutex = Mutex<(items: [Element], waiters: [(Int, CheckedContinuation<Void, Never>)])>(([], []))
        func withLock<R>(_ body: (inout (items: [Element], waiters: [(Int, CheckedContinuation<Void, Never>)])) -> R) -> R {
            mutex.withLock { body(&$0) }
        }
    }

    private let state = State()
    private let task: Task<Void, Never>

    public init(_ stream: AsyncStream<Element>) {
        let state = self.state
        task = Task {
            for await item in stream {
                let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.items.append(item)
                    let count = state.items.count
                    let (done, waiting) = state.waiters.reduce(into: ([CheckedContinuation<Void, Never>](), [(Int, CheckedContinuation<Void, Never>)]())) { acc, waiter in
                        if waiter.0 <= count { acc.0.append(waiter.1) } else { acc.1.append(waiter) }
                    }
                    state.waiters = waiting
                    return done
                }
                for waiter in ready { waiter.resume() }
            }
        }
    }

    deinit { task.cancel() }

    public var items: [Element] { state.withLock { $0.items } }

    /// Waits until at least `count` events arrived (or the time limit passes) and returns them all.
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(20)) async -> [Element] {
        let timer = Task { [state] in
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                defer { state.waiters = [] }
                return state.waiters.map(\.1)
            }
            for waiter in waiters { waiter.resume() }
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.items.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
        return items
    }

    /// Waits until the events so far satisfy the condition (or the time limit passes) and returns
    /// them all: for streams where other events may come between the ones a test counts.
    @discardableResult
    public func wait(timeout: Duration = .seconds(20), until condition: @Sendable ([Element]) -> Bool) async -> [Element] {
        var seen = 0
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let all = await wait(for: seen + 1, timeout: deadline - .now)
            if condition(all) || all.count == seen { return all }
            seen = all.count
        }
        return items
    }

    /// Waits until an event satisfies the predicate; returns it, or nil after the time limit.
    public func first(timeout: Duration = .seconds(20), where predicate: @Sendable (Element) -> Bool) async -> Element? {
        var seen = 0
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let all = await wait(for: seen + 1, timeout: deadline - .now)
            if let match = all.first(where: predicate) { return match }
            if all.count == seen { return nil }
            seen = all.count
        }
        return nil
    }
}

/// The RongCloud code a call failed with: nil when it succeeded, -1 (and a recorded issue) for an
/// error that carries no code.
public func failureCode(_ body: () async throws -> Void) async -> Int? {
    do {
        try await body()
        return nil
    } catch let error as IMError {
        return error.code.rawValue
    } catch let error as SendMessageError {
        return error.code.rawValue
    } catch {
        Issue.record("an error without a RongCloud code: \(error)")
        return -1
    }
}

