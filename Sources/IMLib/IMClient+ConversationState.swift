import Foundation
import IMCore
import IMWire
import SwiftProtobuf

/// RongCloud's `RCConversationNotificationStatus`.
public enum ConversationNotificationStatus: Int, Sendable, Hashable {
    /// Do-not-disturb: no push notifications (messages still arrive and count as unread).
    case doNotDisturb = 0
    case notify = 1
}

/// A conversation tag of the user: RongCloud's `RCTagInfo`.
public struct ConversationTag: Sendable, Hashable {
    /// At most 10 characters.
    public var tagId: String
    /// At most 15 characters.
    public var tagName: String
    /// Conversations in the tag.
    public var count: Int
    /// When the tag was added (ms).
    public var timestamp: Int64
}

/// A tag of one conversation, and whether the conversation is pinned inside it:
/// RongCloud's `RCConversationTagInfo`.
public struct ConversationTagInfo: Sendable, Hashable {
    public var tag: ConversationTag
    public var isTop: Bool
}

/// A change of the user's conversation state applied on this device: made here, on another
/// device of the user, or by the app server; live or pulled at connect.
public enum ConversationStateChange: Sendable, Hashable {
    /// A conversation's do-not-disturb level; an empty `targetId` is the level of the whole type.
    case notificationLevel(ConversationIdentifier, PushNotificationLevel)
    case top(ConversationIdentifier, isTop: Bool)
    /// The quiet hours were set (or changed), or removed (nil).
    case quietHours(QuietHours?)
    /// A tag was added or renamed.
    case tag(tagId: String, name: String)
    /// A tag was removed, and its conversations with it.
    case tagRemoved(tagId: String)
    /// A conversation was put into a tag, or pinned or unpinned inside it.
    case conversationTagged(tagId: String, ConversationIdentifier, isTopInTag: Bool)
    case conversationUntagged(tagId: String, ConversationIdentifier)
}

/// Whether a conversation-state pull is running (for which connection) and whether another was
/// asked for while it ran.
struct ConversationStateSyncFlags {
    var running: ObjectIdentifier?
    var again = false
}

/// Conversation state kept by the server and synced to every device of the user: do-not-disturb,
/// quiet hours, pins and conversation tags (spec/imlib-core.md §8.7-8.9).
///
/// Changes go to the server and are applied here from its reply, so they need a connection
/// (30002 otherwise). Reads are local: this device pulls the state after its offline messages at
/// every connect, and again whenever the server says another device or the app server changed it.
extension IMClient {
    /// Every change of the conversation state applied on this device, wherever it was made.
    public nonisolated func conversationStateChanges() -> AsyncStream<ConversationStateChange> {
        stateEvents.stream()
    }

    // MARK: do-not-disturb

    /// Turns do-not-disturb on or off for a conversation (RongCloud's `setConversationNotificationStatus`).
    /// Blocking sets level `.mention` (only @ mentions push), unblocking `.default`.
    @discardableResult
    public func setConversationNotificationStatus(_ type: ConversationType, targetId: String, isBlocked: Bool) async throws -> ConversationNotificationStatus {
        try await setConversationNotificationLevel(type, targetId: targetId, level: isBlocked ? .mention : .default)
        return isBlocked ? .doNotDisturb : .notify
    }

    /// The do-not-disturb status of a conversation: its own level, or its type's when it has none.
    public func getConversationNotificationStatus(_ type: ConversationType, targetId: String) async throws -> ConversationNotificationStatus {
        try await effectiveLevel(ConversationIdentifier(type, targetId: targetId)).isDoNotDisturb ? .doNotDisturb : .notify
    }

    /// Sets a conversation's push notification level (RongCloud 5.x `setConversationNotificationLevel`).
    public func setConversationNotificationLevel(_ type: ConversationType, targetId: String, channelId: String = "",
                                                 level: PushNotificationLevel) async throws {
        let conversation = ConversationIdentifier(type, targetId: targetId, channelId: channelId)
        try ConversationStateRules.checkNotificationTarget(conversation)
        var request = Im_SetConversationNotificationRequest()
        request.conversation = Im_ConversationRef(conversation)
        request.level = Int32(level.rawValue)
        try await editConversationState(.setConversationNotification, request)
    }

    /// A conversation's own level (`.default` when not set).
    public func getConversationNotificationLevel(_ type: ConversationType, targetId: String, channelId: String = "") async throws -> PushNotificationLevel {
        try await openStore().notificationLevel(ConversationIdentifier(type, targetId: targetId, channelId: channelId)) ?? .default
    }

    /// Sets the level of every conversation of a type (RongCloud's `setConversationTypeNotificationLevel`);
    /// a conversation's own level takes precedence.
    public func setConversationTypeNotificationLevel(_ type: ConversationType, level: PushNotificationLevel) async throws {
        let conversation = ConversationIdentifier(type, targetId: "")
        try ConversationStateRules.checkNotificationTarget(conversation, allowTypeWide: true)
        var request = Im_SetConversationNotificationRequest()
        request.conversation = Im_ConversationRef(conversation)
        request.level = Int32(level.rawValue)
        try await editConversationState(.setConversationNotification, request)
    }

