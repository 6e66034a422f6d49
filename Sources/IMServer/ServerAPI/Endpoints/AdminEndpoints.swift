import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import IMStore

/// The operator's API for apps (`/admin/apps`), apart from the apps' own Server API: it takes
/// the operator's key (`Authorization: Bearer <adminKey>`) or a console session (its cookie and
/// the `X-Requested-By: imserver-console` header, which no other site's page can send), never an
/// app's signature; with neither an `adminKey` nor the console, it is off. JSON in and out;
/// errors carry RongCloud's codes like every answer.
///
/// - `GET /admin/apps`: every app (key, name, creation time, banned), never a secret.
/// - `POST /admin/apps` `{name}`: a new app; the answer holds its key and secret.
/// - `PUT /admin/apps/{appKey}` `{name}`: renames it.
/// - `POST /admin/apps/{appKey}/secret`: a new secret. Tokens are signed with the secret, so
///   every token issued before stops working (31004 at the next connect; connected clients stay
///   until they reconnect) and the app's server must sign with the new one.
/// - `DELETE /admin/apps/{appKey}`: the app and all its data go (users, messages, groups,
///   settings...); its clients are kicked with 31008; its key is unknown afterwards. The
///   development app (the server's first) cannot be deleted, only banned.
/// - `POST /admin/apps/{appKey}/ban` `{banned}`: a banned app's connected clients are kicked with
///   31008, its connects are refused with 31008 and its Server API calls with 1006.
extension ServerAPI {
    func registerAdmin(on router: Router<Context>) {
        registerAdminOperations(on: router)
        router.get("/admin/apps") { request, _ in
            await self.admin(request) { _ in
                ["apps": core.apps.all.map { Self.adminView($0) }]
            }
        }
        router.post("/admin/apps") { request, _ in
            await self.admin(request) { body in
                let name = try Self.appName(body)
                let app = try await core.apps.upsert(appKey: AppRegistry.randomCredential(length: 16),
                                                     appSecret: AppRegistry.randomCredential(length: 24), name: name,
                                                     now: core.clock.nowMilliseconds())
                return ["app": Self.adminView(app, withSecret: true)]
            }
        }
        router.put("/admin/apps/{appKey}") { request, context in
            await self.admin(request) { body in
                let app = try Self.existing(core, context)
                let renamed = try await core.apps.upsert(appKey: app.appKey, appSecret: app.appSecret, name: try Self.appName(body),
                                                         now: core.clock.nowMilliseconds())
                return ["app": Self.adminView(renamed)]
            }
        }
        router.post("/admin/apps/{appKey}/secret") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                let rotated = try await core.apps.upsert(appKey: app.appKey, appSecret: AppRegistry.randomCredential(length: 24),
                                                         name: app.name, now: core.clock.nowMilliseconds())
                return ["app": Self.adminView(rotated, withSecret: true)]
            }
        }
        router.delete("/admin/apps/{appKey}") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                // The server takes its first app for the development app at every start.
                guard app.id != core.apps.all.first?.id else {
                    throw APIError.badParameter("app \(app.appKey) is this server's development app and cannot be deleted: ban it instead")
                }
                // Out of the registry first, then its sessions closed: no connect, call or message
                // of it gets in while the data goes.
                try await core.apps.delete(app) {
                    core.disconnectApp(appId: app.id, code: .appBlockedOrDeleted, reason: "the app was deleted by the server's operator")
                }
                try await core.media.blobs.deleteAll(appId: app.id)
                return [:]
            }
        }
        router.post("/admin/apps/{appKey}/ban") { request, context in
            await self.admin(request) { body in
                let app = try Self.existing(core, context)
                guard let banned = body["banned"] as? Bool else { throw APIError.badParameter("banned must be true or false") }
                guard let changed = try await core.apps.setBanned(appKey: app.appKey, banned: banned) else {
                    throw APIError(.apiNotFound, .notFound, "there is no app \(app.appKey)")
                }
                if banned { core.disconnectApp(appId: changed.id, code: .appBlockedOrDeleted, reason: "the app was banned by the server's operator") }
                return ["app": Self.adminView(changed)]
            }
        }
    }

    /// Checks the operator's key, reads the JSON body and answers `{code: 200, ...}` or the error.
    func admin(_ request: Request, _ body: ([String: Any]) async throws -> [String: any Sendable]) async -> Response {
        do {
            _ = try await authenticateOperator(request)
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            var object: [String: Any] = [:]
            if buffer.readableBytes > 0 {
                guard let parsed = (try? JSONSerialization.jsonObject(with: Data(buffer: buffer))) as? [String: Any] else {
                    throw APIError.badParameter("the body must be a JSON object")
                }
                object = parsed
            }
            return APIResponse.success(try await body(object))
        } catch {
            return APIResponse.failure(apiError(error, request))
        }
    }

    /// Who is calling the admin API: the console's operator (a live session, from the console's
    /// own page) or the holder of the admin key ("admin-key"); anyone else is refused.
    func authenticateOperator(_ request: Request) async throws -> String {
        let given = request.headers[.authorization] ?? ""
        if given.hasPrefix("Bearer ") {
            guard let key = core.config.serverAPI.adminKey else {
                throw APIError(.apiServiceNotEnabled, .forbidden, "the admin key is off: the operator sets adminKey to turn it on")
            }
            guard constantTimeEqual(String(given.dropFirst(7)), key) else {
                throw APIError(.apiSignatureFailed, .unauthorized, "the admin API takes the operator's key (Authorization: Bearer <adminKey>), not an app's credentials")
            }
            return "admin-key"
        }
        if core.config.console.enabled, let token = request.cookies[ConsoleRoutes.cookieName]?.value,
           request.headers[HTTPField.Name("X-Requested-By")!] == ConsoleRoutes.requestedBy,
           let name = try await core.console.operatorName(token: token) {
            return name
        }
        if core.config.serverAPI.adminKey == nil && !core.config.console.enabled {
            throw APIError(.apiServiceNotEnabled, .forbidden, "the admin API is off: the operator sets adminKey (or turns the console on) to use it")
        }
        throw APIError(.apiSignatureFailed, .unauthorized, "the admin API takes the operator's key (Authorization: Bearer <adminKey>) or a console login, not an app's credentials")
    }

    static func existing(_ core: ServerCore, _ context: Context) throws -> AppRecord {
        let key = context.parameters.get("appKey") ?? ""
        guard let app = core.apps.app(key: key) else { throw APIError(.apiNotFound, .notFound, "there is no app \(TextLength.quoted(key))") }
        return app
    }

    private static func appName(_ body: [String: Any]) throws -> String {
        guard let name = body["name"] as? String, !name.isEmpty, TextLength.characters(name) <= 64 else {
            throw APIError.badParameter("name must be 1 to 64 characters")
        }
        return name
    }

    /// An app as the admin API shows it; its secret only when it was just made.
    static func adminView(_ app: AppRecord, withSecret: Bool = false) -> [String: any Sendable] {
        var view: [String: any Sendable] = ["appKey": app.appKey, "name": app.name, "createdAt": app.createdAt, "banned": app.banned]
        if withSecret { view["appSecret"] = app.appSecret }
        return view
    }
}
