import Foundation
import IMCore
import IMStore

/// `/ultragroup/*` and `/message/ultragroup/publish.json`: ultra groups run by the app server
/// (spec/server-api.md §6.5). Channels are `busChannel` here; a call without one means the whole
/// group (mutes, whitelists, do-not-disturb) or the default channel `RCDefault` (messages).
/// Refusals carry RongCloud's ultra group codes: 24410 no such group, 24414 no such channel, 24406
/// not a member, 24403 a bad id or a change the default channel does not allow, 24411-24413 limits.
extension ServerAPI {
    /// Users per mute or whitelist call (RongCloud: 20).
    static let ultraGroupMutesPerCall = 20
    /// Entries a page of an ultra group list holds by default, and at most.
    static let ultraGroupDefaultPageSize = 20
    static let ultraGroupMaxPageSize = 100
    /// Messages one `/ultragroup/msg/get.json` names at most.
    static let ultraGroupMessagesPerGet = 20
    /// Neighbours `/ultragroup/hismsg/msgid/query.json` returns at most on each side.
    static let ultraGroupMaxNeighbours = 50
    /// The longest span of `/ultragroup/hismsg/query.json`: 14 days.
    static let ultraGroupHistorySpan: Int64 = 14 * 86_400_000

    var ultraGroupEndpoints: [APIEndpoint] {
        let groupId = APIParam.string("groupId", required: true, "ultra group id: \(UserID.rule)")
        let channel = APIParam.string("busChannel", required: true, "channel id: 1 to 20 letters and digits")
        let scope = APIParam.string("busChannel", "channel id; omit for the whole group")
        let users = APIParam.list("userIds", required: true, max: UltraGroupLimits.usersPerCall, "user ids, comma-separated")
        let mutedUsers = APIParam.list("userIds", required: true, max: Self.ultraGroupMutesPerCall, "user ids, comma-separated")
        let userGroupIds = APIParam.list("userGroupIds", required: true, max: UltraGroupLimits.maxUserGroupsPerGroup, "user group ids, comma-separated")
        let paging = [APIParam.integer("page", "page, from 1"), .integer("pageSize", "entries per page, 1 to \(Self.ultraGroupMaxPageSize) (default \(Self.ultraGroupDefaultPageSize))")]
        let userList = [APIField("users", "array", items: "object", "{id} per user")]
        let idList = [APIField("data", "array", items: "string", "ids")]
        return [
            APIEndpoint(
                path: "/message/ultragroup/publish.json", tag: "ultragroup",
                summary: "Sends a message from `fromUserId` to a channel (`busChannel`, default RCDefault) of each of `toGroupIds` (at most 3), \(UltraGroupLimits.serverMessagesPerSecond) messages per second per app by default; the members online get it at once, the others read it from history.",
                body: .json,
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .list("toGroupIds", required: true, max: UltraGroupLimits.groupsPerPublish, "ultra groups"),
                    .list("toUserIds", max: GroupLimits.maxDirectedUsers, "members who alone receive the message (a directional message)"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type, e.g. RC:TxtMsg"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .boolean("isMentioned", "an @ message: content carries mentionedInfo {type 1 all / 2 users, userIdList}"),
                    .integer("unreadCountFlag", "accepted for compatibility; isCounted decides"),
                ] + Self.publishFlags,
                response: [APIField("messageUIDs", "array", items: "object", "{groupId, messageUID} per group")],
                handler: publishUltraGroup),
            APIEndpoint(
                path: "/ultragroup/create.json", tag: "ultragroup",
                summary: "Creates an ultra group with its default channel RCDefault and `userId` as its first member (24412 when that user is already in 100 ultra groups).",
                params: [.string("userId", required: true, "the first member"), groupId, .string("groupName", required: true, maxLength: 128, "name")]) { call in
                let ownerId = call.required("userId")
                guard UserID.isValid(ownerId) else {
                    throw IMError(.ultraGroupParameterInvalid, "userId \(TextLength.quoted(ownerId)) is invalid: name one user of \(UserID.rule)")
                }
                try await core.ultraGroups.create(appId: call.app.id, groupId: try ultraGroupId(call), name: call.required("groupName"), ownerId: ownerId)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/dis.json", tag: "ultragroup",
                summary: "Dismisses an ultra group: its members, channels, user groups and settings are deleted and nobody reads its messages any more.",
                params: [groupId]) { call in
                try await core.ultraGroups.dismiss(appId: call.app.id, groupId: try ultraGroupId(call))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/join.json", tag: "ultragroup",
                summary: "Adds users to an ultra group, all or none (24412 when one of them is already in 100 ultra groups).",
                params: [.list("userId", required: true, max: UltraGroupLimits.usersPerCall, "user ids"), groupId]) { call in
                try await core.ultraGroups.join(appId: call.app.id, groupId: try ultraGroupId(call), userIds: try ultraGroupUsers(call, "userId"))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/quit.json", tag: "ultragroup",
                summary: "Removes users from an ultra group, its private channel lists and its user groups.",
                params: [.list("userId", required: true, max: UltraGroupLimits.usersPerCall, "user ids"), groupId]) { call in
                try await core.ultraGroups.quit(appId: call.app.id, groupId: try ultraGroupId(call), userIds: try ultraGroupUsers(call, "userId"))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/refresh.json", tag: "ultragroup", summary: "Renames an ultra group.",
                params: [groupId, .string("groupName", required: true, maxLength: 128, "new name")]) { call in
                try await core.ultraGroups.rename(appId: call.app.id, groupId: try ultraGroupId(call), name: call.required("groupName"))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/member/exist.json", tag: "ultragroup", summary: "Whether a user is a member of an ultra group.",
                params: [groupId, .string("userId", required: true, "user id")],
                response: [APIField("status", "boolean", "true when the user is a member")]) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                return ["status": roster.members[call.required("userId")] != nil]
            },

            // MARK: channels
            APIEndpoint(
                path: "/ultragroup/channel/create.json", tag: "ultragroup",
                summary: "Creates a channel, public (type 0) or private (type 1); a group has at most 50 channels, RCDefault included (24413).",
                params: [groupId, channel, .integer("type", "0 public (default), 1 private")]) { call in
                try await core.ultraGroups.createChannel(appId: call.app.id, groupId: try ultraGroupId(call), channelId: try ultraGroupChannel(call),
                                                         type: try channelType(call) ?? .publicChannel)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/del.json", tag: "ultragroup",
                summary: "Deletes a channel with its private list, bindings and mutes (not RCDefault); its messages are read by nobody any more.",
                params: [groupId, channel]) { call in
                let id = try ultraGroupId(call)
                let channelId = try ultraGroupChannel(call)
                _ = try await core.ultraGroups.roster(appId: call.app.id, groupId: id)
                try await core.ultraGroups.deleteChannel(appId: call.app.id, groupId: id, channelId: channelId)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/get.json", tag: "ultragroup", summary: "A page of an ultra group's channels, oldest first.",
                params: [groupId, .integer("page", "page, from 1"), .integer("limit", "channels per page, 1 to \(Self.ultraGroupMaxPageSize) (default \(Self.ultraGroupDefaultPageSize))")],
                response: [APIField("channelList", "array", items: "object", "{channelId, type (0 public, 1 private), createTime (yyyy-MM-dd HH:mm:ss UTC)}")]) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                let channels = roster.channels.values.sorted { ($0.createdAt, $0.channelId) < ($1.createdAt, $1.channelId) }
                return ["channelList": try page(channels, call, sizeName: "limit").map {
                    ["channelId": $0.channelId, "type": $0.type.rawValue, "createTime": APITime.text($0.createdAt)] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/ultragroup/channel/type/change.json", tag: "ultragroup",
                summary: "Makes a channel public (0) or private (1); RCDefault stays public (24403). Members who stop or start seeing it are told.",
                params: [groupId, channel, APIParam(name: "type", kind: .integer, required: true, summary: "0 public, 1 private")]) { call in
                let id = try ultraGroupId(call)
                let channelId = try ultraGroupChannel(call)
                let type = try channelType(call) ?? .publicChannel
                _ = try await core.ultraGroups.roster(appId: call.app.id, groupId: id)
                try await core.ultraGroups.setChannelType(appId: call.app.id, groupId: id, channelId: channelId, type: type)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/private/users/add.json", tag: "ultragroup",
                summary: "Adds members to a channel's private list (they see the channel while it is private); every user must be a member (24406).",
                params: [groupId, channel, users]) { call in
                try await setPrivateUsers(call, add: true)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/private/users/del.json", tag: "ultragroup", summary: "Removes users from a channel's private list.",
                params: [groupId, channel, users]) { call in
                try await setPrivateUsers(call, add: false)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/private/users/get.json", tag: "ultragroup", summary: "A page of a channel's private list, in id order.",
                params: [groupId, channel] + paging,
                response: [APIField("users", "array", items: "string", "user ids")]) { call in
                let (_, found) = try await existingChannel(call)
                return ["users": try page(found.members.sorted(), call)]
            },

            // MARK: mutes
            APIEndpoint(
                path: "/ultragroup/userbanned/add.json", tag: "ultragroup",
                summary: "Mutes users in a channel, or in the whole group without busChannel, until lifted: their sends fail with 24408.",
                params: [groupId, mutedUsers, scope]) { call in
                try await muteUsers(call, until: Int64.max)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/userbanned/del.json", tag: "ultragroup", summary: "Lifts user mutes of a channel, or of the whole group without busChannel.",
                params: [groupId, mutedUsers, scope]) { call in
                try await muteUsers(call, until: nil)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/userbanned/get.json", tag: "ultragroup", summary: "A page of the users muted in a channel, or in the whole group without busChannel.",
                params: [groupId, scope] + paging, response: userList) { call in
                let (roster, channelId) = try await muteScope(call)
                let now = core.clock.nowMilliseconds()
                let muted = (roster.mutedUsers[channelId] ?? [:]).filter { $0.value > now }.keys.sorted()
                return ["users": try page(muted, call).map { ["id": $0] as [String: any Sendable] }]
            },
            APIEndpoint(
                path: "/ultragroup/globalbanned/set.json", tag: "ultragroup",
                summary: "Mutes a channel as a whole, or the whole group without busChannel (status true), or lifts it (false): only whitelisted users may speak.",
                params: [groupId, APIParam(name: "status", kind: .boolean, required: true, summary: "true to mute, false to lift"), scope]) { call in
                let (roster, channelId) = try await muteScope(call)
                let muted = try call.bool("status") ?? false
                try await core.ultraGroups.setChannelMuted(appId: call.app.id, groupId: roster.groupId, channelId: channelId, muted: muted)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/globalbanned/get.json", tag: "ultragroup", summary: "Whether a channel, or the whole group without busChannel, is muted as a whole.",
                params: [groupId, scope],
                response: [APIField("status", "boolean", "true when muted")]) { call in
                let (roster, channelId) = try await muteScope(call)
                return ["status": roster.mutedChannels.contains(channelId)]
            },
            APIEndpoint(
                path: "/ultragroup/banned/whitelist/add.json", tag: "ultragroup",
                summary: "Users who may still speak while a channel (or the whole group without busChannel) is muted as a whole.",
                params: [groupId, mutedUsers, scope]) { call in
                try await setMuteWhitelist(call, add: true)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/banned/whitelist/del.json", tag: "ultragroup", summary: "Removes users from a mute whitelist.",
                params: [groupId, mutedUsers, scope]) { call in
                try await setMuteWhitelist(call, add: false)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/banned/whitelist/get.json", tag: "ultragroup", summary: "A page of a channel's (or the whole group's) mute whitelist.",
                params: [groupId, scope] + paging, response: userList) { call in
                let (roster, channelId) = try await muteScope(call)
                return ["users": try page((roster.muteWhitelist[channelId] ?? []).sorted(), call).map { ["id": $0] as [String: any Sendable] }]
            },

            // MARK: do not disturb
            APIEndpoint(
                path: "/ultragroup/notdisturb/set.json", tag: "ultragroup",
                summary: "Sets the group's default do-not-disturb level of a channel (or of the whole group without busChannel); a member's own level takes precedence.",
                params: [groupId, APIParam(name: "unpushLevel", kind: .integer, required: true, summary: "-1 all, 0 not set, 1 only @ messages, 2 @ me only, 4 @ all only, 5 nothing"), scope]) { call in
                let (roster, channelId) = try await muteScope(call)
                let raw = try call.int("unpushLevel") ?? 0
                guard let level = PushNotificationLevel(rawValue: Int(raw)) else {
                    throw APIError.badParameter("unpushLevel must be -1, 0, 1, 2, 4 or 5, got \(raw)")
                }
                try await core.ultraGroups.setDefaultUnpushLevel(appId: call.app.id, groupId: roster.groupId, channelId: channelId, level: level)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/notdisturb/get.json", tag: "ultragroup", summary: "The group's default do-not-disturb level of a channel (or of the whole group).",
                params: [groupId, scope],
                response: [APIField("groupId", "string", "the group"), APIField("busChannel", "string", "the channel, empty for the whole group"),
                           APIField("unpushLevel", "integer", "the level set, 0 when none")]) { call in
                let (roster, channelId) = try await muteScope(call)
                let level = try await core.ultraGroups.defaultUnpushLevel(appId: call.app.id, groupId: roster.groupId, channelId: channelId)
                return ["groupId": roster.groupId, "busChannel": channelId, "unpushLevel": level]
            },

            // MARK: user groups
            APIEndpoint(
                path: "/ultragroup/usergroup/add.json", tag: "ultragroup",
                summary: "Creates user groups (ids of 1 to 20 letters and digits); a group has at most 50 (24411).", body: .json,
                params: [groupId, .list("userGroups", required: true, "[{userGroupId}]")]) { call in
                let ids = try call.list("userGroups").map { text -> String in
                    let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                    guard let id = object?["userGroupId"] as? String else {
                        throw APIError.badParameter("userGroups must be a JSON array of {\"userGroupId\": \"...\"}, got \(TextLength.quoted(text))")
                    }
                    return id
                }
                try await core.ultraGroups.createUserGroups(appId: call.app.id, groupId: try ultraGroupId(call), userGroupIds: ids)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/usergroup/del.json", tag: "ultragroup", summary: "Deletes user groups with their members and channel bindings.",
                params: [groupId, userGroupIds]) { call in
                try await core.ultraGroups.deleteUserGroups(appId: call.app.id, groupId: try ultraGroupId(call), userGroupIds: call.list("userGroupIds"))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/usergroup/query.json", tag: "ultragroup", summary: "A page of an ultra group's user groups, in id order.",
                params: [groupId] + paging,
                response: [APIField("userGroups", "array", items: "object", "{userGroupId}")]) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                return ["userGroups": try page(roster.userGroups.keys.sorted(), call).map { ["userGroupId": $0] as [String: any Sendable] }]
            },
            APIEndpoint(
                path: "/ultragroup/usergroup/user/add.json", tag: "ultragroup",
                summary: "Adds members of the ultra group (24406 otherwise) to a user group; it holds at most 100 (24411).",
                params: [groupId, .string("userGroupId", required: true, "user group id"), users]) { call in
                try await setUserGroupUsers(call, add: true)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/usergroup/user/del.json", tag: "ultragroup", summary: "Removes users from a user group.",
                params: [groupId, .string("userGroupId", required: true, "user group id"), users]) { call in
                try await setUserGroupUsers(call, add: false)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/user/usergroup/query.json", tag: "ultragroup", summary: "A page of the user groups a user is in, in id order.",
                params: [groupId, .string("userId", required: true, "user id")] + paging, response: idList) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                let userId = call.required("userId")
                return ["data": try page(roster.userGroups.filter { $0.value.contains(userId) }.keys.sorted(), call)]
            },
            APIEndpoint(
                path: "/ultragroup/channel/usergroup/bind.json", tag: "ultragroup",
                summary: "Binds user groups to a channel: while it is private their members see it.",
                params: [groupId, channel, userGroupIds]) { call in
                try await bindUserGroups(call, bind: true)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/usergroup/unbind.json", tag: "ultragroup", summary: "Unbinds user groups from a channel.",
                params: [groupId, channel, userGroupIds]) { call in
                try await bindUserGroups(call, bind: false)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/channel/usergroup/query.json", tag: "ultragroup", summary: "A page of the user groups bound to a channel, in id order.",
                params: [groupId, channel] + paging, response: idList) { call in
                let (_, found) = try await existingChannel(call)
                return ["data": try page(found.userGroups.sorted(), call)]
            },
            APIEndpoint(
                path: "/ultragroup/usergroup/channel/query.json", tag: "ultragroup", summary: "A page of the channels a user group is bound to, in id order.",
                params: [groupId, .string("userGroupId", required: true, "user group id")] + paging, response: idList) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                let userGroupId = call.required("userGroupId")
                guard roster.userGroups[userGroupId] != nil else { throw Self.noUserGroup(roster.groupId, userGroupId) }
                return ["data": try page(roster.channels.values.filter { $0.userGroups.contains(userGroupId) }.map(\.channelId).sorted(), call)]
            },
            APIEndpoint(
                path: "/ultragroup/user/channel/query.json", tag: "ultragroup",
                summary: "A page of the private channels a member sees (on their list or through a bound user group), in id order.",
                params: [groupId, .string("userId", required: true, "user id")] + paging, response: idList) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                let userId = call.required("userId")
                let seen = roster.channels.values.filter { $0.type == .privateChannel && roster.sees($0, userId: userId) }
                return ["data": try page(seen.map(\.channelId).sorted(), call)]
            },

            // MARK: messages
            APIEndpoint(
                path: "/ultragroup/msg/modify.json", tag: "ultragroup",
                summary: "Replaces the content of `fromUserId`'s own message in the group (20116 otherwise); the channel's online members get the change and history returns it.",
                params: [groupId, .string("fromUserId", required: true, "the message's sender"), .string("msgUID", required: true, "the message's uid"),
                         .json("content", required: true, "the new content, a JSON object up to 128 KB"), scope,
                         .integer("msgRandom", "accepted for compatibility")]) { call in
                _ = try await groupMessage(call, uid: call.required("msgUID"), notFound: .messageNotModifiable)
                _ = try await core.ultraGroups.modify(appId: call.app.id, userId: call.required("fromUserId"), uid: call.required("msgUID"),
                                                      content: Data(call.required("content").utf8), origin: .serverAPI)
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/msg/get.json", tag: "ultragroup",
                summary: "Messages of the group by uid (at most \(Self.ultraGroupMessagesPerGet)); uids of other conversations, or past the history retention, are left out.",
                params: [groupId, .json("msgs", required: true, "[{msgUID, busChannel}]"), scope],
                response: [APIField("data", "array", items: "object", "{fromUserId, groupId, sentTime, busChannel, msgUID, objectName, content, expansion, extraContent}")]) { call in
                let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
                let entries = (try? JSONSerialization.jsonObject(with: Data(call.required("msgs").utf8))) as? [[String: Any]] ?? []
                let uids = entries.compactMap { $0["msgUID"] as? String }
                guard !uids.isEmpty, uids.count == entries.count else {
                    throw APIError.badParameter("msgs must be a JSON array of {\"msgUID\": \"...\", \"busChannel\": \"...\"}")
                }
                guard uids.count <= Self.ultraGroupMessagesPerGet else {
                    throw APIError.badParameter("msgs names \(uids.count) messages; ask for at most \(Self.ultraGroupMessagesPerGet) per call")
                }
                let found = Dictionary(try await core.archive.messages(appId: call.app.id, uids: uids).map { ($0.uid, $0) }, uniquingKeysWith: { a, _ in a })
                let floor = ultraGroupHistoryFloor(call)
                let messages = uids.compactMap { found[$0] }.filter {
                    $0.conversationType == .ultraGroup && $0.targetId == roster.groupId && $0.isInHistory && $0.sentTime >= floor
                }
                return ["data": messages.map { message in
                    var entry = ultraGroupMessageFields(message)
                    entry["groupId"] = message.targetId
                    entry["sentTime"] = message.sentTime
                    return entry
                }]
            },
            APIEndpoint(
                path: "/ultragroup/hismsg/query.json", tag: "ultragroup",
                summary: "A channel's history between two times at most 14 days apart (within the history retention), oldest first, optionally from one sender.",
                params: [groupId, channel, .time("startTime", required: true, "ms"), .time("endTime", required: true, "ms, after startTime"),
                         .string("fromUserId", "only this sender's messages"), .integer("pageSize", "1 to \(UltraGroupLimits.maxHistoryCount) (default 50)")],
                response: Self.ultraGroupHistoryResponse) { call in
                let (roster, found) = try await existingChannel(call)
                let start = try call.int("startTime") ?? 0, end = try call.int("endTime") ?? 0
                guard end >= start, end - start <= Self.ultraGroupHistorySpan else {
                    throw APIError.badParameter("endTime must be after startTime and at most 14 days (\(Self.ultraGroupHistorySpan) ms) later")
                }
                let pageSize = try call.int("pageSize") ?? 50
                guard (1...Int64(UltraGroupLimits.maxHistoryCount)).contains(pageSize) else {
                    throw APIError.badParameter("pageSize must be 1 to \(UltraGroupLimits.maxHistoryCount), got \(pageSize)")
                }
                let messages = try await core.archive.conversationMessages(
                    appId: call.app.id, conversationKey: ultraGroupConversationKey(roster.groupId, found.channelId),
                    start: max(start, ultraGroupHistoryFloor(call)), end: end, includeStart: true, ascending: true,
                    limit: Int(pageSize), senderId: call.string("fromUserId"))
                let shown = messages.filter { $0.seq > max(roster.createdSeq, found.createdSeq) }
                return ["data": shown.prefix(Int(pageSize)).map(ultraGroupHistoryFields)]
            },
            APIEndpoint(
                path: "/ultragroup/hismsg/msgid/query.json", tag: "ultragroup",
                summary: "A message of a channel with up to `prevNum` messages before it and `lastNum` after it (at most 50 each), oldest first.",
                params: [groupId, channel, .string("msgUID", required: true, "the message's uid"),
                         .integer("prevNum", "messages before it, 0 to 50 (default 10)"), .integer("lastNum", "messages after it, 0 to 50 (default 10)")],
                response: Self.ultraGroupHistoryResponse) { call in
                let (roster, found) = try await existingChannel(call)
                let prev = try call.int("prevNum") ?? 10, next = try call.int("lastNum") ?? 10
                for (name, value) in [("prevNum", prev), ("lastNum", next)] where !(0...Int64(Self.ultraGroupMaxNeighbours)).contains(value) {
                    throw APIError.badParameter("\(name) must be 0 to \(Self.ultraGroupMaxNeighbours), got \(value)")
                }
                let key = ultraGroupConversationKey(roster.groupId, found.channelId)
                let floor = ultraGroupHistoryFloor(call), afterSeq = max(roster.createdSeq, found.createdSeq)
                guard let anchor = try await core.archive.message(appId: call.app.id, uid: call.required("msgUID")),
                      anchor.conversationKey == key, anchor.isInHistory, anchor.sentTime >= floor, anchor.seq > afterSeq else {
                    throw APIError.badParameter("no message \(call.required("msgUID")) in channel \(found.channelId) of ultra group \(roster.groupId)")
                }
                // Messages sent in the same millisecond as the anchor count as after it.
                let before = try await core.archive.conversationMessages(
                    appId: call.app.id, conversationKey: key, start: anchor.sentTime, end: floor, includeStart: false, ascending: false, limit: Int(prev))
                let after = try await core.archive.conversationMessages(
                    appId: call.app.id, conversationKey: key, start: anchor.sentTime, end: Int64.max, includeStart: true, ascending: true,
                    limit: Int(next) + Self.ultraGroupMaxNeighbours)
                let following = after.filter { $0.uid != anchor.uid }.prefix(Int(next))
                let shown = (before.reversed() + [anchor] + following).filter { $0.seq > afterSeq }
                return ["data": shown.map(ultraGroupHistoryFields)]
            },
            APIEndpoint(
                path: "/ultragroup/message/expansion/set.json", tag: "ultragroup",
                summary: "Sets extension keys of a group message sent with expansion on; the channel's online members get an RC:MsgExMsg.",
                params: [.string("msgUID", required: true, "the message's uid"), .string("userId", required: true, "the user making the change; must see the channel"),
                         groupId, scope, .boolean("isSyncSender", "the user's own devices get the RC:MsgExMsg too"),
                         .json("extraKeyVal", required: true, "object of keys to set: at most 100 per call, 300 per message")]) { call in
                try await updateUltraGroupExpansion(call, set: try Self.expansionValues(call), remove: [])
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/message/expansion/delete.json", tag: "ultragroup",
                summary: "Removes extension keys of a group message; the channel's online members get an RC:MsgExMsg.",
                params: [.string("msgUID", required: true, "the message's uid"), .string("userId", required: true, "the user making the change; must see the channel"),
                         groupId, scope, .boolean("isSyncSender", "the user's own devices get the RC:MsgExMsg too"),
                         .json("extraKey", required: true, "array of keys to remove, at most 100")]) { call in
                try await updateUltraGroupExpansion(call, set: [:], remove: try Self.expansionKeys(call))
                return [:]
            },
            APIEndpoint(
                path: "/ultragroup/message/expansion/query.json", tag: "ultragroup",
                summary: "A group message's extensions with the time each was set, \(Self.expansionQueryPage) keys per page in key order.",
                params: [.string("msgUID", required: true, "the message's uid"), groupId, scope, .integer("pageNo", "page, from 1")],
                response: Self.expansionQueryResponse) { call in
                _ = try await groupMessage(call, uid: call.required("msgUID"), notFound: .apiBadParameter)
                return try await queryExpansion(call)
            },
        ]
    }

    /// Messages read to find a sender's messages in `/ultragroup/hismsg/query.json`.

    static let ultraGroupHistoryResponse = [APIField(
        "data", "array", items: "object",
        "{groupId, busChannel, fromUserId, msgUID, msgTime, objectName, conversionType (10), content, expansion, extraContent}")]

    // MARK: parameters

    /// `groupId`, checked (24403 when it is not an id).
    private func ultraGroupId(_ call: APICall) throws -> String {
        let id = call.required("groupId")
        guard UserID.isValid(id) else {
            throw IMError(.ultraGroupParameterInvalid, "groupId \(TextLength.quoted(id)) is invalid: use \(UserID.rule)")
        }
        return id
    }

    /// A list of user ids without repeats, checked (24403 for one that is not an id).
    private func ultraGroupUsers(_ call: APICall, _ name: String) throws -> [String] {
        let ids = call.list(name).uniqued()
        if let bad = ids.first(where: { !UserID.isValid($0) }) {
            throw IMError(.ultraGroupParameterInvalid, "\(name) \(TextLength.quoted(bad)) is invalid: use \(UserID.rule)")
        }
        return ids
    }

    /// `busChannel`, checked (24403); "" when absent (the whole group).
    private func ultraGroupChannel(_ call: APICall) throws -> String {
        guard let id = call.string("busChannel") else { return "" }
        try UltraGroupService.checkChannelId(id)
        return id
    }

    private func channelType(_ call: APICall) throws -> UltraGroupChannelType? {
        guard let raw = try call.int("type") else { return nil }
        guard let type = UltraGroupChannelType(rawValue: Int(raw)) else {
            throw APIError.badParameter("type must be 0 (public) or 1 (private), got \(raw)")
        }
        return type
    }

    /// One page of `items`: `page` from 1, `sizeName` entries per page.
    private func page<T>(_ items: [T], _ call: APICall, sizeName: String = "pageSize") throws -> [T] {
        let page = try call.int("page") ?? 1
        let size = try call.int(sizeName) ?? Int64(Self.ultraGroupDefaultPageSize)
        guard page >= 1 else { throw APIError.badParameter("page starts at 1, got \(page)") }
        guard (1...Int64(Self.ultraGroupMaxPageSize)).contains(size) else {
            throw APIError.badParameter("\(sizeName) must be 1 to \(Self.ultraGroupMaxPageSize), got \(size)")
        }
        return Array(items.dropFirst(Int(min(page - 1, Int64(items.count)) * size)).prefix(Int(size)))
    }

    // MARK: checks

    /// The group and its channel `busChannel`: 24410 without the group, 24414 without the channel.
    private func existingChannel(_ call: APICall) async throws -> (UltraGroupRosterRecord, UltraGroupChannelRecord) {
        let id = try ultraGroupId(call)
        let channelId = UltraGroupLimits.effectiveChannel(try ultraGroupChannel(call))
        let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: id)
        guard let channel = roster.channels[channelId] else { throw UltraGroupService.channelNotFound(id, channelId) }
        return (roster, channel)
    }

    /// The group, and the channel a mute, whitelist or do-not-disturb call is about ("" for the
    /// whole group; 24414 when it does not exist).
    private func muteScope(_ call: APICall) async throws -> (UltraGroupRosterRecord, String) {
        let id = try ultraGroupId(call)
        let channelId = try ultraGroupChannel(call)
        let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: id)
        guard channelId.isEmpty || roster.channels[channelId] != nil else { throw UltraGroupService.channelNotFound(id, channelId) }
        return (roster, channelId)
    }

    /// 24406 unless every user is a member of the group.
    private func checkMembers(_ userIds: [String], of roster: UltraGroupRosterRecord) throws {
        let outsiders = userIds.filter { roster.members[$0] == nil }
        guard outsiders.isEmpty else {
            throw IMError(.notInUltraGroup, "\(outsiders.joined(separator: ",")) \(outsiders.count == 1 ? "is not a member" : "are not members") of ultra group \(roster.groupId): add them with /ultragroup/join.json first; nothing was changed")
        }
    }

    static func noUserGroup(_ groupId: String, _ userGroupId: String) -> IMError {
        IMError(.ultraGroupParameterInvalid, "ultra group \(groupId) has no user group \(userGroupId): create it with /ultragroup/usergroup/add.json")
    }

    /// The ultra group message `uid` of this group (and of `busChannel` when given); `notFound`
    /// otherwise.
    private func groupMessage(_ call: APICall, uid: String, notFound: ErrorCode) async throws -> StoredMessage {
        let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
        let channelId = try ultraGroupChannel(call)
        guard let message = try await core.archive.message(appId: call.app.id, uid: uid), message.conversationType == .ultraGroup,
              message.targetId == roster.groupId, channelId.isEmpty || message.channelId == channelId else {
            throw IMError(notFound, "no message \(uid) in ultra group \(roster.groupId)\(channelId.isEmpty ? "" : " channel \(channelId)"): check msgUID, groupId and busChannel")
        }
        return message
    }

    /// The oldest time ultra group history is kept for (ultraGroupHistoryRetentionDays back).
    func ultraGroupHistoryFloor(_ call: APICall) -> Int64 {
        core.clock.nowMilliseconds() - Int64(settings(call).ultraGroups.historyRetentionDays) * 86_400_000
    }

    // MARK: handlers

    private func setPrivateUsers(_ call: APICall, add: Bool) async throws {
        let (roster, channel) = try await existingChannel(call)
        let userIds = try ultraGroupUsers(call, "userIds")
        if add { try checkMembers(userIds, of: roster) }
        try await core.ultraGroups.setPrivateChannelUsers(appId: call.app.id, groupId: roster.groupId, channelId: channel.channelId,
                                                          userIds: userIds, add: add)
    }

    private func muteUsers(_ call: APICall, until: Int64?) async throws {
        let (roster, channelId) = try await muteScope(call)
        let userIds = try ultraGroupUsers(call, "userIds")
        try await core.ultraGroups.setMutedUsers(appId: call.app.id, groupId: roster.groupId, channelId: channelId, userIds: userIds, until: until)
    }

    private func setMuteWhitelist(_ call: APICall, add: Bool) async throws {
        let (roster, channelId) = try await muteScope(call)
        let userIds = try ultraGroupUsers(call, "userIds")
        try await core.ultraGroups.setMuteWhitelist(appId: call.app.id, groupId: roster.groupId, channelId: channelId, userIds: userIds, add: add)
    }

    private func setUserGroupUsers(_ call: APICall, add: Bool) async throws {
        let roster = try await core.ultraGroups.roster(appId: call.app.id, groupId: try ultraGroupId(call))
        let userGroupId = call.required("userGroupId")
        guard roster.userGroups[userGroupId] != nil else { throw Self.noUserGroup(roster.groupId, userGroupId) }
        let userIds = try ultraGroupUsers(call, "userIds")
        if add { try checkMembers(userIds, of: roster) }
        try await core.ultraGroups.setUserGroupUsers(appId: call.app.id, groupId: roster.groupId, userGroupId: userGroupId, userIds: userIds, add: add)
    }

    private func bindUserGroups(_ call: APICall, bind: Bool) async throws {
        let (roster, channel) = try await existingChannel(call)
        let ids = call.list("userGroupIds")
        if let missing = ids.first(where: { roster.userGroups[$0] == nil }) { throw Self.noUserGroup(roster.groupId, missing) }
        try await core.ultraGroups.bindUserGroups(appId: call.app.id, groupId: roster.groupId, channelId: channel.channelId,
                                                  userGroupIds: ids, bind: bind)
    }

    private func updateUltraGroupExpansion(_ call: APICall, set: [String: String], remove: [String]) async throws {
        try ExpansionLimits.check(set: set, remove: remove, perCall: Self.expansionKeysPerAPICall)
        let message = try await groupMessage(call, uid: call.required("msgUID"), notFound: .apiBadParameter)
        _ = try await core.lifecycle.updateExpansion(appId: call.app.id, operatorId: call.required("userId"), uid: message.uid,
                                                     set: set, remove: remove, notifyOperator: try call.bool("isSyncSender") ?? false,
                                                     origin: .serverAPI)
    }

    private func publishUltraGroup(_ call: APICall) async throws -> [String: any Sendable] {
        let content = Data(call.required("content").utf8)
        var message = try message(call, type: .ultraGroup, content: content, status: false)
        message.channelId = try ultraGroupChannel(call)
        let groupIds = call.list("toGroupIds").uniqued()
        if let bad = groupIds.first(where: { !UserID.isValid($0) }) {
            throw IMError(.ultraGroupParameterInvalid, "toGroupIds \(TextLength.quoted(bad)) is invalid: use \(UserID.rule)")
        }
        message.directedUserIds = try ultraGroupUsers(call, "toUserIds")
        try checkMentioned(call, content: content)
        try core.apiLimits.admit(appId: call.app.id, cost: groupIds.count, rules: [
            APIRateLimiter.Rule(name: "ultra group messages", limit: settings(call).serverAPI.ultraGroupPublishPerSecond, windowMilliseconds: 1000),
        ])
        let sent = try await core.ultraGroups.publish(message, toGroups: groupIds)
        return ["messageUIDs": sent.map { ["groupId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
    }
}

/// The fields a message has in the ultra group message queries.
private func ultraGroupMessageFields(_ message: StoredMessage) -> [String: any Sendable] {
    let extra = (try? JSONSerialization.data(withJSONObject: message.expansion, options: [.sortedKeys])).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    return [
        "fromUserId": message.senderId, "busChannel": message.channelId, "msgUID": message.uid, "objectName": message.objectName,
        "content": String(data: message.content, encoding: .utf8) ?? "", "expansion": message.canIncludeExpansion,
        "extraContent": message.expansion.isEmpty ? "" : extra,
    ]
}

/// A message as `/ultragroup/hismsg/*` returns it (`conversionType` is RongCloud's spelling).
private func ultraGroupHistoryFields(_ message: StoredMessage) -> [String: any Sendable] {
    var fields = ultraGroupMessageFields(message)
    fields["groupId"] = message.targetId
    fields["msgTime"] = message.sentTime
    fields["conversionType"] = ConversationType.ultraGroup.rawValue
    return fields
}