    public func getConversationTypeNotificationLevel(_ type: ConversationType) async throws -> PushNotificationLevel {
        try await openStore().notificationLevel(ConversationIdentifier(type, targetId: "")) ?? .default
    }

    /// Local conversations of these types in do-not-disturb (RongCloud's `getBlockedConversationList`).
    public func getBlockedConversationList(types: [ConversationType]) async throws -> [Conversation] {
        try await openStore().blockedConversations(types: types)
    }

    /// Unread messages in conversations of these types; do-not-disturb conversations count only
    /// with `containBlocked` (RongCloud's `getUnreadCount:containBlocked:`).
    public func getUnreadCount(types: [ConversationType], containBlocked: Bool) async throws -> Int {
        try await openStore().unreadCount(types: types, containBlocked: containBlocked)
    }

    private func effectiveLevel(_ conversation: ConversationIdentifier) async throws -> PushNotificationLevel {
        let store = try openStore()
        let own = try await store.notificationLevel(conversation) ?? .default
        guard own == .default else { return own }
        return try await store.notificationLevel(ConversationIdentifier(conversation.type, targetId: "")) ?? .default
    }

    // MARK: quiet hours

    /// Quiet hours every day from `startTime` ("HH:MM:SS", this device's time zone) for
    /// `spanMinutes` (1...1439; 0 and 1440 fail with 33003). During them pushes follow `level`
    /// (default: nothing pushes).
    public func setNotificationQuietHours(startTime: String, spanMinutes: Int, level: PushNotificationLevel = .blocked) async throws {
        let hours = QuietHours(startTime: startTime, spanMinutes: spanMinutes, level: level, timeZone: TimeZone.current.identifier)
        try hours.validate()
        var request = Im_SetQuietHoursRequest()
        request.startTime = hours.startTime
        request.spanMins = Int32(hours.spanMinutes)
        request.level = Int32(hours.level.rawValue)
        request.timeZone = hours.timeZone ?? ""
        try await editConversationState(.setQuietHours, request)
    }

    public func removeNotificationQuietHours() async throws {
        try await editConversationState(.removeQuietHours, Im_RemoveQuietHoursRequest())
    }

    /// The quiet hours, or nil when none are set.
    public func getNotificationQuietHours() async throws -> QuietHours? {
        try await openStore().quietHours()
    }

    // MARK: pins

    /// Pins a conversation to the top of the list, on every device of the user. Returns true.
    @discardableResult
    public func setConversationToTop(_ type: ConversationType, targetId: String, channelId: String = "", isTop: Bool) async throws -> Bool {
        let conversation = ConversationIdentifier(type, targetId: targetId, channelId: channelId)
        try ConversationStateRules.checkPinTarget(conversation)
        var request = Im_SetConversationTopRequest()
        request.conversation = Im_ConversationRef(conversation)
        request.isTop = isTop
        try await editConversationState(.setConversationTop, request)
        return true
    }

    /// Pinned local conversations of these types, newest first.
    public func getTopConversationList(types: [ConversationType]) async throws -> [Conversation] {
        try await openStore().topConversations(types: types)
    }

    // MARK: tags

