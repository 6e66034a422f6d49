import Foundation
import IMCore
import IMStore

/// Sensitive words and per-conversation do-not-disturb.
extension ServerAPI {
    var moderationEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/sensitiveword/add.json", tag: "moderation",
                summary: "Adds a sensitive word: with replaceWord it is replaced in text messages, without it a message containing it is not delivered.",
                params: [
                    .string("word", required: true, maxLength: ModerationLimits.maxWordLength, "the word"),
                    .string("replaceWord", maxLength: ModerationLimits.maxWordLength, "its replacement; omit for a blocking word"),
                ]) { call in
                try await addWords(call, [SensitiveWord(word: call.required("word"), replacement: call.string("replaceWord"))])
            },
            APIEndpoint(
                path: "/sensitiveword/batch/add.json", tag: "moderation",
                summary: "Adds several sensitive words: `words` is a JSON array of {word, replaceWord?}.",
                params: [.json("words", required: true, "[{\"word\": ..., \"replaceWord\": ...}]")]) { call in
                guard let data = call.string("words")?.data(using: .utf8),
                      let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
                    throw APIError.badParameter("words must be a JSON array of {\"word\", \"replaceWord\"} objects")
                }
                let words = try list.map { entry -> SensitiveWord in
                    guard let word = entry["word"] as? String, !word.isEmpty else { throw APIError.badParameter("every entry of words needs a word") }
                    let replacement = (entry["replaceWord"] as? String).flatMap { $0.isEmpty ? nil : $0 }
                    return SensitiveWord(word: word, replacement: replacement)
                }
                return try await addWords(call, words)
            },
            APIEndpoint(
                path: "/sensitiveword/delete.json", tag: "moderation", summary: "Removes a sensitive word.",
                params: [.string("word", required: true, "the word")]) { call in
                try await removeWords(call, [call.required("word")])
            },
            APIEndpoint(
                path: "/sensitiveword/batch/delete.json", tag: "moderation", summary: "Removes sensitive words.",
                params: [.list("words", required: true, max: ModerationLimits.wordsPerBatch, "the words")]) { call in
                try await removeWords(call, call.list("words"))
            },
            APIEndpoint(
                path: "/sensitiveword/list.json", tag: "moderation", summary: "The app's sensitive words.",
                params: [.integer("type", "0 replaced words, 1 blocking words (default), 2 all")],
                response: [APIField("words", "array", items: "object", "{type (\"0\" replace, \"1\" block), word, replaceWord}")]) { call in
                try await listWords(call, type: try call.int("type") ?? 1)
            },
            APIEndpoint(
                path: "/wordfilter/add.json", tag: "moderation", summary: "Adds a blocking word (the older name of /sensitiveword/add.json).",
                params: [.string("word", required: true, maxLength: ModerationLimits.maxWordLength, "the word")]) { call in
                try await addWords(call, [SensitiveWord(word: call.required("word"), replacement: nil)])
            },
            APIEndpoint(
                path: "/wordfilter/delete.json", tag: "moderation", summary: "Removes a word (the older name of /sensitiveword/delete.json).",
                params: [.string("word", required: true, "the word")]) { call in
                try await removeWords(call, [call.required("word")])
            },
            APIEndpoint(
                path: "/wordfilter/list.json", tag: "moderation", summary: "All sensitive words (the older name of /sensitiveword/list.json).",
                params: [],
                response: [APIField("words", "array", items: "object", "{type, word, replaceWord}")]) { call in
                try await listWords(call, type: 2)
            },
            APIEndpoint(
                path: "/conversation/notification/set.json", tag: "conversation",
                summary: "Sets a user's do-not-disturb for one conversation (pushes are held back; messages are still delivered). The user's online devices are told at once.",
                params: [
                    .integer("conversationType", required: true, "1 private, 3 group, 6 system, 10 ultra group"),
                    .string("requestId", required: true, "the user whose setting this is"),
                    .string("targetId", required: true, "the conversation's target"),
                    .integer("isMuted", "1 do not disturb, 0 normal"),
                    .integer("unpushLevel", "-1 all, 0 not set, 1 only @ messages, 2 @ me only, 4 @ all only, 5 nothing"),
                    .string("busChannel", "channel id"),
                ],
                handler: setNotification),
            APIEndpoint(
                path: "/conversation/notification/get.json", tag: "conversation", summary: "A user's do-not-disturb setting for one conversation.",
                params: [
                    .integer("conversationType", required: true, "1 private, 3 group, 6 system, 10 ultra group"),
                    .string("requestId", required: true, "the user"),
                    .string("targetId", required: true, "the conversation's target"),
                    .string("busChannel", "channel id"),
                ],
                response: [APIField("isMuted", "integer", "1 do not disturb, 0 normal"), APIField("unpushLevel", "integer", "the level set")]) { call in
                let level = try await core.conversationState.unpushLevel(
                    appId: call.app.id, userId: call.required("requestId"), type: try conversationType(call),
                    targetId: call.required("targetId"), channelId: call.string("busChannel") ?? "")
                // -1 is "push everything", 0 "not set": neither is do-not-disturb.
                return ["isMuted": level > 0 ? 1 : 0, "unpushLevel": level]
            },
        ]
    }

    private func addWords(_ call: APICall, _ words: [SensitiveWord]) async throws -> [String: any Sendable] {
        for word in words where TextLength.characters(word.word) > ModerationLimits.maxWordLength
            || TextLength.characters(word.replacement ?? "") > ModerationLimits.maxWordLength {
            throw APIError(.apiParameterTooLong, .badRequest, "\(TextLength.quoted(word.word)) or its replacement is longer than \(ModerationLimits.maxWordLength) characters")
        }
        try await core.sensitiveWords.add(appId: call.app.id, words: words, limit: settings(call).moderation.maxSensitiveWords, now: core.clock.nowMilliseconds())
        return [:]
    }

    private func removeWords(_ call: APICall, _ words: [String]) async throws -> [String: any Sendable] {
        try await core.sensitiveWords.remove(appId: call.app.id, words: words)
        return [:]
    }

    private func listWords(_ call: APICall, type: Int64) async throws -> [String: any Sendable] {
        guard (0...2).contains(type) else { throw APIError.badParameter("type must be 0, 1 or 2, got \(type)") }
        let words = try await core.sensitiveWords.list(appId: call.app.id).filter { word in
            type == 2 || (type == 0) == (word.replacement != nil)
        }
        return ["words": words.map {
            ["type": $0.replacement == nil ? "1" : "0", "word": $0.word, "replaceWord": $0.replacement ?? ""] as [String: any Sendable]
        }]
    }

    private func conversationType(_ call: APICall) throws -> ConversationType {
        let raw = try call.int("conversationType") ?? 0
        guard let type = ConversationType(rawValue: Int(raw)), [.private, .discussion, .group, .chatroom, .system, .ultraGroup].contains(type) else {
            throw APIError.badParameter("conversationType must be 1, 3, 6 or 10, got \(raw)")
        }
        return type
    }

    private func setNotification(_ call: APICall) async throws -> [String: any Sendable] {
        let type = try conversationType(call)
        let level: Int64
        // The Go SDK always sends unpushLevel, 0 when the caller only set isMuted.
        if let explicit = try call.int("unpushLevel"), explicit != 0 || call.string("isMuted") == nil {
            guard [-1, 0, 1, 2, 4, 5].contains(explicit) else {
                throw APIError.badParameter("unpushLevel must be -1, 0, 1, 2, 4 or 5, got \(explicit)")
            }
            level = explicit
        } else {
            guard let muted = try call.int("isMuted"), muted == 0 || muted == 1 else {
                throw APIError.badParameter("isMuted must be 0 or 1 (or pass unpushLevel)")
            }
            // RongCloud's isMuted=1: no pushes except for @ mentions (level 1).
            level = muted
        }
        let conversation = ConversationIdentifier(type, targetId: call.required("targetId"), channelId: call.string("busChannel") ?? "")
        try await editConversationState(call, userId: call.required("requestId"), .setLevel(conversation, PushNotificationLevel(rawValue: Int(level)) ?? .default))
        return [:]
    }
}
