import Crypto
import Foundation
import Synchronization

/// A local webhook relay: records every POST (headers and body), checks its
/// `X-IMServer-Signature` as a relay would (HMAC-SHA256 under `secret` of
/// `timestamp + "." + body`), and answers per URL path as the test scripted (200 by default).
/// Plain HTTP unless given a certificate authority.
public final class TestWebhookReceiver: Sendable {
    /// How the receiver answers a path.
    public enum Answer: Sendable, Hashable {
        case status(Int, retryAfter: Int? = nil)
        case hang
    }

    /// One POST the receiver got.
    public struct Delivery: Sendable {
        public var path: String
        /// Header names in lowercase.
        public var headers: [String: String]
        public var body: Data
        /// Whether `X-IMServer-Signature` is the HMAC of `X-IMServer-Timestamp` and the body under the secret.
        public var signatureValid: Bool

        public var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    private struct State {
        var answers: [String: Answer] = [:]
        var deliveries: [Delivery] = []
    }

    private let server: TestHTTPServer
    private let state: Locked<State>
    public var baseURL: String { server.baseURL }

    public init(secret: String, authority: TestCertificateAuthority? = nil) async throws {
        let state = Locked(State())
        self.state = state
        let secretBytes = Data(secret.utf8)
        server = try await TestHTTPServer(tls: authority?.serverTLSConfiguration(protocols: ["http/1.1"])) { request in
            var signatureValid = false
            if let timestamp = request.header("x-imserver-timestamp"), let signature = request.header("x-imserver-signature"),
               signature.hasPrefix("sha256="), let mac = Self.hexBytes(signature.dropFirst("sha256=".count)) {
                var signed = Data(timestamp.utf8)
                signed.append(UInt8(ascii: "."))
                signed.append(request.body)
                signatureValid = HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: SymmetricKey(data: secretBytes))
            }
            let delivery = Delivery(path: request.path, headers: request.headers, body: request.body, signatureValid: signatureValid)
            let answer = state.withLock { state -> Answer in
                state.deliveries.append(delivery)
                return state.answers[request.path] ?? .status(200)
            }
            switch answer {
            case .hang: return .hang
            case .status(let status, let retryAfter):
                return .respond(status: status, headers: retryAfter.map { [("retry-after", String($0))] } ?? [])
            }
        }
    }

    /// The URL for `path` (e.g. "/devices/1"), a device's webhook target.
    public func url(_ path: String) -> String { baseURL + path }

    /// Makes the receiver answer `answer` to POSTs on `path` from now on.
    public func answer(_ answer: Answer, forPath path: String) {
        state.withLock { $0.answers[path] = answer }
    }

    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    public func stop() async { await server.stop() }

    private static func hexBytes(_ text: Substring) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
