import Foundation
import IMCore
import IMLib

/// One message as a conversation screen shows it.
public struct MessageItem: Sendable, Identifiable {
    public var message: Message
    /// The sender's display name (group card, user info, or the id).
    public var senderName: String
    /// The message as one text: the body of a text, a labelled line for media, the recall notice.
    public var text: String
    /// The quoted message's sender and digest, for a quote reply.
    public var quote: (sender: String, text: String)?
    /// The send and read state of a sent message: "sending", "failed", "✓ read", "2 read", "unread".
    public var status: String?
    /// A recall notice of this user's whose text can still be put back into the input.
    public var canReedit: Bool
    /// Appended to the screen only (`appendAndDisplayMessage`): not stored, gone on the next open.
    public var isUIOnly: Bool
    public var isSelected: Bool

    public var id: String { isUIOnly ? "ui-\(message.sentTime)-\(message.clientMessageId)" : "\(message.messageId)" }
}

/// The indicator above the messages when more are unread than fit on the screen
/// (`enableUnreadMessageIcon`): its count is shown above `unreadLabelThreshold`.
public struct UnreadAboveIndicator: Sendable, Equatable {
    public var count: Int
    public var showsCount: Bool
}

/// What a conversation screen draws.
public struct ConversationScreen: Sendable {
    public var title: String
    /// The loaded window, oldest first, with no gap.
    public var items: [MessageItem]
    /// Older messages remain in the local database.
    public var hasOlder: Bool
    public var unreadAbove: UnreadAboveIndicator?
    /// Messages that arrived while the user read higher up (`enableNewComingMessageIcon`).
    public var newBelow: Int
    /// The user shown as typing, if any.
    public var typingUserId: String?
    /// The message being quoted by the next send.
    public var quoting: MessageItem?
    public var isSelecting: Bool
    /// False for system conversations: "end users cannot reply", no input bar.
    public var canSend: Bool
    /// The quick phrases (private chats only).
    public var phrases: [String]
}

/// The actions a message's menu offers (RongCloud's long-press menu).
public enum MessageAction: String, Sendable, CaseIterable {
    case copy, delete, recall, quote, forward, select, requestReceipt
}

/// Events of a media send, for a progress display.
public enum KitMediaEvent: Sendable, Equatable {
    case progress(messageId: Int64, percent: Int)
    case sent(messageId: Int64)
    case failed(messageId: Int64, code: Int)
    case canceled(messageId: Int64)
}

/// The media types the kit sends from a file.
public enum KitMediaKind: String, Sendable, CaseIterable {
    case image, gif, file, voice, video
}

