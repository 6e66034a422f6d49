import Foundation
import IMCore
import IMLib

/// One row of the conversation list: a conversation, or the folded row of an aggregated type.
public struct ConversationRow: Sendable, Equatable, Identifiable {
    public enum Kind: Sendable, Equatable {
        case conversation
        /// All conversations of `conversationType` in one row (`collectionConversationTypeArray`).
        case aggregate
    }

    public var kind: Kind
    public var conversationType: ConversationType
    public var targetId: String
    public var channelId: String
    public var title: String
    /// The last message's digest, or "[Draft] text", with "[@ you]" before it when an unread
    /// message mentions the user.
    public var digest: String
    /// The time it sorts by (ms).
    public var time: Int64
    /// Unread counted messages.
    public var unread: Int
    public var isTop: Bool
    public var isDoNotDisturb: Bool
    public var mentioned: Bool
    public var hasDraft: Bool
    /// Conversations folded into an aggregate row (1 for a conversation).
    public var count: Int

    public var id: String {
        kind == .aggregate ? "aggregate|\(conversationType.rawValue)" : "\(conversationType.rawValue)|\(targetId)|\(channelId)"
    }

    public var identifier: ConversationIdentifier { ConversationIdentifier(conversationType, targetId: targetId, channelId: channelId) }
}

/// What a list screen draws.
public struct ConversationListSnapshot: Sendable, Equatable {
    public var rows: [ConversationRow]
    /// The badge: the sum of the conversations' unread counts (RongCloud: "the app icon badge is the
    /// sum of the per-conversation unread counts").
    public var totalUnread: Int
    /// The network banner's text while not connected (`isShowNetworkIndicatorView`).
    public var banner: String?
    /// No conversation: the screen shows its empty view.
    public var isEmpty: Bool { rows.isEmpty }

    /// Before the first load.
    public static let empty = ConversationListSnapshot(rows: [], totalUnread: 0, banner: nil)
}

