import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `MessageLifecycleStore`: recall (replace), deletion, read receipts, a user's own deletions
    /// (hidden messages, cleared conversations) in history and sync, and extensions with their
    /// refusals.
    public func messageLifecycleStore() async throws {
        let area = "MessageLifecycleStore"

        await check(area, "deleteMessages removes an app's messages sent before a time, oldest first, a batch at a time, of one conversation when named") { f in
            let old = try await f.commit(
                f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                f.privateMessage(from: "bob", to: "alice", at: f.now + 2),
                f.privateMessage(from: "carol", to: "dave", at: f.now + 3),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 10))
            let other = try await f.otherApp()
            let foreign = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1, app: other))
            #expect(try await f.store.deleteMessages(appId: f.appId, conversationKey: privateConversationKey("alice", "bob"), ultraGroups: true,
                                                      sentBefore: f.now + 5, limit: 1) == 1)
            #expect(try await f.store.message(appId: f.appId, uid: old[0].uid) == nil, "the oldest went first")
            #expect(try await f.store.message(appId: f.appId, uid: old[1].uid) != nil)
            #expect(try await f.store.deleteMessages(appId: f.appId, conversationKey: nil, ultraGroups: true, sentBefore: f.now + 5, limit: 10) == 2)
            #expect(try await f.store.message(appId: f.appId, uid: old[2].uid) == nil)
            #expect(try await f.store.message(appId: f.appId, uid: old[3].uid) != nil, "sent at the bound: kept")
            #expect(try await f.store.message(appId: other, uid: foreign[0].uid) != nil, "another app's messages stay")
            #expect(try await f.store.deleteMessages(appId: f.appId, conversationKey: nil, ultraGroups: true, sentBefore: f.now + 5, limit: 10) == 0)

            #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now,
                                                       maxGroupsPerUser: 10) == .joined)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "news", type: .publicChannel,
                                                      now: f.now, maxChannels: 50)
            #expect(Set(try await f.store.ultraGroupConversationKeys(appId: f.appId))
                    == [ultraGroupConversationKey("u", UltraGroupLimits.defaultChannelId), ultraGroupConversationKey("u", "news")])
            #expect(try await f.store.ultraGroupConversationKeys(appId: other).isEmpty)
        }

        await check(area, "replaceMessage puts the new content in place: same uid, seq and time, shown but not counted, no extensions") { f in
            var original = f.privateMessage(from: "alice", to: "bob", at: f.now + 1)
            original.canIncludeExpansion = true
            original.expansion = ["k": "v"]
            let m = try await f.commit(original, f.privateMessage(from: "bob", to: "alice", at: f.now + 2))
            let recall = Data(#"{"operatorId":"alice"}"#.utf8)
            try await f.store.replaceMessage(appId: f.appId, uid: m[0].uid, objectName: "RC:RcNtf", content: recall)
            let replaced = try #require(try await f.store.message(appId: f.appId, uid: m[0].uid))
            #expect(replaced.objectName == "RC:RcNtf" && replaced.content == recall)
            #expect(replaced.flags == .isPersisted, "shown in history, no longer counted")
            #expect(replaced.expansion.isEmpty && !replaced.canIncludeExpansion)
            #expect(try await f.store.expansion(appId: f.appId, uid: m[0].uid) == [:])
            #expect(replaced.seq == m[0].seq && replaced.sentTime == m[0].sentTime && replaced.senderId == "alice"
                    && replaced.conversationKey == m[0].conversationKey)
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")) == m.map(\.uid), "in its place in history")
            #expect(try await f.store.message(appId: f.appId, uid: m[1].uid) == m[1], "other messages untouched")
            try await f.store.replaceMessage(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE", objectName: "RC:RcNtf", content: recall)
        }

        await check(area, "deleteMessage removes a message from the log, history and sync") { f in
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                                       f.privateMessage(from: "alice", to: "bob", at: f.now + 2))
            try await f.store.deleteMessage(appId: f.appId, uid: m[0].uid)
            #expect(try await f.store.message(appId: f.appId, uid: m[0].uid) == nil)
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")) == [m[1].uid])
            #expect(try await f.syncAll("bob").messages == [m[1]])
            try await f.store.deleteMessage(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE")
        }

        await check(area, "requestReadReceipts marks a message as asking for receipts") { f in
            let m = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + 1),
                                       f.groupMessage(from: "alice", group: "g", at: f.now + 2))
            #expect(try await f.store.message(appId: f.appId, uid: m[0].uid)?.receiptRequested == false)
            try await f.store.requestReadReceipts(appId: f.appId, uid: m[0].uid)
            #expect(try await f.store.message(appId: f.appId, uid: m[0].uid)?.receiptRequested == true)
            #expect(try await f.store.message(appId: f.appId, uid: m[1].uid)?.receiptRequested == false)
        }

        await check(area, "recordReads records each reader of a message once, in order, and the reads are found by sender and by message") { f in
            let m = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + 1),
                                       f.groupMessage(from: "alice", group: "g", at: f.now + 2),
                                       f.groupMessage(from: "dave", group: "g", at: f.now + 3))
            func read(_ message: StoredMessage, by reader: String, at time: Int64) -> ReadReceiptRecord {
                ReadReceiptRecord(uid: message.uid, senderId: message.senderId, groupId: "g", readerId: reader, readTime: time)
            }
            let first = try await f.store.recordReads([read(m[0], by: "bob", at: 10), read(m[0], by: "carol", at: 11),
                                                       read(m[1], by: "bob", at: 12), read(m[0], by: "bob", at: 13)], appId: f.appId)
            #expect(first.map(\.readerId) == ["bob", "carol", "bob"] && first.map(\.readTime) == [10, 11, 12],
                    "a reader already recorded, even in the same call, is skipped")
            #expect(first.allSatisfy { $0.seq > 0 } && zip(first, first.dropFirst()).allSatisfy { $0.seq < $1.seq })
            let second = try await f.store.recordReads([read(m[0], by: "bob", at: 20), read(m[2], by: "bob", at: 21)], appId: f.appId)
            #expect(second.map(\.uid) == [m[2].uid] && second.map(\.readTime) == [21])
            #expect(second.first.map { $0.seq > first[2].seq } == true)

            #expect(try await f.store.readReceipts(appId: f.appId, senderId: "alice", after: 0, limit: 10) == first)
            #expect(try await f.store.readReceipts(appId: f.appId, senderId: "alice", after: first[0].seq, limit: 10) == Array(first.dropFirst()))
            #expect(try await f.store.readReceipts(appId: f.appId, senderId: "alice", after: 0, limit: 1) == [first[0]])
            #expect(try await f.store.readReceipts(appId: f.appId, senderId: "dave", after: 0, limit: 10) == second)
            #expect(try await f.store.readReceipts(appId: f.appId, senderId: "bob", after: 0, limit: 10).isEmpty)

            let readers = try await f.store.readers(appId: f.appId, uid: m[0].uid, after: 0, limit: 10)
            #expect(readers.readers == [first[0], first[1]] && readers.total == 2)
            let rest = try await f.store.readers(appId: f.appId, uid: m[0].uid, after: first[0].seq, limit: 10)
            #expect(rest.readers == [first[1]] && rest.total == 2, "total counts every reader")
            let one = try await f.store.readers(appId: f.appId, uid: m[0].uid, after: 0, limit: 1)
            #expect(one.readers == [first[0]] && one.total == 2)
            #expect(try await f.store.recordReads([], appId: f.appId).isEmpty)
        }

        await check(area, "hideMessages takes messages out of one user's history and sync, for good") { f in
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                                       f.privateMessage(from: "bob", to: "alice", at: f.now + 2),
                                       f.privateMessage(from: "alice", to: "bob", at: f.now + 3))
            try await f.store.hideMessages(appId: f.appId, userId: "bob", uids: [m[1].uid])
            try await f.store.hideMessages(appId: f.appId, userId: "bob", uids: [m[1].uid])
            try await f.store.hideMessages(appId: f.appId, userId: "bob", uids: [])
            let key = privateConversationKey("alice", "bob")
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "bob", afterSeq: 0)) == [m[0].uid, m[2].uid])
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "alice", afterSeq: 0)) == m.map(\.uid),
                    "the other side keeps them")
            #expect(try await f.historyUids(key) == m.map(\.uid))
            #expect(try await f.syncAll("bob").messages == [m[0], m[2]])
            #expect(try await f.syncAll("alice").messages == m)
        }

        await check(area, "clearConversation takes a user's messages up to a time out of their history and sync; commands stay") { f in
            let t = f.now
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: t + 10),
                                       f.privateMessage(from: "alice", to: "bob", at: t + 15, flags: .none),
                                       f.privateMessage(from: "bob", to: "alice", at: t + 20),
                                       f.privateMessage(from: "alice", to: "bob", at: t + 30),
                                       f.privateMessage(from: "alice", to: "carol", at: t + 5))
            let key = privateConversationKey("alice", "bob")
            let bob = HistoryViewer(userId: "bob", afterSeq: 0)
            try await f.store.clearConversation(appId: f.appId, userId: "bob", conversationKey: key, through: t + 20)
            #expect(try await f.historyUids(key, viewer: bob) == [m[3].uid], "at or before `through` is gone")
            #expect(try await f.syncAll("bob").messages == [m[1], m[3]], "a command is not history and stays in sync")
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "alice", afterSeq: 0)) == [m[0], m[2], m[3]].map(\.uid))
            #expect(try await f.syncAll("alice").messages.count == 5)
            try await f.store.clearConversation(appId: f.appId, userId: "bob", conversationKey: key, through: t + 10)
            #expect(try await f.historyUids(key, viewer: bob) == [m[3].uid], "an earlier time brings nothing back")
            try await f.store.clearConversation(appId: f.appId, userId: "bob", conversationKey: key, through: t + 30)
            #expect(try await f.historyUids(key, viewer: bob).isEmpty)
            let later = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: t + 40))
            #expect(try await f.historyUids(key, viewer: bob) == [later[0].uid], "later messages are seen")
        }

        await check(area, "updateExpansion sets and removes keys and returns every key with the time it was set") { f in
            var original = f.privateMessage(from: "alice", to: "bob", at: f.now + 1)
            original.canIncludeExpansion = true
            original.expansion = ["a": "1"]
            let m = try await f.commit(original, f.privateMessage(from: "alice", to: "bob", at: f.now + 2))
            let uid = m[0].uid
            #expect(try await f.store.expansion(appId: f.appId, uid: uid) == ["a": ExpansionEntry(value: "1", time: f.now + 1)],
                    "keys sent with the message are set at its sentTime")
            let added = try await f.store.updateExpansion(appId: f.appId, uid: uid, set: ["b": "2", "c": "3"], remove: [],
                                                          now: f.now + 100, maxKeys: 10)
            #expect(added == ["a": ExpansionEntry(value: "1", time: f.now + 1), "b": ExpansionEntry(value: "2", time: f.now + 100),
                              "c": ExpansionEntry(value: "3", time: f.now + 100)])
            let changed = try await f.store.updateExpansion(appId: f.appId, uid: uid, set: ["a": "9"], remove: ["b", "missing"],
                                                            now: f.now + 200, maxKeys: 10)
            let expected = ["a": ExpansionEntry(value: "9", time: f.now + 200), "c": ExpansionEntry(value: "3", time: f.now + 100)]
            #expect(changed == expected)
            #expect(try await f.store.expansion(appId: f.appId, uid: uid) == expected)
            #expect(try await f.store.message(appId: f.appId, uid: uid)?.expansion == ["a": "9", "c": "3"])
            #expect(try await f.store.expansion(appId: f.appId, uid: m[1].uid) == [:], "a message without keys has none")
            #expect(try await f.store.expansion(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE") == nil)
            let emptied = try await f.store.updateExpansion(appId: f.appId, uid: uid, set: [:], remove: ["a", "c"], now: f.now + 300, maxKeys: 10)
            #expect(emptied.isEmpty)
            #expect(try await f.store.message(appId: f.appId, uid: uid)?.expansion == [:])
        }

        await check(area, "updateExpansion refuses an unknown message, one sent without expansion, and more than maxKeys, changing nothing") { f in
            var expandable = f.privateMessage(from: "alice", to: "bob", at: f.now + 1)
            expandable.canIncludeExpansion = true
            expandable.expansion = ["a": "1", "b": "2"]
            let m = try await f.commit(expandable, f.privateMessage(from: "alice", to: "bob", at: f.now + 2))
            await #expect(throws: StoreRefusal.noSuchMessage(uid: "NOPE-NOPE-NOPE-NOPE")) {
                try await f.store.updateExpansion(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE", set: ["k": "v"], remove: [], now: f.now, maxKeys: 10)
            }
            await #expect(throws: StoreRefusal.messageNotExpandable(uid: m[1].uid)) {
                try await f.store.updateExpansion(appId: f.appId, uid: m[1].uid, set: ["k": "v"], remove: [], now: f.now, maxKeys: 10)
            }
            #expect(try await f.store.expansion(appId: f.appId, uid: m[1].uid) == [:])
            let before = try await f.store.expansion(appId: f.appId, uid: m[0].uid)
            await #expect(throws: StoreRefusal.tooManyExpansionKeys(uid: m[0].uid, count: 4, limit: 3)) {
                try await f.store.updateExpansion(appId: f.appId, uid: m[0].uid, set: ["c": "3", "d": "4"], remove: [], now: f.now + 5, maxKeys: 3)
            }
            #expect(try await f.store.expansion(appId: f.appId, uid: m[0].uid) == before, "a refused update changes nothing")
            let swapped = try await f.store.updateExpansion(appId: f.appId, uid: m[0].uid, set: ["c": "3", "d": "4"], remove: ["a", "b"],
                                                            now: f.now + 6, maxKeys: 2)
            #expect(Set(swapped.keys) == ["c", "d"], "the limit counts the keys after the call, removals included")
            let full = try await f.store.updateExpansion(appId: f.appId, uid: m[0].uid, set: ["e": "5"], remove: [], now: f.now + 7, maxKeys: 3)
            #expect(full.count == 3, "exactly maxKeys is allowed")
        }
    }
}
