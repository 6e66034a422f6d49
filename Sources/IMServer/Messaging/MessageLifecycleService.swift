import Foundation
import IMCore
import IMStore
import IMWire

/// What a user does to messages after they are sent: recall within the window, delete from their
/// own cloud history, and set or remove extensions.
///
/// Recall and extension changes reach the rest of the conversation as server-sent commands
/// (`RC:RcCmd`, `RC:MsgExMsg`) through the message log, so devices offline at the time get them
/// at their next sync, in order after the message they act on.
public final class MessageLifecycleService: Sendable {
    private let store: any MessageStore & MessageLifecycleStore
    private let log: MessageLog
    private let messages: MessageService
    private let rosters: GroupRosters
    private let chatrooms: ChatroomRouting
    private let clock: any WallClock
    private let apps: AppRegistry
    private let ultraGroups: UltraGroupRosters

    init(store: any MessageStore & MessageLifecycleStore, log: MessageLog, messages: MessageService, rosters: GroupRosters, chatrooms: ChatroomRouting, clock: any WallClock,
         apps: AppRegistry, ultraGroups: UltraGroupRosters) {
        self.ultraGroups = ultraGroups
        self.chatrooms = chatrooms
        self.store = store
        self.log = log
        self.messages = messages
        self.rosters = rosters
        self.clock = clock
        self.apps = apps
    }

    // MARK: recall

    /// RECALL_MESSAGE: the sender recalls its own one-to-one or group message within the window.
    func recall(_ request: Im_RecallRequest, from session: ClientSession) async throws -> Im_RecallReply {
        // Bad recall parameters are 25101, RongCloud's code for them.
        guard let type = ConversationType(rawValue: Int(request.conversationType)),
              type == .private || type == .group || type == .chatroom || type == .ultraGroup, UserID.isValid(request.targetID) else {
            throw IMError(.recallParameterInvalid, "recall one's own one-to-one (1), group (3), chatroom (4) or ultra group (10) message with its targetId; got type \(request.conversationType), target \(TextLength.quoted(request.targetID))")
        }
        guard TextLength.bytes(request.pushContent) <= MessageFieldLimits.maxPushContentBytes else {
            throw IMError(.invalidParameter, "pushContent is \(TextLength.bytes(request.pushContent)) bytes; at most \(MessageFieldLimits.maxPushContentBytes) are allowed")
        }
        let recallSeconds = apps.settings(appId: session.appId).messaging.recallWindowSeconds
        let window = recallSeconds > 0 ? Int64(recallSeconds) * 1000 : nil
        if type == .chatroom {
            let outcome = try await chatrooms.recall(appId: session.appId, operatorId: session.userId, roomId: request.targetID,
                                                     uid: request.messageUid, isAdmin: false, window: window, origin: session.origin)
            var reply = Im_RecallReply()
            reply.recallTime = outcome.recallTime
            reply.notification = outcome.notification ?? Data()
            return reply
        }
        let outcome = try await messages.recall(
            appId: session.appId, operatorId: session.userId, type: type, targetId: request.targetID, uid: request.messageUid,
            sentTime: request.sentTime == 0 ? nil : request.sentTime, isAdmin: false, delete: false, extra: nil,
            pushContent: request.pushContent, window: window, origin: session.origin, channelId: request.channelID)
        var reply = Im_RecallReply()
        reply.recallTime = outcome.recallTime
        reply.notification = outcome.notification ?? Data()
        return reply
    }

    // MARK: deleting from one's own history

