import Crypto
import Foundation
import Hummingbird
import IMCore
import IMStore

/// `/message/*`: publishing on behalf of users (private, system, status, broadcast), recall, the
/// hourly message log and conversation history queries.
extension ServerAPI {
    static let publishFlags: [APIParam] = [
        .string("pushContent", "push notification text"),
        .string("pushData", maxLength: MessageFieldLimits.maxPushDataBytes, "push payload for the app"),
        .string("count", "iOS badge"),
        .boolean("verifyBlacklist", "skip recipients who blacklisted the sender (default 0)"),
        .boolean("isPersisted", "stored in cloud history (default 1)"),
        .boolean("isCounted", "counted as unread (default 1)"),
        .boolean("isIncludeSender", "the sender's own devices get a copy (default 0)"),
        .boolean("contentAvailable", "iOS silent push flag"),
        .boolean("disablePush", "no push notification"),
        .boolean("expansion", "the message may carry extensions"),
        .json("extraContent", "initial extensions, a JSON object"),
        .json("pushExt", "push options, a JSON object"),
        .string("busChannel", "channel id"),
        .boolean("disableUpdateLastMsg", "do not update the conversation's last message"),
    ]

    static let publishResponse = [APIField("messageUIDs", "array", items: "object", "{userId, messageUID} per recipient that got the message")]

