import Foundation
import GRDB
import IMCore

/// What happens to local messages after they arrive: recall, read status, extensions.
extension LocalStore {
    /// Applies a command message (recall, read receipt, read status, extension change, typing,
    /// group receipt request) to the messages it names. Returns false for ordinary messages,
    /// which the caller stores.
    func applySignal(_ message: Message, _ changes: inout IncomingChanges, _ db: Database) throws -> Bool {
        let decoder = JSONDecoder()
        switch message.objectName {
        case ReadReceiptObjectNames.request:
            let object = try? JSONSerialization.jsonObject(with: message.contentData) as? [String: Any]
            if let uid = object?["messageUId"] as? String {
                try db.execute(sql: "UPDATE messages SET receipt_requested = 1 WHERE uid = ?", arguments: [uid])
                var request = message
                request.messageUId = uid
                changes.receiptRequests.append(request)
            }
        case MessageModifyCommand.objectName:
            guard let command = try? decoder.decode(MessageModifyCommand.self, from: message.contentData) else { break }
            try db.execute(sql: "UPDATE messages SET content = ? WHERE uid = ? AND object_name = ? AND content <> ?",
                           arguments: [Data(command.content.utf8), command.messageUId, command.objectName, Data(command.content.utf8)])
            if db.changesCount > 0, let row = try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE uid = ?",
                                                             arguments: [command.messageUId]) {
                changes.modified.append(self.message(row))
            }
        case RecallCommandMessage.objectName:
            guard let command = try? decoder.decode(RecallCommandMessage.self, from: message.contentData) else { break }
            let notification = RecallNotificationMessage(
                operatorId: message.senderUserId, recallTime: message.sentTime, originalObjectName: "",
                isAdmin: command.isAdmin == 1, isDelete: command.isDelete == 1, extra: command.extra)
            if let recalled = try applyRecall(uid: command.messageUId, notification: notification, db) {
                changes.recalled.append(recalled)
            }
        case ReadReceiptMessage.objectName:
            guard message.conversationType == .private,
                  let receipt = try? decoder.decode(ReadReceiptMessage.self, from: message.contentData) else { break }
            if message.direction == .receive {
                // The peer read this user's messages up to the time. The direction and status are
                // written as constants so that SQLite uses the partial index messages_sent_unread.
                try db.execute(sql: """
                    UPDATE messages SET sent_status = \(SentStatus.read.rawValue)
                    WHERE conv_type = ? AND target_id = ? AND channel_id = '' AND sent_time <= ?
                        AND direction = \(MessageDirection.send.rawValue) AND sent_status = \(SentStatus.sent.rawValue)
                    """, arguments: [ConversationType.private.rawValue, message.targetId, receipt.lastMessageSendTime])
                changes.readReceipts.append(ConversationReadReceipt(
                    conversationType: .private, targetId: message.targetId, readerId: message.senderUserId,
                    lastReadTime: receipt.lastMessageSendTime))
            } else {
                // This user read the conversation on another device.
                try markRead(type: .private, targetId: message.targetId, channelId: "", upTo: receipt.lastMessageSendTime, db)
                changes.readStatuses.append(ConversationReadStatus(conversationType: .private, targetId: message.targetId,
                                                                   lastReadTime: receipt.lastMessageSendTime))
            }
        case SyncReadStatusMessage.objectName:
            guard message.senderUserId == userId,
                  let status = try? decoder.decode(SyncReadStatusMessage.self, from: message.contentData),
                  let type = ConversationType(rawValue: status.conversationType) else { break }
            try markRead(type: type, targetId: status.targetId, channelId: "", upTo: status.lastMessageSendTime, db)
            changes.readStatuses.append(ConversationReadStatus(conversationType: type, targetId: status.targetId,
                                                               lastReadTime: status.lastMessageSendTime))
        case ExpansionChangeMessage.objectName:
            guard let change = try? decoder.decode(ExpansionChangeMessage.self, from: message.contentData),
                  let before = try Row.fetchOne(db, sql: "SELECT expansion FROM messages WHERE uid = ?", arguments: [change.mid])
                    .map({ Self.decodeExpansion($0["expansion"]) }),
                  let updated = try applyExpansion(uid: change.mid, set: change.put ?? [:], remove: change.del ?? [], db) else { break }
            // A change this device made, or has already seen, is not reported again.
            let put = (change.put ?? [:]).filter { before[$0.key] != $0.value }
            let del = (change.del ?? []).filter { before[$0] != nil }
            if !put.isEmpty { changes.expansions.append(.updated(changes: put, message: updated)) }
            if !del.isEmpty { changes.expansions.append(.removed(keys: del, message: updated)) }
        case TypingStatusMessage.objectName:
            guard message.direction == .receive,
                  let typing = try? decoder.decode(TypingStatusMessage.self, from: message.contentData) else { break }
            changes.typing.append(TypingStatus(conversationType: message.conversationType, targetId: message.targetId,
                                               channelId: message.channelId, userId: message.senderUserId, typingContentType: typing.typingContentType,
                                               sentTime: message.sentTime))
        default:
            return false
        }
        return true
    }

    // MARK: recall

    /// Replaces a local message by its recall notification (or deletes it when the recall deleted
    /// it) and returns the message as it now is; nil when this device does not hold the message or
    /// it was recalled already. An unread message stops counting as unread.
    func applyRecall(uid: String, notification: RecallNotificationMessage, _ db: Database) throws -> Message? {
        guard let original = try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE uid = ?", arguments: [uid])
            .map({ self.message($0) }), original.objectName != RecallNotificationMessage.objectName else { return nil }
        if notification.isDelete {
            try db.execute(sql: "DELETE FROM messages WHERE id = ?", arguments: [original.messageId])
            try refreshConversation(type: original.conversationType, targetId: original.targetId, channelId: original.channelId, db)
            return original
        }
        var notification = notification
        notification.originalObjectName = original.objectName
        // Not counted any more (ISPERSISTED), so an unread recalled message leaves the unread count.
        try db.execute(sql: "UPDATE messages SET can_include_expansion = 0, expansion = NULL WHERE id = ?", arguments: [original.messageId])
        try replaceContent(messageId: original.messageId, objectName: RecallNotificationMessage.objectName,
                           data: try notification.encode(), flags: RecallNotificationMessage.persistentFlag, db)
        return try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE id = ?", arguments: [original.messageId])
            .map { self.message($0) }
    }

    /// The sender's own recall, after the server accepted it.
    func recallLocally(uid: String, notification: RecallNotificationMessage) async throws -> Message? {
        try await write { [self] db in try applyRecall(uid: uid, notification: notification, db) }
    }

    // MARK: extensions

    /// Merges an extension change into a local message; returns it, or nil when this device does
    /// not hold the message.
    func applyExpansion(uid: String, set: [String: String], remove: [String], _ db: Database) throws -> Message? {
        guard let row = try Row.fetchOne(db, sql: "SELECT id, expansion FROM messages WHERE uid = ?", arguments: [uid]) else { return nil }
        var expansion = Self.decodeExpansion(row["expansion"])
        for key in remove { expansion[key] = nil }
        expansion.merge(set) { $1 }
        let id: Int64 = row["id"]
        try db.execute(sql: "UPDATE messages SET expansion = ? WHERE id = ?", arguments: [Self.encodeExpansion(expansion), id])
        return try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE id = ?", arguments: [id]).map { self.message($0) }
    }

    func applyExpansion(uid: String, set: [String: String], remove: [String]) async throws -> Message? {
        try await write { [self] db in try applyExpansion(uid: uid, set: set, remove: remove, db) }
    }

    func message(uid: String) async throws -> Message? {
        try await read { [self] db in
            try Row.fetchOne(db, sql: "SELECT \(Self.messageColumns) FROM messages WHERE uid = ?", arguments: [uid]).map { self.message($0) }
        }
    }

    static func encodeExpansion(_ expansion: [String: String]) -> String? {
        guard !expansion.isEmpty, let data = try? JSONEncoder().encode(expansion) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    static func decodeExpansion(_ text: String?) -> [String: String] {
        guard let text, let map = try? JSONDecoder().decode([String: String].self, from: Data(text.utf8)) else { return [:] }
        return map
    }
}
