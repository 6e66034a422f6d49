import Foundation
import IMCore
import IMStore

/// `/group/*`: membership and mutes, held by the server; every change reaches the send path's
/// rosters through `GroupService`.
extension ServerAPI {
    var groupEndpoints: [APIEndpoint] {
        let groupId = APIParam.id("groupId", required: true, "group id: \(UserID.rule)")
        let members = APIParam.ids("userId", required: true, max: GroupLimits.usersPerCall, "user ids")
        let mutedUsers = APIParam.ids("userId", required: true, max: GroupLimits.mutesPerCall, "user ids")
        let mutedGroups = APIParam.ids("groupId", required: true, max: GroupLimits.mutesPerCall, "group ids")
        return [
            APIEndpoint(
                path: "/group/create.json", tag: "group",
                summary: "Creates a group with these members (an existing group gets them added). At most maxGroupMembers (3000) members.",
                params: [members, groupId, .string("groupName", maxLength: GroupLimits.maxNameCharacters, "group name")],
                handler: joinGroup),
            APIEndpoint(
                path: "/group/join.json", tag: "group",
                summary: "Adds members to a group (creating it if needed); all or none when the member limit would be passed.",
                params: [members, groupId, .string("groupName", maxLength: GroupLimits.maxNameCharacters, "group name")],
                handler: joinGroup),
            APIEndpoint(
                path: "/group/quit.json", tag: "group", summary: "Removes members from a group.",
                params: [members, groupId]) { call in
                try await core.groups.quit(appId: call.app.id, groupId: try validGroupId(call), userIds: call.list("userId"))
                return [:]
            },
            APIEndpoint(
                path: "/group/dismiss.json", tag: "group",
                summary: "Dismisses a group: members get an RC:GrpNtf Dismiss notification, nobody can send any more, history stays readable.",
                params: [.id("userId", required: true, "the operator"), groupId]) { call in
                let operatorId = call.required("userId")
                guard UserID.isValid(operatorId) else { throw APIError.badParameter("userId '\(operatorId)' is invalid") }
                _ = try await core.groups.dismiss(appId: call.app.id, groupId: try validGroupId(call), operatorId: operatorId)
                return [:]
            },
            APIEndpoint(
                path: "/group/refresh.json", tag: "group", summary: "Renames a group (creating it, without members, if it does not exist).",
                params: [groupId, .string("groupName", required: true, maxLength: GroupLimits.maxNameCharacters, "new name")]) { call in
                let id = try validGroupId(call)
                if try await !core.groups.rename(appId: call.app.id, groupId: id, name: call.required("groupName")) {
                    _ = try await core.groups.join(appId: call.app.id, groupId: id, name: call.required("groupName"), userIds: [])
                }
                return [:]
            },
            APIEndpoint(
                path: "/group/user/query.json", tag: "group", summary: "A group's members, in joining order.",
                params: [groupId],
                response: [APIField("id", "string", "the group id"), APIField("users", "array", items: "object", "{id, userId, time (joined, ms)}")]) { call in
                let id = call.required("groupId")
                let members = try await core.groups.members(appId: call.app.id, groupId: id)
                return ["id": id, "users": members.map { ["id": $0.userId, "userId": $0.userId, "time": "\($0.joinedAt)"] as [String: any Sendable] }]
            },
            APIEndpoint(
                path: "/group/sync.json", tag: "group",
                summary: "Makes a user a member of exactly the groups listed as group[<id>]=<name> (leaving the others).",
                params: [.id("userId", required: true, "user id")],
                handler: syncGroups),
            APIEndpoint(
                path: "/group/user/gag/add.json", tag: "group",
                summary: "Mutes members of a group for `minute` minutes (0 = until lifted); without groupId, in every group.",
                params: [
                    mutedUsers,
                    .id("groupId", "group id; omit to mute in all groups"),
                    .integer("minute", required: true, "0 to 43200; 0 mutes until lifted"),
                ],
                handler: muteMembers),
            APIEndpoint(
                path: "/group/user/gag/rollback.json", tag: "group", summary: "Lifts member mutes (without groupId: the all-groups mute).",
                params: [mutedUsers, .id("groupId", "group id")]) { call in
                let groupId = call.string("groupId")
                try await core.groups.unmuteMembers(appId: call.app.id, groupId: groupId, userIds: call.list("userId"))
                return [:]
            },
            APIEndpoint(
                path: "/group/user/gag/list.json", tag: "group", summary: "Muted members of a group (without groupId: the all-groups mutes).",
                params: [.id("groupId", "group id")],
                response: [APIField("users", "array", items: "object", "{userId, time (mute end, yyyy-MM-dd HH:mm:ss UTC), startTime}")]) { call in
                let mutes = try await core.groups.mutes(appId: call.app.id, groupId: call.string("groupId"), now: core.clock.nowMilliseconds())
                return ["users": mutes.map {
                    ["userId": $0.userId, "time": APITime.text($0.until), "startTime": APITime.text($0.since)] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/group/ban/add.json", tag: "group", summary: "Mutes whole groups: only members on the group's mute whitelist may speak.",
                params: [mutedGroups]) { call in
                try await core.groups.setMuted(appId: call.app.id, groupIds: call.list("groupId"), muted: true)
                return [:]
            },
            APIEndpoint(
                path: "/group/ban/rollback.json", tag: "group", summary: "Lifts whole-group mutes.",
                params: [mutedGroups]) { call in
                try await core.groups.setMuted(appId: call.app.id, groupIds: call.list("groupId"), muted: false)
                return [:]
            },
            APIEndpoint(
                path: "/group/ban/query.json", tag: "group", summary: "Whole-group mute state of the listed groups (all muted groups without groupId).",
                params: [.ids("groupId", max: GroupLimits.mutesPerCall, "group ids")],
                response: [APIField("groupinfo", "array", items: "object", "{groupId, id (the same), stat (\"1\" muted, \"0\" not)}")]) { call in
                let state = try await core.groups.mutedGroups(appId: call.app.id, groupIds: call.list("groupId"))
                let order = call.list("groupId").isEmpty ? state.keys.sorted() : call.list("groupId")
                // The Go SDK decodes {id, stat} with stat a string; other SDKs read groupId.
                return ["groupinfo": order.map { ["groupId": $0, "id": $0, "stat": state[$0] == true ? "1" : "0"] as [String: any Sendable] }]
            },
            APIEndpoint(
                path: "/group/user/ban/whitelist/add.json", tag: "group", summary: "Members who may speak while their group is muted.",
                params: [groupId, mutedUsers]) { call in
                let id = try validGroupId(call)
                try await core.groups.setMuteWhitelisted(appId: call.app.id, groupId: id, userIds: call.list("userId"), whitelisted: true)
                return [:]
            },
            APIEndpoint(
                path: "/group/user/ban/whitelist/rollback.json", tag: "group", summary: "Removes members from a group's mute whitelist.",
                params: [groupId, mutedUsers]) { call in
                let id = call.required("groupId")
                try await core.groups.setMuteWhitelisted(appId: call.app.id, groupId: id, userIds: call.list("userId"), whitelisted: false)
                return [:]
            },
            APIEndpoint(
                path: "/group/user/ban/whitelist/query.json", tag: "group", summary: "A group's mute whitelist.",
                params: [groupId],
                response: [APIField("userIds", "array", items: "string", "user ids")]) { call in
                ["userIds": try await core.groups.muteWhitelist(appId: call.app.id, groupId: call.required("groupId"))]
            },
        ]
    }

    private func validGroupId(_ call: APICall) throws -> String {
        let id = call.required("groupId")
        guard UserID.isValid(id) else {
            throw APIError.badParameter("groupId '\(id)' is invalid: use \(UserID.rule)")
        }
        return id
    }

    private func joinGroup(_ call: APICall) async throws -> [String: any Sendable] {
        let id = try validGroupId(call)
        let userIds = call.list("userId")
        for user in userIds where !UserID.isValid(user) { throw APIError.badParameter("userId '\(user)' is invalid") }
        switch try await core.groups.join(appId: call.app.id, groupId: id, name: call.string("groupName"), userIds: userIds) {
        case .joined:
            return [:]
        case .tooManyMembers(let limit):
            throw APIError.badParameter("group \(id) would have more than \(limit) members; nobody was added")
        }
    }

    private func syncGroups(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = call.required("userId")
        guard UserID.isValid(userId) else { throw APIError.badParameter("userId '\(userId)' is invalid") }
        let groups = call.parameters.bracketed("group")
        for group in groups where !UserID.isValid(group.id) {
            throw APIError.badParameter("group id \(TextLength.quoted(group.id)) in group[...] is invalid")
        }
        for group in groups where TextLength.characters(group.value) > GroupLimits.maxNameCharacters {
            throw APIError(.apiParameterTooLong, .badRequest, "the name of group \(group.id) is longer than \(GroupLimits.maxNameCharacters) characters")
        }
        try await core.groups.sync(appId: call.app.id, userId: userId, groups: groups.map { ($0.id, $0.value) })
        return [:]
    }

    private func muteMembers(_ call: APICall) async throws -> [String: any Sendable] {
        let minutes = try call.int("minute") ?? 0
        guard (0...Int64(GroupLimits.maxMuteMinutes)).contains(minutes) else {
            throw APIError.badParameter("minute must be 0 (until lifted) to \(GroupLimits.maxMuteMinutes), got \(minutes)")
        }
        let now = core.clock.nowMilliseconds()
        let groupId = call.string("groupId")
        try await core.groups.muteMembers(appId: call.app.id, groupId: groupId, userIds: call.list("userId"),
                                          until: minutes == 0 ? Int64.max : now + minutes * 60_000, now: now)
        return [:]
    }
}