    /// DELETE_REMOTE_MESSAGES: removes messages of one conversation from the caller's cloud history
    /// and offline sync; the other side keeps them.
    func deleteRemote(_ request: Im_DeleteRemoteMessagesRequest, from session: ClientSession) async throws {
        let type = try conversationType(request.conversationType, allowed: [.private, .group, .system, .ultraGroup], what: "remote delete")
        try checkTarget(request.targetID, type: type)
        let uids = Array(Set(request.messageUids))
        guard (1...MessageLimits.remoteDeleteBatch).contains(uids.count) else {
            throw IMError(.invalidParameter, "delete 1 to \(MessageLimits.remoteDeleteBatch) messages per call, got \(uids.count)")
        }
        let keys = conversationKeys(type, user: session.userId, target: request.targetID, channel: try channel(request.channelID, type))
        let found = Dictionary(try await store.messages(appId: session.appId, uids: uids).map { ($0.uid, $0) }) { a, _ in a }
        for uid in uids {
            guard let message = found[uid], keys.contains(message.conversationKey), message.isVisible(to: session.userId) else {
                throw IMError(.invalidParameter, "message \(uid) is not in your \(type) conversation with \(request.targetID): nothing was deleted")
            }
        }
        try await store.hideMessages(appId: session.appId, userId: session.userId, uids: uids)
    }

    /// CLEAR_REMOTE_HISTORY: removes the caller's messages of a conversation sent at or before a
    /// time (0: all of them) from their cloud history and offline sync, for good.
    func clearRemote(_ request: Im_ClearRemoteHistoryRequest, from session: ClientSession) async throws {
        let type = try conversationType(request.conversationType, allowed: [.private, .group, .system, .ultraGroup], what: "clearing history")
        try checkTarget(request.targetID, type: type)
        try await clear(appId: session.appId, userId: session.userId, type: type, targetId: request.targetID,
                        channelId: try channel(request.channelID, type), recordTime: request.recordTime)
    }

    /// Clears one user's view of a conversation up to `recordTime` (0: everything sent so far).
    /// Also the Server API's /conversation/message/history/clean.json.
    func clear(appId: Int64, userId: String, type: ConversationType, targetId: String, channelId: String = "", recordTime: Int64) async throws {
        let now = clock.nowMilliseconds()
        guard recordTime >= 0 else {
            throw IMError(.invalidParameter, "recordTime must be 0 (everything) or a time in ms, got \(recordTime)")
        }
        guard recordTime <= now else {
            throw IMError(.clearHistoryTimeInvalid, "recordTime \(recordTime) is later than the server's time \(now): pass the sentTime of the last message to remove, or 0 for all")
        }
        for key in conversationKeys(type, user: userId, target: targetId, channel: channelId) {
            var through = recordTime
            if recordTime == 0 {
                // Sent times of a burst can run a few ms ahead of the clock: take the latest one.
                through = max(now, try await store.lastSentTime(appId: appId, conversationKey: key) ?? now)
            }
            try await store.clearConversation(appId: appId, userId: userId, conversationKey: key, through: through)
        }
    }

    // MARK: extensions

    /// UPDATE_EXPANSION from a member of the message's conversation.
    func updateExpansion(_ request: Im_ExpansionUpdate, from session: ClientSession) async throws {
        try ExpansionLimits.check(set: request.set, remove: request.removeKeys)
        _ = try await updateExpansion(appId: session.appId, operatorId: session.userId, uid: request.messageUid,
                                      set: request.set, remove: request.removeKeys, notifyOperator: true, origin: session.origin)
    }

