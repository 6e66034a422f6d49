import Foundation
import IMCore
import IMKit
import IMLib

/// The terminal chat app: a conversation list and conversation screens over IMKit, drawn in
/// full-screen text with stable markers (`(3)`, `[connected]`, `[✓ read]`, `[typing…]`,
/// `[↓ 1 new]`, `[40 unread ↑]`, `[@ you]`) that the tmux tests read.
actor ChatApp {
    enum Screen {
        case list
        case conversation
    }

    private let kit: IMKit
    private let terminal: Terminal
    private let log: EventLog
    private let manualClock: ManualClock?
    private let listModel: ConversationListModel
    private var screen = Screen.list
    private var list = ConversationListSnapshot.empty
    private var listCursor = 0
    /// The folded type whose conversations the list shows (an aggregate row opened).
    private var subList: ConversationType?
    private var subRows: [ConversationRow] = []
    private var conversation: ConversationModel?
    private var chat: ConversationScreen?
    private var chatTask: Task<Void, Never>?
    private var mediaTask: Task<Void, Never>?
    private var input = ""
    /// Messages hidden below the bottom of the pane (0: at the bottom).
    private var scroll = 0
    /// When set, the pane starts at this message (after the unread jump).
    private var anchorTop: Int?
    private var prompt: String?
    private var promptInput = ""
    private var toast = ""
    private var connection = KitConnectionState.disconnected
    private var userId: String
    private var mentionCandidates: [(userId: String, name: String)] = []
    private var mentionQuery: String?
    private var mentions: [String] = []
    private var mentionAll = false
    private var lastMedia: Int64?
    private var quit = false
    /// In multi-select mode: the message under the cursor (an index into the screen's items).
    private var selectCursor = 0
    /// The first message drawn in the pane at the last render (to keep the cursor in view).
    private var firstVisibleItem = 0
    /// A combined forward opened (`/open`): its title and messages shown in place of the pane.
    private var viewer: (title: String, lines: [String])?
    /// Real-time location sharing with the open one-to-one conversation's peer.
    private var sharing: LocationShareSession?
    private var sharingTask: Task<Void, Never>?
    /// The status banner's text (nil: no banner), the status and the participants as last read.
    private var sharingBanner: String?
    private var sharingStatus = LocationShareStatus.idle
    private var sharingRows: [LocationShareParticipant] = []
    /// The sharing view (`/share`): the participants table in place of the messages.
    private var sharingView = false
    /// Asks the app's user provider again (`/refresh USER`), nil without one.
    private let fetchUser: (@Sendable (String) async -> UserInfo?)?

    init(kit: IMKit, terminal: Terminal, log: EventLog, manualClock: ManualClock?, userId: String,
         fetchUser: (@Sendable (String) async -> UserInfo?)? = nil) {
        self.kit = kit
        self.terminal = terminal
        self.log = log
        self.manualClock = manualClock
        self.userId = userId
        self.fetchUser = fetchUser
        self.listModel = kit.conversationList()
    }

    var finished: Bool { quit }

    // MARK: feeds

    /// Draws the list from the local database, then follows the kit's feeds; returns the number of
    /// rows drawn first.
    @discardableResult
    func start() async -> Int {
        list = await listModel.load()
        render()
        let snapshots = await listModel.snapshots()
        Task { [weak self] in
            for await snapshot in snapshots { await self?.listChanged(snapshot) }
        }
        let states = kit.connectionStates()
        Task { [weak self] in
            for await state in states { await self?.connectionChanged(state) }
        }
        let notifications = kit.notifications()
        Task { [weak self] in
            for await notice in notifications { await self?.notified(notice) }
        }
        // Each typing status that arrives, for the event log (a test knows it reached this device).
        let typing = kit.client.typingStatusUpdates()
        let log = self.log
        Task {
            for await status in typing { log.write("typing_received", ["userId": status.userId]) }
        }
        return list.rows.count
    }

    private func listChanged(_ snapshot: ConversationListSnapshot) async {
        list = snapshot
        if let subList { subRows = await listModel.rows(in: subList) }
        listCursor = min(listCursor, max(0, currentRows.count - 1))
        log.write("list", ["rows": "\(snapshot.rows.count)", "unread": "\(snapshot.totalUnread)"])
        render()
    }

    private func connectionChanged(_ state: KitConnectionState) {
        connection = state
        log.write("connection", ["state": marker(state)])
        render()
    }

    private func notified(_ notice: LocalNotification) {
        toast = "[notice] \(notice.title): \(notice.body)"
        log.write("notification", ["cType": notice.cType, "fId": notice.senderUserId, "tId": notice.targetId, "oName": notice.objectName])
        terminal.write("\u{07}")
        render()
    }

    private func chatChanged(_ screen: ConversationScreen) {
        chat = screen
        render()
    }

    // MARK: keys

    func handle(_ key: Key) async {
        defer { render() }
        switch key {
        case .focusIn:
            kit.setFocused(true)
            return
        case .focusOut:
            kit.setFocused(false)
            return
        case .control("c"):
            quit = true
            return
        default: break
        }
        if prompt != nil {
            await handlePrompt(key)
            return
        }
        switch screen {
        case .list: await handleList(key)
        case .conversation: await handleConversation(key)
        }
    }

    private var currentRows: [ConversationRow] { subList == nil ? list.rows : subRows }

    private func handleList(_ key: Key) async {
        let rows = currentRows
        switch key {
        case .up, .character("k"): listCursor = max(0, listCursor - 1)
        case .down, .character("j"): listCursor = min(max(0, rows.count - 1), listCursor + 1)
        case .enter:
            guard listCursor < rows.count else { return }
            let row = rows[listCursor]
            if row.kind == .aggregate {
                subList = row.conversationType
                subRows = await listModel.rows(in: row.conversationType)
                listCursor = 0
            } else {
                await open(row.identifier)
            }
        case .escape, .left:
            if subList != nil {
                subList = nil
                listCursor = 0
            }
        case .character("d"):
            guard listCursor < rows.count else { return }
            do {
                try await listModel.delete(rows[listCursor])
                toast = "deleted \(rows[listCursor].title)"
            } catch { toast = describe(error) }
        case .character("r"): await listModel.reload()
        case .character("o"): startPrompt("open (user id, g:group, s:system, u:ultragroup[/channel])")
        case .character("/"): startPrompt("search")
        case .character(":"): startPrompt("command")
        case .character("q"): quit = true
        default: break
        }
    }

    private func startPrompt(_ label: String) {
        prompt = label
        promptInput = ""
    }

    private func handlePrompt(_ key: Key) async {
        switch key {
        case .escape:
            prompt = nil
        case .backspace:
            if !promptInput.isEmpty { promptInput.removeLast() }
        case .character(let character):
            promptInput.append(character)
        case .enter:
            let label = prompt ?? ""
            let text = promptInput.trimmingCharacters(in: .whitespaces)
            prompt = nil
            if label.hasPrefix("open") {
                guard let target = Self.parseTarget(text) else {
                    toast = "give a user id, g:<group>, s:<system id> or u:<ultra group>[/<channel>]"
                    return
                }
                await open(target)
            } else if label == "forward to" || label == "combine to" {
                await forwardSelected(to: text, combined: label == "combine to")
            } else if label == "search" {
                do {
                    let found = try await listModel.search(text)
                    toast = found.isEmpty ? "no conversation has \"\(text)\"" : "found: " + found.map { "\($0.title) (\($0.count))" }.joined(separator: ", ")
                } catch { toast = describe(error) }
            } else {
                await command(text)
            }
        default: break
        }
    }

    static func parseTarget(_ text: String) -> ConversationIdentifier? {
        guard !text.isEmpty else { return nil }
        if text.hasPrefix("g:") { return ConversationIdentifier(.group, targetId: String(text.dropFirst(2))) }
        if text.hasPrefix("s:") { return ConversationIdentifier(.system, targetId: String(text.dropFirst(2))) }
        if text.hasPrefix("u:") {
            let parts = text.dropFirst(2).split(separator: "/", maxSplits: 1).map(String.init)
            return ConversationIdentifier(.ultraGroup, targetId: parts[0], channelId: parts.count > 1 ? parts[1] : "")
        }
        return ConversationIdentifier(.private, targetId: text)
    }

    private func open(_ target: ConversationIdentifier) async {
        let model = kit.conversation(target.type, targetId: target.targetId, channelId: target.channelId)
        conversation = model
        screen = .conversation
        input = (await model.draft()) ?? ""
        scroll = 0
        anchorTop = nil
        mentions = []
        mentionAll = false
        mentionQuery = nil
        let screens = await model.screens()
        chatTask?.cancel()
        chatTask = Task { [weak self] in
            for await screen in screens { await self?.chatChanged(screen) }
        }
        let media = await model.mediaEvents()
        mediaTask?.cancel()
        mediaTask = Task { [weak self] in
            for await event in media { await self?.mediaEvent(event) }
        }
        sharingTask?.cancel()
        sharing = nil
        sharingBanner = nil
        sharingRows = []
        sharingStatus = .idle
        sharingView = false
        if target.type == .private, let session = try? kit.locationShare(targetId: target.targetId) {
            sharing = session
            let events = await session.events()
            sharingTask = Task { [weak self] in
                for await event in events { await self?.sharingEvent(event) }
            }
            await refreshSharing()
        }
        do {
            chat = try await model.open(visibleLines: messageRows)
            log.write("open", ["type": "\(target.type.rawValue)", "target": target.targetId])
        } catch {
            toast = describe(error)
        }
    }

    private func mediaEvent(_ event: KitMediaEvent) {
        switch event {
        case .progress(let id, let percent):
            lastMedia = id
            toast = "[upload \(percent)%] /cancel stops it"
        case .sent: toast = "[upload done]"
        case .failed(_, let code): toast = "[upload failed \(code)]"
        case .canceled: toast = "[upload canceled]"
        }
        render()
    }

    // MARK: location sharing

    private func sharingEvent(_ event: LocationShareEvent) async {
        guard let sharing else { return }
        switch event {
        case .joined, .quit:
            if let text = await sharing.noticeText(event) { toast = "[toast] \(text)" }
        case .startFailed(let messageId, let code):
            toast = "[error \(code)] location sharing could not start: the start message \(messageId) is marked failed"
        case .updateFailed(let text):
            toast = "[location] \(text)"
        case .statusChanged, .location, .bannerChanged:
            break
        }
        await refreshSharing()
        render()
    }

    private func refreshSharing() async {
        guard let sharing else { return }
        sharingBanner = await sharing.banner()
        sharingStatus = await sharing.status
        sharingRows = await sharing.participants
        log.write("location", ["status": sharingStatus.rawValue, "participants": "\(sharingRows.count)",
                               "banner": sharingBanner ?? ""])
    }

    /// `LAT,LNG` as two numbers.
    static func parseCoordinate(_ text: String) -> (latitude: Double, longitude: Double)? {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let latitude = Double(parts[0]), let longitude = Double(parts[1]) else { return nil }
        return (latitude, longitude)
    }

    private func leaveConversation() async {
        if let conversation {
            await conversation.saveDraft(input)
            await conversation.close()
        }
        chatTask?.cancel()
        mediaTask?.cancel()
        sharingTask?.cancel()
        sharing = nil
        sharingBanner = nil
        sharingView = false
        conversation = nil
        chat = nil
        viewer = nil
        screen = .list
        input = ""
        await listModel.reload()
    }

    private func handleConversation(_ key: Key) async {
        guard let conversation else { return }
        if chat?.isSelecting == true {
            await handleSelection(key, conversation)
            return
        }
        if viewer != nil {
            if key == .escape { viewer = nil }
            return
        }
        if sharingView, key == .escape {
            // Sharing goes on; the banner stays on the conversation.
            sharingView = false
            return
        }
        switch key {
        case .escape:
            if mentionQuery != nil {
                mentionQuery = nil
            } else {
                await leaveConversation()
            }
        case .pageUp, .up:
            let step = key == .pageUp ? max(1, messageRows / 2) : 1
            let count = chat?.items.count ?? 0
            anchorTop = nil
            if scroll + step >= count - 1, chat?.hasOlder == true {
                _ = try? await conversation.loadOlder()
            }
            scroll = min(scroll + step, max(0, (chat?.items.count ?? 0) - 1))
            await conversation.setAtBottom(scroll == 0)
        case .pageDown, .down:
            let step = key == .pageDown ? max(1, messageRows / 2) : 1
            anchorTop = nil
            scroll = max(0, scroll - step)
            await conversation.setAtBottom(scroll == 0)
        case .end:
            anchorTop = nil
            scroll = 0
            await conversation.scrollToBottom()
        case .backspace:
            if !input.isEmpty { input.removeLast() }
            updateMentionQuery()
            if mentionQuery != nil { await refreshCandidates() }
        case .tab:
            if mentionQuery != nil, let first = mentionCandidates.first { pickMention(first) }
        case .enter:
            if mentionQuery != nil, let first = mentionCandidates.first {
                pickMention(first)
                return
            }
            let text = input
            input = ""
            if text.hasPrefix("/") {
                await command(String(text.dropFirst()))
            } else if !text.trimmingCharacters(in: .whitespaces).isEmpty {
                guard chat?.canSend != false else {
                    toast = "system conversations are read-only"
                    return
                }
                do {
                    try await conversation.send(text: text, mentions: mentions, mentionAll: mentionAll)
                    scroll = 0
                    anchorTop = nil
                } catch { toast = describe(error) }
                mentions = []
                mentionAll = false
            }
        case .character(let character):
            // A read-only (system) conversation takes commands only.
            guard chat?.canSend != false || input.hasPrefix("/") || (input.isEmpty && character == "/") else { return }
            input.append(character)
            if !input.hasPrefix("/"), await conversation.inputChanged(input) { log.write("typing_sent", [:]) }
            updateMentionQuery()
            if mentionQuery != nil { await refreshCandidates() }
        default: break
        }
    }

    // MARK: multi-select

    /// Multi-select mode (`/select`): ↑↓ (j/k) move the message cursor, Space (or x) marks, `m`
    /// shows the cursor message's menu, `f` forwards the marked messages one by one, `c` combines
    /// them into one message, `d` deletes them from this device, `v` or Esc leaves the mode.
    private func handleSelection(_ key: Key, _ conversation: ConversationModel) async {
        let items = chat?.items ?? []
        guard !items.isEmpty else {
            await conversation.setSelecting(false)
            return
        }
        selectCursor = min(max(0, selectCursor), items.count - 1)
        switch key {
        case .up, .character("k"):
            selectCursor = max(0, selectCursor - 1)
            if selectCursor < firstVisibleItem { scroll = items.count - 1 - selectCursor }
        case .down, .character("j"):
            selectCursor = min(items.count - 1, selectCursor + 1)
            scroll = min(scroll, items.count - 1 - selectCursor)
        case .character(" "), .character("x"):
            await conversation.toggleSelection(items[selectCursor])
        case .character("m"):
            toast = "[menu] " + (await conversation.actions(for: items[selectCursor])).map(\.rawValue).joined(separator: " ")
        case .character("f"), .character("c"):
            guard !(await conversation.selectedItems).isEmpty else {
                toast = "mark messages first (Space)"
                return
            }
            if key == .character("c"), !kit.config.enableSendCombineMessage {
                toast = "combined forward is off: /set enableSendCombineMessage true"
                return
            }
            let targets = await conversation.forwardTargets().map { Self.targetText($0) }
            startPrompt(key == .character("f") ? "forward to" : "combine to")
            toast = "targets: " + targets.joined(separator: " ")
        case .character("d"):
            let chosen = await conversation.selectedItems
            guard !chosen.isEmpty else {
                toast = "mark messages first (Space)"
                return
            }
            do {
                try await conversation.delete(chosen)
                await conversation.setSelecting(false)
                toast = "deleted \(chosen.count) on this device"
            } catch { toast = describe(error) }
        case .character("v"), .escape:
            await conversation.setSelecting(false)
        default: break
        }
    }

    private func forwardSelected(to text: String, combined: Bool) async {
        guard let conversation else { return }
        guard let target = Self.parseTarget(text) else {
            toast = "give a user id or g:<group>"
            return
        }
        let chosen = await conversation.selectedItems
        do {
            let sent = try await conversation.forward(chosen, to: [target], combined: combined)
            toast = "forwarded \(sent.count) to \(target.targetId)"
            log.write("forwarded", ["count": "\(sent.count)", "target": target.targetId, "combined": "\(combined)"])
        } catch { toast = describe(error) }
    }

    static func targetText(_ target: ConversationIdentifier) -> String {
        switch target.type {
        case .group: return "g:\(target.targetId)"
        case .system: return "s:\(target.targetId)"
        case .ultraGroup: return "u:\(target.targetId)" + (target.channelId.isEmpty ? "" : "/\(target.channelId)")
        default: return target.targetId
        }
    }

    /// The text after an "@" being typed in a group (the member picker is open while it is set).
    private func updateMentionQuery() {
        guard let chatType = conversation?.conversation.type, chatType == .group || chatType == .ultraGroup,
              kit.config.enableMessageMentioned, let at = input.lastIndex(of: "@") else {
            mentionQuery = nil
            return
        }
        let after = input[input.index(after: at)...]
        let before = input[..<at]
        if after.contains(" ") || !(before.isEmpty || before.last == " ") {
            mentionQuery = nil
        } else {
            mentionQuery = String(after)
        }
    }

    private func refreshCandidates() async {
        guard let conversation, let query = mentionQuery else { return }
        mentionCandidates = await conversation.mentionCandidates(matching: query)
        log.write("mention_picker", ["candidates": mentionCandidates.map(\.userId).joined(separator: ",")])
    }

    private func pickMention(_ candidate: (userId: String, name: String)) {
        guard let at = input.lastIndex(of: "@") else { return }
        input = String(input[..<at]) + "@\(candidate.name) "
        if candidate.userId == "@all" { mentionAll = true } else { mentions.append(candidate.userId) }
        mentionQuery = nil
    }

    // MARK: commands

    private func command(_ line: String) async {
        let words = line.split(separator: " ", maxSplits: 1).map(String.init)
        guard let name = words.first else { return }
        let argument = words.count > 1 ? words[1] : ""
        do {
            switch name {
            case "back": await leaveConversation()
            case "quit": quit = true
            case "set":
                let parts = argument.split(separator: " ", maxSplits: 1).map(String.init)
                guard parts.count == 2 else { throw IMError(.invalidParameter, "use /set <flag> <value>; flags: \(KitConfig.flagNames.joined(separator: ", "))") }
                try kit.updateConfig { try $0.set(parts[0], to: parts[1]) }
                toast = "\(parts[0]) = \(kit.config.value(of: parts[0]) ?? "")"
            case "clock":
                guard let manualClock else { throw IMError(.invalidParameter, "start imchat with --test-clock to move its clock") }
                if argument == "now" {
                    // Catches up with the real time (never backwards): the server stamps messages with
                    // it, so a rule counted from a message's time starts from here.
                    let real = Int64(Date().timeIntervalSince1970 * 1000)
                    let behind = max(0, real - manualClock.nowMilliseconds())
                    manualClock.advance(milliseconds: behind)
                    toast = "clock now (+\(behind)ms)"
                } else {
                    let seconds = Int64(argument.replacingOccurrences(of: "+", with: "")) ?? 0
                    manualClock.advance(milliseconds: seconds * 1000)
                    toast = "clock +\(seconds)s"
                }
                if let conversation { chat = await conversation.screen() }
            case "help":
                toast = "/recall /reedit /quote /unquote /delete /menu /select /open /url /receipt /readers /file /image /gif /voice /video /cancel /location /share /here /unshare /phrases /phrase N /jump /bottom /search /forward /combine /refresh /clearusers /set /clock /back /quit"
            case "refresh":
                // RongCloud's refreshUserInfoCache: the cache changes, screens show it when they load again.
                guard !argument.isEmpty else { throw IMError(.invalidParameter, "use /refresh <user id>") }
                guard let fetchUser else { throw IMError(.invalidParameter, "no user provider: start imchat with --user-info-url or --app-secret") }
                guard let info = await fetchUser(argument) else { throw IMError(.invalidParameter, "the provider does not know \(argument)") }
                await kit.info.refreshUser(info)
                toast = "refreshed \(argument): \(info.name) (shown when the screen loads again)"
                log.write("user_refreshed", ["userId": argument, "name": info.name])
            case "clearusers":
                await kit.info.clearUsers()
                toast = "user cache cleared"
            default:
                try await conversationCommand(name, argument)
            }
        } catch {
            toast = describe(error)
        }
    }

    /// The message `n` from the bottom of `candidates` (1: the last).
    private func pick(_ candidates: [MessageItem], _ argument: String) -> MessageItem? {
        let n = Int(argument.split(separator: " ").first ?? "") ?? 1
        guard n >= 1, n <= candidates.count else { return nil }
        return candidates[candidates.count - n]
    }

    private func conversationCommand(_ name: String, _ argument: String) async throws {
        guard let conversation, let chat else { throw IMError(.invalidParameter, "open a conversation first (o on the list)") }
        let own = chat.items.filter { $0.message.direction == .send && !$0.isUIOnly }
        let all = chat.items.filter { !$0.isUIOnly }
        switch name {
        case "recall":
            guard let item = pick(own.filter { !($0.message.content is RecallNotificationMessage) }, argument) else { throw IMError(.invalidParameter, "no message of yours to recall") }
            try await conversation.recall(item)
            toast = "recalled"
        case "reedit":
            guard let item = own.last(where: { $0.canReedit }), let text = await conversation.reeditText(item) else {
                throw IMError(.invalidParameter, "nothing to re-edit: a recalled text can be re-edited for \(kit.config.reeditDuration) s")
            }
            input = text
        case "quote":
            guard let item = pick(all, argument) else { throw IMError(.invalidParameter, "no such message") }
            guard await conversation.canQuote(item) else { throw IMError(.invalidParameter, "this message cannot be quoted") }
            await conversation.quote(item)
        case "unquote": await conversation.quote(nil)
        case "delete":
            guard let item = pick(all, argument) else { throw IMError(.invalidParameter, "no such message") }
            try await conversation.delete([item])
        case "menu":
            guard let item = pick(all, argument) else { throw IMError(.invalidParameter, "no such message") }
            toast = "[menu] " + (await conversation.actions(for: item)).map(\.rawValue).joined(separator: " ")
        case "select":
            guard !all.isEmpty else { throw IMError(.invalidParameter, "no message to select") }
            await conversation.setSelecting(true)
            anchorTop = nil
            selectCursor = chat.items.count - 1
            if let item = pick(all, argument), let index = chat.items.firstIndex(where: { $0.id == item.id }) { selectCursor = index }
        case "open":
            guard let item = pick(all, argument), let combined = item.message.content as? CombineMessage else {
                throw IMError(.invalidParameter, "/open [n] opens a combined message ([Chat history])")
            }
            let lines = try await conversation.combinedLines(item)
            viewer = (combined.title, lines)
            log.write("opened_combined", ["messages": "\(lines.count)"])
        case "url":
            guard let item = pick(all, argument) else { throw IMError(.invalidParameter, "no such message") }
            let url: String
            switch item.message.content {
            case let combined as CombineMessage: url = combined.remoteUrl
            case let media as any MediaMessageContent: url = media.mediaUrl
            default: throw IMError(.invalidParameter, "this message has no file or page to open")
            }
            toast = "[url] \(url)"
            log.write("url", ["url": url, "messageId": "\(item.message.messageId)"])
        case "receipt":
            guard let item = pick(own, argument) else { throw IMError(.invalidParameter, "no message of yours") }
            try await conversation.requestReceipt(item)
        case "readers":
            guard let item = pick(own, argument) else { throw IMError(.invalidParameter, "no message of yours") }
            toast = "read by: " + (try await conversation.readers(of: item)).joined(separator: ", ")
        case "file", "image", "gif", "voice", "video":
            let kind: KitMediaKind = ["file": .file, "image": .image, "gif": .gif, "voice": .voice, "video": .video][name]!
            let path = argument
            let model = conversation
            Task { [weak self] in
                do { try await model.sendMedia(path: path, kind: kind) } catch { await self?.show(error) }
            }
        case "location":
            // The location action (plugin 1003): in a one-to-one conversation it offers sending a
            // location or sharing it in real time.
            guard !argument.isEmpty else {
                toast = "[location] /location LAT,LNG NAME sends a location" + (sharing == nil ? "" : " · /share shares it in real time")
                return
            }
            let words = argument.split(separator: " ", maxSplits: 1).map(String.init)
            guard let point = Self.parseCoordinate(words[0]) else { throw IMError(.invalidParameter, "use /location LAT,LNG NAME, e.g. /location 31.23,121.47 People's Square") }
            try await conversation.sendLocation(latitude: point.latitude, longitude: point.longitude, name: words.count > 1 ? words[1] : "")
        case "share":
            do {
                _ = try await conversation.shareLocation()
            } catch is SendMessageError {
                // The start message failed: the session's startFailed event says so.
                return
            }
            sharingView = true
            await refreshSharing()
        case "unshare":
            try await conversation.stopSharingLocation()
            sharingView = false
            await refreshSharing()
        case "here":
            // The fake location provider: a typed coordinate is this device's position.
            guard let sharing else { throw IMError(.invalidParameter, "location sharing works in one-to-one conversations only") }
            guard let point = Self.parseCoordinate(argument) else { throw IMError(.invalidParameter, "use /here LAT,LNG, e.g. /here 31.23,121.47") }
            try await sharing.updateLocation(latitude: point.latitude, longitude: point.longitude)
            await refreshSharing()
        case "cancel":
            guard let id = lastMedia else { throw IMError(.invalidParameter, "no upload under way") }
            _ = await conversation.cancelMedia(messageId: id)
        case "phrases":
            toast = chat.phrases.enumerated().map { "\($0.offset + 1). \($0.element)" }.joined(separator: "  ")
        case "phrase":
            guard let n = Int(argument), n >= 1, n <= chat.phrases.count else { throw IMError(.invalidParameter, "pick a phrase by its number (/phrases)") }
            try await conversation.send(text: chat.phrases[n - 1])
        case "jump":
            if let index = try await conversation.jumpToFirstUnread() {
                anchorTop = index
                await conversation.setAtBottom(false)
            }
        case "bottom":
            anchorTop = nil
            scroll = 0
            await conversation.scrollToBottom()
        case "search":
            let found = try await conversation.search(argument)
            toast = "found \(found.count): " + found.prefix(5).map(\.text).joined(separator: " | ")
        case "forward", "combine":
            let parts = argument.split(separator: " ").map(String.init)
            guard let targetText = parts.first, let target = Self.parseTarget(targetText) else {
                throw IMError(.invalidParameter, "use /\(name) <user id | g:group> [count]")
            }
            let count = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
            let chosen = Array(all.suffix(count))
            let sent = try await conversation.forward(chosen, to: [target], combined: name == "combine")
            toast = "forwarded \(sent.count) to \(target.targetId)"
        default:
            throw IMError(.invalidParameter, "unknown command /\(name): /help lists them")
        }
    }

    private func show(_ error: any Error) {
        toast = describe(error)
        render()
    }

    private func describe(_ error: any Error) -> String { KitError.describe(error) }

    // MARK: drawing

    private var messageRows: Int { max(3, terminal.size.rows - 6) }

    func marker(_ state: KitConnectionState) -> String {
        switch state {
        case .connected: return "[connected]"
        case .connecting: return "[connecting]"
        case .reconnecting(let seconds): return "[reconnecting in \(seconds)s]"
        case .suspended: return "[reconnecting]"
        case .networkUnavailable: return "[no network]"
        case .timedOut: return "[timed out: start imchat again to retry]"
        case .disconnected: return "[disconnected]"
        case .signedOut(let reason):
            switch reason {
            case .otherDevice: return "[kicked: logged in elsewhere]"
            case .banned: return "[banned]"
            case .appBanned: return "[app banned]"
            case .tokenIncorrect: return "[token refused: sign in again]"
            case .deactivated: return "[deactivated]"
            case .signedOut: return "[signed out]"
            }
        }
    }

    func render() {
        let (columns, rows) = terminal.size
        var lines: [String] = []
        let header = "imchat  \(userId)  \(marker(connection))  unread \(list.totalUnread)"
        lines.append(header)
        switch screen {
        case .list: lines += listLines(columns: columns, rows: rows - 3)
        case .conversation: lines += conversationLines(columns: columns, rows: rows - 3)
        }
        while lines.count < rows - 2 { lines.append("") }
        lines = Array(lines.prefix(rows - 2))
        if let prompt {
            lines.append("\(prompt): \(promptInput)▏")
        } else if screen == .conversation {
            if chat?.isSelecting == true {
                lines.append("[select] \(chat?.items.filter(\.isSelected).count ?? 0) selected  ↑↓ move  Space mark  m menu  f forward  c combine  d delete  v/Esc done")
            } else if chat?.canSend == false {
                lines.append("(read-only)" + (input.isEmpty ? "" : " \(input)▏"))
            } else {
                lines.append("> \(input)▏")
            }
        } else {
            lines.append("↑↓ move  Enter open  o open…  d delete  / search  r reload  q quit")
        }
        lines.append(toast)
        var frame = "\u{1B}[H"
        for (index, line) in lines.enumerated() {
            frame += TextWidth.fit(line, columns, pad: false) + "\u{1B}[K"
            if index < lines.count - 1 { frame += "\r\n" }
        }
        frame += "\u{1B}[J"
        terminal.write(frame)
    }

    private func listLines(columns: Int, rows: Int) -> [String] {
        var lines: [String] = []
        if let banner = list.banner { lines.append("[banner] \(banner)") }
        if let subList { lines.append("« \(subList == .system ? kit.strings.system : "\(subList)")  (Esc: back)") }
        let rowsShown = currentRows
        if rowsShown.isEmpty { lines.append("[empty] No conversations yet: press o to open one") }
        let room = max(1, rows - lines.count)
        let start = max(0, min(listCursor - room + 1, rowsShown.count - room))
        for (index, row) in rowsShown.enumerated().dropFirst(start).prefix(room) {
            let cursor = index == listCursor ? ">" : " "
            var flags = ""
            if row.isTop { flags += "[top] " }
            if row.isDoNotDisturb { flags += "[dnd] " }
            let unread = row.unread > 0 ? " (\(row.unread))" : ""
            let title = TextWidth.fit(row.title + unread, 24)
            lines.append("\(cursor) \(title) \(flags)\(row.digest)  \(Self.time(row.time))")
        }
        return lines
    }

    /// One formatter for every row of every frame (formatting is thread-safe).
    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm"
        return formatter
    }()

    static func time(_ milliseconds: Int64) -> String {
        guard milliseconds > 0 else { return "" }
        return timeFormatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    private func conversationLines(columns: Int, rows: Int) -> [String] {
        guard let chat else { return ["loading…"] }
        var lines: [String] = []
        if let viewer {
            lines.append("« [\(kit.strings.chatHistory.trimmingCharacters(in: CharacterSet(charactersIn: "[]")))] \(viewer.title)  (Esc: back)")
            lines += viewer.lines.flatMap { TextWidth.wrap($0, max(10, columns)) }.prefix(max(1, rows - 1))
            return lines
        }
        var title = "« \(chat.title)"
        if let typing = chat.typingUserId { title += "  [\(kit.strings.typing)]" + (typing == chat.title ? "" : " \(typing)") }
        lines.append(title)
        if let sharingBanner { lines.append("[location] \(sharingBanner)") }
        if sharingView {
            lines += sharingLines()
            return lines
        }
        if let above = chat.unreadAbove {
            lines.append(above.showsCount ? "[\(kit.strings.unreadAbove(above.count))]" : "[\(kit.strings.unreadAboveNoCount)]")
        }
        var footer: [String] = []
        if let quoting = chat.quoting { footer.append("[quoting] \(quoting.senderName): \(quoting.text)") }
        if mentionQuery != nil {
            footer.append("[@] " + mentionCandidates.prefix(8).map { $0.userId == "@all" ? "@all" : "\($0.name)" }.joined(separator: "  "))
        }
        if chat.newBelow > 0 { footer.append("[\(kit.strings.newBelow(chat.newBelow))]") }
        let room = max(1, rows - lines.count - footer.count)
        var body: [[String]] = chat.items.enumerated().map { index, item in
            let drawn = itemLines(item, columns: columns)
            guard chat.isSelecting, let first = drawn.first else { return drawn }
            // Multi-select: a box per message, the cursor's marked with ▸.
            return ["\(index == selectCursor ? "▸" : " ")\(item.isSelected ? "[x]" : "[ ]") \(first)"] + drawn.dropFirst()
        }
        if let anchorTop, anchorTop < body.count {
            firstVisibleItem = anchorTop
            body = Array(body[anchorTop...])
            lines += body.flatMap { $0 }.prefix(room)
        } else {
            let visible = body.prefix(max(0, body.count - scroll))
            var shown = 0
            firstVisibleItem = visible.count
            for drawn in visible.reversed() where shown < room {
                shown += drawn.count
                firstVisibleItem -= 1
            }
            lines += visible.flatMap { $0 }.suffix(room)
        }
        while lines.count < rows - footer.count { lines.append("") }
        return lines + footer
    }

    /// The sharing view: the participants with their last position and its age (a map's table form).
    private func sharingLines() -> [String] {
        var lines = ["[sharing] \(sharingStatus.rawValue)  participants = \(sharingRows.count)  (Esc: back, sharing goes on)"]
        lines.append(TextWidth.fit("user", 16) + " " + TextWidth.fit("latitude", 12) + " " + TextWidth.fit("longitude", 12) + " age")
        let now = kit.clock.nowMilliseconds()
        for row in sharingRows {
            let latitude = row.latitude.map { String(format: "%.5f", $0) } ?? "-"
            let longitude = row.longitude.map { String(format: "%.5f", $0) } ?? "-"
            let age = row.locatedAt.map { "\(max(0, now - $0) / 1000)s" } ?? "-"
            let who = row.userId == userId ? "\(row.userId) (me)" : row.userId
            lines.append(TextWidth.fit(who, 16) + " " + TextWidth.fit(latitude, 12) + " " + TextWidth.fit(longitude, 12) + " \(age)")
        }
        lines.append("/here LAT,LNG moves you  /unshare stops sharing")
        return lines
    }

    private func itemLines(_ item: MessageItem, columns: Int) -> [String] {
        var head = ""
        if item.message.content is RecallNotificationMessage {
            head = "[recalled] \(item.text)" + (item.canReedit ? "  [\(kit.strings.reedit)]" : "")
            return [head]
        }
        let who = item.message.direction == .send ? "me" : item.senderName
        var text = "\(who): \(item.text)"
        if let status = item.status { text += "  [\(status)]" }
        var result: [String] = []
        if let quote = item.quote { result.append("  > \(quote.sender): \(quote.text)") }
        result += TextWidth.wrap(text, max(10, columns))
        return result
    }
}

/// JSON lines of what happened, for tests and diagnostics (`--event-log`).
final class EventLog: Sendable {
    private let handle: FileHandle?

    init(path: String?) {
        if let path {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            handle = FileHandle(forWritingAtPath: path)
        } else {
            handle = nil
        }
    }

    func write(_ event: String, _ fields: [String: String]) {
        guard let handle else { return }
        var object = fields
        object["event"] = event
        object["t"] = String(Int64(Date().timeIntervalSince1970 * 1000))
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        handle.write(data + Data("\n".utf8))
    }
}
