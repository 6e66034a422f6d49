import Foundation
import IMCore

/// Limits of the local-database features.
public enum LocalLimits {
    /// Messages per search call. RongCloud states no bound (its sample asks for 50); a page of 100
    /// keeps one call's decoding small and is plenty for a result screen.
    public static let searchCountRange = 1...100
}

/// One conversation that a search across conversations found: RongCloud's `RCSearchConversationResult`.
public struct SearchConversationResult: Sendable, Hashable {
    public var conversation: Conversation
    /// How many of its messages match.
    public var matchCount: Int
}

// Local features of the client database (spec/imlib-core.md §8.5, §8.6, §9.11-9.13): they read and
// write this device's database only and send nothing to the server.
extension IMClient {
    // MARK: unread counts

    /// Unread messages in every conversation (RongCloud's `getTotalUnreadCount`).
    public func getTotalUnreadCount() async throws -> Int {
        try await openStore().totalUnreadCount()
    }

    /// Unread messages of one conversation; 0 for a conversation not in the list.
    public func getUnreadCount(_ type: ConversationType, targetId: String) async throws -> Int {
        try Self.checkTarget(targetId)
        return try await openStore().unreadCount(type: type, targetId: targetId, channelId: "")
    }

    /// Marks the received messages of a conversation sent at or before `time` (ms; 0: all) read;
    /// its unread and mention counts are recounted from the messages still unread. Returns false if
    /// the conversation is not in the list.
    @discardableResult
    public func clearMessagesUnreadStatus(_ type: ConversationType, targetId: String, time: Int64) async throws -> Bool {
        try Self.checkTarget(targetId)
        guard time >= 0 else { throw IMError(.invalidParameter, "time must be a sent time in ms, or 0 for all messages; got \(time)") }
        return try await openStore().markRead(type: type, targetId: targetId, channelId: "", upTo: time)
    }

    // MARK: drafts

    /// Saves the text the user has typed but not sent; an empty text clears it. Drafts stay on
    /// this device. A conversation not in the list yet is added. An ultra group keeps one draft
    /// per channel (`channelId`; none: RCDefault).
    @discardableResult
    public func saveTextMessageDraft(_ type: ConversationType, targetId: String, channelId: String = "", content: String) async throws -> Bool {
        try Self.checkTarget(targetId)
        try await openStore().saveDraft(type: type, targetId: targetId, channelId: Self.channel(channelId, of: type), draft: content,
                                  now: options.clock.nowMilliseconds())
        return true
    }

