import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import IMStore

/// The Server API: RongCloud's HTTP API for an app's backend, on the same wire format
/// (spec/server-api.md): `POST /<path>.json`, signed with App-Key / Nonce / Timestamp / Signature.
struct ServerAPI: Sendable {
    typealias Context = IMRequestContext

    let core: ServerCore

    /// Every endpoint this server answers, in documentation order.
    var endpoints: [APIEndpoint] {
        userEndpoints + accountEndpoints + messageEndpoints + lifecycleEndpoints + groupMessageEndpoints + groupEndpoints + chatroomEndpoints + moderationEndpoints
            + conversationEndpoints + pushEndpoints + pushSettingsEndpoints + callbackEndpoints + ultraGroupEndpoints
    }

    func register(on router: Router<Context>) {
        for endpoint in endpoints {
            let path = RouterPath(stringLiteral: endpoint.path)
            // The router ignores empty path components, so the Go SDK's `//user/...` reaches the same endpoint.
            router.post(path) { request, _ in await self.call(request, endpoint) }
        }
        for (path, reason) in Self.laterEndpoints {
            router.post(RouterPath(stringLiteral: path)) { _, _ in
                APIResponse.failure(APIError(.apiNotFound, .notFound, "\(path) is not available on this server yet: \(reason)"))
            }
        }
        registerUltraGroupV2(on: router)
        registerAdmin(on: router)
        let document = OpenAPIDocument.json(for: endpoints)
        router.get("/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
        router.get("/message-logs/{appKey}/{file}") { request, context in
            try await self.messageLogFile(request, context)
        }
    }

    /// Known RongCloud endpoints whose feature arrives in a later release: they answer 404 with the reason.
    static let laterEndpoints: [(String, String)] = [
        ("/message/discussion/publish.json", "discussions were retired by RongCloud; use groups"),
    ]

    private func call(_ request: Request, _ endpoint: APIEndpoint) async -> Response {
        do {
            let app = try await authenticate(request)
            let fields = try await invoke(endpoint, app: app, parameters: try await parameters(of: request), request: request)
            core.metrics.apiCall(path: endpoint.path, code: 200)
            return APIResponse.success(fields)
        } catch {
            let failure = apiError(error, request)
            core.metrics.apiCall(path: endpoint.path, code: failure.code.rawValue)
            return APIResponse.failure(failure)
        }
    }

    /// Runs an endpoint for an authenticated app: its parameter checks, the rate limit, the
    /// handler, and what must be done before the call is answered.
    func invoke(_ endpoint: APIEndpoint, app: AppRecord, parameters: APIParameters, request: Request) async throws -> [String: any Sendable] {
        for param in endpoint.params { try param.check(parameters) }
        try core.apiLimits.admit(appId: app.id, cost: 1, rules: [
            APIRateLimiter.Rule(name: endpoint.path, limit: core.apps.settings(appId: app.id).serverAPI.callsPerSecond, windowMilliseconds: 1000),
        ])
        let host = request.head.authority ?? "\(core.config.network.host):\(core.config.network.port)"
        let announced = core.peers.announcements
        let fields = try await endpoint.handler(APICall(app: app, parameters: parameters, baseURL: "http://\(host)"))
        // In a cluster, what the call told the other nodes (kicks, frames) is on the bus, and
        // the cache drops it announced applied by every node, before the app's server hears
        // that it is done.
        await core.cluster?.flush()
        await core.peers.applied(since: announced)
        // The callbacks the call caused (chatroom changes) are durable before it is answered.
        await core.callbacks?.durable()
        return fields
    }

    /// The settings of the calling app: the server's, with the app's own values.
    func settings(_ call: APICall) -> AppSettings {
        core.apps.settings(appId: call.app.id)
    }

    /// What a failed call answers: RongCloud's code and the reason.
    func apiError(_ error: any Error, _ request: Request) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as IMError:
            return APIError(error.code, error.code == .apiRateLimited ? .tooManyRequests : .badRequest, error.message)
        default:
            core.logger.error("server API call failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)",
                                                                 "requestId": "\(request.headers[HTTPField.Name("X-Request-Id")!] ?? "")"])
            return APIError(.apiInternalError, .internalServerError, "internal error: retry the call")
        }
    }

    /// Checks the signature: hex SHA1 of app secret + nonce + timestamp, either header spelling.
    func authenticate(_ request: Request) async throws -> AppRecord {
        func header(_ name: String) -> String? {
            request.headers[HTTPField.Name(name)!] ?? request.headers[HTTPField.Name("RC-" + name)!]
        }
        guard let key = header("App-Key"), let app = await core.apps.find(key: key) else {
            throw APIError(.apiSignatureFailed, .unauthorized, "unknown or missing App-Key header: send the app key imserver printed at start")
        }
        guard let nonce = header("Nonce"), let timestamp = header("Timestamp"), let signature = header("Signature") else {
            throw APIError(.apiSignatureFailed, .unauthorized, "missing Nonce, Timestamp or Signature header")
        }
        let expected = APISignature.sign(secret: app.appSecret, nonce: nonce, timestamp: timestamp)
        guard constantTimeEqual(signature.lowercased(), expected) else {
            throw APIError(.apiSignatureFailed, .unauthorized, "signature verification failed: Signature must be the hex SHA1 of app secret + Nonce + Timestamp")
        }
        guard !app.banned else {
            throw APIError(.apiAppLocked, .forbidden, "app \(app.appKey) is banned by the server's operator: its Server API calls are refused until the ban is lifted")
        }
        let window = core.config.serverAPI.timestampWindowSeconds
        if window > 0 {
            // Seconds or milliseconds since 1970, up to the year 9999, so no arithmetic below can overflow.
            guard let value = Int64(timestamp), (1...APIParameters.maxIntegerMagnitude).contains(value) else {
                throw APIError(.apiSignatureFailed, .unauthorized, "Timestamp must be the time in seconds (or milliseconds) since 1970")
            }
            let millis = value > 1_000_000_000_000 ? value : value * 1000
            guard abs(core.clock.nowMilliseconds() - millis) <= Int64(window) * 1000 else {
                throw APIError(.apiSignatureFailed, .unauthorized, "Timestamp is more than \(window) s away from the server's time: check the caller's clock")
            }
        }
        return app
    }

    /// Largest request body: 1000 recipients of a 128 KB template fit comfortably.
    static let maxBodyBytes = 2 * 1024 * 1024

    func parameters(of request: Request) async throws -> APIParameters {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: Self.maxBodyBytes)
        } catch {
            throw APIError(.apiParameterTooLong, .contentTooLarge, "the request body is larger than \(Self.maxBodyBytes / 1024 / 1024) MB")
        }
        let body = String(buffer: buffer)
        if request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true {
            guard let data = body.data(using: .utf8),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw APIError.badParameter("the body is not a JSON object")
            }
            return APIParameters(json: object, body: data)
        }
        return APIParameters(form: body)
    }

}

/// Answers every failure that escapes a route, an unknown path included, with the JSON envelope
/// (the Java and Go SDKs parse every body as JSON).
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            let code: ErrorCode = error.status == .notFound ? .apiNotFound : .apiBadParameter
            return APIResponse.failure(APIError(code, error.status, error.status == .notFound
                ? "no such endpoint: \(request.method) \(request.uri.path)"
                : (error.body ?? "bad request")))
        }
    }
}

/// Compares two secrets in time that does not depend on where they first differ.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}
