import Foundation
import IMCore
import IMStore
import Testing

/// What one check works with: a store, an app of its own in it, and builders of the messages the
/// server commits (same conversation keys, targets and flags as the services use).
struct Fixture: Sendable {
    let store: any IMStore
    /// The check's app.
    let appId: Int64
    /// A fixed "now" (ms), far from 0 so times before and after it are easy to name.
    let now: Int64 = 1_700_000_000_000
    private let uids = MessageUIDGenerator()

    init(store: any IMStore) async throws {
        self.store = store
        appId = try await store.upsertApp(appKey: "conformance-\(UUID().uuidString)", appSecret: "secret", name: "conformance",
                                          now: 1_700_000_000_000).id
    }

    /// Another app of the same store, for isolation checks.
    func otherApp() async throws -> Int64 {
        try await store.upsertApp(appKey: "conformance-\(UUID().uuidString)", appSecret: "secret", name: "other", now: now).id
    }

    func uid() -> String { uids.next(milliseconds: now) }

    /// A JSON text content; `padding` bytes of filler make it as large as a check needs.
    static func content(_ text: String, padding: Int = 0) -> Data {
        Data(#"{"content":"\#(text)\#(String(repeating: "x", count: padding))"}"#.utf8)
    }

    // MARK: messages as the server builds them

    func privateMessage(from: String, to: String, at time: Int64, text: String = "hi", padding: Int = 0,
                        clientMessageId: String = "", flags: PersistentFlag = .persistedAndCounted,
                        includeSender: Bool = true, app: Int64? = nil) -> StoredMessage {
        StoredMessage(appId: app ?? appId, conversationType: .private, conversationKey: privateConversationKey(from, to),
                      targetId: to, senderId: from, objectName: "RC:TxtMsg", content: Self.content(text, padding: padding),
                      uid: uid(), sentTime: time, flags: flags, clientMessageId: clientMessageId, includeSender: includeSender)
    }

    func groupMessage(from: String, group: String, at time: Int64, text: String = "hi", padding: Int = 0,
                      directedTo: [String] = [], flags: PersistentFlag = .persistedAndCounted, includeSender: Bool = true,
                      app: Int64? = nil) -> StoredMessage {
        StoredMessage(appId: app ?? appId, conversationType: .group, conversationKey: groupConversationKey(group), targetId: group,
                      senderId: from, objectName: "RC:TxtMsg", content: Self.content(text, padding: padding), uid: uid(),
                      sentTime: time, flags: flags, includeSender: includeSender, directedUserIds: directedTo.sorted())
    }

    /// A system message to one user, or to `StoredMessage.everyone` (a broadcast, which the
    /// Server API sends without the sender's devices).
    func systemMessage(from: String, to: String, at time: Int64, text: String = "news", app: Int64? = nil) -> StoredMessage {
        StoredMessage(appId: app ?? appId, conversationType: .system, conversationKey: systemConversationKey(sender: from, recipient: to),
                      targetId: to, senderId: from, objectName: "RC:TxtMsg", content: Self.content(text), uid: uid(), sentTime: time,
                      flags: .persistedAndCounted, includeSender: false)
    }

    func ultraGroupMessage(from: String, group: String, channel: String = UltraGroupLimits.defaultChannelId, at time: Int64,
                           text: String = "hi", padding: Int = 0, mentions: MentionedInfo? = nil, directedTo: [String] = [],
                           flags: PersistentFlag = .persistedAndCounted, app: Int64? = nil) -> StoredMessage {
        var message = StoredMessage(appId: app ?? appId, conversationType: .ultraGroup,
                                    conversationKey: ultraGroupConversationKey(group, channel), targetId: group, senderId: from,
                                    objectName: "RC:TxtMsg", content: Self.content(text, padding: padding), uid: uid(), sentTime: time,
                                    flags: flags, channelId: channel, directedUserIds: directedTo.sorted())
        message.mentions = mentions
        return message
    }

    func chatroomMessage(from: String, room: String, at time: Int64, text: String = "hi", padding: Int = 0,
                         app: Int64? = nil) -> StoredMessage {
        StoredMessage(appId: app ?? appId, conversationType: .chatroom, conversationKey: chatroomConversationKey(room), targetId: room,
                      senderId: from, objectName: "RC:TxtMsg", content: Self.content(text, padding: padding), uid: uid(),
                      sentTime: time, flags: .persistedAndCounted, clientMessageId: "c-\(time)")
    }

    /// Commits the messages, which must all be stored (no duplicates), and returns them as stored.
    @discardableResult
    func commit(_ messages: StoredMessage..., sourceLocation: SourceLocation = #_sourceLocation) async throws -> [StoredMessage] {
        try await commit(messages, sourceLocation: sourceLocation)
    }

    @discardableResult
    func commit(_ messages: [StoredMessage], sourceLocation: SourceLocation = #_sourceLocation) async throws -> [StoredMessage] {
        let outcomes = try await store.commit(messages)
        try #require(outcomes.count == messages.count, "commit returns one outcome per message", sourceLocation: sourceLocation)
        return try outcomes.map { outcome in
            guard case .stored(let message) = outcome else {
                Issue.record("a new message was reported a duplicate: \(outcome)", sourceLocation: sourceLocation)
                throw CheckFailed()
            }
            return message
        }
    }

    // MARK: reads checks use often

    /// Everything a user's sync returns from `after`, page by page (`limit` per page).
    func syncAll(_ userId: String, after: UInt64 = 0, limit: Int = 100, minSentTime: Int64 = .min, app: Int64? = nil) async throws
        -> (messages: [StoredMessage], watermark: UInt64) {
        var messages: [StoredMessage] = []
        var watermark = after
        for _ in 0..<1000 {
            let page = try await store.syncPage(appId: app ?? appId, userId: userId, after: watermark, minSentTime: minSentTime,
                                                limit: limit, maxBytes: .max)
            messages += page.messages
            watermark = max(watermark, page.watermark)
            if !page.hasMore { break }
        }
        return (messages, watermark)
    }

    /// The uids of a cloud history page (no byte budget), in the order returned.
    func historyUids(_ key: String, recordTime: Int64 = 0, count: Int = 100, ascending: Bool = true,
                     viewer: HistoryViewer? = nil, app: Int64? = nil) async throws -> [String] {
        try await store.history(appId: app ?? appId, conversationKey: key, recordTime: recordTime, count: count,
                                ascending: ascending, viewer: viewer).messages.map(\.uid)
    }
}

/// A check stopped after recording why.
struct CheckFailed: Error {}
