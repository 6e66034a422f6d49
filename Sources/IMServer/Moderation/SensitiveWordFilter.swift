import Foundation
import IMCore
import IMStore
import Synchronization

/// The app's sensitive-word list applied to messages before they are stored or delivered: a
/// message containing a blocking word is not delivered (spec/imlib-core.md §6, the private-chat
/// sequence), a replaced word is rewritten.
///
/// Words are matched case-insensitively inside the text fields of text-bearing contents
/// (`RC:TxtMsg` content; `RC:ImgTextMsg` title and content); other contents pass unchanged.
/// The list is cached per app and reloaded after every change through the Server API.
public final class SensitiveWordFilter: Sendable {
    public enum Verdict: Sendable, Equatable {
        case deliver(Data)
        case block
    }

    private let store: any SensitiveWordStore
    /// Cached lists and a count of changes (see `UserDirectory`: a stale read is never cached).
    private let cache = Mutex<(entries: [Int64: [SensitiveWord]], changes: UInt64)>(([:], 0))
    static let textFields: [String: [String]] = ["RC:TxtMsg": ["content"], "RC:ImgTextMsg": ["title", "content"]]

    private let peers: ClusterPeers

    init(store: any SensitiveWordStore, peers: ClusterPeers) {
        self.store = store
        self.peers = peers
    }

    /// Adds or replaces words, at most `limit` in the app; the filter applies them from the next message.
    func add(appId: Int64, words: [SensitiveWord], limit: Int, now: Int64) async throws {
        defer { changed(appId: appId) }
        try await explainingRefusals { try await store.addSensitiveWords(appId: appId, words: words, limit: limit, now: now) }
    }

    func remove(appId: Int64, words: [String]) async throws {
        defer { changed(appId: appId) }
        try await store.removeSensitiveWords(appId: appId, words: words)
    }

    /// The app's list, as stored.
    func list(appId: Int64) async throws -> [SensitiveWord] {
        try await store.sensitiveWords(appId: appId)
    }

    private func changed(appId: Int64) {
        forget(appId: appId)
        peers.announce(.sensitiveWords(appId: appId))
    }

    /// Drops the app's cached list (another node changed it).
    func forget(appId: Int64) {
        cache.withLock { cache in
            cache.entries.removeValue(forKey: appId)
            cache.changes &+= 1
        }
    }

    /// The content to deliver, or `.block`.
    /// The content a modification stores: filtered like a new message's, or 21501 when a blocking
    /// word is in it (the message then keeps its content).
    func modifiedContent(appId: Int64, objectName: String, content: Data) async throws -> Data {
        switch try await apply(appId: appId, objectName: objectName, content: content) {
        case .block:
            throw IMError(.blockedBySensitiveWord, "the new content contains a word this app blocks: the message keeps its content")
        case .deliver(let filtered):
            return filtered
        }
    }

    func apply(appId: Int64, objectName: String, content: Data) async throws -> Verdict {
        guard let fields = Self.textFields[objectName] else { return .deliver(content) }
        let words = try await self.words(appId: appId)
        guard !words.isEmpty, var object = (try? JSONSerialization.jsonObject(with: content)) as? [String: Any] else {
            return .deliver(content)
        }
        var changed = false
        for field in fields {
            guard var text = object[field] as? String else { continue }
            for word in words where text.range(of: word.word, options: .caseInsensitive) != nil {
                guard let replacement = word.replacement else { return .block }
                text = text.replacingOccurrences(of: word.word, with: replacement, options: .caseInsensitive)
                changed = true
            }
            object[field] = text
        }
        guard changed else { return .deliver(content) }
        return .deliver(try JSONSerialization.data(withJSONObject: object))
    }

    private func words(appId: Int64) async throws -> [SensitiveWord] {
        let (cached, changes) = cache.withLock { ($0.entries[appId], $0.changes) }
        if let cached { return cached }
        let words = try await store.sensitiveWords(appId: appId)
        cache.withLock { cache in
            if cache.changes == changes { cache.entries[appId] = words }
        }
        return words
    }
}
