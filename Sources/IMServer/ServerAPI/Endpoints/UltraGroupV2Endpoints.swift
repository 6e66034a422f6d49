import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import IMStore

/// The Go SDK's REST family for ultra groups (spec/server-api.md §6.8): `/v2/ultragroups...` with
/// HTTP methods, ids in the path, snake_case JSON bodies, and answers `{"code":10000,"data":...}`
/// (errors `{"code":N,"msg":"..."}`), signed like every call. Each route is the `.json` endpoint
/// that does the same thing, its parameters renamed, so both families share their checks, codes
/// and effects; `data` is that endpoint's answer with snake_case keys.
extension ServerAPI {
    /// One `/v2` route.
    struct V2Route: Sendable {
        enum Target: Sendable {
            /// The `.json` endpoint with this path.
            case endpoint(String)
            /// A handler of its own (what no `.json` endpoint answers).
            case handler(@Sendable (APICall) async throws -> [String: any Sendable])
        }

        let method: HTTPRequest.Method
        let path: String
        let target: Target
        /// Path parameter -> parameter of the target.
        var pathNames: [String: String] = [:]
        /// Body or query key -> parameter of the target, where camelCase of the key is not it.
        var renames: [String: String] = [:]
    }

    static let v2Success = 10000

    var ultraGroupV2Routes: [V2Route] {
        let sendRenames = ["include_sender_enable": "isIncludeSender", "store_flag": "isPersisted",
                           "mentioned_flag": "isMentioned", "silence_push": "disablePush"]
        return [
            V2Route(method: .post, path: "/v2/ultragroups", target: .endpoint("/ultragroup/create.json")),
            V2Route(method: .delete, path: "/v2/ultragroups/{gid}", target: .endpoint("/ultragroup/dis.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .put, path: "/v2/ultragroups/{gid}", target: .endpoint("/ultragroup/refresh.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .post, path: "/v2/ultragroups/{gid}/users/{uid}", target: .endpoint("/ultragroup/join.json"),
                    pathNames: ["gid": "groupId", "uid": "userId"]),
            V2Route(method: .delete, path: "/v2/ultragroups/{gid}/users/{uid}", target: .endpoint("/ultragroup/quit.json"),
                    pathNames: ["gid": "groupId", "uid": "userId"]),
            V2Route(method: .get, path: "/v2/ultragroups/users/{uid}/groups", target: .handler(userUltraGroups), pathNames: ["uid": "userId"]),
            V2Route(method: .get, path: "/v2/ultragroups/{gid}/users", target: .handler(ultraGroupMembers), pathNames: ["gid": "groupId"]),
            V2Route(method: .post, path: "/v2/message/ultragroup/send", target: .endpoint("/message/ultragroup/publish.json"), renames: sendRenames),
            V2Route(method: .post, path: "/v2/ultragroups/{gid}/muted-users", target: .endpoint("/ultragroup/userbanned/add.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .delete, path: "/v2/ultragroups/{gid}/muted-users", target: .endpoint("/ultragroup/userbanned/del.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .get, path: "/v2/ultragroups/{gid}/muted-users", target: .endpoint("/ultragroup/userbanned/get.json"),
                    pathNames: ["gid": "groupId"], renames: ["size": "pageSize"]),
            V2Route(method: .put, path: "/v2/ultragroups/{gid}/muted-status", target: .endpoint("/ultragroup/globalbanned/set.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .get, path: "/v2/ultragroups/{gid}/muted-status", target: .endpoint("/ultragroup/globalbanned/get.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .post, path: "/v2/ultragroups/{gid}/allowed-users", target: .endpoint("/ultragroup/banned/whitelist/add.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .delete, path: "/v2/ultragroups/{gid}/allowed-users", target: .endpoint("/ultragroup/banned/whitelist/del.json"), pathNames: ["gid": "groupId"]),
            V2Route(method: .get, path: "/v2/ultragroups/{gid}/allowed-users", target: .endpoint("/ultragroup/banned/whitelist/get.json"),
                    pathNames: ["gid": "groupId"], renames: ["size": "pageSize"]),
            V2Route(method: .post, path: "/v2/ultragroups/channels", target: .endpoint("/ultragroup/channel/create.json"),
                    renames: ["channel_id": "busChannel"]),
            V2Route(method: .delete, path: "/v2/ultragroups/{gid}/channels/{cid}", target: .endpoint("/ultragroup/channel/del.json"),
                    pathNames: ["gid": "groupId", "cid": "busChannel"]),
            V2Route(method: .get, path: "/v2/ultragroups/{gid}/channels", target: .endpoint("/ultragroup/channel/get.json"), pathNames: ["gid": "groupId"]),
        ]
    }

    func registerUltraGroupV2(on router: Router<Context>) {
        let byPath = Dictionary(endpoints.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        for route in ultraGroupV2Routes {
            let endpoint: APIEndpoint
            switch route.target {
            case .endpoint(let path):
                guard let found = byPath[path] else { preconditionFailure("the /v2 route \(route.path) names no endpoint \(path)") }
                endpoint = found
            case .handler(let handler):
                endpoint = APIEndpoint(path: route.path, tag: "ultragroup", summary: "", params: [], handler: handler)
            }
            router.on(RouterPath(stringLiteral: route.path), method: route.method) { request, context in
                await self.callV2(request, context, route, endpoint)
            }
        }
    }

    private func callV2(_ request: Request, _ context: Context, _ route: V2Route, _ endpoint: APIEndpoint) async -> Response {
        do {
            let app = try await authenticate(request)
            var object: [String: Any] = [:]
            for (key, value) in try await v2Body(request) { object[route.renames[key] ?? Self.camelCase(key)] = value }
            for item in request.uri.queryParameters {
                let key = String(item.key)
                object[route.renames[key] ?? Self.camelCase(key)] = String(item.value)
            }
            for (name, parameter) in route.pathNames {
                guard let value = context.parameters.get(name) else { continue }
                object[parameter] = value
            }
            // A content given as an object is the JSON text the `.json` endpoint takes.
            if let content = object["content"], !(content is String) {
                object["content"] = String(decoding: try JSONSerialization.data(withJSONObject: content), as: UTF8.self)
            }
            let body = try JSONSerialization.data(withJSONObject: object)
            let fields = try await invoke(endpoint, app: app, parameters: APIParameters(json: object, body: body), request: request)
            core.metrics.apiCall(path: route.path, code: Self.v2Success)
            return APIResponse.json(["code": Self.v2Success, "data": Self.snakeCased(fields)], status: .ok)
        } catch {
            let failure = apiError(error, request)
            core.metrics.apiCall(path: route.path, code: failure.code.rawValue)
            return APIResponse.json(["code": failure.code.rawValue, "msg": failure.message], status: failure.status)
        }
    }

    private func v2Body(_ request: Request) async throws -> [String: Any] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: Self.maxBodyBytes)
        } catch {
            throw APIError(.apiParameterTooLong, .contentTooLarge, "the request body is larger than \(Self.maxBodyBytes / 1024 / 1024) MB")
        }
        guard buffer.readableBytes > 0 else { return [:] }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer: buffer))) as? [String: Any] else {
            throw APIError.badParameter("the body is not a JSON object")
        }
        return object
    }

