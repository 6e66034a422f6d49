import Foundation
import IMCore
import IMStore

/// Message extensions set by the app server, and clearing a user's history of a conversation.
extension ServerAPI {
    /// Keys per Server API extension call (RongCloud allows the app server 100, clients 20).
    static let expansionKeysPerAPICall = 100
    /// Keys per page of `/message/expansion/query.json`.
    static let expansionQueryPage = 100

    var lifecycleEndpoints: [APIEndpoint] {
        let target: [APIParam] = [
            .string("msgUID", required: true, "the message's messageUID"),
            .string("userId", required: true, "the user making the change; must be in the message's conversation"),
            .integer("conversationType", required: true, "1 (private) or 3 (group)"),
            .string("targetId", required: true, "the conversation: the other user, or the group"),
            .boolean("isSyncSender", "the user's own devices get the RC:MsgExMsg notice too"),
        ]
        return [
            APIEndpoint(
                path: "/message/expansion/set.json", tag: "message",
                summary: "Sets extension keys of a message sent with expansion on; the conversation's members get an RC:MsgExMsg.",
                params: target + [.json("extraKeyVal", required: true, "object of keys to set: at most 100 per call, 300 per message; keys of A-Z a-z 0-9 + = - _ up to 32, values up to 4096")]
            ) { call in
                try await updateExpansion(call, set: try Self.expansionValues(call), remove: [])
                return [:]
            },
            APIEndpoint(
                path: "/message/expansion/delete.json", tag: "message",
                summary: "Removes extension keys of a message; the conversation's members get an RC:MsgExMsg.",
                params: target + [.json("extraKey", required: true, "array of keys to remove, at most 100")]
            ) { call in
                try await updateExpansion(call, set: [:], remove: try Self.expansionKeys(call))
                return [:]
            },
            APIEndpoint(
                path: "/message/expansion/query.json", tag: "message",
                summary: "A message's extensions with the time each was set, \(Self.expansionQueryPage) keys per page in key order.",
                params: [
                    .string("msgUID", required: true, "the message's messageUID"),
                    .integer("pageNo", "page, from 1"),
                ],
                response: Self.expansionQueryResponse,
                handler: queryExpansion),
            APIEndpoint(
                path: "/conversation/message/history/clean.json", tag: "conversation",
                summary: "Removes a user's history of one conversation up to a time, for good: their cloud history and offline sync no longer hold it; the other side keeps theirs.",
                params: [
                    .integer("conversationType", required: true, "1 (private), 3 (group) or 6 (system)"),
                    .string("fromUserId", required: true, "the user whose history is cleared"),
                    .string("targetId", required: true, "the conversation: the other user, the group or the system account"),
                    .time("msgTimestamp", "remove messages sent at or before this time (ms); absent or 0: all"),
                ]
            ) { call in
                let raw = try call.int("conversationType") ?? 0
                guard let type = ConversationType(rawValue: Int(raw)), [.private, .group, .system].contains(type) else {
                    throw APIError.badParameter("conversationType must be 1 (private), 3 (group) or 6 (system), got \(raw)")
                }
                for name in ["fromUserId", "targetId"] where !UserID.isValid(call.required(name)) {
                    throw APIError.badParameter("\(name) '\(call.required(name))' is not a valid id")
                }
                try await core.lifecycle.clear(appId: call.app.id, userId: call.required("fromUserId"), type: type,
                                               targetId: call.required("targetId"), recordTime: try call.int("msgTimestamp") ?? 0)
                return [:]
            },
        ]
    }

    static let expansionQueryResponse = [APIField("extraContent", "object", "{key: {v: value, ts: time set in ms}}")]

    /// The keys and values of `extraKeyVal`, a JSON object of strings.
    static func expansionValues(_ call: APICall) throws -> [String: String] {
        let object = try? JSONSerialization.jsonObject(with: Data(call.required("extraKeyVal").utf8)) as? [String: Any]
        guard let object, object.values.allSatisfy({ $0 is String }) else {
            throw APIError.badParameter("extraKeyVal must be a JSON object of string values, e.g. {\"k\":\"v\"}")
        }
        return object.compactMapValues { $0 as? String }
    }

    /// The keys of `extraKey`, a JSON array of strings.
    static func expansionKeys(_ call: APICall) throws -> [String] {
        let keys = try? JSONSerialization.jsonObject(with: Data(call.required("extraKey").utf8)) as? [Any]
        guard let keys, keys.allSatisfy({ $0 is String }) else {
            throw APIError.badParameter("extraKey must be a JSON array of keys, e.g. [\"k1\",\"k2\"]")
        }
        return keys.compactMap { $0 as? String }
    }

    /// One page (`pageNo`, from 1) of the extensions of the message `msgUID`, in key order.
    func queryExpansion(_ call: APICall) async throws -> [String: any Sendable] {
        let page = Int(try call.int("pageNo") ?? 1)
        guard page >= 1 else { throw APIError.badParameter("pageNo starts at 1, got \(page)") }
        guard let entries = try await core.lifecycle.expansion(appId: call.app.id, uid: call.required("msgUID")) else {
            throw APIError.badParameter("no message \(call.required("msgUID"))")
        }
        // A page past the end is empty (a message holds at most 300 keys); the product cannot overflow.
        let skipped = (page - 1).multipliedReportingOverflow(by: Self.expansionQueryPage)
        let keys = entries.keys.sorted().dropFirst(skipped.overflow ? Int.max : skipped.partialValue).prefix(Self.expansionQueryPage)
        var content: [String: any Sendable] = [:]
        for key in keys {
            content[key] = ["v": entries[key]!.value, "ts": entries[key]!.time] as [String: any Sendable]
        }
        return ["extraContent": content]
    }

    private func updateExpansion(_ call: APICall, set: [String: String], remove: [String]) async throws {
        let raw = try call.int("conversationType") ?? 0
        guard raw == 1 || raw == 3 else {
            throw APIError.badParameter("conversationType must be 1 (private) or 3 (group): only their messages carry extensions, got \(raw)")
        }
        try ExpansionLimits.check(set: set, remove: remove, perCall: Self.expansionKeysPerAPICall)
        guard let message = try await core.archive.message(appId: call.app.id, uid: call.required("msgUID")),
              message.conversationType.rawValue == Int(raw),
              message.conversationKey == (raw == 3 ? groupConversationKey(call.required("targetId"))
                                                   : privateConversationKey(call.required("userId"), call.required("targetId"))) else {
            throw APIError.badParameter("no message \(call.required("msgUID")) in conversation \(raw) between \(call.required("userId")) and \(call.required("targetId"))")
        }
        _ = try await core.lifecycle.updateExpansion(appId: call.app.id, operatorId: call.required("userId"), uid: message.uid,
                                                     set: set, remove: remove, notifyOperator: try call.bool("isSyncSender") ?? false,
                                                     origin: .serverAPI)
    }
}