/// A conversation screen's behaviour (RongCloud's `RCConversationViewController`): gap-free paging
/// while messages arrive, the send pipeline with its hooks, recall with re-edit, typing status with
/// its 6 s throttle and the peer's timeout, read receipts (private and group), quote, multi-select,
/// forward one by one and combined, @ mentions, the unread-jump and new-message indicators, local
/// and UI-only inserts and quick phrases. Every time rule reads the kit's clock.
public actor ConversationModel {
    public nonisolated let conversation: ConversationIdentifier
    private let kit: IMKit
    private var items: [MessageItem] = []
    private var hasOlder = true
    private var title = ""
    private var unreadAbove: UnreadAboveIndicator?
    private var unreadAtOpen = 0
    private var atBottom = true
    private var newBelow = 0
    private var typing: (userId: String, until: Int64)?
    private var quoting: MessageItem?
    private var selecting = false
    private var selected: Set<String> = []
    private var listening: [Task<Void, Never>] = []
    private var typingExpiry: Task<Void, Never>?
    private let signal = Broadcaster<ConversationScreen>()
    private let mediaSignal = Broadcaster<KitMediaEvent>()
    private var reedits: [Int64: (text: String, recalledAt: Int64)] = [:]
    /// The newest received message reported read (receipt and the other devices), so a message
    /// arriving on the open screen is reported once, and a burst of them together.
    private var reportedReadTime: Int64 = 0
    private var pendingRead: Task<Void, Never>?

    /// `willSendMessage`: sees each content before it is sent and may change it; nil cancels the send.
    public var willSend: (@Sendable (any MessageContent) -> (any MessageContent)?)?
    /// `didSendMessage`: 0 for success, else the error code.
    public var didSend: (@Sendable (Int, any MessageContent) -> Void)?
    /// `willAppendAndDisplayMessage`: may change a message before it joins the screen; nil hides it.
    public var willAppend: (@Sendable (Message) -> Message?)?

    init(kit: IMKit, conversation: ConversationIdentifier) {
        self.kit = kit
        self.conversation = conversation
    }

    deinit {
        listening.forEach { $0.cancel() }
        typingExpiry?.cancel()
    }

    public func setHooks(willSend: (@Sendable (any MessageContent) -> (any MessageContent)?)? = nil,
                         didSend: (@Sendable (Int, any MessageContent) -> Void)? = nil,
                         willAppend: (@Sendable (Message) -> Message?)? = nil) {
        self.willSend = willSend
        self.didSend = didSend
        self.willAppend = willAppend
    }

    private var client: IMClient { kit.client }
    private var me: String { kit.currentUserId ?? "" }
    private var groupId: String? { conversation.type == .group ? conversation.targetId : nil }

    // MARK: screen

    /// Screens as they change.
    public func screens() -> AsyncStream<ConversationScreen> { signal.stream() }

    /// Media send progress.
    public func mediaEvents() -> AsyncStream<KitMediaEvent> { mediaSignal.stream() }

    /// The screen as it is now.
    public func screen() -> ConversationScreen {
        let config = kit.config
        var typingUser: String?
        if let typing, typing.until > kit.clock.nowMilliseconds() { typingUser = typing.userId }
        return ConversationScreen(
            title: title, items: items.map { item in
                var item = item
                item.isSelected = selected.contains(item.id)
                if item.message.content is RecallNotificationMessage { item.canReedit = reeditText(item) != nil }
                return item
            },
            hasOlder: hasOlder, unreadAbove: config.enableUnreadMessageIcon ? unreadAbove : nil,
            newBelow: config.enableNewComingMessageIcon ? newBelow : 0, typingUserId: typingUser, quoting: quoting,
            isSelecting: selecting, canSend: conversation.type != .system,
            phrases: conversation.type == .private ? config.commonPhrases : [])
    }

    private func publish() { signal.yield(screen()) }

    /// Opens the screen: the newest page from the local database (enough to reach the first unread
    /// message when the unread fit in `visibleLines`), the unread-jump indicator when more are
    /// unread than fit, the conversation marked read (with a read receipt and the other devices
    /// told, as configured), and the events that keep it current.
    @discardableResult
    public func open(visibleLines: Int = 20) async throws -> ConversationScreen {
        kit.setOpenConversation(conversation)
        title = await kit.info.title(of: conversation.type, targetId: conversation.targetId)
        let existing = try await client.getConversation(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId)
        unreadAtOpen = existing?.unreadMessageCount ?? 0
        newArrivalsSinceOpen = 0
        items = []
        hasOlder = true
        try await loadPage()
        if unreadAtOpen > visibleLines {
            let threshold = kit.config.unreadLabelThreshold
            unreadAbove = UnreadAboveIndicator(count: unreadAtOpen, showsCount: unreadAtOpen > threshold)
        } else {
            unreadAbove = nil
        }
        atBottom = true
        newBelow = 0
        if listening.isEmpty { startListening() }
        await markRead()
        publish()
        return screen()
    }

    /// Leaves the screen: what arrived is reported read, and notifications for this conversation resume.
    public func close() async {
        if let pending = pendingRead {
            pending.cancel()
            pendingRead = nil
            await markRead()
        }
        kit.setOpenConversation(nil)
        listening.forEach { $0.cancel() }
        listening = []
        typingExpiry?.cancel()
    }

    /// Loads the next older page; returns how many messages were added (0: none left).
    @discardableResult
    public func loadOlder() async throws -> Int {
        let added = try await loadPage()
        publish()
        return added
    }

    @discardableResult
    private func loadPage() async throws -> Int {
        let oldest = items.first { !$0.isUIOnly }?.message.messageId ?? -1
        let size = kit.config.historyPageSize
        let page = try await client.getHistoryMessages(conversation.type, targetId: conversation.targetId,
                                                       channelId: conversation.channelId, oldestMessageId: oldest, count: size)
        if page.count < size { hasOlder = false }
        let known = Set(items.map(\.message.messageId))
        var added: [MessageItem] = []
        for message in page.reversed() where !known.contains(message.messageId) {
            if let item = await item(for: message) { added.append(item) }
        }
        items.insert(contentsOf: added, at: 0)
        return added.count
    }

    /// Tells the model whether the user is at the bottom of the messages: there, new messages scroll
    /// into view; higher up, they raise the new-message indicator instead.
    public func setAtBottom(_ value: Bool) {
        atBottom = value
        if value { newBelow = 0 }
        publish()
    }

    /// The unread-jump action: loads back to the first message unread at open and returns its index.
    @discardableResult
    public func jumpToFirstUnread() async throws -> Int? {
        defer {
            unreadAbove = nil
            publish()
        }
        guard unreadAtOpen > 0 else { return nil }
        while countReceivedSinceOpen() < unreadAtOpen, hasOlder {
            if try await loadPage() == 0 { break }
        }
        let received = items.indices.filter { items[$0].message.direction == .receive && !items[$0].isUIOnly && items[$0].message.flags.contains(.isCounted) }
        let offset = max(0, received.count - unreadAtOpen - newArrivalsSinceOpen)
        atBottom = false
        return offset < received.count ? received[offset] : received.first
    }

    private var newArrivalsSinceOpen = 0

    private func countReceivedSinceOpen() -> Int {
        items.filter { $0.message.direction == .receive && !$0.isUIOnly && $0.message.flags.contains(.isCounted) }.count - newArrivalsSinceOpen
    }

    /// The new-message action: back to the bottom.
    public func scrollToBottom() {
        setAtBottom(true)
    }

    // MARK: receiving

    private func startListening() {
        let received = client.receivedMessages()
        let recalled = client.recalledMessages()
        let typingEvents = client.typingStatusUpdates()
        let privateReads = client.conversationReadReceipts()
        let groupReads = client.readReceiptEvents()
        let modified = client.messageModifications()
        let here = conversation
        listening = [
            Task { [weak self] in
                for await event in received where Self.same(event.message, here) { await self?.arrived(event.message) }
            },
            Task { [weak self] in
                for await message in recalled where Self.same(message, here) { await self?.replace(message) }
            },
            Task { [weak self] in
                for await message in modified where Self.same(message, here) { await self?.replace(message) }
            },
            Task { [weak self] in
                for await status in typingEvents where status.conversationType == here.type && status.targetId == here.targetId {
                    await self?.peerTyping(status.userId)
                }
            },
            Task { [weak self] in
                for await receipt in privateReads where receipt.conversationType == here.type && receipt.targetId == here.targetId {
                    await self?.refreshSent()
                }
            },
            Task { [weak self] in
                for await event in groupReads {
                    if case .response(let type, let targetId, _, _) = event, type == here.type, targetId == here.targetId {
                        await self?.refreshSent()
                    }
                }
            },
        ]
    }

    static func same(_ message: Message, _ conversation: ConversationIdentifier) -> Bool {
        message.conversationType == conversation.type && message.targetId == conversation.targetId
            && (conversation.type != .ultraGroup || message.channelId == conversation.channelId)
    }

    private func arrived(_ message: Message) async {
        // Statuses (typing itself) and commands are not shown and do not end "typing…".
        guard message.flags.contains(.isPersisted), message.messageId > 0 else { return }
        if message.senderUserId == typing?.userId { typing = nil }
        guard !items.contains(where: { $0.message.messageId == message.messageId && message.messageId > 0 }),
              let item = await item(for: message) else { return }
        insertInOrder(item)
        if message.direction == .receive && message.flags.contains(.isCounted) {
            newArrivalsSinceOpen += 1
            if !atBottom { newBelow += 1 }
        }
        scheduleRead()
        publish()
    }

    /// Keeps the window ordered by time, then local id, so a message that arrives while an older
    /// page loads lands in its place: no gap and no duplicate.
    private func insertInOrder(_ item: MessageItem) {
        let key = (item.message.sentTime, item.message.messageId)
        let index = items.lastIndex { ($0.message.sentTime, $0.message.messageId) <= key }.map { $0 + 1 } ?? 0
        items.insert(item, at: index)
    }

    private func replace(_ message: Message) async {
        let index = items.firstIndex(where: {
            (!message.messageUId.isEmpty && $0.message.messageUId == message.messageUId) || ($0.message.messageId == message.messageId && message.messageId > 0)
        })
        if let index, let item = await item(for: message) { items[index] = item }
        var changed = index != nil
        if message.content is RecallNotificationMessage, !message.messageUId.isEmpty {
            // Quotes of a recalled message no longer show its text (see `item(for:)`), even when the
            // original itself is not in the window.
            kit.noteRecalled(message.messageUId)
            for quoting in items.indices where (items[quoting].message.content as? ReferenceMessage)?.referMsgUid == message.messageUId {
                if let fresh = await item(for: items[quoting].message) { items[quoting] = fresh }
                changed = true
            }
        }
        if changed { publish() }
    }

    private func refreshSent() async {
        let ids = items.filter { $0.message.direction == .send && !$0.isUIOnly }.map(\.message.messageId)
        guard let fresh = try? await client.getMessages(ids: ids) else { return }
        for index in items.indices {
            if let message = fresh[items[index].message.messageId], let item = await item(for: message) { items[index] = item }
        }
        publish()
    }

    private func peerTyping(_ userId: String) {
        guard kit.config.enableTypingStatus, userId != me else { return }
        let until = kit.clock.nowMilliseconds() + Int64(kit.config.peerTypingTimeout) * 1000
        typing = (userId, until)
        typingExpiry?.cancel()
        let clock = kit.clock
        typingExpiry = Task { [weak self] in
            try? await clock.sleep(untilMilliseconds: until)
            guard !Task.isCancelled else { return }
            await self?.publish()
        }
        publish()
    }

    /// Messages arriving on the open screen are reported read together, a moment after the burst
    /// (a report is a signal to the server: one per message would spend the user's send rate).
    private func scheduleRead() {
        guard pendingRead == nil else { return }
        pendingRead = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(300))
            await self?.flushRead()
        }
    }

    private func flushRead() async {
        pendingRead = nil
        await markRead()
        publish()
    }

    /// Clears the unread count; with receipts on for this type tells the peer (private), answers
    /// receipt requests (group), and with `enableSyncReadStatus` tells the user's other devices;
    /// nothing is reported twice for the same newest message.
    private func markRead() async {
        guard kit.currentUserId != nil else { return }
        let config = kit.config
        _ = try? await client.clearMessagesUnreadStatus(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId)
        kit.localChanges.yield(conversation)
        let lastReceived = items.last { $0.message.direction == .receive && !$0.isUIOnly }?.message
        guard let lastReceived, lastReceived.sentTime > reportedReadTime else { return }
        reportedReadTime = lastReceived.sentTime
        if config.enabledReadReceiptConversationTypes.contains(conversation.type) {
            if conversation.type == .private {
                try? await client.sendReadReceiptMessage(.private, targetId: conversation.targetId, time: lastReceived.sentTime)
            } else if conversation.type == .group {
                let asked = items.map(\.message).filter { $0.direction == .receive && $0.readReceiptInfo.isReceiptRequestMessage && !$0.readReceiptInfo.hasRespond }
                if !asked.isEmpty {
                    try? await client.sendReadReceiptResponse(.group, targetId: conversation.targetId, messages: asked)
                    for index in items.indices where asked.contains(where: { $0.messageId == items[index].message.messageId }) {
                        items[index].message.readReceiptInfo.hasRespond = true
                    }
                }
            }
        }
        if config.enableSyncReadStatus, conversation.type != .chatroom, conversation.type != .ultraGroup {
            try? await client.syncConversationReadStatus(conversation.type, targetId: conversation.targetId, time: lastReceived.sentTime)
        }
    }

    // MARK: rendering

    private func item(for message: Message) async -> MessageItem? {
        var message = message
        if let willAppend {
            guard let changed = willAppend(message) else { return nil }
            message = changed
        }
        let sender = await kit.info.displayName(message.senderUserId, inGroup: groupId)
        let strings = kit.strings
        var quote: (String, String)?
        var text: String
        switch message.content {
        case let reference as ReferenceMessage:
            text = reference.content
            let quotedSender = await kit.info.displayName(reference.referMsgUserId, inGroup: groupId)
            let quotedContent = client.decodeContent(objectName: reference.referObjectName, data: reference.referencedContentData)
            // The rule for a quoted message recalled later: the quote keeps its sender but no longer
            // shows the snapshot it carries (a recall takes the text back everywhere).
            if quotedWasRecalled(reference.referMsgUid) {
                quote = (quotedSender, strings.quotedRecalled)
            } else {
                quote = (quotedSender, Digest.of(objectName: reference.referObjectName, content: quotedContent, senderUserId: reference.referMsgUserId,
                                                 currentUserId: me, senderName: quotedSender, strings: strings))
            }
        case let text0 as TextMessage:
            text = text0.content
        case let file as FileMessage:
            text = "\(strings.file(file.name)) (\(Self.size(file.size)))"
        case let voice as HQVoiceMessage:
            text = "\(strings.voice) \(voice.duration)\""
        case let sight as SightMessage:
            text = "\(strings.sight) \(sight.duration)\" (\(Self.size(sight.size)))"
        case let image as ImageMessage:
            text = image.imageUri.isEmpty ? strings.image : "\(strings.image) \(image.imageUri)"
        case let gif as GIFMessage:
            text = "\(strings.gif) GIF \(gif.width)×\(gif.height) (\(Self.size(gif.gifDataSize)))"
        case let location as LocationMessage:
            text = "\(strings.location) \(location.latitude),\(location.longitude) \(location.poi)"
        case let combine as CombineMessage:
            text = "\(strings.chatHistory) \(combine.title): " + combine.summaryList.joined(separator: " / ")
        default:
            text = Digest.of(message, currentUserId: me, senderName: sender, strings: strings)
        }
        var status: String?
        if message.direction == .send {
            switch message.sentStatus {
            case .sending: status = strings.sending
            case .failed: status = strings.failed
            case .canceled: status = strings.canceled
            case .read where conversation.type == .private: status = strings.read
            default:
                if conversation.type == .group, message.readReceiptInfo.isReceiptRequestMessage {
                    status = strings.readCount(message.readReceiptInfo.readerCount)
                } else if conversation.type == .private, kit.config.enabledReadReceiptConversationTypes.contains(.private),
                          message.sentStatus == .sent, message.flags.contains(.isCounted) {
                    status = strings.unread
                }
            }
        }
        return MessageItem(message: message, senderName: sender, text: text, quote: quote, status: status,
                           canReedit: false, isUIOnly: message.messageId == 0, isSelected: false)
    }

    /// Whether the quoted message was recalled: seen so on this screen, or in the kit's record of recalls.
    private func quotedWasRecalled(_ uid: String) -> Bool {
        guard !uid.isEmpty else { return false }
        if items.contains(where: { $0.message.messageUId == uid && $0.message.content is RecallNotificationMessage }) { return true }
        return kit.isRecalled(uid)
    }

    static func size(_ bytes: Int64) -> String {
        if bytes >= 1_048_576 { return String(format: "%.1f MB", Double(bytes) / 1_048_576) }
        if bytes >= 1024 { return "\(bytes / 1024) KB" }
        return "\(bytes) B"
    }

    // MARK: sending

    /// Sends a text through the pipeline: `willSend` (nil cancels), the quote being made, @ mentions
    /// (`mentions`: user ids, or `mentionAll`), then `didSend`. Returns the sent message, or nil
    /// when the hook canceled it.
    @discardableResult
    public func send(text: String, mentions: [String] = [], mentionAll: Bool = false) async throws -> Message? {
        var mentioned: MentionedInfo?
        if conversation.type == .group || conversation.type == .ultraGroup, kit.config.enableMessageMentioned {
            if mentionAll { mentioned = MentionedInfo(type: .all) }
            else if !mentions.isEmpty { mentioned = MentionedInfo(type: .users, userIdList: Array(Set(mentions)).sorted()) }
        }
        let content: any MessageContent
        if let quoted = quoting {
            content = try ReferenceMessage(content: text, quoting: Self.quotable(quoted.message), senderUserId: quoted.message.senderUserId,
                                           messageUId: quoted.message.messageUId, mentionedInfo: mentioned)
            quoting = nil
        } else {
            content = TextMessage(content: text, mentionedInfo: mentioned, user: await kit.info.currentUser)
        }
        _ = try? await client.clearTextMessageDraft(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId)
        return try await send(content)
    }

    /// The location action's "send location": a static location message with its place name.
    /// - Throws: `IMError` 33003 for a latitude outside -90...90 or a longitude outside -180...180.
    @discardableResult
    public func sendLocation(latitude: Double, longitude: Double, name: String) async throws -> Message? {
        guard LocationShareSession.isValid(latitude: latitude, longitude: longitude) else {
            throw IMError(.invalidParameter, "a location needs latitude -90...90 and longitude -180...180, not \(latitude),\(longitude)")
        }
        return try await send(LocationMessage(thumbnailBase64: "", latitude: latitude, longitude: longitude, poi: name,
                                              user: await kit.info.currentUser))
    }

    /// The location action's "share in real time" (one-to-one conversations only): joins the
    /// peer's sharing when it is incoming, else starts one whose start card (and its failure) shows
    /// on this screen.
    @discardableResult
    public func shareLocation() async throws -> LocationShareSession {
        let session = try kit.locationShare(conversation.type, targetId: conversation.targetId)
        try await session.startOrJoin(sendStart: { [weak self] content in try await self?.send(content) })
        return session
    }

    /// Stops this user's location sharing; the last one out leaves the "sharing ended" card here.
    public func stopSharingLocation() async throws {
        let session = try kit.locationShare(conversation.type, targetId: conversation.targetId)
        try await session.quit(sendEnd: { [weak self] content in try await self?.send(content) })
    }

    /// Sends any content through the pipeline (`willSend`, the screen, `didSend`).
    @discardableResult
    public func send(_ content: any MessageContent) async throws -> Message? {
        var content = content
        if let willSend {
            guard let changed = willSend(content) else { return nil }
            content = changed
        }
        do {
            let sent = try await sendOpened(content)
            didSend?(0, content)
            return sent
        } catch let error as SendMessageError {
            didSend?(error.code.rawValue, content)
            await placeSent(error.message)
            throw error
        } catch let error as IMError {
            didSend?(error.code.rawValue, content)
            throw error
        }
    }

    private func sendOpened<C: MessageContent>(_ content: C) async throws -> Message {
        let model = self
        let sent = try await client.sendMessage(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId,
                                                content: content, attached: { message in
            Task { await model.placeSent(message) }
        })
        await placeSent(sent)
        kit.localChanges.yield(conversation)
        return sent
    }

    /// Shows a message this device sends: first as "sending" (attached), then in its final state.
    private func placeSent(_ message: Message) async {
        guard let item = await item(for: message) else { return }
        if let index = items.firstIndex(where: { $0.message.messageId == message.messageId && !$0.isUIOnly }) {
            // The final state may have arrived first: never go back to "sending".
            if message.sentStatus == .sending, items[index].message.sentStatus != .sending { return }
            if items[index].message.sentTime == message.sentTime {
                items[index] = item
            } else {
                // Sent: its time is now the server's, which may place it elsewhere (the device's
                // clock is not the server's), so it moves to where a reload would put it.
                items.remove(at: index)
                insertInOrder(item)
            }
        } else {
            insertInOrder(item)
        }
        atBottom = true
        newBelow = 0
        publish()
    }

    /// Sends a file as a media message with progress (0-100) on `mediaEvents()`; a GIF over
    /// `gifMaxBytes` is refused (34003) before anything is stored, a missing file with 34018.
    @discardableResult
    public func sendMedia(path: String, kind: KitMediaKind) async throws -> Message {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard let size = (attributes?[.size] as? NSNumber)?.int64Value else {
            throw IMError(.mediaFileMissing, "no file at \(path): give the path of a readable file")
        }
        if kind == .gif, size > kit.config.gifMaxBytes {
            throw IMError(.gifTooLarge, "the GIF is \(size) bytes; the kit sends GIFs up to \(kit.config.gifMaxBytes) bytes")
        }
        switch kind {
        case .image: return try await sendMediaOpened(ImageMessage(localPath: path))
        case .gif: return try await sendMediaOpened(GIFMessage(localPath: path))
        case .file: return try await sendMediaOpened(FileMessage(localPath: path))
        case .voice: return try await sendMediaOpened(HQVoiceMessage(localPath: path))
        case .video: return try await sendMediaOpened(SightMessage(localPath: path))
        }
    }

    private func sendMediaOpened<C: MediaMessageContent>(_ content: C) async throws -> Message {
        var content: C = content
        if let willSend {
            guard let changed = willSend(content) as? C else {
                throw IMError(.invalidParameter, "the willSend hook canceled the media message")
            }
            content = changed
        }
        let signal = mediaSignal
        let model = self
        do {
            let sent = try await client.sendMediaMessage(conversation.type, targetId: conversation.targetId,
                                                         channelId: conversation.channelId, content: content, events: { event in
                switch event {
                case .attached(let message): Task { await model.placeSent(message) }
                case .progress(let percent, let message): signal.yield(.progress(messageId: message.messageId, percent: percent))
                }
            })
            signal.yield(.sent(messageId: sent.messageId))
            await placeSent(sent)
            didSend?(0, content)
            kit.localChanges.yield(conversation)
            return sent
        } catch let canceled as MediaSendCanceled {
            signal.yield(.canceled(messageId: canceled.message.messageId))
            await placeSent(canceled.message)
            throw canceled
        } catch let error as SendMessageError {
            signal.yield(.failed(messageId: error.message.messageId, code: error.code.rawValue))
            didSend?(error.code.rawValue, content)
            await placeSent(error.message)
            throw error
        }
    }

    /// Cancels a media send under way (`didCancelMessage`).
    @discardableResult
    public func cancelMedia(messageId: Int64) async -> Bool {
        await client.cancelSendMediaMessage(messageId: messageId)
    }

    /// Stores a message on this device and shows it (a local tip that stays).
    @discardableResult
    public func insertLocal(_ content: some MessageContent, incomingFrom sender: String? = nil) async throws -> Message {
        let message: Message
        if let sender {
            message = try await client.insertIncomingMessage(conversation.type, targetId: conversation.targetId, senderUserId: sender,
                                                             isRead: true, content: content)
        } else {
            message = try await client.insertOutgoingMessage(conversation.type, targetId: conversation.targetId, content: content)
        }
        if let item = await item(for: message) { insertInOrder(item) }
        kit.localChanges.yield(conversation)
        publish()
        return message
    }

    /// Shows a message on this screen only (`appendAndDisplayMessage`): not stored, gone when the
    /// screen opens again.
    public func appendUIOnly(_ content: some MessageContent) async {
        let message = Message(unsaved: content, conversationType: conversation.type, targetId: conversation.targetId,
                              channelId: conversation.channelId, senderUserId: me, time: kit.clock.nowMilliseconds())
        guard var item = await item(for: message) else { return }
        item.isUIOnly = true
        items.append(item)
        publish()
    }

    // MARK: input

    /// The input changed: a typing status goes to the peer of a private chat, at most one per 6 s
    /// (IMLib's throttle, on the kit's clock). Returns whether one was sent.
    @discardableResult
    public func inputChanged(_ text: String) async -> Bool {
        guard kit.config.enableTypingStatus, conversation.type == .private, !text.isEmpty else { return false }
        return (try? await client.sendTypingStatus(.private, targetId: conversation.targetId, typingContentType: TextMessage.objectName)) ?? false
    }

    /// Keeps what was typed but not sent (shown as "[Draft]" in the list).
    public func saveDraft(_ text: String) async {
        _ = try? await client.saveTextMessageDraft(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId, content: text)
        kit.localChanges.yield(conversation)
    }

    public func draft() async -> String? {
        try? await client.getTextMessageDraft(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId)
    }

    /// The members to pick from after "@" in a group, from the member provider, filtered by what
    /// follows the "@" (id or name); "@all" (everyone) first.
    public func mentionCandidates(matching query: String = "") async -> [(userId: String, name: String)] {
        guard conversation.type == .group || conversation.type == .ultraGroup, kit.config.enableMessageMentioned else { return [] }
        let members = await kit.info.members(ofGroup: conversation.targetId)
        var found: [(String, String)] = []
        let needle = query.lowercased()
        if needle.isEmpty || "all".hasPrefix(needle) || kit.strings.everyone.hasPrefix(needle) { found.append(("@all", kit.strings.everyone)) }
        for member in members where member != me {
            let name = await kit.info.displayName(member, inGroup: groupId)
            if needle.isEmpty || member.lowercased().hasPrefix(needle) || name.lowercased().hasPrefix(needle) { found.append((member, name)) }
        }
        return found
    }

    // MARK: message actions

    /// The menu for a message, by its type, direction and age: recall only on this user's sent
    /// message within `maxRecallDuration`; quote only on quotable types.
    public func actions(for item: MessageItem) -> [MessageAction] {
        var actions: [MessageAction] = []
        if item.message.content is TextMessage || item.message.content is ReferenceMessage { actions.append(.copy) }
        actions.append(.delete)
        if canRecall(item) { actions.append(.recall) }
        if canQuote(item) { actions.append(.quote) }
        if !(item.message.content is RecallNotificationMessage) && item.message.messageId > 0 { actions.append(.forward) }
        actions.append(.select)
        if conversation.type == .group, item.message.direction == .send, !item.message.messageUId.isEmpty,
           kit.config.enabledReadReceiptConversationTypes.contains(.group), !item.message.readReceiptInfo.isReceiptRequestMessage {
            actions.append(.requestReceipt)
        }
        return actions
    }

    /// Whether this user may recall the message now: their own, stored and sent, within the window.
    public func canRecall(_ item: MessageItem) -> Bool {
        let config = kit.config
        guard config.enableMessageRecall, item.message.direction == .send, !item.message.messageUId.isEmpty,
              item.message.sentStatus != .failed, item.message.flags.contains(.isPersisted),
              !(item.message.content is RecallNotificationMessage) else { return false }
        return kit.clock.nowMilliseconds() - item.message.sentTime <= Int64(config.maxRecallDuration) * 1000
    }

    public func canQuote(_ item: MessageItem) -> Bool {
        guard kit.config.enableMessageReference, !item.message.messageUId.isEmpty else { return false }
        switch item.message.content {
        case is TextMessage, is FileMessage, is RichContentMessage, is ImageMessage, is ReferenceMessage: return true
        default: return false
        }
    }

    /// Recalls the message: the screen shows the notice, and a text can be re-edited for
    /// `reeditDuration` (kept on this device only).
    @discardableResult
    public func recall(_ item: MessageItem) async throws -> Message {
        guard canRecall(item) else {
            throw IMError(.recallParameterInvalid, "this message can no longer be recalled: only your own sent messages, within \(kit.config.maxRecallDuration) s")
        }
        let original = (item.message.content as? TextMessage)?.content ?? (item.message.content as? ReferenceMessage)?.content
        let recalled = try await client.recallMessage(item.message)
        kit.noteRecalled(item.message.messageUId)
        if let original {
            let now = kit.clock.nowMilliseconds()
            reedits[recalled.messageId] = (original, now)
            try? kit.database?.saveReedit(messageId: recalled.messageId, text: original, recalledAt: now)
        }
        await replace(recalled)
        kit.localChanges.yield(conversation)
        return recalled
    }

    /// The text of a recalled message of this user's that can still be put back into the input
    /// (`reeditDuration` after the recall), else nil.
    public func reeditText(_ item: MessageItem) -> String? {
        guard item.message.content is RecallNotificationMessage, item.message.direction == .send else { return nil }
        let id = item.message.messageId
        if reedits[id] == nil, let stored = try? kit.database?.reedits(messageIds: [id])[id] { reedits[id] = stored }
        guard let entry = reedits[id] else { return nil }
        return kit.clock.nowMilliseconds() - entry.recalledAt <= Int64(kit.config.reeditDuration) * 1000 ? entry.text : nil
    }

    /// Deletes messages from this device (RongCloud's menu delete: local only).
    public func delete(_ chosen: [MessageItem]) async throws {
        let ids = chosen.filter { !$0.isUIOnly }.map(\.message.messageId)
        if !ids.isEmpty { _ = try await client.deleteMessages(ids: ids) }
        let gone = Set(chosen.map(\.id))
        items.removeAll { gone.contains($0.id) }
        selected.subtract(gone)
        kit.localChanges.yield(conversation)
        publish()
    }

    /// Quotes the message in the next send.
    public func quote(_ item: MessageItem?) {
        quoting = item.flatMap { canQuote($0) ? $0 : nil }
        publish()
    }

    /// Asks the group's members to report reading this message (group read receipts).
    public func requestReceipt(_ item: MessageItem) async throws {
        try await client.sendReadReceiptRequest(item.message)
        if let index = items.firstIndex(where: { $0.id == item.id }) {
            items[index].message.readReceiptInfo.isReceiptRequestMessage = true
            if let fresh = await self.item(for: items[index].message) { items[index] = fresh }
        }
        publish()
    }

    /// The readers of one of this user's group messages.
    public func readers(of item: MessageItem) async throws -> [String] {
        try await client.getMessageReadUsers(messageUId: item.message.messageUId).users.map(\.userId)
    }

    // MARK: multi-select and forward

    public func setSelecting(_ on: Bool) {
        selecting = on
        if !on { selected = [] }
        publish()
    }

    public func toggleSelection(_ item: MessageItem) {
        guard selecting, !item.isUIOnly else { return }
        if selected.contains(item.id) { selected.remove(item.id) } else { selected.insert(item.id) }
        publish()
    }

    /// The selected messages, oldest first (valid while selecting).
    public var selectedItems: [MessageItem] { selecting ? items.filter { selected.contains($0.id) } : [] }

    /// The conversations a forward may go to: every local conversation.
    public func forwardTargets() async -> [ConversationIdentifier] {
        let list = (try? await client.getConversationList(types: [.private, .group, .system, .ultraGroup], count: 1_000)) ?? []
        return list.filter { $0.conversationType != .system }.map { ConversationIdentifier($0.conversationType, targetId: $0.targetId, channelId: $0.channelId) }
    }

    /// Forwards messages one by one (mentions removed) or, with `combined` and
    /// `enableSendCombineMessage`, as one combined message. Returns the messages sent.
    @discardableResult
    public func forward(_ chosen: [MessageItem], to targets: [ConversationIdentifier], combined: Bool) async throws -> [Message] {
        let messages = chosen.map(\.message).filter { $0.messageId > 0 && !($0.content is RecallNotificationMessage) }
        var sent: [Message] = []
        if combined {
            guard kit.config.enableSendCombineMessage else {
                throw IMError(.invalidParameter, "combined forward is off (enableSendCombineMessage)")
            }
            for target in targets {
                sent.append(try await client.sendCombinedMessage(messages, to: target.type, targetId: target.targetId, channelId: target.channelId))
            }
        } else {
            for target in targets {
                for message in messages {
                    guard let content = message.content else { continue }
                    sent.append(try await Self.forwardOne(client, content: Self.withoutMentions(content), to: target))
                }
            }
        }
        setSelecting(false)
        for target in targets { kit.localChanges.yield(target) }
        return sent
    }

    /// Sends one forwarded copy. Forwarding many at once meets the server's limit of 5 messages per
    /// second per client (20604): the same local message is sent again a moment later (up to 5
    /// times), so the copies all arrive, in order, with no failed duplicate left behind.
    private static func forwardOne<C: MessageContent>(_ client: IMClient, content: C, to target: ConversationIdentifier) async throws -> Message {
        do {
            return try await client.sendMessage(target.type, targetId: target.targetId, channelId: target.channelId, content: content)
        } catch let error as SendMessageError where error.code == .sendRateTooHigh {
            var last = error
            for _ in 0..<5 {
                try await Task.sleep(for: .milliseconds(400))
                do {
                    return try await client.resendMessage(messageId: last.message.messageId)
                } catch let again as SendMessageError where again.code == .sendRateTooHigh {
                    last = again
                }
            }
            throw last
        }
    }

    /// A forwarded copy keeps no @ mentions.
    static func withoutMentions(_ content: any MessageContent) -> any MessageContent {
        if var text = content as? TextMessage {
            text.mentionedInfo = nil
            return text
        }
        if var reference = content as? ReferenceMessage {
            reference.mentionedInfo = nil
            return reference
        }
        return content
    }

    static func quotable(_ message: Message) throws -> any MessageContent {
        guard let content = message.content else { throw IMError(.invalidParameter, "the quoted message's type is not known on this client") }
        return content
    }

    /// What a combined forward holds, one line per message ("name: digest"), read back from its page
    /// (downloaded with the app's download token the first time).
    public func combinedLines(_ item: MessageItem) async throws -> [String] {
        guard item.message.content is CombineMessage, item.message.messageId > 0 else {
            throw IMError(.invalidParameter, "not a combined message")
        }
        let strings = kit.strings
        return try await client.combinedMessages(of: item.message.messageId).map { entry in
            let content = client.decodeContent(objectName: entry.objectName, data: Data(entry.content.utf8))
            let digest = Digest.of(objectName: entry.objectName, content: content, senderUserId: entry.senderUserId,
                                   currentUserId: me, senderName: entry.senderName, strings: strings)
            return "\(entry.senderName): \(digest)"
        }
    }

    // MARK: search

    /// This conversation's local messages matching a keyword, newest first.
    public func search(_ keyword: String) async throws -> [MessageItem] {
        let found = try await client.searchMessages(conversation.type, targetId: conversation.targetId, channelId: conversation.channelId, keyword: keyword)
        var result: [MessageItem] = []
        for message in found { if let item = await item(for: message) { result.append(item) } }
        return result
    }
}