/// The conversation list's behaviour (RongCloud's `RCConversationListViewController`): rows from
/// the local database (so it shows before the connection succeeds), display and aggregated
/// types, pinned rows first, then the newest; digests, unread counts and the badge; reloads when
/// messages arrive (once a batch is complete: `left == 0`), are recalled, read elsewhere, or
/// change on this device; delete and search; the network banner.
///
/// Names come from the info cache when a snapshot is built: a refreshed name shows at the next
/// reload (RongCloud's deferred refresh).
public actor ConversationListModel {
    private let kit: IMKit
    private var current = ConversationListSnapshot(rows: [], totalUnread: 0, banner: nil)
    private let signal = Broadcaster<ConversationListSnapshot>()
    private var listening: Task<Void, Never>?
    /// How many conversations a load reads.
    public var limit = 1_000
    /// The least time between two reloads caused by changes (the list follows within it).
    static let reloadPause: Duration = .milliseconds(100)

    init(kit: IMKit) {
        self.kit = kit
    }

    deinit { listening?.cancel() }

    /// The last snapshot built.
    public var snapshot: ConversationListSnapshot { current }

    /// Reads the list from the local database.
    @discardableResult
    public func load() async -> ConversationListSnapshot {
        let config = kit.config
        let strings = KitStrings(config.language)
        let summaries = (try? await kit.client.getConversationSummaries(types: config.displayConversationTypes, count: limit)) ?? []
        let me = kit.currentUserId ?? ""
        var rows: [ConversationRow] = []
        var aggregates: [ConversationType: ConversationRow] = [:]
        for summary in summaries {
            let row = await self.row(summary, me: me, strings: strings)
            if config.collectionConversationTypes.contains(row.conversationType) {
                if var folded = aggregates[row.conversationType] {
                    folded.unread += row.unread
                    folded.count += 1
                    folded.mentioned = folded.mentioned || row.mentioned
                    if row.time > folded.time {
                        folded.time = row.time
                        folded.digest = row.digest
                    }
                    aggregates[row.conversationType] = folded
                } else {
                    var folded = row
                    folded.kind = .aggregate
                    folded.targetId = ""
                    folded.channelId = ""
                    folded.title = row.conversationType == .system ? strings.system : "\(row.conversationType)"
                    folded.isTop = false
                    folded.isDoNotDisturb = false
                    folded.hasDraft = false
                    aggregates[row.conversationType] = folded
                }
            } else {
                rows.append(row)
            }
        }
        rows.append(contentsOf: aggregates.values)
        rows.sort(by: Self.order)
        let banner = config.isShowNetworkIndicatorView ? kit.connectionState.banner(strings) : nil
        current = ConversationListSnapshot(rows: rows, totalUnread: rows.reduce(0) { $0 + $1.unread }, banner: banner)
        return current
    }

    /// Pinned first, then by time, newest first (drafts count by the time they were saved).
    static func order(_ a: ConversationRow, _ b: ConversationRow) -> Bool {
        if a.isTop != b.isTop { return a.isTop }
        if a.time != b.time { return a.time > b.time }
        return a.id < b.id
    }

    private func row(_ summary: ConversationSummary, me: String, strings: KitStrings) async -> ConversationRow {
        let conversation = summary.conversation
        let title = await kit.info.title(of: conversation.conversationType, targetId: conversation.targetId)
        var digest = ""
        if let latest = summary.latestMessage {
            let groupId = conversation.conversationType == .group ? conversation.targetId : nil
            let sender = await kit.info.displayName(latest.senderUserId, inGroup: groupId)
            digest = Digest.of(latest, currentUserId: me, senderName: sender, strings: strings)
            if (conversation.conversationType == .group || conversation.conversationType == .ultraGroup),
               latest.senderUserId != me, !(latest.content is RecallNotificationMessage), !latest.senderUserId.isEmpty {
                digest = "\(sender): \(digest)"
            }
        }
        let hasDraft = !conversation.draft.isEmpty
        if hasDraft { digest = "\(strings.draft) \(Digest.oneLine(conversation.draft))" }
        if conversation.hasUnreadMentioned { digest = "\(strings.mentionedYou) \(digest)" }
        return ConversationRow(
            kind: .conversation, conversationType: conversation.conversationType, targetId: conversation.targetId,
            channelId: conversation.channelId, title: title, digest: digest, time: conversation.sentTime,
            unread: conversation.unreadMessageCount, isTop: conversation.isTop,
            isDoNotDisturb: conversation.notificationLevel.isDoNotDisturb, mentioned: conversation.hasUnreadMentioned,
            hasDraft: hasDraft, count: 1)
    }

    /// The conversations an aggregate row folds, newest first.
    public func rows(in type: ConversationType) async -> [ConversationRow] {
        let strings = kit.strings
        let me = kit.currentUserId ?? ""
        let summaries = (try? await kit.client.getConversationSummaries(types: [type], count: limit)) ?? []
        var rows: [ConversationRow] = []
        for summary in summaries { rows.append(await row(summary, me: me, strings: strings)) }
        return rows.sorted(by: Self.order)
    }

    /// Snapshots as the list changes, starting with a fresh load. Changes are coalesced: a batch of
    /// offline messages gives one snapshot when its last message (`left == 0`) arrives.
    public func snapshots() -> AsyncStream<ConversationListSnapshot> {
        let stream = signal.stream()
        if listening == nil { startListening() }
        Task { await self.reloadAndPublish() }
        return stream
    }

    /// Builds the list again and publishes it (the app's reload key, after info refreshes).
    public func reload() async {
        await reloadAndPublish()
    }

    private func reloadAndPublish() async {
        signal.yield(await load())
    }

    private func startListening() {
        let client = kit.client
        let received = client.receivedMessages()
        let recalled = client.recalledMessages()
        let state = client.conversationStateChanges()
        let reads = client.readStatusUpdates()
        let modified = client.messageModifications()
        let connection = kit.connectionStates()
        let local = kit.localChanges.stream()
        // At most one reload waits while another runs: a burst of changes (50 messages a second)
        // costs one rebuild of the list per pause, not one per message.
        let merged = AsyncStream<Bool>(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let tasks = [
                Task { for await event in received where event.left == 0 { continuation.yield(true) } },
                Task { for await _ in recalled { continuation.yield(true) } },
                Task { for await _ in state { continuation.yield(true) } },
                Task { for await _ in reads { continuation.yield(true) } },
                Task { for await _ in modified { continuation.yield(true) } },
                Task { for await _ in connection { continuation.yield(true) } },
                Task { for await _ in local { continuation.yield(true) } },
            ]
            continuation.onTermination = { _ in tasks.forEach { $0.cancel() } }
        }
        listening = Task { [weak self] in
            for await complete in merged where complete {
                guard let self else { return }
                await self.reloadAndPublish()
                try? await Task.sleep(for: Self.reloadPause)
            }
        }
    }

    /// Deletes a conversation from the local list (its messages stay; RongCloud's swipe to delete).
    /// An aggregate row deletes every conversation of its type.
    public func delete(_ row: ConversationRow) async throws {
        if row.kind == .aggregate {
            try await kit.client.clearConversations(types: [row.conversationType])
        } else {
            try await kit.client.removeConversation(row.conversationType, targetId: row.targetId, channelId: row.channelId)
        }
        kit.localChanges.yield(nil)
    }

    /// Conversations whose messages of the searchable types match `keyword`, best first
    /// (RongCloud's `searchConversations`; the kit has no search screen of its own).
    public func search(_ keyword: String) async throws -> [ConversationRow] {
        let config = kit.config
        let results = try await kit.client.searchConversations(types: config.displayConversationTypes, keyword: keyword)
        let strings = kit.strings
        let me = kit.currentUserId ?? ""
        let latest = try await kit.client.getMessages(ids: results.map(\.conversation.latestMessageId))
        var rows: [ConversationRow] = []
        for result in results {
            var row = await row(ConversationSummary(conversation: result.conversation, latestMessage: latest[result.conversation.latestMessageId]),
                                me: me, strings: strings)
            row.count = result.matchCount
            rows.append(row)
        }
        return rows
    }
}
