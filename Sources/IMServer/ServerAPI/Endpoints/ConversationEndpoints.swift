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
        ]
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
