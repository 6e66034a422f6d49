import Foundation
import IMCore
import IMStore

/// `/user/*`: registration and tokens, profile, connect blocks, blacklists and whitelists, tags.
extension ServerAPI {
    var userEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/user/getToken.json", tag: "user",
                summary: "Registers a user (or updates their name and portrait) and issues a connect token. Tokens do not expire; /user/token/expire.json revokes them.",
                params: [
                    .string("userId", required: true, "user id: \(UserID.rule)"),
                    .string("name", maxLength: 128, "display name"),
                    .string("portraitUri", maxLength: 1024, "portrait URL"),
                ],
                response: [APIField("userId", "string", "the user id"), APIField("token", "string", "connect token for IMLib")],
                handler: getToken),
            APIEndpoint(
                path: "/user/refresh.json", tag: "user",
                summary: "Updates a user's name and portrait; empty values leave them unchanged.",
                params: [
                    .string("userId", required: true, "user id"),
                    .string("name", maxLength: 128, "new display name"),
                    .string("portraitUri", maxLength: 1024, "new portrait URL"),
                ],
                handler: refreshUser),
            APIEndpoint(
                path: "/user/info.json", tag: "user",
                summary: "A registered user's name, portrait and registration time.",
                params: [.string("userId", required: true, "user id")],
                response: [
                    APIField("userName", "string", "display name"), APIField("userPortrait", "string", "portrait URL"),
                    APIField("createTime", "string", "registration time, yyyy-MM-dd HH:mm:ss UTC"),
                ],
                handler: userInfo),
            APIEndpoint(
                path: "/user/checkOnline.json", tag: "user",
                summary: "Whether the user has a live connection.",
                params: [.string("userId", required: true, "user id")],
                response: [APIField("status", "string", "\"1\" online, \"0\" offline")],
                handler: checkOnline),
            APIEndpoint(
                path: "/user/token/expire.json", tag: "user",
                summary: "Revokes the users' tokens issued before `time`; their next connect gets 31004.",
                params: [
                    .list("userId", required: true, max: 20, "user ids"),
                    .time("time", required: true, "ms since the epoch; tokens issued before it stop working"),
                ],
                handler: expireTokens),
            APIEndpoint(
                path: "/user/block.json", tag: "user",
                summary: "Blocks users from connecting for `minute` minutes; their live connections are closed with 31009.",
                params: [
                    .list("userId", required: true, max: 20, "user ids"),
                    .integer("minute", required: true, "1 to 43200"),
                ],
                handler: blockUsers),
            APIEndpoint(
                path: "/user/unblock.json", tag: "user", summary: "Lifts connect blocks.",
                params: [.list("userId", required: true, max: 20, "user ids")],
                handler: unblockUsers),
            APIEndpoint(
                path: "/user/block/query.json", tag: "user", summary: "Users blocked now.",
                params: [],
                response: [APIField("users", "array", items: "object", "{userId, blockEndTime (yyyy-MM-dd HH:mm:ss UTC)}")],
                handler: blockedUsers),
        ] + listEndpoints(kind: .blacklist, name: "blacklist", memberKey: "blackUserId",
                          summary: "a blacklisted user's private messages to the owner fail with 405")
          + listEndpoints(kind: .whitelist, name: "whitelist", memberKey: "whiteUserId",
                          summary: "in whitelist mode only whitelisted users may send private messages to the owner (407 otherwise)")
          + [
            APIEndpoint(
                path: "/user/tag/set.json", tag: "user", summary: "Replaces a user's push tags (JSON body).", body: .json,
                params: [
                    .string("userId", required: true, "user id"),
                    .list("tags", required: true, max: 20, "tags, each at most 40 bytes"),
                ],
                handler: setTags),
            APIEndpoint(
                path: "/user/tag/batch/set.json", tag: "user", summary: "Replaces the push tags of many users (JSON body).", body: .json,
                params: [
                    .list("userIds", required: true, max: 1000, "user ids"),
                    .list("tags", required: true, max: 20, "tags, each at most 40 bytes"),
                ],
                handler: setTags),
            APIEndpoint(
                path: "/user/tags/get.json", tag: "user", summary: "The push tags of users.",
                params: [.list("userIds", required: true, max: 50, "user ids")],
                response: [APIField("result", "object", "{userId: [tags]}")],
                handler: getTags),
            APIEndpoint(
                path: "/user/group/query.json", tag: "group", summary: "The groups a user is a member of.",
                params: [.string("userId", required: true, "user id")],
                response: [APIField("groups", "array", items: "object", "{id, name}")],
                handler: userGroups),
        ]
    }

    private func validUserIds(_ ids: [String], _ name: String = "userId") throws -> [String] {
        for id in ids where !UserID.isValid(id) {
            throw APIError.badParameter("\(name) '\(id)' is invalid: use \(UserID.rule)")
        }
        return ids
    }

    private func getToken(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = try validUserIds([call.required("userId")])[0]
        let now = core.clock.nowMilliseconds()
        if try await core.directory.isDeactivated(appId: call.app.id, userId: userId) {
            throw APIError(.userDeactivated, .badRequest, "user \(userId) was deactivated: reactivate them with /user/reactivate.json before issuing a token")
        }
        try await core.directory.register(appId: call.app.id, userId: userId, name: call.string("name") ?? "",
                                          portraitUri: call.string("portraitUri") ?? "", now: now)
        return ["userId": userId, "token": core.tokens.issue(app: call.app, userId: userId, now: now)]
    }

    private func refreshUser(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = try validUserIds([call.required("userId")])[0]
        try await core.directory.register(appId: call.app.id, userId: userId, name: call.string("name") ?? "",
                                          portraitUri: call.string("portraitUri") ?? "", now: core.clock.nowMilliseconds())
        return [:]
    }

    private func userInfo(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = call.required("userId")
        guard let user = try await core.directory.user(appId: call.app.id, userId: userId) else {
            throw APIError.badParameter("user \(userId) is not registered: register it with /user/getToken.json")
        }
        return ["userName": user.name, "userPortrait": user.portraitUri, "createTime": APITime.text(user.createdAt)]
    }

    private func checkOnline(_ call: APICall) async throws -> [String: any Sendable] {
        ["status": try await core.isOnline(appId: call.app.id, userId: call.required("userId")) ? "1" : "0"]
    }

    private func expireTokens(_ call: APICall) async throws -> [String: any Sendable] {
        let userIds = try validUserIds(call.list("userId"))
        let time = try call.int("time") ?? 0
        guard time > 0 else { throw APIError.badParameter("time must be a time in ms since the epoch") }
        try await core.directory.expireTokens(appId: call.app.id, userIds: userIds, before: time, now: core.clock.nowMilliseconds())
        return [:]
    }

    private func blockUsers(_ call: APICall) async throws -> [String: any Sendable] {
        let userIds = try validUserIds(call.list("userId"))
        let minutes = try call.int("minute") ?? 0
        guard (1...Int64(GroupLimits.maxMuteMinutes)).contains(minutes) else {
            throw APIError.badParameter("minute must be 1 to \(GroupLimits.maxMuteMinutes), got \(minutes)")
        }
        try await core.directory.block(appId: call.app.id, userIds: userIds, minutes: Int(minutes), now: core.clock.nowMilliseconds())
        return [:]
    }

    private func unblockUsers(_ call: APICall) async throws -> [String: any Sendable] {
        try await core.directory.unblock(appId: call.app.id, userIds: try validUserIds(call.list("userId")), now: core.clock.nowMilliseconds())
        return [:]
    }

    private func blockedUsers(_ call: APICall) async throws -> [String: any Sendable] {
        let users = try await core.directory.blockedUsers(appId: call.app.id, now: core.clock.nowMilliseconds())
        return ["users": users.map { ["userId": $0.userId, "blockEndTime": APITime.text($0.blockedUntil)] as [String: any Sendable] }]
    }

    private func listEndpoints(kind: UserListKind, name: String, memberKey: String, summary: String) -> [APIEndpoint] {
        let params: [APIParam] = [
            .string("userId", required: true, "the list's owner"),
            .list(memberKey, required: true, max: 20, "users to add or remove"),
        ]
        return [
            APIEndpoint(path: "/user/\(name)/add.json", tag: "user", summary: "Adds users to the owner's \(name): \(summary).",
                        params: params) { call in
                let owner = try validUserIds([call.required("userId")])[0]
                let members = try validUserIds(call.list(memberKey), memberKey)
                try await core.directory.add(appId: call.app.id, owner: owner, kind: kind, members: members, now: core.clock.nowMilliseconds())
                return [:]
            },
            APIEndpoint(path: "/user/\(name)/remove.json", tag: "user", summary: "Removes users from the owner's \(name).",
                        params: params) { call in
                try await core.directory.remove(appId: call.app.id, owner: call.required("userId"), kind: kind, members: call.list(memberKey))
                return [:]
            },
            APIEndpoint(path: "/user/\(name)/query.json", tag: "user", summary: "The owner's \(name).",
                        params: [.string("userId", required: true, "the list's owner")],
                        response: [APIField("users", "array", items: "string", "user ids")]) { call in
                ["users": try await core.directory.members(appId: call.app.id, owner: call.required("userId"), kind: kind)]
            },
        ]
    }

    private func setTags(_ call: APICall) async throws -> [String: any Sendable] {
        let userIds = try validUserIds(call.parameters.values["userIds"].map { _ in call.list("userIds") } ?? [call.required("userId")])
        let tags = call.list("tags")
        for tag in tags where tag.utf8.count > 40 {
            throw APIError(.apiParameterTooLong, .badRequest, "tag '\(tag)' is longer than 40 bytes")
        }
        try await core.directory.setTags(appId: call.app.id, userIds: userIds, tags: tags)
        return [:]
    }

    private func getTags(_ call: APICall) async throws -> [String: any Sendable] {
        let tags = try await core.directory.tags(appId: call.app.id, userIds: call.list("userIds"))
        return ["result": tags as [String: any Sendable]]
    }

    private func userGroups(_ call: APICall) async throws -> [String: any Sendable] {
        let groups = try await core.groups.groups(appId: call.app.id, ofUser: call.required("userId"))
        return ["groups": groups.map { ["id": $0.groupId, "name": $0.name] as [String: any Sendable] }]
    }
}
