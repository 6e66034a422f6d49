import Foundation
import IMCore
@testable import IMServer
import IMStore
import IMStoreSQLite
import Logging
import Testing

/// The services on their own: a `ServerCore` over a SQLite store and a manual clock, no sockets.
@Suite("Services without sockets")
struct ServiceTests {
    /// A core over a fresh store in a temporary directory, removed afterwards.
    static func withCore<T: Sendable>(configure: (inout ServerConfig) -> Void = { _ in },
                                      _ body: (ServerCore, Int64) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-service-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var config = ServerConfig()
        config.storage.dataDir = directory.path
        configure(&config)
        var logger = Logger(label: "service-test")
        logger.logLevel = .warning
        let core = ServerCore(config: config, store: try SQLiteStore(directory: directory.path),
                              clock: ManualClock(milliseconds: 1_800_000_000_000), logger: logger)
        let app = try await core.prepare()
        return try await body(core, app.id)
    }

    @Test("a group join past the member limit is refused with 1002 and its words, adds nobody, and publishes no membership change")
    func groupLimit() async throws {
        try await Self.withCore(configure: { $0.groups.maxMembers = 2 }) { core, appId in
            let events = core.events.subscribe()
            #expect(try await core.groups.join(appId: appId, groupId: "g", name: "g", userIds: ["a", "b"]) == .joined(memberCount: 2))
            let outcome = try await core.groups.join(appId: appId, groupId: "g", name: nil, userIds: ["c", "d"])
            #expect(outcome == .tooManyMembers(limit: 2))
            #expect(try await core.groups.members(appId: appId, groupId: "g").map(\.userId).sorted() == ["a", "b"])
            // Syncing a user into a full group is refused as a whole, worded by the service.
            do {
                try await core.groups.sync(appId: appId, userId: "c", groups: [(id: "g", name: "g")])
                Issue.record("a sync into a full group was accepted")
            } catch let error as IMError {
                #expect(error.code == .apiBadParameter && error.message.contains("more than 2 members"))
            }
            #expect(try await core.groups.groups(appId: appId, ofUser: "c").isEmpty)
            // A later change marks the end: between the two, the refused calls published nothing.
            try await core.groups.quit(appId: appId, groupId: "g", userIds: ["a"])
            var changes: [MembershipChange] = []
            for await event in events {
                guard case .membershipChanged(let change) = event else { continue }
                changes.append(change)
                if change.left == ["a"] { break }
            }
            #expect(changes.map(\.joined) == [["a", "b"], []] && changes.map(\.left) == [[], ["a"]])
        }
    }

    @Test("a sensitive word takes effect on the next message: the filter's cache is dropped by the service that changed the list")
    func sensitiveWordCache() async throws {
        try await Self.withCore { core, appId in
            let content = Data(#"{"content":"a bad word"}"#.utf8)
            #expect(try await core.sensitiveWords.apply(appId: appId, objectName: "RC:TxtMsg", content: content) == .deliver(content))
            try await core.sensitiveWords.add(appId: appId, words: [SensitiveWord(word: "bad", replacement: nil)], limit: 10, now: 1)
            #expect(try await core.sensitiveWords.apply(appId: appId, objectName: "RC:TxtMsg", content: content) == .block)
            try await core.sensitiveWords.remove(appId: appId, words: ["bad"])
            #expect(try await core.sensitiveWords.apply(appId: appId, objectName: "RC:TxtMsg", content: content) == .deliver(content))
            // Past the app's limit: refused as a whole, with the code and words the service gives.
            let many = (0..<11).map { SensitiveWord(word: "w\($0)", replacement: "*") }
            do {
                try await core.sensitiveWords.add(appId: appId, words: many, limit: 10, now: 2)
                Issue.record("11 words were accepted under a limit of 10")
            } catch let error as IMError {
                #expect(error.code == .apiBadParameter && error.message.contains("at most 10 sensitive words"))
            }
            #expect(try await core.sensitiveWords.list(appId: appId).isEmpty)
        }
    }

    @Test("conversation tag refusals of the store reach users as 33003 with what to do; a refused edit changes no version")
    func tagRefusals() async throws {
        try await Self.withCore { core, appId in
            let before = try await core.conversationState.edit(.addTag(tagId: "t1", name: "one", limit: 2), appId: appId, userId: "u",
                                                               origin: .serverAPI)
            for (edit, words) in [
                (ConversationStateEdit.addTag(tagId: "t1", name: "again", limit: 2), "already exists"),
                (.renameTag(tagId: "nope", name: "x"), "there is no tag 'nope'"),
                (.setTopInTag(tagId: "t1", ConversationIdentifier(.private, targetId: "v"), true), "is not in tag 't1'"),
            ] {
                do {
                    try await core.conversationState.edit(edit, appId: appId, userId: "u", origin: .serverAPI)
                    Issue.record("\(edit) was accepted")
                } catch let error as IMError {
                    #expect(error.code == .invalidParameter && error.message.contains(words), "\(error.message)")
                }
            }
            let after = try await core.conversationState.edit(.renameTag(tagId: "t1", name: "one"), appId: appId, userId: "u",
                                                              origin: .serverAPI)
            #expect(after.version == before.version, "refused edits moved the version")
        }
    }

    @Test("ultra group channel refusals of the store reach users as 24410 (no group), 24403 (exists) and 24413 (past the channel limit)")
    func ultraGroupLimits() async throws {
        try await Self.withCore { core, appId in
            try await core.ultraGroups.create(appId: appId, groupId: "ug", name: "ug", ownerId: "owner")
            do {
                try await core.ultraGroups.createChannel(appId: appId, groupId: "missing", channelId: "c", type: .publicChannel)
                Issue.record("a channel was created in a missing group")
            } catch let error as IMError {
                #expect(error.code == .ultraGroupNotFound)
            }
            try await core.ultraGroups.createChannel(appId: appId, groupId: "ug", channelId: "c1", type: .publicChannel)
            do {
                try await core.ultraGroups.createChannel(appId: appId, groupId: "ug", channelId: "c1", type: .publicChannel)
                Issue.record("a channel was created twice")
            } catch let error as IMError {
                #expect(error.code == .ultraGroupParameterInvalid && error.message.contains("already exists"))
            }
            // The default channel and c1 exist; fill the group to its limit, then one more.
            for index in 2..<UltraGroupLimits.maxChannelsPerGroup {
                try await core.ultraGroups.createChannel(appId: appId, groupId: "ug", channelId: "c\(index)", type: .publicChannel)
            }
            do {
                try await core.ultraGroups.createChannel(appId: appId, groupId: "ug", channelId: "over", type: .publicChannel)
                Issue.record("channel \(UltraGroupLimits.maxChannelsPerGroup + 1) was created")
            } catch let error as IMError {
                #expect(error.code == .ultraGroupChannelsExceeded && error.message.contains("delete one"), "\(error.message)")
            }
        }
    }
}
