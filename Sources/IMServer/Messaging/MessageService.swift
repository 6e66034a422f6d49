import Foundation
import IMCore
import IMStore
import IMWire

/// What a recall did: the command sent to the conversation, and the notification content that now
/// stands in the message's place (nil when the message was deleted).
public struct RecallOutcome: Sendable, Equatable, Codable {
    var command: StoredMessage
    var notification: Data?
    var recallTime: Int64
}

/// Sending and delivering one-to-one and group messages.
///
/// A message is checked (target, object name, size, JSON, per-connection rate, and the blacklist of
/// a private peer or the membership and mutes of a group), committed through the `MessageLog`
/// (durable before the sender hears success), then written to the recipients' live sessions and to
/// the sender's other sessions. Offline sessions get it from the log on their next sync. STATUS
/// messages skip the log: online recipients only.
public final class MessageService: Sendable {
    private let log: MessageLog
    /// What must follow the fan-out of messages already committed waits here.
    var fanOut: FanOutOrder { log.fanOut }
    private let bus: any SessionBus
    private let clock: any WallClock
    private let apps: AppRegistry
    private let directory: UserDirectory
    private let words: SensitiveWordFilter
    private let rosters: GroupRosters
    private let ultraGroups: UltraGroupRosters
    private let chatrooms: ChatroomRouting
    private let callbacks: CallbackService?
    private let uids = MessageUIDGenerator()

    init(log: MessageLog, bus: any SessionBus, clock: any WallClock, apps: AppRegistry,
         directory: UserDirectory, words: SensitiveWordFilter, rosters: GroupRosters, ultraGroups: UltraGroupRosters,
         chatrooms: ChatroomRouting, callbacks: CallbackService? = nil) {
        self.log = log
        self.callbacks = callbacks
        self.ultraGroups = ultraGroups
        self.chatrooms = chatrooms
        self.rosters = rosters
        self.bus = bus
        self.clock = clock
        self.apps = apps
        self.directory = directory
        self.words = words
    }

    /// Handles SEND_MESSAGE from a session.
    func send(_ request: Im_SendMessageRequest, from session: ClientSession) async throws -> Im_SendMessageReply {
        // The app's settings looked up once per message, and read through `config`'s stored
        // properties (the dynamic members would copy a whole area for one value).
        let settings = apps.settings(appId: session.appId)
        let message = try validate(request, from: session, multiDeviceSync: settings.config.messaging.multiDeviceSyncEnabled)
        let perSecond = settings.config.session.clientSendsPerSecond
        guard session.admitSend(now: clock.nowMilliseconds(), perSecond: perSecond) else {
            throw IMError(.sendRateTooHigh, "more than \(perSecond) messages per second from this client: wait a second before sending again, or send in bulk through the Server API")
        }
        if message.conversationType == .chatroom {
            return try await sendToChatroom(message, from: session)
        }
        if message.conversationType == .ultraGroup {
            let roster = try await ultraGroups.checkSender(appId: message.appId, groupId: message.targetId, channelId: message.channelId,
                                                           userId: message.senderId, now: clock.nowMilliseconds())
            if let outsider = message.directedUserIds.first(where: { roster.members[$0] == nil }) {
                throw IMError(.invalidParameter, "user \(outsider) is not a member of ultra group \(message.targetId): a directional message goes to members only")
            }
        } else if message.conversationType == .group {
            let roster = try await rosters.checkSender(appId: message.appId, groupId: message.targetId, userId: message.senderId,
                                                       now: clock.nowMilliseconds())
            if let outsider = message.directedUserIds.first(where: { roster.members[$0] == nil }) {
                throw IMError(.invalidParameter, "user \(outsider) is not a member of group \(message.targetId): a directional message goes to members only")
            }
        } else {
            try await directory.checkPrivateChatMute(appId: message.appId, sender: message.senderId)
            try await directory.checkPrivateMessage(appId: message.appId, from: message.senderId, to: message.targetId)
        }
        let sent = try await send(message, origin: session.origin, session: session)
        var reply = Im_SendMessageReply()
        reply.messageUid = sent.uid
        reply.sentTime = sent.sentTime
        reply.seq = sent.seq
        return reply
    }

