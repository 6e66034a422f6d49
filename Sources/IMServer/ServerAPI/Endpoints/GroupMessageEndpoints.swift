import Foundation
import IMCore
import IMStore

/// `/message/group/publish.json` and `/statusmessage/group/publish.json`: group messages sent by
/// the app server on behalf of a user (20 per second per app by default).
extension ServerAPI {
    var groupMessageEndpoints: [APIEndpoint] {
        let response = [APIField("messageUIDs", "array", items: "object", "{groupId, messageUID} per group")]
        return [
            APIEndpoint(
                path: "/message/group/publish.json", tag: "message",
                summary: "Sends a group message from `fromUserId` to each of `toGroupId` (at most 3); with `toUserId`, a directional message only those members receive.",
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .list("toGroupId", required: true, max: GroupLimits.groupsPerPublish, "groups"),
                    .list("toUserId", max: GroupLimits.maxDirectedUsers, "members who alone receive the message (a directional message)"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type, e.g. RC:TxtMsg"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .boolean("isMentioned", "an @ message: content carries mentionedInfo {type 1 all / 2 users, userIdList, mentionedContent}"),
                ] + Self.publishFlags,
                response: response) { call in try await publishGroup(call, status: false) },
            APIEndpoint(
                path: "/statusmessage/group/publish.json", tag: "message",
                summary: "Sends a status message to each of `toGroupId`: online members only, never stored, cached or counted.",
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .list("toGroupId", required: true, max: GroupLimits.groupsPerPublish, "groups"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object"),
                    .boolean("verifyBlacklist", "accepted for compatibility; group messages have no blacklist"),
                    .boolean("isIncludeSender", "the sender's own devices get a copy"),
                    .string("busChannel", "channel id"),
                ],
                response: response) { call in try await publishGroup(call, status: true) },
        ]
    }

    private func publishGroup(_ call: APICall, status: Bool) async throws -> [String: any Sendable] {
        let content = Data(call.required("content").utf8)
        var message = try message(call, type: .group, content: content, status: status)
        var seen = Set<String>()
        let groupIds = call.list("toGroupId").filter { seen.insert($0).inserted }
        for id in groupIds where !UserID.isValid(id) {
            throw APIError.badParameter("toGroupId '\(id)' is invalid: use \(UserID.rule)")
        }
        if !status {
            var directed = Set<String>()
            message.directedUserIds = call.list("toUserId").filter { directed.insert($0).inserted }
            for id in message.directedUserIds where !UserID.isValid(id) {
                throw APIError.badParameter("toUserId '\(id)' is invalid: use \(UserID.rule)")
            }
            try checkMentioned(call, content: content)
            try core.apiLimits.admit(appId: call.app.id, cost: groupIds.count, rules: [
                APIRateLimiter.Rule(name: "group messages", limit: settings(call).serverAPI.groupPublishPerSecond, windowMilliseconds: 1000),
            ])
        }
        let sent = try await core.groups.publish(message, to: groupIds)
        return ["messageUIDs": sent.map { ["groupId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
    }

    /// With `isMentioned=1`, the content must carry `mentionedInfo` (1002 otherwise).
    func checkMentioned(_ call: APICall, content: Data) throws {
        guard try call.bool("isMentioned") == true else { return }
        let object = try? JSONSerialization.jsonObject(with: content) as? [String: Any]
        guard let mention = object?["mentionedInfo"] as? [String: Any], let type = mention["type"] as? Int, type == 1 || type == 2 else {
            throw APIError.badParameter("isMentioned=1 needs mentionedInfo in content: {\"type\":1} for everyone or {\"type\":2,\"userIdList\":[...]}")
        }
    }
}
