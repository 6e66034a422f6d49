import Foundation
import IMCore
import IMStore

/// The app's callbacks to its server (RongCloud keeps these in its console): where message
/// routing, online status, chatroom status and chatroom attributes go, and the message callback
/// with its filters, timeout and failure rule. Changes take effect within 5 seconds on every node.
extension ServerAPI {
    var callbackEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/callback/settings/set.json", tag: "callbacks",
                summary: "Changes the app's callbacks. Only the parameters given change; an empty URL turns that callback off (its waiting callbacks are given up). Every URL must be an absolute http:// or https:// URL; callbacks go only to these URLs, signed as RongCloud signs them (appKey, nonce, timestamp, signTimestamp, signature = sha1(appSecret + nonce + timestamp) in the query).",
                params: [
                    .string("routingUrl", maxLength: 1024, "full message routing (全量消息路由): every message, form-encoded"),
                    .boolean("routingServerApi", "route messages sent through the Server API too (default false)"),
                    .boolean("routingBlocked", "route messages a blocking sensitive word held back, with sensitiveType 1 (default false)"),
                    .string("statusUrl", maxLength: 1024, "online status (在线状态订阅): each device's online (0), offline (1) and logout (2)"),
                    .string("chatroomStatusUrl", maxLength: 1024, "chatroom status sync: rooms created and destroyed, members joined and left"),
                    .string("chatroomAttributeUrl", maxLength: 1024, "chatroom attribute sync: KV set, removed, cleared"),
                    .string("deactivationUrl", maxLength: 1024, "deactivation results: userId, operateId, type (0 deactivated, 1 reactivated), code, time, form-encoded"),
                    .string("messageCallbackUrl", maxLength: 1024, "the message callback (消息回调): asked before a message is delivered; answers pass, block or replace"),
                    .list("messageCallbackTypes", max: 4, "conversation types asked about: 1 private, 3 group, 4 chatroom, 10 ultra group (default all four)"),
                    .list("messageCallbackObjectNames", max: 100, entryLength: 32, "message types asked about, e.g. RC:TxtMsg (default every type)"),
                    .integer("messageCallbackTimeout", in: 100...30_000, "milliseconds a message waits for the answer (default 3000, RongCloud's)"),
                    .boolean("messageCallbackFailClosed", "a failed or late answer holds the message back (default false: it is delivered, RongCloud's rule)"),
                    .boolean("messageCallbackServerApi", "ask about messages sent through the Server API too (default false)"),
                    .boolean("blockNotice", "tell the sender's device when its message is held back (messageDidBlock, default false)"),
                ],
                response: [APIField("settings", "object", "the settings now, as /callback/settings/get.json")],
                failures: [400: "a URL that is not an absolute http:// or https:// URL, an unknown conversation type (1002)"],
                handler: setCallbackSettings),
            APIEndpoint(
                path: "/callback/settings/get.json", tag: "callbacks",
                summary: "The app's callbacks, with how many wait to be sent and what became of them since the server started.",
                params: [],
                response: [APIField("settings", "object", "routing {url, serverApi, blocked}, statusUrl, chatroomStatusUrl, chatroomAttributeUrl, deactivationUrl, messageCallback {url, types, objectNames, timeout, failClosed, serverApi}, blockNotice"),
                           APIField("backlog", "integer", "callbacks waiting for the app's server"),
                           APIField("stats", "object", "{delivered, failedAttempts, dropped, messagesBlocked, messageCallbackFailures} on this node since it started")]) { call in
                let callbacks = try requireCallbacks()
                let settings = try await callbacks.settings(appId: call.app.id)
                let counters = callbacks.counters(appId: call.app.id)
                return [
                    "settings": Self.view(settings),
                    "backlog": try await callbacks.backlog()[call.app.id] ?? 0,
                    "stats": ["delivered": counters.delivered, "failedAttempts": counters.failedAttempts, "dropped": counters.dropped,
                              "messagesBlocked": counters.messagesBlocked, "messageCallbackFailures": counters.messageCallbackFailures],
                ]
            },
        ]
    }

    private func requireCallbacks() throws -> CallbackService {
        guard let callbacks = core.callbacks else {
            throw APIError(.apiServiceNotEnabled, .badRequest, "this server sends no callbacks (callbacksEnabled is off, or it was started without a callback transport)")
        }
        return callbacks
    }

    private func setCallbackSettings(_ call: APICall) async throws -> [String: any Sendable] {
        let callbacks = try requireCallbacks()
        // Every value is checked before anything changes.
        func url(_ name: String) throws -> String?? {
            guard let value = call.string(name) else { return .none }
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { return .some(nil) }
            if let problem = CallbackAppSettings.problem(with: trimmed) { throw APIError.badParameter("\(name) \(problem)") }
            return .some(trimmed)
        }
        let routingURL = try url("routingUrl"), statusURL = try url("statusUrl"), roomStatusURL = try url("chatroomStatusUrl")
        let roomAttributeURL = try url("chatroomAttributeUrl"), messageCallbackURL = try url("messageCallbackUrl")
        let deactivationURL = try url("deactivationUrl")
        let routingServerAPI = try call.bool("routingServerApi"), routingBlocked = try call.bool("routingBlocked")
        var types: [ConversationType]?
        if call.string("messageCallbackTypes") != nil {
            types = try call.list("messageCallbackTypes").map { item in
                guard let raw = Int(item), let type = ConversationType(rawValue: raw),
                      CallbackAppSettings.MessageCallback.coveredTypes.contains(type) else {
                    throw APIError.badParameter("messageCallbackTypes: '\(item.prefix(20))' is not 1 (private), 3 (group), 4 (chatroom) or 10 (ultra group)")
                }
                return type
            }
        }
        let objectNames = call.string("messageCallbackObjectNames") != nil ? call.list("messageCallbackObjectNames") : nil
        let timeout = try call.int("messageCallbackTimeout"), failClosed = try call.bool("messageCallbackFailClosed")
        let callbackServerAPI = try call.bool("messageCallbackServerApi"), blockNotice = try call.bool("blockNotice")
        let messageCallbackOptionsGiven = types != nil || objectNames != nil || timeout != nil || failClosed != nil || callbackServerAPI != nil
        let routingOptionsGiven = routingServerAPI != nil || routingBlocked != nil

        let settings = try await callbacks.updateSettings(appId: call.app.id) { settings in
            if let routingURL {
                settings.routing = routingURL.map { url in
                    var routing = settings.routing ?? CallbackAppSettings.Routing(url: url)
                    routing.url = url
                    return routing
                }
            }
            if routingOptionsGiven {
                guard var routing = settings.routing else {
                    throw APIError.badParameter("routingServerApi and routingBlocked need a routing URL: give routingUrl too")
                }
                if let routingServerAPI { routing.includeServerAPI = routingServerAPI }
                if let routingBlocked { routing.includeBlocked = routingBlocked }
                settings.routing = routing
            }
            if let statusURL { settings.statusURL = statusURL }
            if let roomStatusURL { settings.chatroomStatusURL = roomStatusURL }
            if let roomAttributeURL { settings.chatroomAttributeURL = roomAttributeURL }
            if let deactivationURL { settings.deactivationURL = deactivationURL }
            if let messageCallbackURL {
                settings.messageCallback = messageCallbackURL.map { url in
                    var callback = settings.messageCallback ?? CallbackAppSettings.MessageCallback(url: url)
                    callback.url = url
                    return callback
                }
            }
            if messageCallbackOptionsGiven {
                guard var callback = settings.messageCallback else {
                    throw APIError.badParameter("the message callback's options need its URL: give messageCallbackUrl too")
                }
                if let types { callback.conversationTypes = types }
                if let objectNames { callback.objectNames = objectNames }
                if let timeout { callback.timeoutMilliseconds = timeout }
                if let failClosed { callback.failClosed = failClosed }
                if let callbackServerAPI { callback.includeServerAPI = callbackServerAPI }
                settings.messageCallback = callback
            }
            if let blockNotice { settings.blockNotice = blockNotice }
        }
        return ["settings": Self.view(settings)]
    }

    static func view(_ settings: CallbackAppSettings) -> [String: any Sendable] {
        var view: [String: any Sendable] = ["blockNotice": settings.blockNotice]
        if let routing = settings.routing {
            view["routing"] = ["url": routing.url, "serverApi": routing.includeServerAPI, "blocked": routing.includeBlocked] as [String: any Sendable]
        }
        if let url = settings.statusURL { view["statusUrl"] = url }
        if let url = settings.chatroomStatusURL { view["chatroomStatusUrl"] = url }
        if let url = settings.chatroomAttributeURL { view["chatroomAttributeUrl"] = url }
        if let url = settings.deactivationURL { view["deactivationUrl"] = url }
        if let callback = settings.messageCallback {
            view["messageCallback"] = [
                "url": callback.url, "types": callback.conversationTypes.map(\.rawValue), "objectNames": callback.objectNames,
                "timeout": callback.timeoutMilliseconds, "failClosed": callback.failClosed, "serverApi": callback.includeServerAPI,
            ] as [String: any Sendable]
        }
        return view
    }
}