    /// A chatroom message: filtered for sensitive words, then through the room's checks and intake
    /// quota. A message over the quota is answered as sent but marked discarded.
    private func sendToChatroom(_ message: StoredMessage, from session: ClientSession) async throws -> Im_SendMessageReply {
        var reply = Im_SendMessageReply()
        let (message, held) = try await moderate(message, session: session)
        guard !held else {
            reply.sentTime = message.sentTime
            reply.messageUid = message.uid
            return reply
        }
        let (sent, discarded) = try await chatrooms.send(message, from: session)
        reply.messageUid = sent.uid
        reply.sentTime = sent.sentTime
        reply.discarded = discarded
        return reply
    }

    /// Filters, stores and delivers one checked message. A STATUS message is delivered to online
    /// sessions only; a message the app's moderation holds back (a blocking sensitive word, the
    /// message callback's refusal) is answered as sent but neither stored nor delivered, as
    /// RongCloud answers it.
    /// - Parameter session: the sender's session, for the blocked-message notice.
    func send(_ message: StoredMessage, origin: Origin, session: ClientSession? = nil) async throws -> StoredMessage {
        var (message, held) = try await moderate(message, session: session)
        // Answered as sent, with the uid its notice and routing name.
        guard !held else { return message }
        if message.flags.contains(.status) {
            message.sentTime = clock.nowMilliseconds()
            message.uid = uids.next(milliseconds: message.sentTime)
            // Behind the fan-out of every message committed before it (a status skips the log).
            await fanOut.behindCommitted()
            await bus.deliver(message, origin: origin)
            return message
        }
        return try await log.append(message, origin: origin).message
    }

    /// The app's moderation, in RongCloud's order: its sensitive words, then its message callback.
    /// Returns the message to deliver (words replaced, the callback's replacements applied; a
    /// reviewed message keeps the uid its review named), or the message held back with its uid and
    /// time (then routed if the app routes blocked messages, and its sender told if the app asks).
    private func moderate(_ message: StoredMessage, session: ClientSession?) async throws -> (message: StoredMessage, held: Bool) {
        var message = message
        switch try await words.apply(appId: message.appId, objectName: message.objectName, content: message.content) {
        case .block:
            message.sentTime = clock.nowMilliseconds()
            message.uid = uids.next(milliseconds: message.sentTime)
            await callbacks?.held(message, by: .customSensitiveWord, extra: "", session: session)
            return (message, true)
        case .deliver(let content):
            if content != message.content { message.hadWordReplaced = true }
            message.content = try Self.checkFiltered(content)
        }
        guard let callbacks, !message.flags.contains(.status) else { return (message, false) }
        switch await callbacks.review(message, clientIp: session?.clientAddress ?? "") {
        case .deliver(let reviewed):
            return (reviewed, false)
        case .block(let asked, let extra):
            await callbacks.held(asked, by: .messageCallback, extra: extra, session: session)
            return (asked, true)
        }
    }

    /// A client's content against the content rule: 30016 when too large, 33003 when not an object.
    static func checkContent(_ content: Data) throws {
        switch MessageContentRule.violation(of: content) {
        case nil: return
        case .tooLarge?: throw IMError(.messageTooLarge, MessageContentRule.message(.tooLarge(bytes: content.count)))
        case .notAnObject?: throw IMError(.invalidParameter, MessageContentRule.message(.notAnObject))
        }
    }

    /// Content after the app's sensitive-word replacements, which may be longer than the words they
    /// replace: it must still fit the 128 KB limit.
    static func checkFiltered(_ content: Data) throws -> Data {
        guard content.count <= MessageLimits.maxContentBytes else {
            throw IMError(.messageTooLarge, "with the app's sensitive-word replacements the content is \(content.count) bytes; the limit is 128 KB (\(MessageLimits.maxContentBytes) bytes)")
        }
        return content
    }

    /// Sends one message per recipient on behalf of `message.senderId` (the Server API's private,
    /// system and status publish): recipients a check refuses (blacklist with `verifyBlacklist`)
    /// are skipped. Returns the sent message of each recipient that got one, in recipient order.
    func publish(_ message: StoredMessage, to recipients: [String], contents: [Data]? = nil, pushContents: [String]? = nil,
                 pushData: [String]? = nil, verifyBlacklist: Bool) async throws -> [StoredMessage] {
        var prepared: [StoredMessage] = []
        prepared.reserveCapacity(recipients.count)
        for (index, recipient) in recipients.enumerated() {
            if verifyBlacklist {
                do {
                    try await directory.checkPrivateMessage(appId: message.appId, from: message.senderId, to: recipient)
                } catch let error as IMError where error.code == .rejectedByBlacklist || error.code == .notInWhitelist {
                    continue
                }
            }
            var copy = message
            copy.targetId = recipient
            copy.conversationKey = message.conversationType == .system
                ? systemConversationKey(sender: message.senderId, recipient: recipient)
                : privateConversationKey(message.senderId, recipient)
            if let contents { copy.content = contents[index] }
            if let pushContents, index < pushContents.count { copy.pushContent = pushContents[index] }
            if let pushData, index < pushData.count { copy.pushData = pushData[index] }
            prepared.append(copy)
        }
        return try await withThrowingTaskGroup(of: (Int, StoredMessage).self) { group in
            for (index, item) in prepared.enumerated() {
                group.addTask { (index, try await self.send(item, origin: .serverAPI)) }
            }
            var sent = [StoredMessage?](repeating: nil, count: prepared.count)
            for try await (index, message) in group { sent[index] = message }
            return sent.compactMap { $0 }
        }
    }

