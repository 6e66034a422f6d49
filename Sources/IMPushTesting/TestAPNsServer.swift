import Crypto
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// A local APNs: HTTP/2 over TLS (ALPN h2) on 127.0.0.1 with the test CA's certificate,
/// `POST /3/device/<token>`. It authenticates each request as APNs does, by a provider token
/// (ES256 JWT: a known `kid`, the team as `iss`, a valid signature, `iat` under an hour old by
/// `now`) or by a client certificate chained to the test CA, checks `apns-topic` against the
/// bundle id, records what passed, and answers per device token as the test scripted (200 by
/// default). Verified provider tokens are cached, so it keeps up with a benchmark.
public final class TestAPNsServer: Sendable {
    /// How the server answers a device token.
    public enum Answer: Sendable, Hashable {
        case success
        /// 400 BadDeviceToken: the token is not for this environment, or not a token.
        case badDeviceToken
        /// 400 DeviceTokenNotForTopic.
        case deviceTokenNotForTopic
        /// 410 Unregistered.
        case unregistered
        /// 429 TooManyRequests, with Retry-After when given.
        case tooManyRequests(retryAfter: Int?)
        /// 500 InternalServerError.
        case internalServerError
        /// 503 ServiceUnavailable, with Retry-After when given.
        case serviceUnavailable(retryAfter: Int?)
        /// Any status and reason.
        case status(Int, reason: String)
        /// No answer at all.
        case hang
        /// A GOAWAY naming this push's stream the last one processed, then 200: the connection
        /// takes no more requests.
        case goAway
        /// Once: a GOAWAY naming the stream before this push's the last one processed, and no
        /// answer (the push was not processed); the token is answered `.success` afterwards.
        case goAwayUnprocessed
    }

    /// How a recorded request was authenticated.
    public enum Authentication: Sendable, Hashable {
        /// A provider token: its `kid`, `iss` and `iat`, and the token itself.
        case token(keyId: String, teamId: String, issuedAt: Int, jwt: String)
        /// A client certificate: its subject, and its UID (the bundle id) when it has one.
        case certificate(subject: String, uid: String?)
    }

    /// One push the server took (it passed authentication and the topic check).
    public struct Request: Sendable {
        public var deviceToken: String
        /// Header names in lowercase.
        public var headers: [String: String]
        public var body: Data
        public var authentication: Authentication
        public var connectionId: Int
        public var httpVersion: String

        /// The body as JSON.
        public var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// A request refused before the script: the status and reason it got.
    public struct Refusal: Sendable, Hashable {
        public var deviceToken: String
        public var status: Int
        public var reason: String
    }

    private struct State {
        var answers: [String: Answer] = [:]
        var requests: [Request] = []
        var refusals: [Refusal] = []
        var taken = 0
        var verified: [String: Result<(keyId: String, teamId: String, issuedAt: Int), Refused>] = [:]
    }

    private struct Refused: Error { var status: Int; var reason: String }

    private let server: TestHTTPServer
    private let state: Locked<State>
    public let bundleId: String
    public let teamId: String
    /// `https://127.0.0.1:<port>`: PushEndpoints' apnsProduction and apnsSandbox.
    public var baseURL: String { server.baseURL }

    /// `keys` maps Key IDs to the public keys of the p8 keys the server accepts; `recordRequests`
    /// false keeps only the count (benchmarks); `eventLoopGroup` nil: NIO's shared one;
    /// `initialWindowSize` and `maxConcurrentStreams`: what its SETTINGS announce.
    public init(bundleId: String, teamId: String, keys: [String: P256.Signing.PublicKey],
                authority: TestCertificateAuthority = .shared, now: @escaping @Sendable () -> Date = { Date() },
                recordRequests: Bool = true, eventLoopGroup: (any EventLoopGroup)? = nil, initialWindowSize: Int = 1 << 20,
                maxConcurrentStreams: Int = 1000) async throws {
        let state = Locked(State())
        self.state = state
        self.bundleId = bundleId
        self.teamId = teamId
        let keys = keys.mapValues(\.rawRepresentation)
        server = try await TestHTTPServer(tls: authority.serverTLSConfiguration(protocols: ["h2"], clientCertificates: true),
                                          eventLoopGroup: eventLoopGroup, initialWindowSize: initialWindowSize,
                                          maxConcurrentStreams: maxConcurrentStreams) { request in
            Self.handle(request, state: state, bundleId: bundleId, teamId: teamId, keys: keys, now: now, record: recordRequests)
        }
    }

    /// Makes the server answer `answer` to pushes for `deviceToken` from now on.
    public func answer(_ answer: Answer, forToken deviceToken: String) {
        state.withLock { $0.answers[deviceToken] = answer }
    }

    /// The pushes taken, in arrival order.
    public var requests: [Request] { state.withLock { $0.requests } }
    /// How many pushes were taken (also when not recorded).
    public var requestCount: Int { state.withLock { $0.taken } }
    /// Requests refused by authentication or the topic check.
    public var refusals: [Refusal] { state.withLock { $0.refusals } }
    /// TCP connections accepted so far.
    public var connectionsAccepted: Int { server.connectionsAccepted }

    /// Drops every open connection (clients must connect again).
    public func dropConnections() async { await server.closeConnections() }

    public func stop() async { await server.stop() }

