import Foundation
import IMCore
import IMStore

/// Limits of the chatroom Server API (spec/server-api.md §6.4), each with where it comes from.
enum ChatroomAPILimits {
    /// Users per gag, block, global-mute and mute-whitelist call ("userId (list ≤20)").
    static let usersPerModerationCall = 20
    /// Longest gag, block or global mute, in minutes: 30 days ("minute (≤43200)").
    static let maxMinutes = 43_200
    /// Users per `/chatroom/users/exist.json` ("userId (list ≤1000)") and per legacy join.
    static let usersPerCall = 1000
    /// Rooms per `/chatroom/query.json` ("chatroomId (list ≤20)").
    static let roomsPerQuery = 20
    /// Rooms per `/message/chatroom/publish.json`: the Go SDK advises at most 10
    /// ("建议最多不超过 10 个聊天室").
    static let roomsPerPublish = 10
    /// Users on one room's user whitelist ("聊天室中白名单用户最多不超过 5 个", rongcloud 2.0.1).
    static let userWhitelistPerRoom = 5
    /// Low-priority message types: 5 per call, 20 per app
    /// ("每次最多提交 5 个，设置的消息类型最多不超过 20 个", rongcloud 2.0.1 addPriority).
    static let priorityTypesPerCall = 5
    static let priorityTypesPerApp = 20
    /// Keys per `/chatroom/entry/query.json` ("keys (list ≤100)").
    static let entryKeysPerQuery = 100
    /// Chatroom broadcasts per second per app ("rate 1/s", §6.2).
    static let broadcastsPerSecond = 1
    /// A fixed-time destroy (destroyType 1) at most 7 days after creation. RongCloud states no
    /// figure here; the idle wait is bounded by `ChatroomLimits.maxIdleDestroyMinutes` (24 h, B3).
    static let maxFixedDestroyMinutes = 7 * 24 * 60
    /// `/chatroom/ban/query.json` page size: 50 unless asked, at most 1000 (RongCloud states none).
    static let banQueryDefaultSize = 50
    static let banQuerySizes = 1...1000
}

extension ErrorCode {
    /// 1015: "keepalive chatroom to delete does not exist" (HTTP 200, spec/server-api.md §5.2).
    static let apiKeepAliveRoomNotFound = ErrorCode(1015)
}

/// `/chatroom/*`, `/message/chatroom/publish.json` and `/message/chatroom/broadcast.json`, over
/// `ChatroomService`.
///
/// Endpoints about a live room (its members, messages, attributes, destroy rule, distribution)
/// answer 23410 when it does not exist. Moderation and configuration settings (gags, blocks,
/// mutes, whitelists, keep-alive, priorities) are kept in the store by room id, so they can be set
/// before a room exists and hold when it is created again. Invalid chatroom parameters are 23412;
/// missing ones 1002.
extension ServerAPI {
    var chatroomEndpoints: [APIEndpoint] {
        chatroomRoomEndpoints + chatroomMemberEndpoints + chatroomModerationEndpoints + chatroomSettingEndpoints
            + chatroomEntryEndpoints + chatroomMessageEndpoints
    }

    private static let roomIdRule = "chatroom id: \(UserID.rule)"

    // MARK: rooms

