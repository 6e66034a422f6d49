import Foundation
import HTTPTypes
import IMCore
import IMStore

/// `/push.json`: a system message to an audience chosen by push tags, by user ids, or to every
/// user of the app (RongCloud's 标签推送 / 广播推送 with a `message`).
///
/// The message is stored and delivered like `/message/system/publish.json` (tags, user ids) or like
/// `/message/broadcast.json` (`is_to_all`, stored once and sharing its 2 per hour, 3 per day). This
/// server has no push service (APNs, FCM, vendor channels), so a call without `message`, RongCloud's
/// push-only notification (不落地通知), is refused with 1009 rather than answered as sent.
extension ServerAPI {
    /// Tags per condition and user ids per call (RongCloud's documented limits for `/push.json`).
    static let maxPushTags = 20
    static let maxPushUserIds = 1000
    /// The `id` of a call to a list of users or to a tag: each recipient's copy has its own uid.
    static let pushIds = MessageUIDGenerator()

    var pushEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/push.json", tag: "push",
                summary: "Sends `message` as a system message from `fromuserid` to the audience: users carrying every `tag` and any of `tag_or`, the listed `userid`s (which take precedence over tags), or every user with `is_to_all` (stored once; shares /message/broadcast.json's 2 per hour and 3 per day). Push-only notifications (no `message`) need a push service this server does not have: 1009.",
                body: .json,
                params: [
                    .list("platform", "ios and/or android: the push platforms (the message itself reaches every device)"),
                    .string("fromuserid", "the system account sending `message` (required with `message`)"),
                    .json("audience", required: true, "{tag[] (AND, up to 20), tag_or[] (OR, up to 20), userid[] (up to 1000), is_to_all}"),
                    .json("message", "{content (the message content, a JSON object or its text), objectName, disableUpdateLastMsg}"),
                    .json("notification", "{alert, ios{...}, android{...}}: `alert` is kept as the message's push text"),
                ],
                response: [
                    APIField("id", "string", "the call's id: the broadcast's uid with is_to_all"),
                    APIField("messageUID", "string", "with is_to_all: the broadcast's uid"),
                    APIField("messageUIDs", "array", items: "object", "for tags and user ids: {userId, messageUID} per recipient"),
                ],
                failures: [430: "a push-only call (no `message`): this server has no push service yet (1009)"],
                handler: push),
        ]
    }

    private func push(_ call: APICall) async throws -> [String: any Sendable] {
        guard let body = call.parameters.json,
              let object = try JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw APIError.badParameter("the body must be a JSON object")
        }
        guard let audience = Self.object(object["audience"]) else {
            throw APIError.badParameter("audience must be an object: {tag[], tag_or[], userid[], is_to_all}")
        }
        guard let message = Self.object(object["message"]) else {
            throw APIError(.apiServiceNotEnabled, HTTPResponse.Status(code: 430),
                           "push-only notifications are not available: this server has no push service (APNs/FCM) yet. Add message{content, objectName} and fromuserid to send a stored system message instead")
        }
        let stored = try pushMessage(call, object: object, message: message)
        let isToAll = try Self.flag(audience["is_to_all"], "audience.is_to_all") ?? false
        if isToAll {
            try core.apiLimits.admit(appId: call.app.id, cost: 1, rules: broadcastRules)
            let sent = try await core.messages.broadcast(stored)
            return ["id": sent.uid, "messageUID": sent.uid]
        }
        let tags = try Self.strings(audience["tag"], "audience.tag", max: Self.maxPushTags)
        let anyTags = try Self.strings(audience["tag_or"], "audience.tag_or", max: Self.maxPushTags)
        let userIds = try Self.strings(audience["userid"], "audience.userid", max: Self.maxPushUserIds)
        guard !tags.isEmpty || !anyTags.isEmpty || !userIds.isEmpty else {
            throw APIError.badParameter("audience names nobody: give tag, tag_or or userid, or set is_to_all to true")
        }
        var recipients: [String]
        if !userIds.isEmpty {
            var seen = Set<String>()
            recipients = userIds.filter { seen.insert($0).inserted }
            if let bad = recipients.first(where: { !UserID.isValid($0) }) {
                throw APIError.badParameter("audience.userid '\(bad)' is invalid: use \(UserID.rule)")
            }
        } else {
            recipients = try await core.directory.users(appId: call.app.id, withAllTags: tags, anyTag: anyTags)
        }
        recipients.removeAll { $0 == stored.senderId }
        let limit = core.config.serverAPI.systemPublishPerSecond
        if limit > 0 && recipients.count > limit {
            throw APIError(.apiRateLimited, .tooManyRequests,
                           "the audience has \(recipients.count) users and system messages are limited to \(limit) per second (systemPublishPerSecond): narrow the audience, use is_to_all, or raise the limit")
        }
        try core.apiLimits.admit(appId: call.app.id, cost: recipients.count, rules: [
            APIRateLimiter.Rule(name: "system messages", limit: limit, windowMilliseconds: 1000),
        ])
        let sent = try await core.messages.publish(stored, to: recipients, verifyBlacklist: false)
        return ["id": Self.pushIds.next(milliseconds: core.clock.nowMilliseconds()),
                "messageUIDs": sent.map { ["userId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
    }

    /// The broadcast limits `/message/broadcast.json` and `/push.json` with `is_to_all` share.
    var broadcastRules: [APIRateLimiter.Rule] {
        [
            APIRateLimiter.Rule(name: "broadcasts", limit: APIRateLimits.broadcastsPerHour, windowMilliseconds: 3_600_000),
            APIRateLimiter.Rule(name: "broadcasts", limit: APIRateLimits.broadcastsPerDay, windowMilliseconds: 86_400_000),
        ]
    }

    /// The system message a push call sends: `message{content, objectName}` from `fromuserid`, with
    /// the notification's `alert` as its push text.
    private func pushMessage(_ call: APICall, object: [String: Any], message: [String: Any]) throws -> StoredMessage {
        guard let sender = (object["fromuserid"] ?? object["fromUserId"]) as? String, !sender.isEmpty else {
            throw APIError.badParameter("fromuserid is required with message: the system account that sends it")
        }
        guard UserID.isValid(sender) else { throw APIError.badParameter("fromuserid \(TextLength.quoted(sender)) is invalid") }
        guard let objectName = message["objectName"] as? String, !objectName.isEmpty else {
            throw APIError.badParameter("message.objectName is required, e.g. RC:TxtMsg")
        }
        guard MessageFieldLimits.isValidObjectName(objectName) else {
            throw APIError(.apiParameterTooLong, .badRequest, "message.objectName is longer than \(MessageLimits.maxObjectNameLength) characters")
        }
        guard !MessageService.serverOnlyObjectNames.contains(objectName) else {
            throw APIError.badParameter("\(objectName) is sent by the server itself: recall a broadcast with /message/broadcast/recall.json")
        }
        let content: Data
        switch message["content"] {
        case let text as String: content = Data(text.utf8)
        case let value? where value is [String: Any]: content = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        default: throw APIError.badParameter("message.content is required: the message content, a JSON object such as {\"content\":\"hello\"}")
        }
        if let violation = MessageContentRule.violation(of: content) {
            throw APIError.badParameter(MessageContentRule.message(violation, field: "message.content"))
        }
        _ = try Self.flag(message["disableUpdateLastMsg"], "message.disableUpdateLastMsg")
        let alert = Self.object(object["notification"])?["alert"] as? String
        if let alert, TextLength.bytes(alert) > MessageFieldLimits.maxPushContentBytes {
            throw APIError(.apiParameterTooLong, .badRequest, "notification.alert is \(TextLength.bytes(alert)) bytes; at most \(MessageFieldLimits.maxPushContentBytes) are allowed")
        }
        return StoredMessage(
            appId: call.app.id, conversationType: .system, conversationKey: "", targetId: "", senderId: sender,
            objectName: objectName, content: content, flags: [.isPersisted, .isCounted], pushContent: alert ?? "",
            includeSender: false)
    }

    /// A JSON object, given as one or as its text; nil when absent or null.
    static func object(_ value: Any?) -> [String: Any]? {
        if let object = value as? [String: Any] { return object }
        guard let text = value as? String, let data = text.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// A JSON boolean (true/false, 1/0, or their text); nil when absent.
    static func flag(_ value: Any?, _ name: String) throws -> Bool? {
        switch value {
        case nil, is NSNull: return nil
        case let number as NSNumber where number.intValue == 0 || number.intValue == 1: return number.boolValue
        case let text as String where ["true", "1"].contains(text.lowercased()): return true
        case let text as String where ["false", "0", ""].contains(text.lowercased()): return false
        default: throw APIError.badParameter("\(name) must be true or false")
        }
    }

    /// A JSON array of strings (empty when absent), at most `max` of them.
    static func strings(_ value: Any?, _ name: String, max: Int) throws -> [String] {
        switch value {
        case nil, is NSNull: return []
        case let list as [Any]:
            let strings = try list.map { item -> String in
                guard let text = item as? String, !text.isEmpty else { throw APIError.badParameter("\(name) must list non-empty strings") }
                return text
            }
            guard strings.count <= max else {
                throw APIError(.apiParameterTooLong, .badRequest, "\(name) lists \(strings.count) entries; at most \(max)")
            }
            return strings
        default: throw APIError.badParameter("\(name) must be an array of strings")
        }
    }
}
