import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import IMStore

/// The operator's view of each app beyond its key and name (what the console shows):
///
/// - `GET /admin/overview`: live figures: connections by platform and by app, nodes, bytes
///   queued to clients.
/// - `GET /admin/apps/{appKey}/settings`: every per-app setting with its value, the server's
///   default, whether the app has its own, the allowed values and what it does (the app's push
///   and callback settings are its `/push/settings/*` and `/callback/settings/*`, below).
/// - `POST /admin/apps/{appKey}/settings` `{set: {key: value}, reset: [key]}`: changes them at
///   once on every node; all or nothing (1002 names what is wrong).
/// - `GET /admin/apps/{appKey}/statistics?days=N`: the app's figures per day (N up to 400).
/// - `GET /admin/apps/{appKey}/users/{userId}/sessions`: the user's online devices, every node's.
/// - `POST /admin/apps/{appKey}/users/{userId}/disconnect`: closes them (they reconnect; to keep
///   a user out, block them with `/user/block.json`).
/// - `POST /admin/apps/{appKey}/api/<Server API path>`: runs any Server API endpoint as the app
///   (form or JSON body, the endpoint's own checks, codes and answer), so the console acts
///   through exactly what the app's server uses.
extension ServerAPI {
    func registerAdminOperations(on router: Router<Context>) {
        router.get("/admin/overview") { request, _ in
            await self.admin(request) { _ in await overview() }
        }
        router.get("/admin/apps/{appKey}/settings") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                return try await settingsView(app)
            }
        }
        router.post("/admin/apps/{appKey}/settings") { request, context in
            await self.admin(request) { body in
                let app = try Self.existing(core, context)
                let set = try Self.jsonObject(body["set"] ?? [String: Any](), name: "set")
                guard let reset = (body["reset"] ?? [String]()) as? [String] else {
                    throw APIError.badParameter("reset must be a list of setting keys")
                }
                guard !set.isEmpty || !reset.isEmpty else {
                    throw APIError.badParameter("give settings to change in set ({\"cloudHistoryEnabled\": false}) or keys to reset in reset")
                }
                guard let changed = try await core.apps.updateSettings(appKey: app.appKey, set: set, reset: reset) else {
                    throw APIError(.apiNotFound, .notFound, "there is no app \(app.appKey)")
                }
                core.logger.notice("app settings changed", metadata: [
                    "appKey": "\(app.appKey)", "set": "\(set.keys.sorted())", "reset": "\(reset.sorted())",
                ])
                return try await settingsView(changed)
            }
        }
        router.get("/admin/apps/{appKey}/statistics") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                let days = Int(request.uri.queryParameters.get("days") ?? "30") ?? 0
                guard (1...400).contains(days) else { throw APIError.badParameter("days must be 1 to 400") }
                // What is counted but not yet written is written first, so the figures are current.
                try? await core.statistics.flush()
                let figures = try await core.statistics.daily(appId: app.id, days: days)
                return ["days": figures.map(Self.dayView)]
            }
        }
        router.get("/admin/apps/{appKey}/users/{userId}/sessions") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                let userId = context.parameters.get("userId") ?? ""
                return ["sessions": try await onlineSessions(appId: app.id, userId: userId)]
            }
        }
        router.post("/admin/apps/{appKey}/users/{userId}/disconnect") { request, context in
            await self.admin(request) { _ in
                let app = try Self.existing(core, context)
                let userId = context.parameters.get("userId") ?? ""
                core.dropConnections(appId: app.id, userId: userId)
                return [:]
            }
        }
        for endpoint in endpoints {
            router.post(RouterPath(stringLiteral: "/admin/apps/{appKey}/api" + endpoint.path)) { request, context in
                await self.operatorCall(request, context, endpoint)
            }
        }
    }

    /// A Server API call made by the operator for an app: the endpoint's own checks and answer.
    private func operatorCall(_ request: Request, _ context: Context, _ endpoint: APIEndpoint) async -> Response {
        do {
            let name = try await authenticateOperator(request)
            let app = try Self.existing(core, context)
            let fields = try await invoke(endpoint, app: app, parameters: try await parameters(of: request), request: request)
            core.logger.info("operator call", metadata: ["operator": "\(name)", "appKey": "\(app.appKey)", "path": "\(endpoint.path)"])
            return APIResponse.success(fields)
        } catch {
            return APIResponse.failure(apiError(error, request))
        }
    }

    private func overview() async -> [String: any Sendable] {
        var byPlatform: [String: Int] = [:]
        var byApp: [Int64: Int] = [:]
        var queued = 0
        for session in core.registry.allSessions() {
            byPlatform[ServerMetrics.label(session.platform), default: 0] += 1
            byApp[session.appId, default: 0] += 1
            queued += session.outbound.queuedBytes
        }
        let apps: [[String: any Sendable]] = core.apps.all.map { app in
            ["appKey": app.appKey, "name": app.name, "banned": app.banned, "connections": byApp[app.id] ?? 0]
        }
        return [
            "connections": byPlatform.values.reduce(0, +), "connectionsByPlatform": byPlatform, "apps": apps,
            "nodes": core.cluster?.liveNodes() ?? 1, "outboundQueuedBytes": queued,
            "serverTime": core.clock.nowMilliseconds(),
        ]
    }

    private func settingsView(_ app: AppRecord) async throws -> [String: any Sendable] {
        let settings = core.apps.settings(appId: app.id)
        let values = settings.config.values
        var list: [[String: any Sendable]] = []
        for area in ServerConfig.table.areas {
            for setting in area.settings where setting.isPerApp {
                list.append([
                    "key": setting.key, "area": area.title,
                    "value": Self.foundation(values[setting.key]?.settingJSON ?? .null),
                    "default": Self.foundation(core.apps.defaults.config.values[setting.key]?.settingJSON ?? .null),
                    "own": app.settings[setting.key] != nil, "allowed": setting.allowedText, "doc": setting.doc,
                    "type": setting.placeholder,
                ])
            }
        }
        return ["appKey": app.appKey, "settings": list]
    }

    private func onlineSessions(appId: Int64, userId: String) async throws -> [[String: any Sendable]] {
        var list: [[String: any Sendable]] = []
        var local = Set<String>()
        for session in core.registry.sessions(appId: appId, userId: userId) where !session.isClosed {
            local.insert(session.id)
            list.append(["sessionId": session.id, "platform": ServerMetrics.label(session.platform), "deviceId": session.deviceId,
                         "address": session.clientAddress, "node": core.cluster?.nodeId ?? "single"])
        }
        if let cluster = core.cluster {
            for entry in try await cluster.sessions(appId: appId, userIds: [userId]) where !local.contains(entry.sessionId) {
                let platform = Platform(rawValue: entry.platform).map(ServerMetrics.label) ?? String(entry.platform)
                list.append(["sessionId": entry.sessionId, "platform": platform, "deviceId": entry.deviceId, "address": "",
                             "node": entry.nodeId, "connectedAt": entry.connectedAt])
            }
        }
        return list
    }

    static func dayView(_ day: DailyStatistics) -> [String: any Sendable] {
        var messages: [String: Int64] = [:]
        for (name, value) in day.figures where name.hasPrefix("messages.") {
            messages[String(name.dropFirst("messages.".count))] = value
        }
        return ["day": day.day, "messages": messages, "activeUsers": day.figures[DailyFigure.activeUsers] ?? 0,
                "peakConnections": day.figures[DailyFigure.peakConnections] ?? 0]
    }

    /// A JSON object of the body as `JSONValue`s.
    static func jsonObject(_ value: Any, name: String) throws -> [String: JSONValue] {
        guard JSONSerialization.isValidJSONObject([value]), let object = value as? [String: Any],
              let data = try? JSONSerialization.data(withJSONObject: object),
              case .object(let parsed)? = try? JSONValue(data: data) else {
            throw APIError.badParameter("\(name) must be a JSON object of setting keys and values")
        }
        return parsed
    }

    /// A `JSONValue` as `JSONSerialization` writes it.
    static func foundation(_ value: JSONValue) -> any Sendable {
        switch value {
        case .null: return NSNull()
        case .bool(let bool): return bool
        case .number(let number): return number.rounded() == number && abs(number) < 1e15 ? Int64(number) as any Sendable : number
        case .string(let string): return string
        case .array(let array): return array.map(foundation)
        case .object(let object): return object.mapValues(foundation)
        }
    }
}
