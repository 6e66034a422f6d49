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
                summary: "Creates a group with these members (an existing group gets them added). At most maxGroupMembers (3000) members, or maxMember for this call. With bindNotifyMsg, the message given is sent to the group once the members are in.",
                params: [members, groupId, .string("groupName", maxLength: GroupLimits.maxNameCharacters, "group name"), Self.maxMemberParam]
                    + Self.bindNotifyParams,
                response: Self.bindNotifyResponse,
                handler: joinGroup),
            APIEndpoint(
                path: "/group/join.json", tag: "group",
                summary: "Adds members to a group (creating it if needed); all or none when the member limit would be passed. With bindNotifyMsg, the message given is sent to the group once they are in.",
                params: [members, groupId, .string("groupName", maxLength: GroupLimits.maxNameCharacters, "group name"), Self.maxMemberParam]
                    + Self.bindNotifyParams,
                response: Self.bindNotifyResponse,
                handler: joinGroup),
            APIEndpoint(
                path: "/group/quit.json", tag: "group",
                summary: "Removes members from a group. With bindNotifyMsg, the message given is sent to the members who stay.",
                params: [members, groupId] + Self.bindNotifyParams,
                response: Self.bindNotifyResponse) { call in
                let id = try validGroupId(call)
                let notice = try boundNotice(call)
                try await core.groups.quit(appId: call.app.id, groupId: id, userIds: call.list("userId"))
                return try await send(notice, to: id)
            },
            APIEndpoint(
                path: "/group/dismiss.json", tag: "group",
                summary: "Dismisses a group: members get an RC:GrpNtf Dismiss notification, nobody can send any more, history stays readable. With bindNotifyMsg, the message given is sent to the members first.",
                params: [.id("userId", required: true, "the operator"), groupId] + Self.bindNotifyParams,
                response: Self.bindNotifyResponse) { call in
                let operatorId = call.required("userId")
                guard UserID.isValid(operatorId) else { throw APIError.badParameter("userId '\(operatorId)' is invalid") }
                let id = try validGroupId(call)
                let notice = try boundNotice(call)
                if notice != nil, try await core.groups.rosters.roster(appId: call.app.id, groupId: id) == nil {
                    throw APIError.badParameter("there is no group \(id): nothing was sent or dismissed")
                }
                let answer = try await send(notice, to: id)
                _ = try await core.groups.dismiss(appId: call.app.id, groupId: id, operatorId: operatorId)
                return answer
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
        let notice = try boundNotice(call)
        let maxMembers = try call.int("maxMember").map { min(Int($0), settings(call).groups.maxMembers) }
        switch try await core.groups.join(appId: call.app.id, groupId: id, name: call.string("groupName"), userIds: userIds,
                                          maxMembers: maxMembers) {
        case .joined(let memberCount):
            var answer = try await send(notice, to: id)
            answer["memberCount"] = memberCount
            return answer
        case .tooManyMembers(let limit):
            throw APIError.badParameter("group \(id) would have more than \(limit) members; nobody was added")
        }
    }

    /// `maxMember`: the most members the group may have after this call (never above the app's limit).
    static let maxMemberParam = APIParam.integer("maxMember", in: 1...Int64(Int32.max),
                                                 "the group's member limit for this call, at most maxGroupMembers (not stored)")

    /// A notification message bound to a membership change (the Go and Java SDKs' `bindNotifyMsg`).
    static let bindNotifyParams: [APIParam] = [
        .boolean("bindNotifyMsg", "send the message below to the group with the change"),
        .string("fromUserId", "the message's sender (required with bindNotifyMsg)"),
        .string("objectName", maxLength: MessageLimits.maxObjectNameLength, "the message's type (required with bindNotifyMsg)"),
        .json("content", "the message's content, a JSON object (required with bindNotifyMsg)"),
        .string("pushContent", "push notification text"),
        .string("pushData", maxLength: MessageFieldLimits.maxPushDataBytes, "push payload for the app"),
        .json("pushExt", "push options, a JSON object"),
        .boolean("isIncludeSender", "the sender's own devices get a copy (default 0)"),
        .boolean("isPersisted", "stored in cloud history (default 1)"),
        .boolean("isCounted", "counted as unread (default 1)"),
        .boolean("disableUpdateLastMsg", "do not update the conversation's last message"),
    ]
    static let bindNotifyResponse = [
        APIField("messageUID", "string", "the bound message's uid (with bindNotifyMsg)"),
        APIField("memberCount", "integer", "members after the call (create and join)"),
    ]

    /// The message of `bindNotifyMsg`, checked before the change is made (nil without it).
    private func boundNotice(_ call: APICall) throws -> StoredMessage? {
        guard try call.bool("bindNotifyMsg") == true else { return nil }
        for name in ["fromUserId", "objectName", "content"] where call.string(name) == nil {
            throw APIError.badParameter("\(name) is required with bindNotifyMsg: the notification needs a sender, a type and a content")
        }
        return try message(call, type: .group, content: Data(call.required("content").utf8), status: false)
    }

    private func send(_ notice: StoredMessage?, to groupId: String) async throws -> [String: any Sendable] {
        guard let notice else { return [:] }
        let sent = try await core.groups.publish(notice, to: [groupId])
        return ["messageUID": sent.first?.uid ?? ""]
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
