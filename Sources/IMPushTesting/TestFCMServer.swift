import _CryptoExtras
import Crypto
import Foundation
import Synchronization

/// A local FCM over TLS (HTTP/2 or HTTP/1.1) with the test CA's certificate: Google's OAuth2
/// token endpoint (`POST /token`, the JWT bearer grant, the assertion's RS256 signature checked
/// against the service account's public key) and FCM HTTP v1's
/// `POST /v1/projects/<project>/messages:send` (a bearer token it issued, unexpired by `now` and
/// for that project). It records token exchanges and messages and answers per registration
/// token as the test scripted (200 by default).
public final class TestFCMServer: Sendable {
    /// How the server answers a registration token.
    public enum Answer: Sendable, Hashable {
        case success
        /// 404 NOT_FOUND with errorCode UNREGISTERED.
        case unregistered
        /// 400 INVALID_ARGUMENT about `message.token`.
        case invalidToken
        /// 400 INVALID_ARGUMENT about another field.
        case invalidArgument
        /// 429 RESOURCE_EXHAUSTED (QUOTA_EXCEEDED), with Retry-After when given.
        case quotaExceeded(retryAfter: Int?)
        /// 503 UNAVAILABLE, with Retry-After when given.
        case unavailable(retryAfter: Int?)
        /// 500 INTERNAL.
        case internalError
        case hang
    }

    /// One message FCM took.
    public struct Message: Sendable {
        public var projectId: String
        /// The access token it came with.
        public var accessToken: String
        public var body: Data
        public var httpVersion: String