    /// Adds a tag (id ≤ 10 characters, name ≤ 15; at most 20 tags per user).
    public func addTag(tagId: String, tagName: String) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try ConversationStateRules.checkTagName(tagName)
        try await editTag(.add, tagId: tagId, name: tagName)
    }

    /// Removes a tag; its conversations leave it (they stay in the conversation list).
    public func removeTag(tagId: String) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try await editTag(.remove, tagId: tagId, name: "")
    }

    /// Renames a tag.
    public func updateTag(tagId: String, tagName: String) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try ConversationStateRules.checkTagName(tagName)
        try await editTag(.rename, tagId: tagId, name: tagName)
    }

    /// The user's tags, oldest first.
    public func getTags() async throws -> [ConversationTag] {
        try await openStore().tags()
    }

    /// Puts up to 1000 conversations (34013 beyond) into a tag; only private, group and system
    /// conversations can be tagged (34012).
    public func addConversationsToTag(tagId: String, conversations: [ConversationIdentifier]) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try ConversationStateRules.checkTaggedConversations(conversations)
        try await tagConversations(.add, tagIds: [tagId], conversations: conversations)
    }

    public func removeConversationsFromTag(tagId: String, conversations: [ConversationIdentifier]) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try ConversationStateRules.checkTaggedConversations(conversations)
        try await tagConversations(.remove, tagIds: [tagId], conversations: conversations)
    }

    /// Takes one conversation out of these tags.
    public func removeTagsFromConversation(_ conversation: ConversationIdentifier, tagIds: [String]) async throws {
        try ConversationStateRules.checkTaggedConversations([conversation])
        guard !tagIds.isEmpty, tagIds.count <= ConversationStateLimits.maxTagIdsPerCall else {
            throw IMError(.invalidParameter, "pass 1 to \(ConversationStateLimits.maxTagIdsPerCall) tag ids, got \(tagIds.count)")
        }
        for tagId in tagIds { try ConversationStateRules.checkTagId(tagId) }
        try await tagConversations(.removeTags, tagIds: tagIds, conversations: [conversation])
    }

    /// The tags of one conversation, with its pin inside each.
    public func getTagsFromConversation(_ conversation: ConversationIdentifier) async throws -> [ConversationTagInfo] {
        try await openStore().tags(of: conversation)
    }

    /// A page of a tag's conversations: pinned-in-tag first, then by latest message, those older
    /// than `timestamp` (0: from the newest).
    public func getConversationsFromTagByPage(tagId: String, timestamp: Int64 = 0, count: Int = 20) async throws -> [Conversation] {
        guard count > 0 else { throw IMError(.invalidParameter, "count must be at least 1, got \(count)") }
        return try await openStore().conversations(inTag: tagId, before: timestamp, count: count)
    }

    /// Unread messages in a tag's conversations; do-not-disturb ones count only with `containBlocked`.
    public func getUnreadCountByTag(tagId: String, containBlocked: Bool) async throws -> Int {
        try await openStore().unreadCount(inTag: tagId, containBlocked: containBlocked)
    }

    /// Pins or unpins a conversation inside a tag; it must be in the tag (33003 otherwise).
    public func setConversationToTopInTag(tagId: String, conversation: ConversationIdentifier, isTop: Bool) async throws {
        try ConversationStateRules.checkTagId(tagId)
        try ConversationStateRules.checkTaggedConversations([conversation])
        var request = Im_TagConversationsRequest()
        request.action = .setTop
        request.tagIds = [tagId]
        request.conversations = [Im_ConversationRef(conversation)]
        request.isTop = isTop
        try await editConversationState(.tagConversations, request)
    }

    private func editTag(_ action: Im_ConversationTagRequest.Action, tagId: String, name: String) async throws {
        var request = Im_ConversationTagRequest()
        request.action = action
        request.tagID = tagId
        request.name = name
        try await editConversationState(.editConversationTag, request)
    }

    private func tagConversations(_ action: Im_TagConversationsRequest.Action, tagIds: [String], conversations: [ConversationIdentifier]) async throws {
        var request = Im_TagConversationsRequest()
        request.action = action
        request.tagIds = tagIds
        request.conversations = conversations.map { Im_ConversationRef($0) }
        try await editConversationState(.tagConversations, request)
    }

    // MARK: sync

    /// Sends one change, applies the server's reply, and pulls if another change slipped in between.
    private func editConversationState<Request: SwiftProtobuf.Message>(_ op: Im_Op, _ request: Request) async throws {
        let store = try openStore()
        let connection = try connected()
        let delta = try await connection.request(op, request, timeout: options.requestTimeout).body(Im_ConversationStateDelta.self)
        let applied = try await store.applyConversationStateEdit(delta)
        for change in applied.changes { stateEvents.yield(change) }
        if !applied.upToDate, !syncing, let scope, scope.connection === connection {
            scope.run { [weak self] in await self?.syncConversationState(scope) }
        }
    }

    /// The server says the state moved on: pull unless this device already has it, or the pull
    /// that follows the offline messages will fetch it anyway.
    func conversationStateChanged(_ notice: Im_ConversationStateChanged, scope: ConnectionScope) async {
        guard let store, !syncing, let held = try? await store.conversationStateVersion(), held < notice.version else { return }
        scope.run { [weak self] in await self?.syncConversationState(scope) }
    }

    /// Pulls the state changed since this device's version, page by page. A request while a pull
    /// of the same connection runs makes it go round once more instead of starting a second one.
    func syncConversationState(_ scope: ConnectionScope) async {
        guard let store else { return }
        let id = ObjectIdentifier(scope)
        if stateSync.running == id {
            stateSync.again = true
            return
        }
        stateSync.running = id
        defer { if stateSync.running == id { stateSync.running = nil } }
        do {
            repeat {
                stateSync.again = false
                var more = true
                while more {
                    var request = Im_ConversationStateSyncRequest()
                    request.since = try await store.conversationStateVersion()
                    let page = try await scope.connection.request(.conversationStateSync, request, timeout: options.requestTimeout)
                        .body(Im_ConversationStateDelta.self)
                    try Task.checkCancellation()
                    let applied = try await store.applyConversationStatePage(page)
                    for change in applied.changes { stateEvents.yield(change) }
                    more = page.more
                }
            } while stateSync.again
        } catch {
            options.logger.debug("conversation state sync stopped", metadata: ["error": "\(error)"])
        }
    }
}
