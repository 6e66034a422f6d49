import Foundation
import IMCore
import IMWire

/// Sending and delivering one-to-one messages.
///
/// A message is checked (target, object name, size, JSON, per-connection rate), committed through
/// the `MessageLog` (durable before the sender hears success), then written to the recipient's live
/// sessions and to the sender's other sessions. Offline sessions get it from the log on their next
/// sync. STATUS messages skip the log: online recipients only.
public final class MessageService: Sendable {
    private let log: MessageLog
    private let delivery: Delivery
    private let clock: any WallClock
    private let config: ServerConfig
    private let uids = MessageUIDGenerator()

    init(log: MessageLog, delivery: Delivery, clock: any WallClock, config: ServerConfig) {
        self.log = log
        self.delivery = delivery
        self.clock = clock
        self.config = config
    }

    /// Handles SEND_MESSAGE from a session.
    func send(_ request: Im_SendMessageRequest, from session: ClientSession) async throws -> Im_SendMessageReply {
        let message = try validate(request, from: session)
        guard session.admitSend(now: clock.nowMilliseconds(), perSecond: config.clientSendsPerSecond) else {
            throw IMError(.sendRateTooHigh, "more than \(config.clientSendsPerSecond) messages per second from this client: wait a second before sending again, or send in bulk through the Server API")
        }
        let sent: StoredMessage
        if message.flags.contains(.status) {
            var status = message
            status.sentTime = clock.nowMilliseconds()
            status.uid = uids.next(milliseconds: status.sentTime)
            delivery.deliver(status, origin: session.id)
            sent = status
        } else {
            sent = try await log.append(message, origin: session.id).message
        }
        var reply = Im_SendMessageReply()
        reply.messageUid = sent.uid
        reply.sentTime = sent.sentTime
        reply.seq = sent.seq
        return reply
    }

    private func validate(_ request: Im_SendMessageRequest, from session: ClientSession) throws -> StoredMessage {
        guard let type = ConversationType(rawValue: Int(request.conversationType)) else {
            throw IMError(.invalidParameter, "unknown conversation type \(request.conversationType)")
        }
        guard type == .private else {
            throw IMError(.invalidParameter, "conversation type \(type) cannot be sent to by this server yet; only private (1) conversations are supported")
        }
        guard UserID.isValid(request.targetID) else {
            throw IMError(.invalidParameter, "targetId '\(request.targetID)' is not a valid user id: use 1 to 64 bytes of letters, digits and + = - _ |")
        }
        guard !request.objectName.isEmpty, request.objectName.count <= MessageLimits.maxObjectNameLength else {
            throw IMError(.invalidParameter, "objectName must be 1 to \(MessageLimits.maxObjectNameLength) characters, got '\(request.objectName)'")
        }
        guard request.content.count <= MessageLimits.maxContentBytes else {
            throw IMError(.messageTooLarge, "message content is \(request.content.count) bytes; the limit is 128 KB (\(MessageLimits.maxContentBytes) bytes): send large data as a media file")
        }
        guard (try? JSONSerialization.jsonObject(with: request.content)) is [String: Any] else {
            throw IMError(.invalidParameter, "message content must be a JSON object")
        }
        guard request.clientMessageID.utf8.count <= 64 else {
            throw IMError(.invalidParameter, "clientMessageId must be at most 64 bytes")
        }
        return StoredMessage(
            appId: session.appId, conversationType: type,
            conversationKey: privateConversationKey(session.userId, request.targetID),
            targetId: request.targetID, senderId: session.userId, objectName: request.objectName,
            content: request.content, flags: PersistentFlag(rawValue: request.flags),
            clientMessageId: request.clientMessageID, pushContent: request.pushContent,
            pushData: request.pushData, disableNotification: request.disableNotification,
            canIncludeExpansion: request.canIncludeExpansion, expansion: request.expansion,
            channelId: request.channelID)
    }
}
