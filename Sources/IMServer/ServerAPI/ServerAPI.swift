import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import IMCore

/// The Server API: RongCloud's HTTP API for an app's backend, on the same wire format
/// (spec/server-api.md): `POST /<path>.json`, signed with App-Key / Nonce / Timestamp / Signature.
struct ServerAPI: Sendable {
    typealias Context = BasicWebSocketRequestContext
    typealias Handler = @Sendable (APIParameters, AppRecord) async throws -> Response

    let core: ServerCore

    func register(on router: Router<Context>) {
        route(router, "/user/getToken.json", getToken)
        route(router, "/user/checkOnline.json", checkOnline)
    }

    /// Adds a signed endpoint. Accepts `//` in the path as the Go SDK sends it.
    private func route(_ router: Router<Context>, _ path: String, _ handler: @escaping Handler) {
        router.post(RouterPath(stringLiteral: path)) { request, context in
            await self.call(request, handler)
        }
    }

    private func call(_ request: Request, _ handler: Handler) async -> Response {
        do {
            let app = try authenticate(request)
            let parameters = try await parameters(of: request)
            return try await handler(parameters, app)
        } catch let error as APIError {
            return APIResponse.failure(error)
        } catch let error as IMError {
            return APIResponse.failure(APIError(error.code, .badRequest, error.message))
        } catch {
            core.logger.error("server API call failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            return APIResponse.failure(APIError(.apiInternalError, .internalServerError, "internal error: retry the call"))
        }
    }

    /// Checks the signature: hex SHA1 of app secret + nonce + timestamp, either header spelling.
    private func authenticate(_ request: Request) throws -> AppRecord {
        func header(_ name: String) -> String? {
            request.headers[HTTPField.Name(name)!] ?? request.headers[HTTPField.Name("RC-" + name)!]
        }
        guard let key = header("App-Key"), let app = core.apps.app(key: key) else {
            throw APIError(.apiSignatureFailed, .unauthorized, "unknown or missing App-Key header: send the app key imserver printed at start")
        }
        guard let nonce = header("Nonce"), let timestamp = header("Timestamp"), let signature = header("Signature") else {
            throw APIError(.apiSignatureFailed, .unauthorized, "missing Nonce, Timestamp or Signature header")
        }
        let expected = Insecure.SHA1.hash(data: Data((app.appSecret + nonce + timestamp).utf8))
            .map { String(format: "%02x", $0) }.joined()
        guard signature.lowercased() == expected else {
            throw APIError(.apiSignatureFailed, .unauthorized, "signature verification failed: Signature must be the hex SHA1 of app secret + Nonce + Timestamp")
        }
        let window = core.config.apiTimestampWindowSeconds
        if window > 0 {
            guard let value = Int64(timestamp) else {
                throw APIError(.apiSignatureFailed, .unauthorized, "Timestamp must be a number")
            }
            let millis = value > 1_000_000_000_000 ? value : value * 1000
            guard abs(core.clock.nowMilliseconds() - millis) <= Int64(window) * 1000 else {
                throw APIError(.apiSignatureFailed, .unauthorized, "Timestamp is more than \(window) s away from the server's time: check the caller's clock")
            }
        }
        return app
    }

    private func parameters(of request: Request) async throws -> APIParameters {
        let buffer = try await request.body.collect(upTo: 2 * 1024 * 1024)
        let body = String(buffer: buffer)
        if request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true {
            guard let data = body.data(using: .utf8),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw APIError.badParameter("the body is not a JSON object")
            }
            return APIParameters(json: object)
        }
        return APIParameters(form: body)
    }

    // MARK: user

    private func getToken(_ parameters: APIParameters, _ app: AppRecord) async throws -> Response {
        guard let userId = parameters.string("userId") else {
            throw APIError.badParameter("userId is required")
        }
        guard UserID.isValid(userId) else {
            throw APIError.badParameter("userId '\(userId)' is invalid: use 1 to 64 bytes of letters, digits and + = - _ |")
        }
        let name = parameters.string("name") ?? ""
        guard name.count <= 128 else { throw APIError(.apiParameterTooLong, .badRequest, "name is longer than 128 characters") }
        let portrait = parameters.string("portraitUri") ?? ""
        guard portrait.count <= 1024 else { throw APIError(.apiParameterTooLong, .badRequest, "portraitUri is longer than 1024 characters") }
        let now = core.clock.nowMilliseconds()
        try await core.store.upsertUser(appId: app.id, userId: userId, name: name, portraitUri: portrait, now: now)
        return APIResponse.success(["userId": userId, "token": core.tokens.issue(app: app, userId: userId, now: now)])
    }

    private func checkOnline(_ parameters: APIParameters, _ app: AppRecord) async throws -> Response {
        guard let userId = parameters.string("userId") else { throw APIError.badParameter("userId is required") }
        return APIResponse.success(["status": core.registry.isOnline(appId: app.id, userId: userId) ? "1" : "0"])
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