        /// The whole body as JSON; `message` is the part that matters.
        public var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }
        public var message: [String: Any]? { json?["message"] as? [String: Any] }
        public var token: String? { message?["token"] as? String }
    }

    /// One access-token request, granted or not.
    public struct TokenExchange: Sendable {
        public var clientEmail: String?
        /// The assertion's header `kid` and claims.
        public var keyId: String?
        public var scope: String?
        public var audience: String?
        public var issuedAt: Int?
        public var expiresAt: Int?
        /// The token issued; nil when refused.
        public var accessToken: String?
        public var error: String?
    }

    private struct Account {
        var projectId: String
        /// The service account's public key, DER (the key type itself is not Sendable).
        var publicKeyDER: Data
    }

    private struct Issued {
        var clientEmail: String
        var projectId: String
        var expiresAt: Date
    }

    private struct State {
        var accounts: [String: Account] = [:]
        var issued: [String: Issued] = [:]
        var exchanges: [TokenExchange] = []
        var messages: [Message] = []
        var unauthenticated = 0
        var answers: [String: Answer] = [:]
        var serial = 0
        var tokenFailures: [Int] = []
    }

    private let server: TestHTTPServer
    private let state: Locked<State>
    /// Seconds an access token lives (`expires_in`).
    public let accessTokenLifetime: Int
    /// `https://127.0.0.1:<port>`: PushEndpoints' fcm.
    public var baseURL: String { server.baseURL }
    /// The token endpoint, the service accounts' `token_uri`.
    public var tokenURI: String { server.baseURL + "/token" }

    public init(authority: TestCertificateAuthority = .shared, accessTokenLifetime: Int = 3600,
                now: @escaping @Sendable () -> Date = { Date() }) async throws {
        let state = Locked(State())
        self.state = state
        self.accessTokenLifetime = accessTokenLifetime
        let tokenPath = "/token"
        server = try await TestHTTPServer(tls: authority.serverTLSConfiguration()) { [accessTokenLifetime] request in
            if request.path == tokenPath {
                return Self.exchange(request, state: state, lifetime: accessTokenLifetime, now: now)
            }
            return Self.send(request, state: state, now: now)
        }
    }

    /// A service-account JSON file, as the Firebase console gives, with a fresh 2048-bit RSA key
    /// whose public half this server trusts and a `token_uri` pointing here.
    public func makeServiceAccount(projectId: String = "imserver-test", clientEmail: String? = nil) throws -> Data {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let email = clientEmail ?? "push-\(UUID().uuidString.prefix(8).lowercased())@\(projectId).iam.gserviceaccount.com"
        state.withLock { $0.accounts[email] = Account(projectId: projectId, publicKeyDER: key.publicKey.derRepresentation) }
        let file: [String: String] = [
            "type": "service_account",
            "project_id": projectId,
            "private_key_id": String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()),
            "private_key": key.pkcs8PEMRepresentation + "\n",
            "client_email": email,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/\(email)",
            "universe_domain": "googleapis.com",
        ]
        return try JSONSerialization.data(withJSONObject: file, options: [.prettyPrinted, .sortedKeys])
    }

    /// Makes the send endpoint answer `answer` for `token` from now on.
    public func answer(_ answer: Answer, forToken token: String) {
        state.withLock { $0.answers[token] = answer }
    }

    /// Makes the token endpoint answer the next requests with these statuses (then grant again).
    public func failTokenRequests(_ statuses: [Int]) {
        state.withLock { $0.tokenFailures = statuses }
    }

    /// Forgets every access token issued: sends with them get 401 UNAUTHENTICATED.
    public func revokeAccessTokens() {
        state.withLock { $0.issued = [:] }
    }

    public var tokenExchanges: [TokenExchange] { state.withLock { $0.exchanges } }
    /// Messages taken (authenticated), in arrival order, whatever they were answered.
    public var messages: [Message] { state.withLock { $0.messages } }
    /// Sends refused with 401.
    public var unauthenticatedCount: Int { state.withLock { $0.unauthenticated } }

    public func stop() async { await server.stop() }

    private static func form(_ body: Data) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    private static func exchange(_ request: TestHTTPRequest, state: Locked<State>, lifetime: Int,
                                 now: @Sendable () -> Date) -> TestHTTPAnswer {
        let fields = form(request.body)
        var record = TokenExchange()
        func refuse(_ error: String, _ description: String) -> TestHTTPAnswer {
            record.error = error
            state.withLock { $0.exchanges.append(record) }
            return .json(400, ["error": error, "error_description": description])
        }
        if let status = state.withLock({ $0.tokenFailures.isEmpty ? nil : $0.tokenFailures.removeFirst() }) {
            record.error = "scripted \(status)"
            state.withLock { $0.exchanges.append(record) }
            return .json(status, ["error": "internal_failure"])
        }
        guard request.method == "POST", request.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return refuse("invalid_request", "POST a form")
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return refuse("unsupported_grant_type", "Invalid grant_type: \(fields["grant_type"] ?? "")")
        }
        guard let assertion = fields["assertion"], let jwt = JWTParts(assertion) else {
            return refuse("invalid_request", "Invalid JWT")
        }
        record.clientEmail = jwt.claims["iss"] as? String
        record.keyId = jwt.header["kid"] as? String
        record.scope = jwt.claims["scope"] as? String
        record.audience = jwt.claims["aud"] as? String
        record.issuedAt = jwt.int("iat")
        record.expiresAt = jwt.int("exp")
        guard jwt.header["alg"] as? String == "RS256", let email = record.clientEmail,
              let account = state.withLock({ $0.accounts[email] }) else {
            return refuse("invalid_grant", "Invalid JWT Signature.")
        }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: jwt.signature)
        guard let publicKey = try? _RSA.Signing.PublicKey(derRepresentation: account.publicKeyDER),
              publicKey.isValidSignature(signature, for: jwt.signingInput, padding: _RSA.Signing.Padding.insecurePKCS1v1_5) else {
            return refuse("invalid_grant", "Invalid JWT Signature.")
        }
        let nowSeconds = Int(now().timeIntervalSince1970)
        // The audience is this endpoint's own URL (the service account's token_uri).
        guard let host = request.header("host"), record.audience == "https://\(host)/token" else {
            return refuse("invalid_grant", "Invalid JWT: aud")
        }
        guard record.scope?.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging") == true else {
            return refuse("invalid_scope", "firebase.messaging is not in scope")
        }
        guard let iat = record.issuedAt, let exp = record.expiresAt, exp - iat <= 3600, iat <= nowSeconds + 60, exp > nowSeconds else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let token = state.withLock { state -> String in
            state.serial += 1
            let token = "ya29.test-\(state.serial)"
            state.issued[token] = Issued(clientEmail: email, projectId: account.projectId,
                                         expiresAt: now().addingTimeInterval(TimeInterval(lifetime)))
            record.accessToken = token
            state.exchanges.append(record)
            return token
        }
        return .json(200, ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"])
    }

    private static func fcmError(_ status: Int, _ grpcStatus: String, _ message: String, errorCode: String? = nil,
                                 field: String? = nil, retryAfter: Int? = nil) -> TestHTTPAnswer {
        var details: [[String: Any]] = []
        if let errorCode {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
        }
        if let field {
            details.append(["@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [["field": field, "description": message]]])
        }
        return .json(status, ["error": ["code": status, "message": message, "status": grpcStatus, "details": details]],
                     headers: retryAfter.map { [("retry-after", String($0))] } ?? [])
    }

    private static func send(_ request: TestHTTPRequest, state: Locked<State>, now: @Sendable () -> Date) -> TestHTTPAnswer {
        let prefix = "/v1/projects/", suffix = "/messages:send"
        guard request.method == "POST", request.path.hasPrefix(prefix), request.path.hasSuffix(suffix) else {
            return fcmError(404, "NOT_FOUND", "Not found")
        }
        let project = String(request.path.dropFirst(prefix.count).dropLast(suffix.count))
        guard let authorization = request.header("authorization"), authorization.hasPrefix("Bearer ") else {
            state.withLock { $0.unauthenticated += 1 }
            return fcmError(401, "UNAUTHENTICATED", "Request is missing required authentication credential.")
        }
        let accessToken = String(authorization.dropFirst("Bearer ".count))
        let issued = state.withLock { $0.issued[accessToken] }
        guard let issued, issued.expiresAt > now() else {
            state.withLock { $0.unauthenticated += 1 }
            return fcmError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        }
        guard issued.projectId == project else {
            return fcmError(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on resource")
        }
        let message = Message(projectId: project, accessToken: accessToken, body: request.body, httpVersion: request.httpVersion)
        guard let token = message.token, message.message?["notification"] != nil || message.message?["data"] != nil else {
            return fcmError(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", errorCode: "INVALID_ARGUMENT", field: "message")
        }
        let (answer, serial) = state.withLock { state -> (Answer, Int) in
            state.messages.append(message)
            state.serial += 1
            return (state.answers[token] ?? .success, state.serial)
        }
        switch answer {
        case .success: return .json(200, ["name": "projects/\(project)/messages/0:\(serial)"])
        case .unregistered:
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED")
        case .invalidToken:
            return fcmError(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                            errorCode: "INVALID_ARGUMENT", field: "message.token")
        case .invalidArgument:
            return fcmError(400, "INVALID_ARGUMENT", "Invalid value at 'message.android.ttl'",
                            errorCode: "INVALID_ARGUMENT", field: "message.android.ttl")
        case .quotaExceeded(let retryAfter):
            return fcmError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED", retryAfter: retryAfter)
        case .unavailable(let retryAfter):
            return fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE", retryAfter: retryAfter)
        case .internalError:
            return fcmError(500, "INTERNAL", "Internal error encountered.", errorCode: "INTERNAL")
        case .hang:
            return .hang
        }
    }
}