    /// Stores one message every user of the app receives (the Server API broadcast) and delivers it
    /// to everyone online.
    func broadcast(_ message: StoredMessage) async throws -> StoredMessage {
        var message = message
        message.targetId = StoredMessage.everyone
        message.conversationKey = systemConversationKey(sender: message.senderId, recipient: StoredMessage.everyone)
        message.includeSender = false
        return try await send(message, origin: .serverAPI)
    }

    /// Recalls a stored message (the Server API's /message/recall.json, and clients within the
    /// recall window): its content is replaced by a recall notification (`RC:RcNtf`) or, with
    /// `delete`, removed; an `RC:RcCmd` command goes to both sides of the conversation (for a
    /// directional group message, to its members), online now or at their next sync.
    func recall(appId: Int64, operatorId: String, type: ConversationType, targetId: String, uid: String,
                sentTime: Int64?, isAdmin: Bool, delete: Bool, extra: String?, pushContent: String = "",
                window: Int64? = nil, origin: Origin, channelId: String = "") async throws -> RecallOutcome {
        guard let original = try await log.storedMessage(appId: appId, uid: uid),
              original.conversationType == type,
              original.objectName != RecallNotificationMessage.objectName, original.isInHistory,
              sentTime.map({ $0 == original.sentTime }) ?? true else {
            throw IMError(.recallParameterInvalid, "no recallable \(type) message \(uid)\(sentTime.map { " sent at \($0)" } ?? ""): check messageUID, sentTime and conversationType")
        }
        let expectedKey: String
        switch type {
        case .system: expectedKey = systemConversationKey(sender: operatorId, recipient: targetId)
        case .group: expectedKey = groupConversationKey(targetId)
        case .ultraGroup: expectedKey = ultraGroupConversationKey(targetId, UltraGroupLimits.effectiveChannel(channelId))
        default: expectedKey = privateConversationKey(operatorId, targetId)
        }
        guard isAdmin || (original.senderId == operatorId && original.conversationKey == expectedKey) else {
            throw IMError(.recallParameterInvalid, "message \(uid) was not sent by \(operatorId) to \(targetId): only its sender can recall it (or pass isAdmin=1)")
        }
        let now = clock.nowMilliseconds()
        if let window, now - original.sentTime > window {
            throw IMError(.recallParameterInvalid, "message \(uid) was sent \((now - original.sentTime) / 1000) s ago; messages can be recalled for \(window / 1000) s after sending")
        }
        var notification: Data?
        if delete {
            try await log.deleteStoredMessage(appId: appId, uid: uid)
        } else {
            let content = try RecallNotificationMessage(operatorId: operatorId, recallTime: now, originalObjectName: original.objectName,
                                                        isAdmin: isAdmin, isDelete: false, extra: extra).encode()
            try await log.replaceStoredMessage(appId: appId, uid: uid, objectName: RecallNotificationMessage.objectName, content: content)
            // Ultra group devices away learn of it from their next summary (there is no offline sync).
            if type == .ultraGroup { try await log.markModified(appId: appId, uid: uid, content: content, at: now) }
            notification = content
        }
        let command = RecallCommandMessage(messageUId: uid, conversationType: type.rawValue, targetId: original.targetId,
                                           sentTime: original.sentTime, isAdmin: isAdmin ? 1 : 0, isDelete: delete ? 1 : 0, extra: extra)
        let recall = StoredMessage(
            appId: appId, conversationType: type, conversationKey: original.conversationKey,
            targetId: original.targetId, senderId: original.senderId, objectName: RecallCommandMessage.objectName,
            content: try command.encode(), flags: .none, pushContent: pushContent,
            channelId: original.channelId, includeSender: true, directedUserIds: original.directedUserIds)
        return RecallOutcome(command: try await log.append(recall, origin: origin).message, notification: notification, recallTime: now)
    }

