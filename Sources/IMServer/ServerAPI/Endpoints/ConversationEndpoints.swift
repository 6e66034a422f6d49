import Foundation
import IMCore
import IMStore

/// Conversation state of a user set by the app server: pins and conversation-type do-not-disturb.
/// (Per-conversation do-not-disturb is with the moderation endpoints.) Every change reaches the
/// user's online devices at once, and the others when they next connect.
extension ServerAPI {
    var conversationEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/conversation/top/set.json", tag: "conversation",
                summary: "Pins a conversation to the top of a user's conversation list, or unpins it, on all of the user's devices.",
                params: [
                    .string("userId", required: true, "the user whose list this is"),
                    .integer("conversationType", required: true, "1 private, 2 discussion, 3 group, 6 system, 10 ultra group"),
                    .string("targetId", required: true, "the conversation's target"),
                    APIParam(name: "setTop", kind: .boolean, required: true, summary: "true to pin, false to unpin"),
                ]) { call in
                let conversation = ConversationIdentifier(try stateConversationType(call), targetId: call.required("targetId"))
                try await editConversationState(call, userId: call.required("userId"), .setTop(conversation, try call.bool("setTop") ?? false))
                return [:]
            },
            APIEndpoint(
                path: "/conversation/type/notification/set.json", tag: "conversation",
                summary: "Sets a user's do-not-disturb level for every conversation of one type; a conversation's own level takes precedence.",
                params: [
                    .integer("conversationType", required: true, "1 private, 2 discussion, 3 group, 4 chatroom, 6 system, 10 ultra group"),
                    .string("requestId", required: true, "the user whose setting this is"),
                    .integer("unpushLevel", required: true, "-1 all, 0 not set, 1 only @ messages, 2 @ me only, 4 @ all only, 5 nothing"),
                ]) { call in
                let raw = try call.int("unpushLevel") ?? 0
                guard let level = PushNotificationLevel(rawValue: Int(raw)) else {
                    throw APIError.badParameter("unpushLevel must be -1, 0, 1, 2, 4 or 5, got \(raw)")
                }
                let conversation = ConversationIdentifier(try stateConversationType(call), targetId: "")
                try await editConversationState(call, userId: call.required("requestId"), .setLevel(conversation, level))
                return [:]
            },
            APIEndpoint(
                path: "/conversation/type/notification/get.json", tag: "conversation",
                summary: "A user's do-not-disturb level for one conversation type.",
                params: [
                    .integer("conversationType", required: true, "1 private, 2 discussion, 3 group, 4 chatroom, 6 system, 10 ultra group"),
                    .string("requestId", required: true, "the user"),
                ],
                response: [APIField("isMuted", "integer", "1 do not disturb, 0 normal"), APIField("unpushLevel", "integer", "the level set")]) { call in
                let level = try await core.conversationState.unpushLevel(
                    appId: call.app.id, userId: call.required("requestId"), type: try stateConversationType(call), targetId: "", channelId: "")
                return ["isMuted": level > 0 ? 1 : 0, "unpushLevel": level]
            },
            APIEndpoint(
                path: "/user/conversation/tag/set.json", tag: "conversation",
                summary: "Adds conversation tags to a user, or renames the ones they have (JSON body). At most 20 tags per user; a tag id is 1 to 10 characters, a name 1 to 15.",
                body: .json,
                params: [
                    .id("userId", required: true, "the user whose tags these are"),
                    .list("tags", required: true, max: ConversationStateLimits.maxTagsPerUser, "[{tagId, tagName}]"),
                ]) { call in
                let object = try Self.jsonBody(call)
                let userId = call.required("userId")
                guard let tags = object["tags"] as? [[String: Any]], !tags.isEmpty else {
                    throw APIError.badParameter("tags must be an array of {tagId, tagName} objects")
                }
                for tag in tags {
                    guard let tagId = tag["tagId"] as? String, let name = tag["tagName"] as? String else {
                        throw APIError.badParameter("every entry of tags needs a tagId and a tagName, both strings")
                    }
                    // A tag the user has is renamed; any other is added.
                    do {
                        try await editConversationState(call, userId: userId, .renameTag(tagId: tagId, name: name))
                    } catch {
                        try await editConversationState(call, userId: userId,
                                                        .addTag(tagId: tagId, name: name, limit: ConversationStateLimits.maxTagsPerUser))
                    }
                }
                return [:]
            },
            APIEndpoint(
                path: "/user/conversation/tag/del.json", tag: "conversation",
                summary: "Removes conversation tags of a user (JSON body), taking every conversation out of them; tags the user does not have are ignored.",
                body: .json,
                params: [
                    .id("userId", required: true, "the user whose tags these are"),
                    .list("tagIds", required: true, max: ConversationStateLimits.maxTagsPerUser, "tag ids"),
                ]) { call in
                for tagId in call.list("tagIds").uniqued() {
                    try await editConversationState(call, userId: call.required("userId"), .removeTag(tagId: tagId))
                }
                return [:]
            },
            taggingEndpoint(path: "/tag/conversation/set.json",
                            summary: "Puts conversations (private 1, group 3, system 6) into a user's tag (JSON body); the tag must exist. At most 100 conversations per call.") {
                .addConversations(tagId: $0, $1)
            },
            taggingEndpoint(path: "/tag/conversation/del.json",
                            summary: "Takes conversations out of a user's tag (JSON body); the conversations and the tag stay.") {
                .removeConversations(tagId: $0, $1)
            },
        ]
    }

    /// `/tag/conversation/set|del.json`: the same call, the edit apart.
    private func taggingEndpoint(path: String, summary: String,
                                 _ edit: @escaping @Sendable (String, [ConversationIdentifier]) -> ConversationStateEdit) -> APIEndpoint {
        APIEndpoint(
            path: path, tag: "conversation", summary: summary, body: .json,
            params: [
                .id("userId", required: true, "the user whose tag this is"),
                .string("tagId", required: true, "the tag"),
                .list("conversations", required: true, max: Self.maxTaggedConversationsPerCall, "[{targetId, conversationType}]"),
            ]) { call in
            let conversations = try Self.taggedConversations(try Self.jsonBody(call))
            try await editConversationState(call, userId: call.required("userId"), edit(call.required("tagId"), conversations))
            return [:]
        }
    }

    /// RongCloud's Server API takes at most 100 conversations per tag call (clients 1000).
    static let maxTaggedConversationsPerCall = 100

    private static func taggedConversations(_ object: [String: Any]) throws -> [ConversationIdentifier] {
        guard let entries = object["conversations"] as? [[String: Any]], !entries.isEmpty else {
            throw APIError.badParameter("conversations must be an array of {targetId, conversationType} objects")
        }
        return try entries.map { entry in
            guard let targetId = entry["targetId"] as? String,
                  let raw = (entry["conversationType"] as? NSNumber).flatMap({ Int(exactly: $0.doubleValue) }) ?? (entry["conversationType"] as? String).flatMap(Int.init),
                  let type = ConversationType(rawValue: raw) else {
                throw APIError.badParameter("every conversation needs a targetId (string) and a conversationType (1 private, 3 group, 6 system)")
            }
            return ConversationIdentifier(type, targetId: targetId)
        }
    }

    private func stateConversationType(_ call: APICall) throws -> ConversationType {
        let raw = try call.int("conversationType") ?? 0
        guard let type = ConversationType(rawValue: Int(raw)) else {
            throw APIError.badParameter("conversationType must be 1, 2, 3, 4, 6 or 10, got \(raw)")
        }
        return type
    }

    /// Applies a conversation-state edit for a user and tells their devices; a refused edit is
    /// 1002 with the reason.
    func editConversationState(_ call: APICall, userId: String, _ edit: ConversationStateEdit) async throws {
        guard UserID.isValid(userId) else {
            throw APIError.badParameter("'\(userId)' is not a valid user id (\(UserID.rule))")
        }
        do {
            try await core.conversationState.edit(edit, appId: call.app.id, userId: userId, origin: .serverAPI)
        } catch let error as IMError where error.code == .invalidParameter {
            throw APIError.badParameter(error.message)
        }
    }
}
