import Foundation
import IMCore
import IMWire

/// Recall, remote delete, read receipts and read status, typing status and message extensions.
extension IMClient {
    // MARK: events

    /// Messages recalled by their senders (RongCloud's `onMessageRecalled`): the local message as
    /// it now is, its content a `RecallNotificationMessage` (or, when the recall deleted it, as it
    /// was before it was removed). Offline devices get them at their next connect.
    public nonisolated func recalledMessages() -> AsyncStream<Message> {
        recallEvents.stream()
    }

    /// One-to-one read receipts from peers (RongCloud's `RCLibDispatchReadReceiptNotification`).
    public nonisolated func conversationReadReceipts() -> AsyncStream<ConversationReadReceipt> {
        conversationReadEvents.stream()
    }

    /// Conversations this user read on another device; this device's unread counts already follow.
    public nonisolated func readStatusUpdates() -> AsyncStream<ConversationReadStatus> {
        readStatusEvents.stream()
    }

    /// Typing status of others in this user's conversations (online only).
    public nonisolated func typingStatusUpdates() -> AsyncStream<TypingStatus> {
        typingEvents.stream()
    }

    /// Extension changes of messages this device holds, made by anyone (RongCloud's
    /// `messageExpansionDidUpdate` / `messageExpansionDidRemove`).
    public nonisolated func messageExpansionUpdates() -> AsyncStream<MessageExpansionEvent> {
        expansionEvents.stream()
    }

    // MARK: recall

    /// Recalls one of this user's sent messages within the server's recall window (2 minutes by
    /// default): every member and device of the conversation, online or not, sees a recall
    /// notification in its place. Returns the local message, now holding the notification.
    ///
    /// - Throws: 25101 when the window has passed, the message is not this user's, or it is unknown
    ///   to the server; 30002 when not connected.
    @discardableResult
    public func recallMessage(_ message: Message, pushContent: String? = nil) async throws -> Message {
        let store = try openStore()
        guard message.direction == .send, !message.messageUId.isEmpty,
              [.private, .group, .chatroom, .ultraGroup].contains(message.conversationType) else {
            throw IMError(.recallParameterInvalid, "only this user's sent one-to-one, group, chatroom and ultra group messages can be recalled, and only once the server has them (messageUId set)")
        }
        var request = Im_RecallRequest()
        request.conversationType = Int32(message.conversationType.rawValue)
        request.targetID = message.targetId
        request.messageUid = message.messageUId
        request.sentTime = message.sentTime
        request.channelID = message.channelId
        request.pushContent = pushContent ?? ""
        let reply = try await connected().request(.recallMessage, request, timeout: options.requestTimeout).body(Im_RecallReply.self)
        let notification = (try? JSONDecoder().decode(RecallNotificationMessage.self, from: reply.notification))
            ?? RecallNotificationMessage(operatorId: store.userId, recallTime: reply.recallTime, originalObjectName: message.objectName)
        if let recalled = try await store.recallLocally(uid: message.messageUId, notification: notification) {
            return recalled
        }
        // Not in the local database (e.g. a message fetched from remote history): describe it.
        var recalled = message
        recalled.objectName = RecallNotificationMessage.objectName
        recalled.contentData = try notification.encode()
        recalled.content = notification
        recalled.flags = RecallNotificationMessage.persistentFlag
        return recalled
    }

    // MARK: deleting

    /// Removes messages from this user's cloud history (and from what a new device syncs); the
    /// other side keeps them, and local copies stay. Irreversible. In an ultra group, `channelId`
    /// names the messages' channel (none: RCDefault).
    public func deleteRemoteMessages(_ type: ConversationType, targetId: String, channelId: String = "", messages: [Message]) async throws {
        let uids = messages.map(\.messageUId).filter { !$0.isEmpty }
        guard !uids.isEmpty, uids.count <= MessageLimits.remoteDeleteBatch else {
            throw IMError(.invalidParameter, "pass 1 to \(MessageLimits.remoteDeleteBatch) sent or received messages (with a messageUId)")
        }
        var request = Im_DeleteRemoteMessagesRequest()
        request.conversationType = Int32(type.rawValue)
        request.targetID = targetId
        request.messageUids = uids
        request.channelID = try Self.channel(channelId, of: type)
        _ = try await connected().request(.deleteRemoteMessages, request, timeout: options.requestTimeout)
    }

    /// Removes this user's cloud history of a conversation sent at or before `recordTime` (0: all).
    /// Irreversible.
    ///
    /// - Throws: 25103 when `recordTime` is later than the server's time.
    public func clearRemoteHistoryMessages(_ type: ConversationType, targetId: String, channelId: String = "", recordTime: Int64) async throws {
        guard recordTime >= 0 else {
            throw IMError(.invalidParameter, "recordTime must be 0 (all) or a sentTime in ms")
        }
        var request = Im_ClearRemoteHistoryRequest()
        request.conversationType = Int32(type.rawValue)
        request.targetID = targetId
        request.recordTime = recordTime
        request.channelID = try Self.channel(channelId, of: type)
        _ = try await connected().request(.clearRemoteHistory, request, timeout: options.requestTimeout)
    }