    var messageEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/message/private/publish.json", tag: "message",
                summary: "Sends a one-to-one message from `fromUserId` to each of `toUserId` (6000 recipients per minute per app).",
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .list("toUserId", required: true, max: APIRateLimits.privateRecipientsPerCall, "recipients"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type, e.g. RC:TxtMsg"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                ] + Self.publishFlags,
                response: Self.publishResponse) { call in try await publish(call, type: .private) },
            APIEndpoint(
                path: "/message/private/publish_template.json", tag: "message",
                summary: "Sends a templated one-to-one message: `{key}` placeholders in content and pushContent are filled per recipient from `values`.", body: .json,
                params: Self.templateParams(max: APIRateLimits.privateRecipientsPerCall),
                response: Self.publishResponse) { call in try await publishTemplate(call, type: .private) },
            APIEndpoint(
                path: "/statusmessage/private/publish.json", tag: "message",
                summary: "Sends a status message (online recipients only; never stored, cached or counted).",
                params: [
                    .string("fromUserId", required: true, "sender"),
                    .list("toUserId", required: true, max: APIRateLimits.privateRecipientsPerCall, "recipients"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object"),
                    .boolean("verifyBlacklist", "skip recipients who blacklisted the sender"),
                    .boolean("isIncludeSender", "the sender's own devices get a copy"),
                    .string("busChannel", "channel id"),
                ],
                response: Self.publishResponse) { call in try await publish(call, type: .private, status: true) },
            APIEndpoint(
                path: "/message/system/publish.json", tag: "message",
                summary: "Sends a system-conversation message from `fromUserId` (a system account) to each of `toUserId`; users cannot reply.",
                params: [
                    .string("fromUserId", required: true, "system sender"),
                    .list("toUserId", required: true, max: APIRateLimits.systemRecipientsPerCall, "recipients"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                ] + Self.publishFlags,
                response: Self.publishResponse) { call in try await publish(call, type: .system) },
            APIEndpoint(
                path: "/message/system/publish_template.json", tag: "message",
                summary: "Sends a templated system message, filled per recipient from `values`.", body: .json,
                params: Self.templateParams(max: APIRateLimits.systemRecipientsPerCall),
                response: Self.publishResponse) { call in try await publishTemplate(call, type: .system) },
            APIEndpoint(
                path: "/message/broadcast.json", tag: "message",
                summary: "Sends a system message to every user of the app, stored once (2 per hour and 3 per day).",
                params: [
                    .string("fromUserId", required: true, "system sender"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .string("pushContent", "push notification text"),
                    .string("pushData", maxLength: MessageFieldLimits.maxPushDataBytes, "push payload"),
                    .string("os", "iOS or Android: push to that platform only"),
                    .boolean("contentAvailable", "iOS silent push flag"),
                    .json("pushExt", "push options"),
                    .boolean("disableUpdateLastMsg", "do not update the conversation's last message"),
                ],
                response: [APIField("messageUID", "string", "the broadcast's message uid"), APIField("id", "string", "the same uid (older clients read this)")],
                handler: broadcast),
            APIEndpoint(
                path: "/message/private/modify.json", tag: "message",
                summary: "Replaces the content of a private message for its sender: same uid, time and type. History shows the new content and every device of both users gets it (IMLib's messageModifications), online now or at its next sync. 20116 when the message cannot be modified.",
                params: Self.modifyParams(target: .id("targetId", required: true, "the message's recipient"))) { call in
                try await modify(call, type: .private, targetId: call.required("targetId"))
            },
            APIEndpoint(
                path: "/message/group/modify.json", tag: "message",
                summary: "Replaces the content of a group message for its sender: same uid, time and type. History shows the new content and every member's devices get it, online now or at their next sync. 20116 when the message cannot be modified.",
                params: Self.modifyParams(target: .id("groupId", required: true, "the message's group"))) { call in
                try await modify(call, type: .group, targetId: call.required("groupId"))
            },
            APIEndpoint(
                path: "/message/online/broadcast.json", tag: "message",
                summary: "Sends a system message from fromUserId to the users online now and to those who connect within 10 minutes; it is not stored in cloud history, not pushed and cannot be recalled. 1009 when onlineBroadcastEnabled is off.",
                params: [
                    .string("fromUserId", required: true, "system sender: the system conversation's target"),
                    .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
                    .json("content", required: true, "the message content, a JSON object up to 128 KB"),
                    .boolean("disableUpdateLastMsg", "do not update the conversation's last message"),
                ],
                response: [APIField("messageUID", "string", "the broadcast's message uid")]) { call in
                guard settings(call).serverAPI.onlineBroadcastEnabled else {
                    throw APIError(.apiServiceNotEnabled, .badRequest, "online broadcast is not enabled for this app: the server's operator enables it (onlineBroadcastEnabled, an app setting)")
                }
                var message = try message(call, type: .system, content: Data(call.required("content").utf8), status: false)
                message.isOnlineBroadcast = true
                try core.apiLimits.admit(appId: call.app.id, cost: 1, rules: [
                    APIRateLimiter.Rule(name: "online broadcast", limit: settings(call).serverAPI.onlineBroadcastsPerMinute, windowMilliseconds: 60_000),
                ])
                let sent = try await core.messages.broadcast(message)
                return ["messageUID": sent.uid]
            },
            APIEndpoint(
                path: "/message/broadcast/recall.json", tag: "message",
                summary: "Recalls a broadcast: every user, online now or at their next sync, sees a recall notification in its place.",
                params: [
                    .string("fromUserId", required: true, "the broadcast's sender"),
                    .string("messageUID", required: true, "uid of the broadcast"),
                    .time("sentTime", "the broadcast's sentTime, ms"),
                    .boolean("isAdmin", "recall as an administrator"),
                    .boolean("isDelete", "delete instead of leaving a notification"),
                    .string("extra", maxLength: MessageFieldLimits.maxExtraCharacters, "extra text carried by the notification"),
                    .boolean("disableUpdateLastMsg", "do not update the conversation's last message"),
                ]) { call in
                _ = try await core.messages.recall(
                    appId: call.app.id, operatorId: call.required("fromUserId"), type: .system, targetId: StoredMessage.everyone,
                    uid: call.required("messageUID"), sentTime: try call.int("sentTime"), isAdmin: try call.bool("isAdmin") ?? false,
                    delete: try call.bool("isDelete") ?? false, extra: call.string("extra"), origin: .serverAPI)
                return [:]
            },
            APIEndpoint(
                path: "/message/recall.json", tag: "message",
                summary: "Recalls a message: everyone in the conversation, online now or at their next sync, sees a recall notification (RC:RcNtf) in its place. In a chatroom, the members online are told and the room's latest messages (and history, when kept) hold the notification.",
                params: [
                    .string("fromUserId", required: true, "the message's sender"),
                    .integer("conversationType", required: true, "1 private, 3 group, 4 chatroom, 6 system, 10 ultra group"),
                    .string("targetId", required: true, "the conversation's other user, the group, the chatroom or the ultra group"),
                    .string("messageUID", required: true, "uid of the message to recall"),
                    .time("sentTime", "the message's sentTime, ms"),
                    .boolean("isAdmin", "recall as an administrator (any sender)"),
                    .boolean("isDelete", "delete instead of leaving a notification"),
                    .boolean("disablePush", "no push notification"),
                    .string("extra", maxLength: MessageFieldLimits.maxExtraCharacters, "extra text carried by the notification"),
                    .string("busChannel", "an ultra group message's channel (none: RCDefault)"),
                ],
                handler: recall),
            APIEndpoint(
                path: "/message/history.json", tag: "message",
                summary: "The URL of one hour's message log (every message of the app sent in that UTC hour, one JSON object per line); empty when there is none.",
                params: [.string("date", required: true, "the hour, YYYYMMDDHH (UTC)")],
                response: [APIField("url", "string", "where to download the log; empty when there is none"), APIField("date", "string", "the hour asked for")],
                handler: messageLog),
            APIEndpoint(
                path: "/message/history/delete.json", tag: "message",
                summary: "Deletes one hour's message log: /message/history.json then returns an empty URL for it. Messages and cloud history are unchanged.",
                params: [.string("date", required: true, "the hour, YYYYMMDDHH (UTC)")],
                handler: deleteMessageLog),
            historyQuery("private", "a one-to-one conversation", target: "the other user", handler: queryPrivateHistory),
            historyQuery("group", "a group, as the user sees it (messages directed to other members left out)", target: "the group",
                         handler: queryGroupHistory),
            historyQuery("chatroom", "a chatroom (23414 when the server keeps no chatroom history; within chatroomHistoryRetentionDays)",
                         target: "the chatroom", handler: queryChatroomHistory),
            historyQuery("ultragroup", "an ultra group channel (busChannel; the default channel when empty), within ultraGroupHistoryRetentionDays",
                         target: "the ultra group", handler: queryUltraGroupHistory),
        ]
    }

    /// `/v3/message/{kind}/query.json`: cloud history between two times, a JSON body.
    private func historyQuery(_ kind: String, _ what: String, target: String,
                              handler: @escaping @Sendable (APICall) async throws -> [String: any Sendable]) -> APIEndpoint {
        APIEndpoint(
            path: "/v3/message/\(kind)/query.json", tag: "message",
            summary: "Cloud history of \(what) between two times: ascending when endTime > startTime, descending otherwise.", body: .json,
            params: [
                .string("userId", required: true, kind == "private" ? "one user of the conversation" : "the user asking"),
                .string("targetId", required: true, target),
                .time("startTime", required: true, "ms"),
                .time("endTime", required: true, "ms"),
                .integer("pageSize", in: 1...100, "default 50"),
                .boolean("includeStart", "include a message sent exactly at startTime (default true)"),
                .string("busChannel", "channel id"),
            ],
            response: [APIField("data", "array", items: "object", "{targetId, fromUserId, messageUID, msgTime, objectName, content, expansion, extraContent, busChannel}")],
            handler: handler)
    }

    static func templateParams(max: Int) -> [APIParam] {
        [
            .string("fromUserId", required: true, "sender"),
            .list("toUserId", required: true, max: max, "recipients"),
            .string("objectName", required: true, maxLength: MessageLimits.maxObjectNameLength, "message type"),
            .string("content", required: true, maxLength: MessageLimits.maxContentBytes, "the content as a JSON template with {key} placeholders"),
            .list("values", required: true, entryLength: MessageLimits.maxContentBytes, "one object of placeholder values per recipient"),
            .list("pushContent", entryLength: MessageFieldLimits.maxPushContentBytes, "one push text template per recipient"),
            .list("pushData", entryLength: MessageFieldLimits.maxPushDataBytes, "one push payload per recipient"),
            .boolean("verifyBlacklist", "skip recipients who blacklisted the sender"),
            .boolean("isPersisted", "stored in cloud history (default 1)"),
            .boolean("isCounted", "counted as unread (default 1)"),
            .boolean("isIncludeSender", "the sender's own devices get a copy (default 0)"),
            .boolean("contentAvailable", "iOS silent push flag"),
            .boolean("disablePush", "no push notification"),
        ]
    }

    // MARK: publishing

    /// Checks a publish call's content and builds the message each recipient gets a copy of.
    func message(_ call: APICall, type: ConversationType, content: Data, status: Bool) throws -> StoredMessage {
        let sender = call.required("fromUserId")
        guard UserID.isValid(sender) else { throw APIError.badParameter("fromUserId \(TextLength.quoted(sender)) is invalid") }
        let objectName = call.required("objectName")
        let pushContent = call.string("pushContent") ?? "", pushData = call.string("pushData") ?? ""
        try MessageFieldLimits.check(objectName: objectName, pushContent: pushContent, pushData: pushData, code: .apiParameterTooLong)
        if let violation = MessageContentRule.violation(of: content) {
            throw APIError.badParameter(MessageContentRule.message(violation, field: "content"))
        }
        var flags: PersistentFlag = []
        if status {
            flags = .status
        } else {
            if try call.bool("isPersisted") ?? true { flags.insert(.isPersisted) }
            if try call.bool("isCounted") ?? true { flags.insert(.isCounted) }
        }
        var expansion: [String: String] = [:]
        if let extra = call.string("extraContent"), let object = try? JSONSerialization.jsonObject(with: Data(extra.utf8)) as? [String: Any] {
            for (key, value) in object { expansion[key] = (value as? String) ?? "\(value)" }
            // The message's first extensions: the limits of any extension (keys, values, 300 in all).
            try ExpansionLimits.check(set: expansion, remove: [], perCall: ExpansionLimits.keysPerMessage)
        }
        var message = StoredMessage(
            appId: call.app.id, conversationType: type, conversationKey: "", targetId: "", senderId: sender,
            objectName: objectName, content: content, flags: flags,
            pushContent: pushContent, pushData: pushData,
            disableNotification: try call.bool("disablePush") ?? false,
            canIncludeExpansion: try call.bool("expansion") ?? !expansion.isEmpty, expansion: expansion,
            // A channel is an ultra group's; the ultra group endpoints check and set it themselves.
            channelId: type == .ultraGroup ? (call.string("busChannel") ?? "") : "", includeSender: try call.bool("isIncludeSender") ?? false)
        message.disableUpdateLastMessage = try call.bool("disableUpdateLastMsg") ?? false
        return message
    }

    /// The rate rules a publish of `count` messages is charged against.
    private func admitPublish(_ call: APICall, type: ConversationType, count: Int) throws {
        let rule = type == .system
            ? APIRateLimiter.Rule(name: "system messages", limit: settings(call).serverAPI.systemPublishPerSecond, windowMilliseconds: 1000)
            : APIRateLimiter.Rule(name: "private messages", limit: settings(call).serverAPI.privatePublishPerMinute, windowMilliseconds: 60_000)
        try core.apiLimits.admit(appId: call.app.id, cost: count, rules: [rule])
    }

    private func recipients(_ call: APICall) throws -> [String] {
        var seen = Set<String>()
        let ids = call.list("toUserId").filter { seen.insert($0).inserted }
        for id in ids where !UserID.isValid(id) {
            throw APIError.badParameter("toUserId '\(id)' is invalid: use \(UserID.rule)")
        }
        return ids
    }

    private func publish(_ call: APICall, type: ConversationType, status: Bool = false) async throws -> [String: any Sendable] {
        let message = try message(call, type: type, content: Data(call.required("content").utf8), status: status)
        let recipients = try recipients(call)
        if !status { try admitPublish(call, type: type, count: recipients.count) }
        let sent = try await core.messages.publish(message, to: recipients, verifyBlacklist: try call.bool("verifyBlacklist") ?? false)
        return ["messageUIDs": sent.map { ["userId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
    }

    private func publishTemplate(_ call: APICall, type: ConversationType) async throws -> [String: any Sendable] {
        guard let body = call.parameters.json,
              let object = try JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw APIError.badParameter("the body must be a JSON object")
        }
        let recipients = try recipients(call)
        guard let values = object["values"] as? [[String: Any]], values.count == recipients.count else {
            throw APIError.badParameter("values must list one object of placeholder values per toUserId (\(recipients.count))")
        }
        let template = call.required("content")
        // RongCloud's SDKs send keys with their braces ({"{name}": "Ann"}); bare keys also work.
        // Placeholders are filled in key order, so the result does not depend on dictionary order.
        // A text that would grow past `limit` bytes is refused before it is built (a template of
        // placeholders with long values would otherwise take megabytes per recipient).
        func fill(_ text: String, _ values: [String: Any], limit: Int, what: String) throws -> String {
            try values.keys.sorted().reduce(text) { text, key in
                let placeholder = key.hasPrefix("{") && key.hasSuffix("}") ? key : "{\(key)}"
                let value = values[key].map { ($0 as? String) ?? "\($0)" } ?? ""
                let occurrences = text.components(separatedBy: placeholder).count - 1
                guard occurrences > 0 else { return text }
                let size = text.utf8.count + occurrences * (value.utf8.count - placeholder.utf8.count)
                guard size <= limit else {
                    throw APIError.badParameter("\(what) is \(size) bytes once its placeholders are filled in; the limit is \(limit) bytes")
                }
                return text.replacingOccurrences(of: placeholder, with: value)
            }
        }
        let contents = try values.enumerated().map { index, value in
            Data(try fill(template, value, limit: MessageLimits.maxContentBytes, what: "the content for recipient \(index + 1)").utf8)
        }
        let pushTemplates = (object["pushContent"] as? [Any])?.map { ($0 as? String) ?? "" }
        let pushContents = try pushTemplates.map { templates in
            try templates.enumerated().map { index, text in
                try fill(text, index < values.count ? values[index] : [:], limit: MessageFieldLimits.maxPushContentBytes,
                         what: "pushContent[\(index)]")
            }
        }
        let pushData = (object["pushData"] as? [Any])?.map { ($0 as? String) ?? "" }
        for list in [pushContents, pushData].compactMap({ $0 }) where list.count > recipients.count {
            throw APIError.badParameter("pushContent and pushData list at most one entry per toUserId (\(recipients.count)), got \(list.count)")
        }
        for (index, text) in (pushContents ?? []).enumerated() where TextLength.bytes(text) > MessageFieldLimits.maxPushContentBytes {
            throw APIError(.apiParameterTooLong, .badRequest, "pushContent[\(index)] is \(TextLength.bytes(text)) bytes once filled in; at most \(MessageFieldLimits.maxPushContentBytes) are allowed")
        }
        for (index, text) in (pushData ?? []).enumerated() where TextLength.bytes(text) > MessageFieldLimits.maxPushDataBytes {
            throw APIError(.apiParameterTooLong, .badRequest, "pushData[\(index)] is \(TextLength.bytes(text)) bytes; at most \(MessageFieldLimits.maxPushDataBytes) are allowed")
        }
        // Every filled-in content is checked (JSON object, 128 KB) before anything is sent.
        let checked = try contents.map { try self.message(call, type: type, content: $0, status: false) }
        guard let message = checked.first else { throw APIError.badParameter("toUserId is required") }
        try admitPublish(call, type: type, count: recipients.count)
        let sent = try await core.messages.publish(message, to: recipients, contents: contents, pushContents: pushContents,
                                                   pushData: pushData, verifyBlacklist: try call.bool("verifyBlacklist") ?? false)
        return ["messageUIDs": sent.map { ["userId": $0.targetId, "messageUID": $0.uid] as [String: any Sendable] }]
    }

    static func modifyParams(target: APIParam) -> [APIParam] {
        [
            .id("fromUserId", required: true, "the message's sender"),
            target,
            .string("msgUID", required: true, "the message's uid"),
            .string("objectName", maxLength: MessageLimits.maxObjectNameLength, "the message's type, if given (a modification cannot change it)"),
            .json("content", required: true, "the new content, a JSON object up to 128 KB"),
        ]
    }

    private func modify(_ call: APICall, type: ConversationType, targetId: String) async throws -> [String: any Sendable] {
        let content = Data(call.required("content").utf8)
        if let violation = MessageContentRule.violation(of: content) {
            throw APIError.badParameter(MessageContentRule.message(violation, field: "content"))
        }
        _ = try await core.messages.modify(appId: call.app.id, senderId: call.required("fromUserId"), type: type, targetId: targetId,
                                           uid: call.required("msgUID"), objectName: call.string("objectName"), content: content,
                                           origin: .serverAPI)
        return [:]
    }

    private func broadcast(_ call: APICall) async throws -> [String: any Sendable] {
        if call.required("objectName") == RecallCommandMessage.objectName {
            // The Go SDK recalls a broadcast by broadcasting RC:RcCmd with the broadcast's uid.
            guard let object = try? JSONSerialization.jsonObject(with: Data(call.required("content").utf8)) as? [String: Any],
                  let uid = object["messageUId"] as? String else {
                throw APIError.badParameter("an RC:RcCmd broadcast recalls a broadcast: content needs its messageUId")
            }
            let delete = (object["isDelete"] as? Int ?? 0) == 1 || (object["isDelete"] as? Bool ?? false)
            _ = try await core.messages.recall(appId: call.app.id, operatorId: call.required("fromUserId"), type: .system,
                                               targetId: StoredMessage.everyone, uid: uid, sentTime: nil, isAdmin: true,
                                               delete: delete, extra: nil, origin: .serverAPI)
            return [:]
        }
        let message = try message(call, type: .system, content: Data(call.required("content").utf8), status: false)
        try core.apiLimits.admit(appId: call.app.id, cost: 1, rules: broadcastRules)
        let sent = try await core.messages.broadcast(message)
        return ["messageUID": sent.uid, "id": sent.uid]
    }

    private func recall(_ call: APICall) async throws -> [String: any Sendable] {
        let rawType = try call.int("conversationType") ?? 0
        guard let type = ConversationType(rawValue: Int(rawType)), [.private, .group, .chatroom, .system, .ultraGroup].contains(type) else {
            throw APIError.badParameter("conversationType must be 1 (private), 3 (group), 4 (chatroom), 6 (system) or 10 (ultra group), got \(rawType)")
        }
        if type == .chatroom {
            // isDelete is not told apart in a chatroom: the room's copy becomes the notification either way.
            _ = try await core.chatroomRouting.recall(
                appId: call.app.id, operatorId: call.required("fromUserId"), roomId: call.required("targetId"),
                uid: call.required("messageUID"), isAdmin: try call.bool("isAdmin") ?? false, window: nil, extra: call.string("extra"),
                origin: .serverAPI)
            return [:]
        }
        _ = try await core.messages.recall(
            appId: call.app.id, operatorId: call.required("fromUserId"), type: type, targetId: call.required("targetId"),
            uid: call.required("messageUID"), sentTime: try call.int("sentTime"), isAdmin: try call.bool("isAdmin") ?? false,
            delete: try call.bool("isDelete") ?? false, extra: call.string("extra"), origin: .serverAPI, channelId: call.string("busChannel") ?? "")
        return [:]
    }

    // MARK: message logs

    private func hour(_ call: APICall) throws -> (text: String, start: Int64) {
        let text = call.required("date")
        guard let start = APITime.hourStart(text) else {
            throw APIError.badParameter("date must be an hour written YYYYMMDDHH (UTC), e.g. 2026112108; got '\(text)'")
        }
        return (text, start)
    }

    private func messageLog(_ call: APICall) async throws -> [String: any Sendable] {
        let (text, start) = try hour(call)
        guard try await core.archive.hasLog(appId: call.app.id, hour: text, start: start) else { return ["url": "", "date": text] }
        let file = "\(text).jsonl"
        let expires = core.clock.nowMilliseconds() / 1000 + Self.logLinkLifetimeSeconds
        let base = core.config.serverAPI.publicURL ?? call.baseURL
        return ["url": "\(base)/message-logs/\(call.app.appKey)/\(file)?expires=\(expires)&sig=\(Self.logSignature(app: call.app, file: file, expires: expires))", "date": text]
    }

    private func deleteMessageLog(_ call: APICall) async throws -> [String: any Sendable] {
        let (text, _) = try hour(call)
        try await core.archive.deleteLog(appId: call.app.id, hour: text)
        return [:]
    }

    /// How long a message-log link works.
    static let logLinkLifetimeSeconds: Int64 = 86_400

    /// The download link's proof: HMAC-SHA256 of the file name and expiry under the app secret, so
    /// only a holder of a link the Server API returned can read the log, and only until it expires.
    static func logSignature(app: AppRecord, file: String, expires: Int64) -> String {
        HMAC<SHA256>.authenticationCode(for: Data("\(file)|\(expires)".utf8), using: SymmetricKey(data: Data(app.appSecret.utf8)))
            .map { String(format: "%02x", $0) }.joined()
    }

    /// GET /message-logs/{appKey}/{YYYYMMDDHH}.jsonl?sig=...: one JSON object per message.
    /// Messages per page of a message-log download.
    static let messageLogPage = 100

    func messageLogFile(_ request: Request, _ context: Context) async throws -> Response {
        let notFound = APIResponse.failure(APIError(.apiNotFound, .notFound, "no such message log, or the link is not valid: ask /message/history.json for a new one"))
        guard let appKey = context.parameters.get("appKey"), let file = context.parameters.get("file"),
              let app = core.apps.app(key: appKey), file.hasSuffix(".jsonl"),
              let expires = request.uri.queryParameters.get("expires").flatMap({ Int64($0) }),
              expires >= core.clock.nowMilliseconds() / 1000,
              constantTimeEqual(request.uri.queryParameters.get("sig") ?? "", Self.logSignature(app: app, file: file, expires: expires)),
              let start = APITime.hourStart(String(file.dropLast(6))) else { return notFound }
        guard try await !core.archive.isLogDeleted(appId: app.id, hour: String(file.dropLast(6))) else { return notFound }
        // Streamed a page of messages at a time: an hour of a busy app is gigabytes, and only one
        // page (of at most 100 messages) is ever held here.
        let archive = core.archive
        let end = start + 3_600_000
        let body = ResponseBody { writer in
            var cursor = (sentTime: start, seq: UInt64(0))
            while true {
                let page = try await archive.logPage(appId: app.id, sentFrom: cursor.sentTime, afterSeq: cursor.seq, to: end,
                                                    limit: Self.messageLogPage)
                var lines = Data()
                for message in page {
                    let entry: [String: Any] = [
                        "appKey": app.appKey, "fromUserId": message.senderId, "targetId": message.targetId,
                        "targetType": message.conversationType.rawValue, "objectName": message.objectName,
                        "content": (try? JSONSerialization.jsonObject(with: message.content)) ?? [:],
                        "msgUID": message.uid, "timestamp": message.sentTime, "dateTime": APITime.text(message.sentTime),
                        "busChannel": message.channelId,
                    ]
                    lines.append(try JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys]))
                    lines.append(0x0A)
                }
                if !lines.isEmpty { try await writer.write(ByteBuffer(bytes: lines)) }
                guard page.count == Self.messageLogPage, let last = page.last else { break }
                cursor = (last.sentTime, last.seq)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson; charset=utf-8"], body: body)
    }

    // MARK: history query

    /// The window of a `/v3` history query.
    private struct HistoryWindow {
        var userId: String
        var targetId: String
        var start: Int64
        var end: Int64
        var includeStart: Bool
        var pageSize: Int
        var ascending: Bool { end >= start }
    }

    /// User, group, chatroom and ultra group ids share one rule (`UserID.rule`).
    private func historyWindow(_ call: APICall) throws -> HistoryWindow {
        let userId = call.required("userId"), targetId = call.required("targetId")
        for (name, id) in [("userId", userId), ("targetId", targetId)] where !UserID.isValid(id) {
            throw APIError.badParameter("\(name) \(TextLength.quoted(id)) is invalid: \(UserID.rule)")
        }
        // pageSize is declared 1...100: the dispatcher refuses anything else with 1002.
        let pageSize = try call.int("pageSize") ?? 50
        return HistoryWindow(userId: userId, targetId: targetId, start: try call.int("startTime") ?? 0, end: try call.int("endTime") ?? 0,
                             includeStart: try call.bool("includeStart") ?? true, pageSize: Int(pageSize))
    }

    private func queryPrivateHistory(_ call: APICall) async throws -> [String: any Sendable] {
        let window = try historyWindow(call)
        let floor = try settings(call).messaging.cloudHistoryFloor(now: core.clock.nowMilliseconds())
        let messages = try await core.archive.conversationMessages(
            appId: call.app.id, conversationKey: privateConversationKey(window.userId, window.targetId), start: window.start, end: window.end,
            includeStart: window.includeStart, ascending: window.ascending, limit: window.pageSize)
        return historyPage(messages.filter { $0.sentTime >= floor })
    }

    /// A group's history as `userId` sees it: a message directed to other members is left out
    /// (the page may then hold fewer than pageSize).
    private func queryGroupHistory(_ call: APICall) async throws -> [String: any Sendable] {
        let window = try historyWindow(call)
        let floor = try settings(call).messaging.cloudHistoryFloor(now: core.clock.nowMilliseconds())
        let messages = try await core.archive.conversationMessages(
            appId: call.app.id, conversationKey: groupConversationKey(window.targetId), start: window.start, end: window.end,
            includeStart: window.includeStart, ascending: window.ascending, limit: window.pageSize)
        return historyPage(messages.filter { message in
            message.sentTime >= floor && (message.directedUserIds.isEmpty || message.senderId == window.userId || message.directedUserIds.contains(window.userId))
        })
    }

    private func queryChatroomHistory(_ call: APICall) async throws -> [String: any Sendable] {
        let window = try historyWindow(call)
        let messages = try await core.chatrooms.history(appId: call.app.id, roomId: window.targetId, start: window.start, end: window.end,
                                                        includeStart: window.includeStart, limit: window.pageSize)
        return historyPage(messages)
    }

    private func queryUltraGroupHistory(_ call: APICall) async throws -> [String: any Sendable] {
        let window = try historyWindow(call)
        let channelId = UltraGroupLimits.effectiveChannel(call.string("busChannel") ?? "")
        // Ultra group history is kept for ultraGroupHistoryRetentionDays: nothing older is returned.
        let floor = ultraGroupHistoryFloor(call)
        var start = window.start, end = window.end, includeStart = window.includeStart
        if window.ascending {
            if start < floor { (start, includeStart) = (floor, true) }
        } else if end < floor {
            end = floor
        }
        guard max(start, end) >= floor else { return ["data": [[String: any Sendable]]()] }
        let messages = try await core.archive.conversationMessages(
            appId: call.app.id, conversationKey: ultraGroupConversationKey(window.targetId, channelId), start: start, end: end,
            includeStart: includeStart, ascending: window.ascending, limit: window.pageSize)
        return historyPage(messages)
    }

    private func historyPage(_ messages: [StoredMessage]) -> [String: any Sendable] {
        ["data": messages.map { message -> [String: any Sendable] in
            let extra = (try? JSONSerialization.data(withJSONObject: message.expansion, options: [.sortedKeys])).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
            return [
                "targetId": message.targetId, "fromUserId": message.senderId, "messageUID": message.uid,
                "msgTime": message.sentTime, "objectName": message.objectName,
                "content": String(data: message.content, encoding: .utf8) ?? "", "expansion": message.canIncludeExpansion,
                "extraContent": message.expansion.isEmpty ? "" : extra, "busChannel": message.channelId,
            ]
        }]
    }
}