    /// Sets and removes extensions of a message for `operatorId`, who must be in its conversation,
    /// then tells the conversation with an `RC:MsgExMsg`. The store applies the change and the
    /// 300-key limit in one transaction. Returns the message's extensions after the change.
    func updateExpansion(appId: Int64, operatorId: String, uid: String, set: [String: String], remove: [String],
                         notifyOperator: Bool, origin: Origin) async throws -> [String: ExpansionEntry] {
        guard let original = try await store.message(appId: appId, uid: uid) else {
            throw IMError(.invalidParameter, "no message \(uid): extensions are set on sent messages by their messageUId")
        }
        guard [.private, .group, .ultraGroup].contains(original.conversationType) else {
            throw IMError(.messageNotExpandable, "message \(uid) is a \(original.conversationType) message; only one-to-one, group and ultra group messages carry extensions")
        }
        // The change goes to the same audience as the message.
        var change = StoredMessage(
            appId: appId, conversationType: original.conversationType, conversationKey: original.conversationKey,
            targetId: original.targetId, senderId: operatorId, objectName: ExpansionChangeMessage.objectName,
            content: Data(), flags: .none, channelId: original.channelId, includeSender: notifyOperator)
        if original.conversationType == .group || original.conversationType == .ultraGroup {
            if original.conversationType == .ultraGroup {
                // Whoever sees the channel may extend its messages; the change goes to the channel's audience.
                _ = try await ultraGroups.checkReader(appId: appId, groupId: original.targetId, channelId: original.channelId, userId: operatorId)
            } else {
                _ = try await rosters.checkMember(appId: appId, groupId: original.targetId, userId: operatorId)
            }
            guard original.isVisible(to: operatorId) else {
                throw IMError(.invalidParameter, "message \(uid) is a directional message not addressed to \(operatorId)")
            }
            if !original.directedUserIds.isEmpty {
                change.directedUserIds = Array(Set(original.directedUserIds + [original.senderId])).sorted()
            }
        } else {
            guard original.senderId == operatorId || original.targetId == operatorId else {
                throw IMError(.invalidParameter, "message \(uid) is not in a conversation of \(operatorId): only its two users extend it")
            }
            let peer = original.senderId == operatorId ? original.targetId : original.senderId
            change.targetId = peer
            change.conversationKey = privateConversationKey(operatorId, peer)
        }
        let entries = try await explainingRefusals {
            try await store.updateExpansion(appId: appId, uid: uid, set: set, remove: remove,
                                            now: clock.nowMilliseconds(), maxKeys: ExpansionLimits.keysPerMessage)
        }
        change.content = try ExpansionChangeMessage(mid: uid, put: set.isEmpty ? nil : set,
                                                    del: remove.isEmpty ? nil : remove).encode()
        _ = try await log.append(change, origin: origin)
        return entries
    }

    /// A message's extensions with the time each was set; nil when there is no such message.
    public func expansion(appId: Int64, uid: String) async throws -> [String: ExpansionEntry]? {
        try await store.expansion(appId: appId, uid: uid)
    }

    // MARK: helpers

    private func conversationType(_ raw: Int32, allowed: Set<ConversationType>, what: String) throws -> ConversationType {
        guard let type = ConversationType(rawValue: Int(raw)), allowed.contains(type) else {
            let names = allowed.map { "\($0) (\($0.rawValue))" }.sorted().joined(separator: ", ")
            throw IMError(.invalidParameter, "\(what) works in \(names) conversations, not in conversation type \(raw)")
        }
        return type
    }

    private func checkTarget(_ targetId: String, type: ConversationType) throws {
        guard UserID.isValid(targetId) else {
            throw IMError(.invalidParameter, "targetId '\(targetId)' is not a valid \(type == .group ? "group" : "user") id")
        }
    }

    /// The logs a user's conversation is made of: a system conversation holds the account's
    /// messages to the user and its broadcasts to everyone.
    /// An ultra group's channel as the request names it (none: RCDefault); other conversations have none.
    private func channel(_ channelId: String, _ type: ConversationType) throws -> String {
        guard type == .ultraGroup else {
            guard channelId.isEmpty else { throw IMError(.invalidParameter, "only ultra group conversations have channels") }
            return ""
        }
        guard channelId.isEmpty || UltraGroupLimits.isValidChannelId(channelId) else {
            throw IMError(.ultraGroupParameterInvalid, "channel id \(TextLength.quoted(channelId)) is invalid: use 1 to \(UltraGroupLimits.maxChannelIdLength) letters and digits")
        }
        return UltraGroupLimits.effectiveChannel(channelId)
    }

    private func conversationKeys(_ type: ConversationType, user: String, target: String, channel: String = "") -> Set<String> {
        switch type {
        case .ultraGroup: return [ultraGroupConversationKey(target, channel)]
        case .group: return [groupConversationKey(target)]
        case .system: return [systemConversationKey(sender: target, recipient: user),
                              systemConversationKey(sender: target, recipient: StoredMessage.everyone)]
        default: return [privateConversationKey(user, target)]
        }
    }
}