    /// Deletes a conversation's messages sent at or before `recordTime` (0: all) from this device
    /// and, with `clearRemote`, from this user's cloud history first (RongCloud's
    /// `clearHistoryMessages`). When the server refuses, nothing local is deleted.
    public func clearHistoryMessages(_ type: ConversationType, targetId: String, channelId: String = "", recordTime: Int64,
                                     clearRemote: Bool) async throws {
        let store = try openStore()
        let channel = try Self.channel(channelId, of: type)
        if clearRemote {
            try await clearRemoteHistoryMessages(type, targetId: targetId, channelId: channelId, recordTime: recordTime)
        } else if recordTime < 0 {
            throw IMError(.invalidParameter, "recordTime must be 0 (all) or a sentTime in ms")
        }
        _ = try await store.deleteMessages(type: type, targetId: targetId, channelId: channel, sentAtOrBefore: recordTime)
    }

    // MARK: read receipts and read status

    /// Tells the peer of a one-to-one conversation that this user has read its messages sent up to
    /// `time` (the sentTime of the last one read). The peer's sent messages up to then become read;
    /// this user's other devices, and this one, clear their unread count up to it.
    public func sendReadReceiptMessage(_ type: ConversationType, targetId: String, time: Int64) async throws {
        guard type == .private else {
            throw IMError(.invalidParameter, "read receipts by time are for one-to-one conversations; use sendReadReceiptResponse in groups")
        }
        guard time > 0 else { throw IMError(.invalidParameter, "time is the sentTime (ms) of the last message read") }
        _ = try await sendSignal(type, targetId: targetId, content: ReadReceiptMessage(lastMessageSendTime: time))
        try await openStore().markRead(type: type, targetId: targetId, channelId: "", upTo: time)
    }

    /// Tells this user's other devices that the conversation has been read up to `time` (RongCloud's
    /// `syncConversationReadStatus`); they clear their unread counts up to it. This device too.
    public func syncConversationReadStatus(_ type: ConversationType, targetId: String, time: Int64) async throws {
        guard type == .private || type == .group || type == .system else {
            throw IMError(.invalidParameter, "read status is synced for one-to-one, group and system conversations")
        }
        guard time > 0 else { throw IMError(.invalidParameter, "time is the sentTime (ms) of the last message read") }
        let status = SyncReadStatusMessage(lastMessageSendTime: time, conversationType: type.rawValue, targetId: targetId)
        _ = try await sendSignal(type, targetId: targetId, content: status)
        try await openStore().markRead(type: type, targetId: targetId, channelId: "", upTo: time)
    }

    // MARK: typing

    /// Tells the others in a conversation that this user is typing a message of `typingContentType`
    /// (an object name, e.g. `RC:TxtMsg`). At most one status per conversation is sent every 6 s;
    /// calls in between are dropped. Returns whether a status was sent.
    /// In an ultra group the status goes to the members online in `channelId` (none: RCDefault).
    @discardableResult
    public func sendTypingStatus(_ type: ConversationType, targetId: String, channelId: String = "", typingContentType: String) async throws -> Bool {
        let channel = try Self.channel(channelId, of: type)
        let key = "\(type.rawValue)|\(targetId)|\(channel)"
        let now = options.clock.nowMilliseconds()
        if let last = lastTypingSent[key], now - last < TypingLimits.intervalMilliseconds { return false }
        lastTypingSent[key] = now
        do {
            _ = try await sendSignal(type, targetId: targetId, channelId: channel, content: TypingStatusMessage(typingContentType: typingContentType))
        } catch {
            lastTypingSent[key] = nil
            throw error
        }
        return true
    }

    // MARK: extensions

    /// Sets or changes extensions of a sent message by its messageUId (at most 20 per call, 300 per
    /// message). Everyone in the conversation gets the change.
    ///
    /// - Throws: 34008 when the message was sent without `canIncludeExpansion`, 34010 when a limit
    ///   is passed, 34009 when the server could not be reached.
    public func updateMessageExpansion(_ expansion: [String: String], messageUId: String) async throws {
        try ExpansionLimits.check(set: expansion, remove: [])
        try await changeExpansion(messageUId: messageUId, set: expansion, remove: [])
    }

    /// Removes extension keys of a sent message by its messageUId.
    public func removeMessageExpansionForKey(_ keys: [String], messageUId: String) async throws {
        try ExpansionLimits.check(set: [:], remove: keys)
        try await changeExpansion(messageUId: messageUId, set: [:], remove: keys)
    }

    private func changeExpansion(messageUId: String, set: [String: String], remove: [String]) async throws {
        let store = try openStore()
        var request = Im_ExpansionUpdate()
        request.messageUid = messageUId
        request.set = set
        request.removeKeys = remove
        do {
            _ = try await connected().request(.updateExpansion, request, timeout: options.requestTimeout)
        } catch let error as IMError where [.connectionUnavailable, .responseTimeout, .socketDisconnected].contains(error.code) {
            throw IMError(.expansionFailed, "the extension change did not reach the server (\(error.message)): retry when connected")
        }
        _ = try await store.applyExpansion(uid: messageUId, set: set, remove: remove)
    }

    // MARK: helpers

    /// Sends a command content that is not stored locally (read status, typing).
    private func sendSignal(_ conversationType: ConversationType, targetId: String, channelId: String = "",
                            content: some MessageContent) async throws -> Im_SendMessageReply {
        guard UserID.isValid(targetId) else {
            throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid id")
        }
        var request = Im_SendMessageRequest()
        request.conversationType = Int32(conversationType.rawValue)
        request.targetID = targetId
        request.channelID = channelId
        request.objectName = type(of: content).objectName
        request.content = try content.encode()
        request.flags = type(of: content).persistentFlag.rawValue
        request.clientMessageID = UUID().uuidString
        return try await connected().request(.sendMessage, request, timeout: options.requestTimeout).body(Im_SendMessageReply.self)
    }
}