    /// `user_ids` -> `userIds`.
    static func camelCase(_ key: String) -> String {
        let parts = key.split(separator: "_")
        guard let first = parts.first else { return key }
        return String(first) + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    /// `channelList` -> `channel_list`, through arrays and objects.
    static func snakeCased(_ value: Any) -> Any {
        switch value {
        case let object as [String: Any]:
            return Dictionary(object.map { (snakeCase($0.key), snakeCased($0.value)) }, uniquingKeysWith: { first, _ in first })
        case let list as [Any]:
            return list.map(snakeCased)
        default:
            return value
        }
    }

    /// `groupId` -> `group_id`; a run of capitals is one word (`messageUIDs` -> `message_uids`).
    static func snakeCase(_ key: String) -> String {
        var out = ""
        var previous: Character?
        for character in key {
            if character.isUppercase, let previous, previous.isLowercase || previous.isNumber {
                out += "_"
            }
            out += character.lowercased()
            previous = character
        }
        return out
    }

    /// `GET /v2/ultragroups/users/{uid}/groups?page=&size=`: the ultra groups a user is in, by id.
    private func userUltraGroups(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = call.required("userId")
        var groups: [[String: any Sendable]] = []
        for groupId in try await core.ultraGroups.store.ultraGroupIds(appId: call.app.id, ofUser: userId).sorted() {
            let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: groupId)
            groups.append(["groupId": groupId, "groupName": roster.name])
        }
        return ["groups": try v2Page(groups, call)]
    }

    /// `GET /v2/ultragroups/{gid}/users?page=&size=`: an ultra group's members, by id.
    private func ultraGroupMembers(_ call: APICall) async throws -> [String: any Sendable] {
        let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: call.required("groupId"))
        return ["users": try v2Page(roster.members.keys.sorted().map { ["id": $0] as [String: any Sendable] }, call)]
    }

    private func v2Page<T>(_ items: [T], _ call: APICall) throws -> [T] {
        let page = try call.int("page") ?? 1
        let size = try call.int("size") ?? Int64(Self.ultraGroupDefaultPageSize)
        guard page >= 1, (1...Int64(Self.ultraGroupMaxPageSize)).contains(size) else {
            throw APIError.badParameter("page must be 1 or more and size 1 to \(Self.ultraGroupMaxPageSize)")
        }
        return Array(items.dropFirst(Int(clamping: (page - 1) * size)).prefix(Int(size)))
    }
}
