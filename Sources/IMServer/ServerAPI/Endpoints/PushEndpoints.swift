import Foundation
import HTTPTypes
import IMCore
import IMPush
import IMStore

/// `/push.json`, `/push/user.json`, `/push/custom.json`: RongCloud's tag, broadcast and user pushes.
///
/// With a `message`, `/push.json` stores and delivers it like `/message/system/publish.json` (tags,
/// user ids) or like `/message/broadcast.json` (`is_to_all`, stored once, sharing its 2 per hour
/// and 3 per day); the push service then pushes it as any message. Without one, and always for
/// `/push/user.json` and `/push/custom.json`, the call is push-only (不落地通知): nothing is stored
/// or delivered, and every device of the audience with a push token gets the notification,
/// online or not (`PushService.pushDirect`).
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
                summary: "Pushes to an audience: users carrying every `tag` and any of `tag_or`, the listed `userid`s (which take precedence over tags), or every user with `is_to_all` (which shares /message/broadcast.json's 2 per hour and 3 per day). With `message` (and `fromuserid`) the message is stored and delivered as a system message and pushed to offline devices; without, a push-only notification goes to every device of the audience.",
                body: .json,
                params: [
                    .list("platform", "ios and/or android: the devices pushed (empty: all); a message itself reaches every device"),
                    .string("fromuserid", "the system account sending `message` (required with `message`)"),
                    .json("audience", required: true, "{tag[] (AND, up to 20), tag_or[] (OR, up to 20), userid[] (up to 1000), is_to_all}"),
                    .json("message", "{content (the message content, a JSON object or its text), objectName, disableUpdateLastMsg}"),
                    .json("notification", "{alert, ios{title, alert, badge, sound, thread-id, apns-collapse-id, interruption-level, extras}, android{alert, extras, fcm{collapse_key, channelId, imageUrl}}}: `alert` is the push text"),
                ],
                response: [
                    APIField("id", "string", "the call's id (push records are kept under it for a push-only call)"),
                    APIField("messageUID", "string", "with message and is_to_all: the broadcast's uid"),
                    APIField("messageUIDs", "array", items: "object", "with message, for tags and user ids: {userId, messageUID} per recipient"),
                ],
                handler: push),
            APIEndpoint(
                path: "/push/user.json", tag: "push",
                summary: "A push-only notification to up to 100 users: every device of theirs with a push token gets it, online or not. Nothing is stored or delivered as a message.",
                body: .json,
                params: [
                    .list("userIds", required: true, max: 100, "the users"),
                    .json("notification", required: true, "{title?, pushContent, ios{badge, sound, thread-id, apns-collapse-id, interruption-level, extras}, android{extras, fcm{...}}}"),
                ],
                response: [APIField("id", "string", "the call's id: /push/records/query.json?messageUID=id shows what became of it")]) { call in
                let object = try Self.jsonBody(call)
                let userIds = try Self.strings(object["userIds"], "userIds", max: 100)
                guard !userIds.isEmpty else { throw APIError.badParameter("userIds must list at least one user") }
                for id in userIds where !UserID.isValid(id) { throw APIError.badParameter("userIds: '\(id.prefix(80))' is not a valid user id") }
                let direct = try Self.directPush(object, platforms: [], bodyKey: "pushContent")
                let id = Self.pushIds.next(milliseconds: core.clock.nowMilliseconds())
                try await core.requirePush().pushDirect(direct, appId: call.app.id, userIds: Array(Set(userIds)), id: id)
                return ["id": id]
            },
            APIEndpoint(
                path: "/push/custom.json", tag: "push",
                summary: "A push-only notification to the devices of the users carrying every `tag` and any of `tag_or`, or to every device with `is_to_all` (2 per hour, 3 per day, shared with broadcasts). Nothing is stored or delivered as a message.",
                body: .json,
                params: [
                    .list("platform", "ios and/or android (empty: all)"),
                    .json("audience", required: true, "{tag[], tag_or[], is_to_all, packageName}"),
                    .json("notification", required: true, "{title, alert, ios{...}, android{...}} as /push.json"),
                ],
                response: [APIField("id", "string", "the call's id")]) { call in
                let object = try Self.jsonBody(call)
                guard let audience = Self.object(object["audience"]) else {
                    throw APIError.badParameter("audience must be an object: {tag[], tag_or[], is_to_all}")
                }
                if audience["tagItems"] != nil {
                    throw APIError.badParameter("audience.tagItems is not supported by this server: use tag (all of) and tag_or (any of)")
                }
                let direct = try Self.directPush(object, platforms: Self.platforms(object), bodyKey: "alert")
                return ["id": try await pushOnly(call, direct: direct, audience: audience)]
            },
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
            let direct = try Self.directPush(object, platforms: Self.platforms(object), bodyKey: "alert")
            return ["id": try await pushOnly(call, direct: direct, audience: audience)]
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
        let limit = settings(call).serverAPI.systemPublishPerSecond
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

    /// Sends a push-only notification to an audience {tag, tag_or, userid, is_to_all}; returns its id.
    private func pushOnly(_ call: APICall, direct: DirectPush, audience: [String: Any]) async throws -> String {
        let push = try core.requirePush()
        let id = Self.pushIds.next(milliseconds: core.clock.nowMilliseconds())
        if try Self.flag(audience["is_to_all"], "audience.is_to_all") ?? false {
            try core.apiLimits.admit(appId: call.app.id, cost: 1, rules: broadcastRules)
            try await push.pushDirectToAll(direct, appId: call.app.id, id: id)
            return id
        }
        let tags = try Self.strings(audience["tag"], "audience.tag", max: Self.maxPushTags)
        let anyTags = try Self.strings(audience["tag_or"], "audience.tag_or", max: Self.maxPushTags)
        let userIds = try Self.strings(audience["userid"], "audience.userid", max: Self.maxPushUserIds)
        guard !tags.isEmpty || !anyTags.isEmpty || !userIds.isEmpty else {
            throw APIError.badParameter("audience names nobody: give tag, tag_or or userid, or set is_to_all to true")
        }
        if let bad = userIds.first(where: { !UserID.isValid($0) }) {
            throw APIError.badParameter("audience.userid '\(bad.prefix(80))' is invalid: use \(UserID.rule)")
        }
        let users = !userIds.isEmpty ? Array(Set(userIds))
            : try await core.directory.users(appId: call.app.id, withAllTags: tags, anyTag: anyTags)
        for chunk in stride(from: 0, to: users.count, by: PushService.directPage) {
            try await push.pushDirect(direct, appId: call.app.id, userIds: Array(users[chunk..<min(chunk + PushService.directPage, users.count)]), id: id)
        }
        return id
    }

    /// The body of a JSON call, as an object.
    static func jsonBody(_ call: APICall) throws -> [String: Any] {
        guard let body = call.parameters.json, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw APIError.badParameter("the body must be a JSON object")
        }
        return object
    }

    /// `platform`: ios and/or android.
    static func platforms(_ object: [String: Any]) throws -> Set<String> {
        let platforms = Set(try strings(object["platform"], "platform", max: 2).map { $0.lowercased() })
        if let bad = platforms.first(where: { $0 != "ios" && $0 != "android" }) {
            throw APIError.badParameter("platform lists '\(bad.prefix(40))': give ios and/or android")
        }
        return platforms
    }

    /// The notification of a push-only call: `notification{title, <bodyKey>, ios{...}, android{...}}`
    /// (RongCloud's field names); 1002 without a text, 26001 for an invalid iOS field.
    static func directPush(_ object: [String: Any], platforms: Set<String>, bodyKey: String) throws -> DirectPush {
        guard let notification = Self.object(object["notification"]) else {
            throw APIError.badParameter("notification must be an object: {\(bodyKey), title?, ios{...}, android{...}}")
        }
        let ios = Self.object(notification["ios"]) ?? [:]
        let android = Self.object(notification["android"]) ?? [:]
        let fcm = Self.object(android["fcm"]) ?? [:]
        let text = { (value: Any?) -> String? in (value as? String).flatMap { $0.isEmpty ? nil : $0 } }
        let body = text(notification[bodyKey]) ?? text(notification["alert"]) ?? text(notification["pushContent"])
        let iosBody = text(ios["alert"]), androidBody = text(android["alert"])
        guard let body = body ?? iosBody ?? androidBody else {
            throw APIError.badParameter("notification.\(bodyKey) is required: the text the push shows")
        }
        var direct = DirectPush(title: text(notification["title"]) ?? text(ios["title"]), body: body)
        direct.iosBody = iosBody
        direct.androidBody = androidBody
        direct.platforms = platforms
        for (name, value) in [("title", direct.title), (bodyKey, body), ("ios.alert", iosBody), ("android.alert", androidBody)] {
            if let value, value.utf8.count > PushLimits.maxFieldBytes {
                throw APIError(.apiParameterTooLong, .badRequest, "notification.\(name) is \(value.utf8.count) bytes; at most \(PushLimits.maxFieldBytes)")
            }
        }
        if let badge = ios["badge"] {
            guard let number = badge as? Int, (0...99_999).contains(number) else {
                throw APIError(.invalidPushParameter, .badRequest, "notification.ios.badge must be a whole number from 0 to 99999")
            }
            direct.badge = number
        }
        direct.sound = text(ios["sound"])
        direct.threadId = text(ios["thread-id"])
        if let collapse = text(ios["apns-collapse-id"]) {
            guard collapse.utf8.count <= PushLimits.maxCollapseIdBytes else {
                throw APIError(.invalidPushParameter, .badRequest,
                               "notification.ios.apns-collapse-id is \(collapse.utf8.count) bytes; APNs takes at most \(PushLimits.maxCollapseIdBytes)")
            }
            direct.collapseId = collapse
        }
        if let level = text(ios["interruption-level"]) {
            guard PushLimits.interruptionLevels.contains(level) else {
                throw APIError(.invalidPushParameter, .badRequest,
                               "notification.ios.interruption-level must be one of \(PushLimits.interruptionLevels.sorted().joined(separator: ", "))")
            }
            direct.interruptionLevel = level
        }
        if let extras = ios["extras"] ?? android["extras"] {
            guard JSONSerialization.isValidJSONObject(extras),
                  let data = try? JSONSerialization.data(withJSONObject: extras, options: [.sortedKeys]),
                  data.count <= PushLimits.maxFieldBytes else {
                throw APIError.badParameter("notification extras must be a JSON object of at most \(PushLimits.maxFieldBytes) bytes")
            }
            direct.appData = String(decoding: data, as: UTF8.self)
        }
        direct.fcmCollapseKey = text(fcm["collapse_key"])
        direct.fcmChannelId = text(fcm["channelId"])
        direct.imageURL = text(fcm["imageUrl"]) ?? text(ios["richMediaUri"])
        return direct
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
