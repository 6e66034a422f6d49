import Foundation
import Hummingbird
import IMServer
import Logging
import NIOCore
import ServiceLifecycle
import IMPushTesting

/// An app's server for the callback tests: a Hummingbird application on 127.0.0.1, port 0, that
/// records every call (path, query, headers, body), checks RongCloud's signature with the app's
/// secret, and answers as the test says: 200, an error status, a body (the message callback's
/// verdict), or only once the test releases it (a slow server).
public final class TestCallbackReceiver: Sendable {
    /// One call the server received.
    public struct Call: Sendable {
        public var path: String
        /// The query's parameters (the signature's among them).
        public var query: [String: String]
        public var headers: [String: String]
        public var body: Data
        /// Whether `signature` is the hex SHA1 of the secret + nonce + timestamp, and `appKey`,
        /// `timestamp` and `signTimestamp` are right.
        public var signatureValid: Bool

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
        /// The form-encoded body's fields (a field given several times: its values joined by ",").
        public var form: [String: String] {
            var fields: [String: String] = [:]
            for (name, value) in formPairs { fields[name] = fields[name].map { $0 + "," + value } ?? value }
            return fields
        }
        /// The form-encoded body's fields in order, repeated ones kept.
        public var formPairs: [(String, String)] { TestCallbackReceiver.decodeForm(String(decoding: body, as: UTF8.self)) }
        public var json: Any? { try? JSONSerialization.jsonObject(with: body) }
    }

    /// How the server answers a call.
    public enum Answer: Sendable {
        case status(Int, body: String = "")
        /// Waits until `release()` is called, then answers 200 with `body`.
        case held(body: String = "")
    }

    public let port: Int
    public var baseURL: String { "http://127.0.0.1:\(port)" }
    private let calls: Locked<[Call]>
    private let answer: Locked<@Sendable (Call) -> Answer>
    private let gate: Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>
    private let recorder: EventRecorder<Call>
    private let record: AsyncStream<Call>.Continuation
    private let group: ServiceGroup
    private let runner: Task<Void, any Error>

    /// Starts the server; `secret` and `appKey` are the app's, for checking signatures.
    public init(appKey: String, secret: String, answer: @escaping @Sendable (Call) -> Answer = { _ in .status(200) }) async throws {
        let (stream, continuation) = AsyncStream<Call>.makeStream()
        recorder = EventRecorder(stream)
        record = continuation
        let answer = Locked<@Sendable (Call) -> Answer>(answer)
        self.answer = answer
        let gate = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        self.gate = gate
        let calls = Locked<[Call]>([])
        self.calls = calls
        let router = Router()
        router.post("**") { request, _ -> Response in
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
            let buffer = try await request.body.collect(upTo: 1 << 20)
            let timestamp = query["timestamp"] ?? ""
            let expected = APISignature.sign(secret: secret, nonce: query["nonce"] ?? "", timestamp: timestamp)
            let valid = query["signature"] == expected && query["appKey"] == appKey && !timestamp.isEmpty
                && query["signTimestamp"] == timestamp
            let call = Call(path: request.uri.path, query: query, headers: headers, body: Data(buffer.readableBytesView), signatureValid: valid)
            calls.withLock { $0.append(call) }
            continuation.yield(call)
            switch answer.withLock({ $0 })(call) {
            case .status(let status, let body):
                return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: body)))
            case .held(let body):
                await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                    let open = gate.withLock { gate -> Bool in
                        if gate.open { return true }
                        gate.waiters.append(waiter)
                        return false
                    }
                    if open { waiter.resume() }
                }
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: body)))
            }
        }
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "test-callback-receiver")
        logger.logLevel = .warning
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                      onServerRunning: { channel in
                                          portContinuation.yield(channel.localAddress?.port ?? 0)
                                          portContinuation.finish()
                                      }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        self.group = group
        runner = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw CancellationError() }
        self.port = port
    }

    /// Every call so far.
    public var received: [Call] { calls.withLock { $0 } }

    /// Waits until at least `count` calls arrived (or the time limit passes) and returns them all.
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(20)) async -> [Call] {
        await recorder.wait(for: count, timeout: timeout)
    }

    /// Changes how later calls are answered.
    public func answer(_ answer: @escaping @Sendable (Call) -> Answer) {
        self.answer.withLock { $0 = answer }
    }

    /// Lets every held call (and every later one) be answered.
    public func release() {
        let waiters = gate.withLock { gate -> [CheckedContinuation<Void, Never>] in
            gate.open = true
            defer { gate.waiters = [] }
            return gate.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    public func stop() async {
        release()
        record.finish()
        await group.triggerGracefulShutdown()
        _ = await runner.result
    }

    static func decodeForm(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}