    private static func handle(_ request: TestHTTPRequest, state: Locked<State>, bundleId: String, teamId: String,
                               keys: [String: Data], now: @Sendable () -> Date, record: Bool) -> TestHTTPAnswer {
        let prefix = "/3/device/"
        guard request.path.hasPrefix(prefix) else { return refusal(404, "BadPath") }
        let deviceToken = String(request.path.dropFirst(prefix.count))
        guard request.method == "POST" else { return refusal(405, "MethodNotAllowed") }

        func refuse(_ status: Int, _ reason: String) -> TestHTTPAnswer {
            state.withLock { $0.refusals.append(Refusal(deviceToken: deviceToken, status: status, reason: reason)) }
            return refusal(status, reason)
        }

        // Authentication: a provider token, else a client certificate.
        let authentication: Authentication
        if let authorization = request.header("authorization") {
            guard authorization.lowercased().hasPrefix("bearer ") else { return refuse(403, "InvalidProviderToken") }
            let jwt = String(authorization.dropFirst("bearer ".count))
            let verified = state.withLock { $0.verified[jwt] } ?? {
                let result = verify(jwt, teamId: teamId, keys: keys)
                state.withLock { $0.verified[jwt] = result }
                return result
            }()
            switch verified {
            case .failure(let refused):
                return refuse(refused.status, refused.reason)
            case .success(let token):
                let age = Int(now().timeIntervalSince1970) - token.issuedAt
                guard age <= 3600 else { return refuse(403, "ExpiredProviderToken") }
                guard age >= -300 else { return refuse(403, "InvalidProviderToken") }
                authentication = .token(keyId: token.keyId, teamId: token.teamId, issuedAt: token.issuedAt, jwt: jwt)
            }
        } else if let subject = request.clientCertificateSubject {
            authentication = .certificate(subject: subject, uid: request.clientCertificateUID)
        } else {
            return refuse(403, "MissingProviderToken")
        }

        guard let topic = request.header("apns-topic") else { return refuse(400, "MissingTopic") }
        if case .certificate(_, let uid?) = authentication, topic != uid, topic != uid + ".voip" {
            return refuse(400, "TopicDisallowed")
        }
        guard topic == bundleId || topic == bundleId + ".voip" else { return refuse(400, "TopicDisallowed") }
        let pushType = request.header("apns-push-type")
        guard pushType == "alert" || pushType == "voip" || pushType == "background" else { return refuse(400, "InvalidPushType") }
        guard (pushType == "voip") == topic.hasSuffix(".voip") else { return refuse(400, "InvalidPushType") }
        if let id = request.header("apns-id"), UUID(uuidString: id) == nil { return refuse(400, "BadMessageId") }
        if let collapseId = request.header("apns-collapse-id"), collapseId.utf8.count > 64 { return refuse(400, "BadCollapseId") }
        if let expiration = request.header("apns-expiration"), Int(expiration) == nil { return refuse(400, "BadExpirationDate") }
        guard !request.body.isEmpty else { return refuse(400, "PayloadEmpty") }
        guard request.body.count <= (pushType == "voip" ? 5120 : 4096) else { return refuse(413, "PayloadTooLarge") }

        let answer = state.withLock { state -> Answer in
            state.taken += 1
            if record {
                state.requests.append(Request(deviceToken: deviceToken, headers: request.headers, body: request.body,
                                              authentication: authentication, connectionId: request.connectionId,
                                              httpVersion: request.httpVersion))
            }
            let answer = state.answers[deviceToken] ?? .success
            if answer == .goAwayUnprocessed { state.answers[deviceToken] = .success }
            return answer
        }
        switch answer {
        case .success:
            return .respond(status: 200, headers: [("apns-id", request.header("apns-id") ?? UUID().uuidString.lowercased())])
        case .badDeviceToken: return refusal(400, "BadDeviceToken")
        case .deviceTokenNotForTopic: return refusal(400, "DeviceTokenNotForTopic")
        case .unregistered:
            return .json(410, ["reason": "Unregistered", "timestamp": Int(now().timeIntervalSince1970 * 1000)])
        case .tooManyRequests(let retryAfter): return refusal(429, "TooManyRequests", retryAfter: retryAfter)
        case .internalServerError: return refusal(500, "InternalServerError")
        case .serviceUnavailable(let retryAfter): return refusal(503, "ServiceUnavailable", retryAfter: retryAfter)
        case .status(let status, let reason): return refusal(status, reason)
        case .hang: return .hang
        case .goAway:
            return .goAway(processed: true, then: .respond(status: 200, headers: [("apns-id", request.header("apns-id") ?? UUID().uuidString.lowercased())]))
        case .goAwayUnprocessed: return .goAway(processed: false, then: .hang)
        }
    }

    private static func refusal(_ status: Int, _ reason: String, retryAfter: Int? = nil) -> TestHTTPAnswer {
        .json(status, ["reason": reason], headers: retryAfter.map { [("retry-after", String($0))] } ?? [])
    }

    /// Checks a provider token's form and signature (its age is checked per request).
    private static func verify(_ jwt: String, teamId: String,
                               keys: [String: Data]) -> Result<(keyId: String, teamId: String, issuedAt: Int), Refused> {
        let invalid = Refused(status: 403, reason: "InvalidProviderToken")
        guard let parts = JWTParts(jwt), parts.header["alg"] as? String == "ES256",
              let keyId = parts.header["kid"] as? String, let raw = keys[keyId],
              let key = try? P256.Signing.PublicKey(rawRepresentation: raw),
              let issuer = parts.claims["iss"] as? String, let issuedAt = parts.int("iat"),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature),
              key.isValidSignature(signature, for: parts.signingInput) else { return .failure(invalid) }
        guard issuer == teamId else { return .failure(invalid) }
        return .success((keyId, issuer, issuedAt))
    }
}