    /// The conversation's (or ultra group channel's) draft, or nil when it has none.
    public func getTextMessageDraft(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> String? {
        try Self.checkTarget(targetId)
        return try await openStore().draft(type: type, targetId: targetId, channelId: Self.channel(channelId, of: type))
    }

    /// Clears the conversation's (or ultra group channel's) draft; false if it is not in the list.
    @discardableResult
    public func clearTextMessageDraft(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> Bool {
        try Self.checkTarget(targetId)
        return try await openStore().clearDraft(type: type, targetId: targetId, channelId: Self.channel(channelId, of: type))
    }

    // MARK: inserted messages

    /// Stores an outgoing message on this device only: it has no messageUId until
    /// `sendMessage(messageId:)` sends it. It appears in history and the conversation list by
    /// `sentTime` (ms; 0: now). `canIncludeExpansion` and `expansion` are kept with it (and sent
    /// with it); `extra` is the local text of `setMessageExtra`.
    ///
    /// - Throws: 34021 when the content's type is not registered; 33003 for an invalid target, a
    ///   negative time or a type that is not stored (its persistent flag lacks `isPersisted`);
    ///   34008 for extensions without `canIncludeExpansion`, 34010 past the extension limits.
    @discardableResult
    public func insertOutgoingMessage(
        _ type: ConversationType, targetId: String, sentStatus: SentStatus = .sent, content: some MessageContent, sentTime: Int64 = 0,
        canIncludeExpansion: Bool = false, expansion: [String: String] = [:], extra: String = ""
    ) async throws -> Message {
        let store = try openStore()
        var message = try localMessage(type, targetId: targetId, senderUserId: store.userId, direction: .send,
                                       sentStatus: sentStatus, isRead: true, content: content, sentTime: sentTime)
        try Self.expand(&message, canIncludeExpansion: canIncludeExpansion, expansion: expansion, extra: extra)
        return try await store.insertLocal(message)
    }

    /// Stores a received message on this device only, as if `senderUserId` had sent it: it has no
    /// messageUId. Unless `isRead`, a counted type counts as unread. It appears in history and the
    /// conversation list by `sentTime` (ms; 0: now).
    ///
    /// - Throws: as `insertOutgoingMessage`, and 33003 for an invalid sender.
    @discardableResult
    public func insertIncomingMessage(
        _ type: ConversationType, targetId: String, senderUserId: String, isRead: Bool = false, content: some MessageContent,
        sentTime: Int64 = 0, canIncludeExpansion: Bool = false, expansion: [String: String] = [:], extra: String = ""
    ) async throws -> Message {
        guard UserID.isValid(senderUserId) else { throw IMError(.invalidParameter, "senderUserId '\(senderUserId)' is not a valid user id") }
        var message = try localMessage(type, targetId: targetId, senderUserId: senderUserId, direction: .receive,
                                       sentStatus: .received, isRead: isRead, content: content, sentTime: sentTime)
        try Self.expand(&message, canIncludeExpansion: canIncludeExpansion, expansion: expansion, extra: extra)
        return try await openStore().insertLocal(message)
    }

    private static func expand(_ message: inout Message, canIncludeExpansion: Bool, expansion: [String: String], extra: String) throws {
        if !expansion.isEmpty {
            guard canIncludeExpansion else {
                throw IMError(.messageNotExpandable, "the message carries extensions but canIncludeExpansion is off: set it to keep extensions")
            }
            try ExpansionLimits.check(set: expansion, remove: [])
        }
        message.canIncludeExpansion = canIncludeExpansion
        message.expansion = expansion
        message.extra = extra
    }

    /// Sets the text the app keeps with a message on this device only (RongCloud's
    /// `setMessageExtra`); false when there is no such message.
    @discardableResult
    public func setMessageExtra(messageId: Int64, value: String) async throws -> Bool {
        try await openStore().setExtra(messageId: messageId, value: value)
    }

    private func localMessage(
        _ type: ConversationType, targetId: String, senderUserId: String, direction: MessageDirection, sentStatus: SentStatus,
        isRead: Bool, content: some MessageContent, sentTime: Int64
    ) throws -> Message {
        try Self.checkTarget(targetId)
        try requireRegistered(content)
        let objectName = Swift.type(of: content).objectName
        let flags = Swift.type(of: content).persistentFlag
        guard flags.contains(.isPersisted) else {
            throw IMError(.invalidParameter, "\(objectName) is not stored (its persistent flag lacks isPersisted), so it cannot be inserted")
        }
        guard sentTime >= 0 else { throw IMError(.invalidParameter, "sentTime must be a time in ms, or 0 for now; got \(sentTime)") }
        let data: Data
        do {
            data = try content.encode()
        } catch {
            throw IMError(.invalidParameter, "the message content could not be encoded: \(error)")
        }
        let now = options.clock.nowMilliseconds()
        return Message(
            messageId: 0, conversationType: type, targetId: targetId, channelId: "", senderUserId: senderUserId, direction: direction,
            objectName: objectName, contentData: data, content: content, flags: flags, sentStatus: sentStatus, isRead: isRead,
            sentTime: sentTime == 0 ? now : sentTime, receivedTime: now, messageUId: "", clientMessageId: UUID().uuidString,
            pushContent: "", pushData: "")
    }

    /// Fails with 34021 unless the content's object name is registered (built-in or by
    /// `registerMessageType`): only registered types can be sent or inserted.
    func requireRegistered(_ content: some MessageContent) throws {
        let objectName = Swift.type(of: content).objectName
        guard types.isRegistered(objectName) else {
            throw IMError(.messageTypeNotRegistered, "message type \(objectName) is not registered: call registerMessageType before connecting")
        }
    }

    // MARK: local deletes

    /// Deletes messages from this device's database (the server keeps them). Their conversations
    /// show their newest remaining message and recount unread messages. Returns whether any of
    /// them existed.
    @discardableResult
    public func deleteMessages(ids: [Int64]) async throws -> Bool {
        guard !ids.isEmpty else { throw IMError(.invalidParameter, "ids is empty: name the messages to delete") }
        return try await openStore().deleteMessages(ids: ids) > 0
    }

    /// Deletes every message of a conversation from this device's database (the server keeps them);
    /// the conversation stays in the list, with no unread messages. Returns false if there was
    /// nothing to delete and no such conversation.
    @discardableResult
    public func clearMessages(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> Bool {
        try Self.checkTarget(targetId)
        let store = try openStore()
        let channel = try Self.channel(channelId, of: type)
        let deleted = try await store.deleteMessages(type: type, targetId: targetId, channelId: channel, sentAtOrBefore: 0)
        if deleted > 0 { return true }
        return try await store.conversation(type: type, targetId: targetId, channelId: channel) != nil
    }

    // MARK: search

    /// Up to `count` (1-100) messages of a conversation whose searchable words contain the keyword,
    /// newest first; `startTime` > 0 returns only messages sent before it (pass the last result's
    /// sentTime for the next page). Chinese, Japanese and Korean text matches anywhere ("天气" finds
    /// "今天天气很好"); other words match from their start, case-insensitively ("wor" finds "World").
    /// In an ultra group, `channelId` names the channel searched (none: RCDefault).
    public func searchMessages(_ type: ConversationType, targetId: String, channelId: String = "", keyword: String, count: Int = 50,
                               startTime: Int64 = 0) async throws -> [Message] {
        try Self.checkSearch(targetId: targetId, count: count, startTime: startTime)
        guard !keyword.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw IMError(.invalidParameter, "keyword is empty: give the text to search for")
        }
        return try await openStore().searchMessages(type: type, targetId: targetId, channelId: Self.channel(channelId, of: type), keyword: keyword,
                                              count: count, before: startTime)
    }

    /// Up to `count` (1-100) messages of a conversation sent by `userId`, newest first; `startTime`
    /// > 0 returns only messages sent before it.
    public func searchMessages(_ type: ConversationType, targetId: String, channelId: String = "", userId: String, count: Int = 50,
                               startTime: Int64 = 0) async throws -> [Message] {
        try Self.checkSearch(targetId: targetId, count: count, startTime: startTime)
        guard UserID.isValid(userId) else { throw IMError(.invalidParameter, "userId '\(userId)' is not a valid user id") }
        return try await openStore().searchMessages(type: type, targetId: targetId, channelId: Self.channel(channelId, of: type), senderId: userId,
                                              count: count, before: startTime)
    }

    /// The conversations of these types whose messages (of these object names; nil: any) contain
    /// the keyword, each with its number of matching messages, newest conversation first.
    public func searchConversations(types: [ConversationType], objectNames: [String]? = nil, keyword: String) async throws -> [SearchConversationResult] {
        guard !keyword.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw IMError(.invalidParameter, "keyword is empty: give the text to search for")
        }
        return try await openStore().searchConversations(types: types, objectNames: objectNames ?? [], keyword: keyword)
            .map { SearchConversationResult(conversation: $0.0, matchCount: $0.1) }
    }

    private static func checkSearch(targetId: String, count: Int, startTime: Int64) throws {
        try checkTarget(targetId)
        guard LocalLimits.searchCountRange.contains(count) else {
            throw IMError(.invalidParameter, "count must be \(LocalLimits.searchCountRange.lowerBound)...\(LocalLimits.searchCountRange.upperBound), got \(count)")
        }
        guard startTime >= 0 else { throw IMError(.invalidParameter, "startTime must be a time in ms, or 0 for no limit; got \(startTime)") }
    }

    static func checkTarget(_ targetId: String) throws {
        guard UserID.isValid(targetId) else { throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid id") }
    }
}