    /// Replaces the content of a private or group message for its sender (the Server API's
    /// `/message/private/modify.json` and `/message/group/modify.json`): same uid, time and type;
    /// the stored message and cloud history show the new content, and an `RC:MsgModifyCmd` command
    /// carries it to every device of the conversation, online now or at its next sync. 20116 for a
    /// message that is not the sender's, not of this conversation, not kept in history, recalled,
    /// or asked to change its type.
    func modify(appId: Int64, senderId: String, type: ConversationType, targetId: String, uid: String, objectName: String?,
                content: Data, origin: Origin) async throws -> StoredMessage {
        try Self.checkContent(content)
        let key = type == .group ? groupConversationKey(targetId) : privateConversationKey(senderId, targetId)
        guard var original = try await log.storedMessage(appId: appId, uid: uid), original.conversationType == type,
              original.conversationKey == key else {
            throw IMError(.messageNotModifiable, "no \(type == .group ? "group" : "private") message \(uid) between \(senderId) and \(targetId): check msgUID, fromUserId and the target")
        }
        guard original.senderId == senderId else {
            throw IMError(.messageNotModifiable, "message \(uid) was sent by another user: only its sender's modification is accepted")
        }
        try Self.checkModifiable(original)
        if let objectName, !objectName.isEmpty, objectName != original.objectName {
            throw IMError(.messageNotModifiable, "message \(uid) is a \(original.objectName); a modification keeps the type, got \(objectName)")
        }
        let content = try await words.modifiedContent(appId: appId, objectName: original.objectName, content: content)
        let now = clock.nowMilliseconds()
        let mentions = type == .group ? MentionedInfo.of(content: content) : nil
        try await log.markModified(appId: appId, uid: uid, content: content, mentions: mentions, at: now)
        original.content = content
        let command = MessageModifyCommand(messageUId: uid, conversationType: type.rawValue, targetId: original.targetId,
                                           objectName: original.objectName, content: String(decoding: content, as: UTF8.self),
                                           modifiedTime: now)
        let notice = StoredMessage(
            appId: appId, conversationType: type, conversationKey: original.conversationKey,
            targetId: original.targetId, senderId: original.senderId, objectName: MessageModifyCommand.objectName,
            content: try command.encode(), flags: .none, includeSender: true, directedUserIds: original.directedUserIds)
        _ = try await log.append(notice, origin: origin)
        return original
    }

    /// 20116 for a message that is recalled or not kept in history: there is nothing to modify.
    static func checkModifiable(_ message: StoredMessage) throws {
        guard message.isInHistory, message.objectName != RecallNotificationMessage.objectName else {
            throw IMError(.messageNotModifiable, "message \(message.uid) is \(message.objectName == RecallNotificationMessage.objectName ? "recalled" : "not kept in history"): it cannot be modified")
        }
    }

    /// Object names only the server sends: a client forging one could rewrite others' messages.
    static let serverOnlyObjectNames: Set<String> = [
        RecallCommandMessage.objectName, MessageModifyCommand.objectName, RecallNotificationMessage.objectName, ExpansionChangeMessage.objectName,
        ReadReceiptObjectNames.request, ChatroomKVNotificationMessage.objectName,
    ]