    private var chatroomRoomEndpoints: [APIEndpoint] {
        let roomId = APIParam.string("chatroomId", required: true, Self.roomIdRule)
        let destroyType = APIParam.integer("destroyType", "0 destroyed when idle (default), 1 destroyed at a fixed time")
        let destroyTime = APIParam.integer("destroyTime", "minutes: the idle time (1 to 1440, default the server's) or, for destroyType 1, the time after creation (1 to 10080)")
        return [
            APIEndpoint(
                path: "/chatroom/create.json", tag: "chatroom",
                summary: "Creates chatrooms given as chatroom[<id>]=<name> (repeatable). An existing room keeps its members and takes the new name.",
                params: []) { call in
                let rooms = call.parameters.bracketed("chatroom")
                guard !rooms.isEmpty else {
                    throw APIError.badParameter("chatroom[<id>]=<name> is required: one per room to create")
                }
                for room in rooms where !ChatroomID.isValid(room.id) {
                    throw Self.chatroomParameter("chatroom id \(TextLength.quoted(room.id)) in chatroom[...] is invalid: use \(UserID.rule)")
                }
                for room in rooms where TextLength.characters(room.value) > ChatroomLimits.maxNameCharacters {
                    throw Self.chatroomParameter("the name of chatroom \(room.id) is longer than \(ChatroomLimits.maxNameCharacters) characters")
                }
                try await core.chatroomRouting.create(appId: call.app.id, rooms: rooms.map { ($0.id, $0.value.isEmpty ? $0.id : $0.value) })
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/create_new.json", tag: "chatroom",
                summary: "Creates a chatroom with its destroy rule, optionally muted (isBan) with a mute whitelist, and initial attributes owned by entryOwnerId. An existing room takes the destroy rule, and the mute, whitelist and attributes given are added.",
                params: [
                    roomId, destroyType, destroyTime,
                    .boolean("isBan", "mute the whole room: only whiteUserIds may speak"),
                    .list("whiteUserIds", max: ChatroomAPILimits.usersPerModerationCall, "users who may speak while the room is muted"),
                    .string("entryOwnerId", "owner of the attributes in entryInfo (required with it)"),
                    .json("entryInfo", "initial attributes, a JSON object of string values"),
                ],
                handler: createChatroom),
            APIEndpoint(
                path: "/chatroom/destroy.json", tag: "chatroom",
                summary: "Destroys chatrooms: members online are told and removed, attributes go. Rooms that do not exist are passed over.",
                params: [.list("chatroomId", required: true, "chatroom ids")]) { call in
                let ids = try chatroomIds(call, "chatroomId")
                try await core.chatroomRouting.destroy(appId: call.app.id, roomIds: ids)
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/destroy/set.json", tag: "chatroom",
                summary: "Changes how an existing chatroom is destroyed: when idle for destroyTime minutes, or destroyTime minutes after creation.",
                params: [roomId, APIParam.integer("destroyType", required: true, destroyType.summary), destroyTime]) { call in
                let id = try chatroomId(call)
                try await core.chatroomRouting.setDestroyRule(appId: call.app.id, roomId: id, try destroyRule(call))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/query.json", tag: "chatroom",
                summary: "Name and creation time of the listed chatrooms that exist (deprecated by RongCloud in favour of /chatroom/get.json).",
                params: [.list("chatroomId", required: true, max: ChatroomAPILimits.roomsPerQuery, "chatroom ids")],
                response: [APIField("chatRooms", "array", items: "object", "{chrmId, chatroomId (the same), name, time (created, yyyy-MM-dd HH:mm:ss UTC)} per existing room")]) { call in
                let ids = try chatroomIds(call, "chatroomId")
                var rooms: [ChatroomService.RoomSummary] = []
                for id in ids {
                    if let room = try await core.chatroomRouting.summary(appId: call.app.id, roomId: id) { rooms.append(room) }
                }
                return ["chatRooms": rooms.map {
                    ["chrmId": $0.roomId, "chatroomId": $0.roomId, "name": $0.name, "time": APITime.text($0.createdAt)] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/chatroom/get.json", tag: "chatroom",
                summary: "A chatroom's creation time, member count, destroy rule and whole-room mute; 23410 when it does not exist.",
                params: [roomId],
                response: [
                    APIField("chatroomId", "string", "the room"), APIField("createTime", "integer", "created, ms"),
                    APIField("memberCount", "integer", "members now"), APIField("destroyType", "integer", "0 when idle, 1 at a fixed time"),
                    APIField("destroyTime", "integer", "minutes of the destroy rule"), APIField("ban", "boolean", "the whole room is muted"),
                ]) { call in
                let id = try chatroomId(call)
                guard let room = try await core.chatroomRouting.summary(appId: call.app.id, roomId: id) else { throw Self.chatroomNotFound(id) }
                return ["chatroomId": room.roomId, "createTime": room.createdAt, "memberCount": room.memberCount,
                        "destroyType": room.destroyType, "destroyTime": room.destroyMinutes, "ban": room.isMuted]
            },
            APIEndpoint(
                path: "/chatroom/message/stopDistribution.json", tag: "chatroom",
                summary: "Stops delivering a chatroom's messages: they are still accepted (and kept in history when it is on) but reach nobody.",
                params: [roomId]) { call in
                try await core.chatroomRouting.setDistribution(appId: call.app.id, roomId: try chatroomId(call), stopped: true)
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/message/resumeDistribution.json", tag: "chatroom",
                summary: "Resumes delivering a chatroom's messages (those sent while stopped are not delivered).",
                params: [roomId]) { call in
                try await core.chatroomRouting.setDistribution(appId: call.app.id, roomId: try chatroomId(call), stopped: false)
                return [:]
            },
        ]
    }

    private func createChatroom(_ call: APICall) async throws -> [String: any Sendable] {
        let id = try chatroomId(call)
        let rule = try destroyRule(call)
        let muted = try call.bool("isBan") ?? false
        let whitelist = try userIds(call, "whiteUserIds")
        var entries: [String: String] = [:]
        var owner = ""
        if call.string("entryInfo") != nil {
            entries = try entryInfo(call)
            guard let entryOwner = call.string("entryOwnerId") else {
                throw APIError.badParameter("entryOwnerId is required with entryInfo: the attributes need an owner")
            }
            owner = try userId(entryOwner, "entryOwnerId")
            guard settings(call).chatrooms.entriesEnabled else {
                throw APIError(.chatroomEntriesDisabled, .badRequest, "chatroom attributes are turned off on this server (chatroomEntriesEnabled); nothing was created")
            }
            guard entries.count <= ChatroomEntryLimits.entriesPerRoom else {
                throw APIError(.chatroomEntriesExceeded, .badRequest, "entryInfo has \(entries.count) attributes; a room holds at most \(ChatroomEntryLimits.entriesPerRoom)")
            }
            for (key, value) in entries { try ChatroomEntryLimits.check(key: key, value: value) }
        }
        try await core.chatroomRouting.create(appId: call.app.id, rooms: [(id, id)], rule: rule)
        if muted {
            try await core.chatrooms.addSettings(appId: call.app.id, kind: .roomMute, roomId: id, items: [])
        }
        if !whitelist.isEmpty {
            try await core.chatrooms.addSettings(appId: call.app.id, kind: .muteWhitelist, roomId: id, items: whitelist)
        }
        if !entries.isEmpty {
            try await core.chatroomRouting.setEntries(appId: call.app.id, roomId: id, entries, userId: owner, autoDelete: false,
                                                      force: true, notify: false, extra: "")
        }
        return [:]
    }

    private func destroyRule(_ call: APICall) throws -> ChatroomService.DestroyRule {
        let type = try call.int("destroyType") ?? 0
        let time = try call.int("destroyTime")
        switch type {
        case 0:
            if let time, !(1...Int64(ChatroomLimits.maxIdleDestroyMinutes)).contains(time) {
                throw Self.chatroomParameter("destroyTime of an idle room must be 1 to \(ChatroomLimits.maxIdleDestroyMinutes) minutes, got \(time)")
            }
            return .whenIdle(minutes: time.map(Int.init))
        case 1:
            guard let time, (1...Int64(ChatroomAPILimits.maxFixedDestroyMinutes)).contains(time) else {
                throw Self.chatroomParameter("destroyType 1 needs destroyTime, 1 to \(ChatroomAPILimits.maxFixedDestroyMinutes) minutes after creation; got \(time.map { "\($0)" } ?? "none")")
            }
            return .atTime(minutes: Int(time))
        default:
            throw Self.chatroomParameter("destroyType must be 0 (when idle) or 1 (at a fixed time), got \(type)")
        }
    }

    // MARK: members

    private var chatroomMemberEndpoints: [APIEndpoint] {
        let roomId = APIParam.string("chatroomId", required: true, Self.roomIdRule)
        return [
            APIEndpoint(
                path: "/chatroom/join.json", tag: "chatroom",
                summary: "Legacy: adds users to a chatroom (creating it if needed) as members with no device online. They count as members until the room's next message after 30 s (or 30 messages); clients join over the gateway to receive messages.",
                params: [.list("userId", required: true, max: ChatroomAPILimits.usersPerCall, "user ids"), roomId]) { call in
                let id = try chatroomId(call)
                try await core.chatroomRouting.addMembers(appId: call.app.id, roomId: id, userIds: try userIds(call, "userId"))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/user/query.json", tag: "chatroom",
                summary: "A chatroom's member count and up to 500 members by join time.",
                params: [
                    roomId,
                    .integer("count", required: true, "members to list, 1 to 500 (more lists 500)"),
                    .integer("order", required: true, "1 earliest joiners first, 2 latest first"),
                ],
                response: [
                    APIField("total", "integer", "members in the room"),
                    APIField("users", "array", items: "object", "{id, time (joined, yyyy-MM-dd HH:mm:ss UTC)}"),
                ]) { call in
                let id = try chatroomId(call)
                let count = try call.int("count") ?? 0
                guard count >= 1 else { throw Self.chatroomParameter("count must be 1 to \(ChatroomLimits.serverQueryMembersMax), got \(count)") }
                let rawOrder = try call.int("order") ?? 0
                guard let order = ChatroomMemberOrder(rawValue: Int(rawOrder)) else {
                    throw Self.chatroomParameter("order must be 1 (earliest joiners first) or 2 (latest first), got \(rawOrder)")
                }
                let result = try await core.chatroomRouting.members(appId: call.app.id, roomId: id,
                                                               count: Int(min(count, Int64(ChatroomLimits.serverQueryMembersMax))), order: order)
                return ["total": result.total, "users": result.members.map {
                    ["id": $0.userId, "time": APITime.text($0.joinTime)] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/chatroom/user/exist.json", tag: "chatroom",
                summary: "Whether a user is in a chatroom (on any device, or within the offline grace period).",
                params: [roomId, .string("userId", required: true, "user id")],
                response: [APIField("isInChrm", "boolean", "the user is in the room")]) { call in
                let id = try chatroomId(call)
                let user = try userId(call.required("userId"), "userId")
                return ["isInChrm": try await chatroomMembership(call.app.id, id, [user]).first ?? false]
            },
            APIEndpoint(
                path: "/chatroom/users/exist.json", tag: "chatroom",
                summary: "Whether each user is in a chatroom.",
                params: [roomId, .list("userId", required: true, max: ChatroomAPILimits.usersPerCall, "user ids")],
                response: [APIField("result", "array", items: "object", "{userId, isInChrm (1 in the room, 0 not)}")]) { call in
                let id = try chatroomId(call)
                let users = try userIds(call, "userId")
                let present = try await chatroomMembership(call.app.id, id, users)
                return ["result": zip(users, present).map { ["userId": $0, "isInChrm": $1 ? 1 : 0] as [String: any Sendable] }]
            },
        ]
    }

    private func chatroomMembership(_ appId: Int64, _ roomId: String, _ users: [String]) async throws -> [Bool] {
        guard try await core.chatroomRouting.summary(appId: appId, roomId: roomId) != nil else { throw Self.chatroomNotFound(roomId) }
        return try await core.chatroomRouting.areMembers(appId: appId, roomId: roomId, userIds: users)
    }

    // MARK: moderation: gag, block, global mute, whole-room mute and its whitelist

    private var chatroomModerationEndpoints: [APIEndpoint] {
        let roomId = APIParam.string("chatroomId", required: true, Self.roomIdRule)
        let users = APIParam.list("userId", required: true, max: ChatroomAPILimits.usersPerModerationCall, "user ids")
        let minute = APIParam.integer("minute", required: true, "duration, 1 to \(ChatroomAPILimits.maxMinutes) minutes")
        let notify: [APIParam] = [
            .boolean("needNotify", "tell the room's members online (a user kicked by a block is always told)"),
            .string("extra", maxLength: MessageFieldLimits.maxExtraCharacters, "text carried by the notice"),
        ]
        let timedUsers = [APIField("users", "array", items: "object", "{userId, time (ends, yyyy-MM-dd HH:mm:ss UTC)}")]
        return [
            APIEndpoint(
                path: "/chatroom/user/gag/add.json", tag: "chatroom",
                summary: "Mutes users in a chatroom for `minute` minutes: they receive but cannot send (23408).",
                params: [users, roomId, minute] + notify) { call in
                try await addTimedSetting(call, .gag, roomId: try chatroomId(call))
            },
            APIEndpoint(
                path: "/chatroom/user/gag/rollback.json", tag: "chatroom", summary: "Lifts mutes of users in a chatroom.",
                params: [users, roomId] + notify) { call in
                try await removeSetting(call, .gag, roomId: try chatroomId(call), items: try userIds(call, "userId"))
            },
            APIEndpoint(
                path: "/chatroom/user/gag/list.json", tag: "chatroom", summary: "Users muted in a chatroom.",
                params: [roomId], response: timedUsers) { call in
                try await listTimedSetting(call, .gag, roomId: try chatroomId(call))
            },
            APIEndpoint(
                path: "/chatroom/user/block/add.json", tag: "chatroom",
                summary: "Bans users from a chatroom for `minute` minutes: they are removed at once and joining fails with 23409 until the ban ends.",
                params: [users, roomId, minute] + notify) { call in
                try await addTimedSetting(call, .block, roomId: try chatroomId(call))
            },
            APIEndpoint(
                path: "/chatroom/user/block/rollback.json", tag: "chatroom", summary: "Lifts bans from a chatroom.",
                params: [users, roomId] + notify) { call in
                try await removeSetting(call, .block, roomId: try chatroomId(call), items: try userIds(call, "userId"))
            },
            APIEndpoint(
                path: "/chatroom/user/block/list.json", tag: "chatroom", summary: "Users banned from a chatroom.",
                params: [roomId], response: timedUsers) { call in
                try await listTimedSetting(call, .block, roomId: try chatroomId(call))
            },
            APIEndpoint(
                path: "/chatroom/user/ban/add.json", tag: "chatroom",
                summary: "Mutes users in every chatroom of the app for `minute` minutes (global mute).",
                params: [users, minute] + notify) { call in
                try await addTimedSetting(call, .globalMute, roomId: "")
            },
            APIEndpoint(
                path: "/chatroom/user/ban/remove.json", tag: "chatroom", summary: "Lifts global chatroom mutes.",
                params: [users] + notify) { call in
                try await removeSetting(call, .globalMute, roomId: "", items: try userIds(call, "userId"))
            },
            APIEndpoint(
                path: "/chatroom/user/ban/query.json", tag: "chatroom", summary: "Users muted in every chatroom.",
                params: [], response: timedUsers) { call in
                try await listTimedSetting(call, .globalMute, roomId: "")
            },
            APIEndpoint(
                path: "/chatroom/ban/add.json", tag: "chatroom",
                summary: "Mutes a whole chatroom: only its mute whitelist (/chatroom/user/ban/whitelist/add.json) may speak.",
                params: [roomId] + notify) { call in
                let id = try chatroomId(call)
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .roomMute, roomId: id, items: [],
                                                     notify: try call.bool("needNotify") ?? false, extra: call.string("extra") ?? "")
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/ban/rollback.json", tag: "chatroom", summary: "Lifts a whole-chatroom mute.",
                params: [roomId] + notify) { call in
                try await removeSetting(call, .roomMute, roomId: try chatroomId(call), items: [])
            },
            APIEndpoint(
                path: "/chatroom/ban/query.json", tag: "chatroom", summary: "The muted chatrooms, a page at a time in id order.",
                params: [
                    .integer("page", "page, from 1 (default 1)"),
                    .integer("size", "rooms per page, 1 to \(ChatroomAPILimits.banQuerySizes.upperBound) (default \(ChatroomAPILimits.banQueryDefaultSize))"),
                ],
                response: [APIField("chatroomIds", "array", items: "string", "muted rooms")]) { call in
                let page = try call.int("page") ?? 1
                let size = try call.int("size") ?? Int64(ChatroomAPILimits.banQueryDefaultSize)
                guard page >= 1 else { throw Self.chatroomParameter("page starts at 1, got \(page)") }
                guard ChatroomAPILimits.banQuerySizes.contains(Int(clamping: size)) else {
                    throw Self.chatroomParameter("size must be 1 to \(ChatroomAPILimits.banQuerySizes.upperBound), got \(size)")
                }
                let rooms = try await core.chatrooms.rooms(appId: call.app.id, with: .roomMute)
                let start = (page - 1).multipliedReportingOverflow(by: size)
                let first = start.overflow ? rooms.count : Int(clamping: start.partialValue)
                return ["chatroomIds": Array(rooms.dropFirst(first).prefix(Int(size)))]
            },
            APIEndpoint(
                path: "/chatroom/ban/check.json", tag: "chatroom", summary: "Whether a whole chatroom is muted.",
                params: [roomId],
                response: [APIField("status", "integer", "1 muted, 0 not")]) { call in
                let id = try chatroomId(call)
                let muted = try await core.chatrooms.rooms(appId: call.app.id, with: .roomMute).contains(id)
                return ["status": muted ? 1 : 0]
            },
            APIEndpoint(
                path: "/chatroom/user/ban/whitelist/add.json", tag: "chatroom", summary: "Users who may speak while their chatroom is muted.",
                params: [roomId, users] + notify) { call in
                let id = try chatroomId(call)
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .muteWhitelist, roomId: id, items: try userIds(call, "userId"),
                                                     notify: try call.bool("needNotify") ?? false, extra: call.string("extra") ?? "")
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/user/ban/whitelist/rollback.json", tag: "chatroom", summary: "Removes users from a chatroom's mute whitelist.",
                params: [roomId, users] + notify) { call in
                try await removeSetting(call, .muteWhitelist, roomId: try chatroomId(call), items: try userIds(call, "userId"))
            },
            APIEndpoint(
                path: "/chatroom/user/ban/whitelist/query.json", tag: "chatroom", summary: "A chatroom's mute whitelist.",
                params: [roomId],
                response: [APIField("userIds", "array", items: "string", "user ids")]) { call in
                let id = try chatroomId(call)
                return ["userIds": try await core.chatrooms.settings(appId: call.app.id, kind: .muteWhitelist, roomId: id).map(\.item)]
            },
        ]
    }

    private func addTimedSetting(_ call: APICall, _ kind: ChatroomSettingKind, roomId: String) async throws -> [String: any Sendable] {
        let users = try userIds(call, "userId")
        let minutes = try call.int("minute") ?? 0
        guard (1...Int64(ChatroomAPILimits.maxMinutes)).contains(minutes) else {
            throw Self.chatroomParameter("minute must be 1 to \(ChatroomAPILimits.maxMinutes), got \(minutes)")
        }
        try await core.chatrooms.addSettings(appId: call.app.id, kind: kind, roomId: roomId, items: users, minutes: Int(minutes),
                                             notify: try call.bool("needNotify") ?? false, extra: call.string("extra") ?? "")
        return [:]
    }

    private func removeSetting(_ call: APICall, _ kind: ChatroomSettingKind, roomId: String, items: [String]) async throws -> [String: any Sendable] {
        try await core.chatrooms.removeSettings(appId: call.app.id, kind: kind, roomId: roomId, items: items,
                                                notify: try call.bool("needNotify") ?? false, extra: call.string("extra") ?? "")
        return [:]
    }

    private func listTimedSetting(_ call: APICall, _ kind: ChatroomSettingKind, roomId: String) async throws -> [String: any Sendable] {
        let items = try await core.chatrooms.settings(appId: call.app.id, kind: kind, roomId: roomId)
        return ["users": items.map { ["userId": $0.item, "time": APITime.text($0.until)] as [String: any Sendable] }]
    }

    // MARK: app settings: priorities, keep-alive, message whitelist, user whitelist

    private var chatroomSettingEndpoints: [APIEndpoint] {
        let roomId = APIParam.string("chatroomId", required: true, Self.roomIdRule)
        let priorityTypes = APIParam.list("objectName", required: true, max: ChatroomAPILimits.priorityTypesPerCall, "message types")
        let whitelistTypes = APIParam.list("objectnames", required: true, "message types (lowercase n, as RongCloud spells it)")
        let whitelistUsers = APIParam.list("userId", required: true, max: ChatroomAPILimits.userWhitelistPerRoom, "user ids")
        return [
            APIEndpoint(
                path: "/chatroom/message/priority/add.json", tag: "chatroom",
                summary: "Makes message types low priority in every chatroom: under load they are discarded first. 5 per call, 20 per app.",
                params: [priorityTypes]) { call in
                let types = try objectNames(call, "objectName")
                let existing = try await core.chatrooms.settings(appId: call.app.id, kind: .lowPriority).map(\.item)
                let total = Set(existing).union(types).count
                guard total <= ChatroomAPILimits.priorityTypesPerApp else {
                    throw Self.chatroomParameter("the app would have \(total) low-priority message types; at most \(ChatroomAPILimits.priorityTypesPerApp) are allowed: remove some first")
                }
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .lowPriority, items: types)
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/message/priority/remove.json", tag: "chatroom", summary: "Makes message types normal priority again.",
                params: [priorityTypes]) { call in
                try await core.chatrooms.removeSettings(appId: call.app.id, kind: .lowPriority, items: try objectNames(call, "objectName"))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/message/priority/query.json", tag: "chatroom", summary: "The low-priority message types.",
                params: [],
                response: [APIField("objectNames", "array", items: "string", "message types")]) { call in
                ["objectNames": try await core.chatrooms.settings(appId: call.app.id, kind: .lowPriority).map(\.item)]
            },
            APIEndpoint(
                path: "/chatroom/keepalive/add.json", tag: "chatroom",
                summary: "Keeps a chatroom alive: it is never destroyed for being idle (it can still be destroyed through the API).",
                params: [roomId]) { call in
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .keepAlive, items: [try chatroomId(call)])
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/keepalive/remove.json", tag: "chatroom",
                summary: "Lets a kept-alive chatroom be destroyed when idle again; 1015 when it was not kept alive.",
                params: [roomId]) { call in
                let id = try chatroomId(call)
                let kept = try await core.chatrooms.settings(appId: call.app.id, kind: .keepAlive).contains { $0.item == id }
                guard kept else {
                    throw APIError(.apiKeepAliveRoomNotFound, .ok, "chatroom \(id) is not kept alive: nothing to remove")
                }
                try await core.chatrooms.removeSettings(appId: call.app.id, kind: .keepAlive, items: [id])
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/keepalive/query.json", tag: "chatroom", summary: "The kept-alive chatrooms.",
                params: [],
                response: [APIField("chatroomIds", "array", items: "string", "room ids")]) { call in
                ["chatroomIds": try await core.chatrooms.settings(appId: call.app.id, kind: .keepAlive).map(\.item)]
            },
            APIEndpoint(
                path: "/chatroom/whitelist/add.json", tag: "chatroom",
                summary: "Message types never discarded under load, in every chatroom (the message whitelist).",
                params: [whitelistTypes]) { call in
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .messageWhitelist, items: try objectNames(call, "objectnames"))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/whitelist/delete.json", tag: "chatroom", summary: "Removes message types from the message whitelist.",
                params: [whitelistTypes]) { call in
                try await core.chatrooms.removeSettings(appId: call.app.id, kind: .messageWhitelist, items: try objectNames(call, "objectnames"))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/whitelist/query.json", tag: "chatroom", summary: "The message whitelist.",
                params: [],
                response: [APIField("whitlistMsgType", "array", items: "string", "message types (the real server's spelling)")]) { call in
                ["whitlistMsgType": try await core.chatrooms.settings(appId: call.app.id, kind: .messageWhitelist).map(\.item)]
            },
            APIEndpoint(
                path: "/chatroom/user/whitelist/add.json", tag: "chatroom",
                summary: "A chatroom's whitelisted users (at most 5): their messages are never discarded and they are never removed for being offline.",
                params: [roomId, whitelistUsers]) { call in
                let id = try chatroomId(call)
                let users = try userIds(call, "userId")
                let existing = try await core.chatrooms.settings(appId: call.app.id, kind: .userWhitelist, roomId: id).map(\.item)
                let total = Set(existing).union(users).count
                guard total <= ChatroomAPILimits.userWhitelistPerRoom else {
                    throw Self.chatroomParameter("chatroom \(id) would have \(total) whitelisted users; at most \(ChatroomAPILimits.userWhitelistPerRoom) are allowed: remove some first")
                }
                try await core.chatrooms.addSettings(appId: call.app.id, kind: .userWhitelist, roomId: id, items: users)
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/user/whitelist/remove.json", tag: "chatroom", summary: "Removes users from a chatroom's user whitelist.",
                params: [roomId, .list("userId", required: true, max: ChatroomAPILimits.usersPerModerationCall, "user ids")]) { call in
                try await core.chatrooms.removeSettings(appId: call.app.id, kind: .userWhitelist, roomId: try chatroomId(call),
                                                        items: try userIds(call, "userId"))
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/user/whitelist/query.json", tag: "chatroom", summary: "A chatroom's whitelisted users.",
                params: [roomId],
                response: [APIField("users", "array", items: "string", "user ids")]) { call in
                let id = try chatroomId(call)
                return ["users": try await core.chatrooms.settings(appId: call.app.id, kind: .userWhitelist, roomId: id).map(\.item)]
            },
        ]
    }

    // MARK: attributes (KV)

    private var chatroomEntryEndpoints: [APIEndpoint] {
        let roomId = APIParam.string("chatroomId", required: true, Self.roomIdRule)
        let autoDelete = APIParam.boolean("autoDelete", "removed when the owner leaves the room or goes offline (default 0)")
        return [
            APIEndpoint(
                path: "/chatroom/entry/set.json", tag: "chatroom",
                summary: "Sets a chatroom attribute as userId, whoever owned it before (the app server may change any); with objectName and content, that message goes to the room too.",
                params: [
                    roomId,
                    .string("userId", required: true, "the attribute's owner from now on; need not be in the room"),
                    .string("key", required: true, "1 to 128 characters of A-Z a-z 0-9 + = - _"),
                    .string("value", required: true, maxLength: ChatroomEntryLimits.maxValueLength, tooLong: .chatroomParameterInvalid, "up to 4096 characters"),
                    autoDelete,
                    .string("objectName", maxLength: MessageLimits.maxObjectNameLength, "type of a message sent to the room with the change"),
                    .json("content", "content of that message, a JSON object"),
                ]) { call in
                let id = try chatroomId(call)
                let owner = try userId(call.required("userId"), "userId")
                var content: Data?
                switch (call.string("objectName"), call.string("content")) {
                case (nil, nil):
                    break
                case (_?, let text?):
                    let data = Data(text.utf8)
                    if let violation = MessageContentRule.violation(of: data) {
                        throw Self.chatroomParameter(MessageContentRule.message(violation, field: "content"))
                    }
                    content = data
                default:
                    throw Self.chatroomParameter("objectName and content go together: give both to send a message with the change, or neither")
                }
                try await core.chatroomRouting.setEntries(appId: call.app.id, roomId: id, [call.required("key"): call.required("value")],
                                                          userId: owner, autoDelete: try call.bool("autoDelete") ?? false, force: true,
                                                          notify: false, extra: "", objectName: call.string("objectName"), content: content)
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/entry/remove.json", tag: "chatroom",
                summary: "Removes a chatroom attribute, whoever owns it; 23427 when it does not exist.",
                params: [roomId, .string("userId", required: true, "the user removing it"), .string("key", required: true, "the attribute")]) { call in
                let id = try chatroomId(call)
                let user = try userId(call.required("userId"), "userId")
                try await core.chatroomRouting.removeEntries(appId: call.app.id, roomId: id, [call.required("key")], userId: user,
                                                             force: true, notify: false, extra: "")
                return [:]
            },
            APIEndpoint(
                path: "/chatroom/entry/query.json", tag: "chatroom", summary: "A chatroom's attributes: the listed keys that exist, or all.",
                params: [roomId, .list("keys", max: ChatroomAPILimits.entryKeysPerQuery, "keys; omit for all")],
                response: [APIField("keys", "array", items: "object", "{key, value, userId (owner), autoDelete (\"1\" or \"0\"), lastSetTime (ms, as a string)}")]) { call in
                let id = try chatroomId(call)
                let entries = try await core.chatroomRouting.entries(appId: call.app.id, roomId: id, keys: call.list("keys"))
                return ["keys": entries.map {
                    ["key": $0.key, "value": $0.value, "userId": $0.ownerId, "autoDelete": $0.autoDelete ? "1" : "0",
                     "lastSetTime": "\($0.updatedAt)"] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/chatroom/entry/batch/set.json", tag: "chatroom",
                summary: "Sets several chatroom attributes at once, all or none, owned by entryOwnerId.",
                params: [
                    roomId, autoDelete,
                    .string("entryOwnerId", required: true, "the attributes' owner"),
                    .json("entryInfo", required: true, "a JSON object of keys and string values"),
                ]) { call in
                let id = try chatroomId(call)
                let owner = try userId(call.required("entryOwnerId"), "entryOwnerId")
                try await core.chatroomRouting.setEntries(appId: call.app.id, roomId: id, try entryInfo(call), userId: owner,
                                                          autoDelete: try call.bool("autoDelete") ?? false, force: true, notify: false, extra: "")
                return [:]
            },
        ]
    }

    private func entryInfo(_ call: APICall) throws -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(call.required("entryInfo").utf8)) as? [String: Any],
              object.values.allSatisfy({ $0 is String }) else {
            throw Self.chatroomParameter("entryInfo must be a JSON object of string values, e.g. {\"k1\":\"v1\"}")
        }
        guard !object.isEmpty else { throw Self.chatroomParameter("entryInfo holds no attribute") }
        return object.compactMapValues { $0 as? String }
    }

    // MARK: messages

    private var chatroomMessageEndpoints: [APIEndpoint] {
        let response = [APIField("messageUIDs", "array", items: "object", "{chatroomId, messageUID} per room")]
        return [
            APIEndpoint(
                path: "/message/chatroom/publish.json", tag: "message",
                summary: "Sends a chatroom message from `fromUserId` to each of `toChatroomId` (at most 10; all must exist, 23410 otherwise): members online get it, nothing is queued or pushed. 100 per second per app, each room counted.",
                params: [
                    .string("fromUserId", required: true, "sender; need not be in the rooms, and mutes do not apply"),
                    .list("toChatroomId", required: true, max: ChatroomAPILimits.roomsPerPublish, "chatrooms"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type, e.g. RC:TxtMsg"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .boolean("isPersisted", "kept in the room's latest messages and history (default 1)"),
                    .boolean("isCounted", "counted as unread (default 1)"),
                    .boolean("isIncludeSender", "the sender's own sessions in the room get it too (default 0)"),
                ],
                response: response) { call in
                let message = try chatroomMessage(call)
                let rooms = call.list("toChatroomId").uniqued()
                for id in rooms where !ChatroomID.isValid(id) {
                    throw Self.chatroomParameter("toChatroomId \(TextLength.quoted(id)) is invalid: use \(UserID.rule)")
                }
                var missing: [String] = []
                for id in rooms where try await core.chatroomRouting.summary(appId: call.app.id, roomId: id) == nil { missing.append(id) }
                guard missing.isEmpty else {
                    throw APIError(.chatroomNotFound, .badRequest, "chatroom \(missing.joined(separator: ", ")) does not exist: create it (/chatroom/create.json) or let a member join it first; nothing was sent")
                }
                try core.apiLimits.admit(appId: call.app.id, cost: rooms.count, rules: [
                    APIRateLimiter.Rule(name: "chatroom messages", limit: settings(call).serverAPI.chatroomPublishPerSecond, windowMilliseconds: 1000),
                ])
                let sent = try await publish(message, toChatrooms: rooms, skippingMissing: false)
                return ["messageUIDs": sent.map { ["chatroomId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
            },
            APIEndpoint(
                path: "/message/chatroom/broadcast.json", tag: "message",
                summary: "Sends a message from `fromUserId` to every chatroom of the app (content up to 128 KB; one broadcast per second).",
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .boolean("isIncludeSender", "the sender's own sessions in the rooms get it too (default 0)"),
                ],
                response: response) { call in
                let message = try chatroomMessage(call)
                try core.apiLimits.admit(appId: call.app.id, cost: 1, rules: [
                    APIRateLimiter.Rule(name: "chatroom broadcasts", limit: ChatroomAPILimits.broadcastsPerSecond, windowMilliseconds: 1000),
                ])
                let sent = try await publish(message, toChatrooms: try await core.chatroomRouting.roomIds(appId: call.app.id), skippingMissing: true)
                return ["messageUIDs": sent.map { ["chatroomId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
            },
        ]
    }

    /// The checked message of a chatroom publish or broadcast (1002 for bad content, as the other publishes).
    private func chatroomMessage(_ call: APICall) throws -> StoredMessage {
        let message = try message(call, type: .chatroom, content: Data(call.required("content").utf8), status: false)
        guard !message.canIncludeExpansion, message.expansion.isEmpty else {
            throw APIError.badParameter("chatroom messages cannot carry extensions: send without expansion and extraContent")
        }
        return message
    }

    /// Sends one copy of the message to each room, through the sensitive-word filter as a client's
    /// chatroom message goes: a blocked message is answered as sent and reaches nobody. The rooms
    /// are sent to concurrently, so with chatroom history on their store writes share commits.
    private func publish(_ message: StoredMessage, toChatrooms rooms: [String], skippingMissing: Bool) async throws -> [StoredMessage] {
        var message = message
        switch try await core.sensitiveWords.apply(appId: message.appId, objectName: message.objectName, content: message.content) {
        case .block:
            let now = core.clock.nowMilliseconds()
            return rooms.map { id in
                var copy = message
                copy.targetId = id
                copy.conversationKey = chatroomConversationKey(id)
                copy.sentTime = now
                copy.uid = core.chatrooms.uids.next(milliseconds: now)
                return copy
            }
        case .deliver(let content):
            message.content = content
        }
        let chatrooms = core.chatroomRouting, filtered = message
        return try await withThrowingTaskGroup(of: (Int, StoredMessage?).self) { group in
            for (index, id) in rooms.enumerated() {
                var copy = filtered
                copy.targetId = id
                copy.conversationKey = chatroomConversationKey(id)
                group.addTask {
                    do {
                        return (index, try await chatrooms.publish(copy).message)
                    } catch let error as IMError where skippingMissing && error.code == .chatroomNotFound {
                        return (index, nil)   // destroyed since the rooms were listed
                    }
                }
            }
            var sent = [StoredMessage?](repeating: nil, count: rooms.count)
            for try await (index, copy) in group { sent[index] = copy }
            return sent.compactMap { $0 }
        }
    }

    // MARK: parameters

    static func chatroomParameter(_ message: String) -> APIError { APIError(.chatroomParameterInvalid, .badRequest, message) }

    static func chatroomNotFound(_ roomId: String) -> APIError {
        APIError(.chatroomNotFound, .badRequest, "chatroom \(roomId) does not exist: create it (/chatroom/create.json) or let a member join it")
    }

    private func chatroomId(_ call: APICall) throws -> String {
        let id = call.required("chatroomId")
        guard ChatroomID.isValid(id) else {
            throw Self.chatroomParameter("chatroomId \(TextLength.quoted(id)) is invalid: use \(UserID.rule)")
        }
        return id
    }

    private func chatroomIds(_ call: APICall, _ name: String) throws -> [String] {
        let ids = call.list(name).uniqued()
        for id in ids where !ChatroomID.isValid(id) {
            throw Self.chatroomParameter("\(name) \(TextLength.quoted(id)) is invalid: use \(UserID.rule)")
        }
        return ids
    }

    private func userId(_ id: String, _ name: String) throws -> String {
        guard UserID.isValid(id) else {
            throw Self.chatroomParameter("\(name) \(TextLength.quoted(id)) is invalid: use \(UserID.rule)")
        }
        return id
    }

    /// A list of user ids, without repeats, each checked (23412).
    private func userIds(_ call: APICall, _ name: String) throws -> [String] {
        let ids = call.list(name).uniqued()
        for id in ids { _ = try userId(id, name) }
        return ids
    }

    /// A list of message types, without repeats, each 1 to 32 characters (23412).
    private func objectNames(_ call: APICall, _ name: String) throws -> [String] {
        var seen = Set<String>()
        let names = call.list(name).filter { seen.insert($0).inserted }
        for objectName in names where !MessageFieldLimits.isValidObjectName(objectName) {
            throw Self.chatroomParameter("\(name) \(TextLength.quoted(objectName)) must be 1 to \(MessageLimits.maxObjectNameLength) characters")
        }
        return names
    }
}