    private func validate(_ request: Im_SendMessageRequest, from session: ClientSession, multiDeviceSync: Bool) throws -> StoredMessage {
        guard let type = ConversationType(rawValue: Int(request.conversationType)) else {
            throw IMError(.invalidParameter, "unknown conversation type \(request.conversationType)")
        }
        // A read status may be about a system conversation; it goes to the user's own devices.
        let readStatus = request.objectName == SyncReadStatusMessage.objectName
        if type == .system && !readStatus {
            throw IMError(.systemConversationNotWritable, "system conversations cannot be replied to: only the app server writes to them, through the Server API (/message/system/publish.json, /message/broadcast.json, /push.json)")
        }
        guard type == .private || type == .group || type == .chatroom || type == .ultraGroup || (readStatus && type == .system) else {
            throw IMError(.invalidParameter, "conversation type \(type) cannot be sent to by this server yet; private (1), group (3), chatroom (4) and ultra group (10) conversations are supported")
        }
        if type == .ultraGroup, !request.channelID.isEmpty, !UltraGroupLimits.isValidChannelId(request.channelID) {
            throw IMError(.ultraGroupParameterInvalid, "channel id \(TextLength.quoted(request.channelID)) is invalid: use 1 to \(UltraGroupLimits.maxChannelIdLength) letters and digits, or none for \(UltraGroupLimits.defaultChannelId)")
        }
        if type == .chatroom, !ChatroomID.isValid(request.targetID) {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(request.targetID)) is invalid: use \(UserID.rule)")
        }
        guard UserID.isValid(request.targetID) else {
            throw IMError(.invalidParameter, "targetId \(TextLength.quoted(request.targetID)) is not a valid \(type == .group ? "group" : type == .chatroom ? "chatroom" : "user") id: use \(UserID.rule)")
        }
        if type == .chatroom {
            guard !readStatus else { throw IMError(.invalidParameter, "chatrooms have no read status") }
            guard !request.canIncludeExpansion, request.expansion.isEmpty else {
                throw IMError(.messageNotExpandable, "chatroom messages cannot carry extensions: send without canIncludeExpansion")
            }
        }
        if !request.directedUserIds.isEmpty {
            guard type == .group || type == .ultraGroup else {
                throw IMError(.invalidParameter, "directional messages are sent to groups and ultra groups; a private message already has one recipient")
            }
            guard request.directedUserIds.count <= GroupLimits.maxDirectedUsers else {
                throw IMError(.invalidParameter, "a directional message names at most \(GroupLimits.maxDirectedUsers) members, got \(request.directedUserIds.count)")
            }
            if let bad = request.directedUserIds.first(where: { !UserID.isValid($0) }) {
                throw IMError(.invalidParameter, "directional recipient \(TextLength.quoted(bad)) is not a valid user id")
            }
        }
        try MessageFieldLimits.check(objectName: request.objectName, pushContent: request.pushContent, pushData: request.pushData)
        try Self.checkContent(request.content)
        let pushConfig = try MessagePushConfig.decode(request.pushConfig)
        try pushConfig?.validate()
        guard !Self.serverOnlyObjectNames.contains(request.objectName) else {
            throw IMError(.invalidParameter, "\(request.objectName) messages are sent by the server only: use recallMessage, updateMessageExpansion or sendReadReceiptRequest")
        }
        if !request.expansion.isEmpty {
            guard request.canIncludeExpansion else {
                throw IMError(.messageNotExpandable, "the message carries extensions but canIncludeExpansion is off: set it to send extensions")
            }
            try ExpansionLimits.check(set: request.expansion, remove: [])
        }
        guard request.clientMessageID.utf8.count <= 64 else {
            throw IMError(.invalidParameter, "clientMessageId must be at most 64 bytes")
        }
        if readStatus {
            // A read status goes to the user's own devices only, whatever conversation it is about.
            return StoredMessage(
                appId: session.appId, conversationType: .private, conversationKey: privateConversationKey(session.userId, session.userId),
                targetId: session.userId, senderId: session.userId, objectName: request.objectName, content: request.content,
                flags: .none, clientMessageId: request.clientMessageID)
        }
        let key: String
        // A channel is an ultra group's; other conversations have none, whatever the client sent.
        var channelId = ""
        var mentions: MentionedInfo?
        switch type {
        case .group: key = groupConversationKey(request.targetID)
        case .chatroom: key = chatroomConversationKey(request.targetID)
        case .ultraGroup:
            channelId = UltraGroupLimits.effectiveChannel(request.channelID)
            key = ultraGroupConversationKey(request.targetID, channelId)
            mentions = MentionedInfo.of(content: request.content)
        default: key = privateConversationKey(session.userId, request.targetID)
        }
        var message = StoredMessage(
            appId: session.appId, conversationType: type, conversationKey: key,
            targetId: request.targetID, senderId: session.userId, objectName: request.objectName,
            content: request.content, flags: PersistentFlag(rawValue: request.flags & StoredMessage.clientFlagBits),
            clientMessageId: request.clientMessageID, pushContent: request.pushContent,
            pushData: request.pushData, disableNotification: request.disableNotification,
            canIncludeExpansion: request.canIncludeExpansion, expansion: request.expansion,
            channelId: channelId, directedUserIds: Array(Set(request.directedUserIds)).sorted())
        message.mentions = mentions
        message.pushConfig = pushConfig?.encoded() ?? Data()
        message.senderPlatform = session.platform
        message.disableUpdateLastMessage = request.disableUpdateLastMessage
        // Without multi-device sync a message stays on the device that sent it.
        message.includeSender = multiDeviceSync
        return message
    }
}
