import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `MessageStore`: commit (seq order, every field kept, dedup by sender and client message
    /// id), the newest sentTime of a conversation, reads by uid, time-ranged reads and the hourly
    /// message log.
    public func messageStore() async throws {
        let area = "MessageStore"

        await check(area, "commit stores messages in order with increasing seqs and every field kept") { f in
            let a = f.privateMessage(from: "alice", to: "bob", at: f.now + 1, clientMessageId: "c1")
            var b = f.groupMessage(from: "alice", group: "g1", at: f.now + 2, directedTo: ["bob", "carol"], flags: .isPersisted,
                                   includeSender: false)
            b.pushContent = "push text"
            b.pushData = "push data"
            b.disableNotification = true
            b.canIncludeExpansion = true
            b.expansion = ["color": "red", "size": "L"]
            let c = f.ultraGroupMessage(from: "alice", group: "u1", channel: "ch1", at: f.now + 3, flags: .none)
            let d = f.systemMessage(from: "sys", to: StoredMessage.everyone, at: f.now + 4)
            let stored = try await f.commit(a, b, c, d)
            #expect(stored[0].seq > 0)
            #expect(zip(stored, stored.dropFirst()).allSatisfy { $0.seq < $1.seq }, "seqs increase in the order given")
            for (original, saved) in zip([a, b, c, d], stored) {
                var expected = original
                expected.seq = saved.seq
                #expect(saved == expected, "commit returns the message as given, with its seq")
                #expect(try await f.store.message(appId: f.appId, uid: saved.uid) == saved, "read back as committed")
            }
            let later = try await f.commit(f.privateMessage(from: "bob", to: "alice", at: f.now + 5))
            #expect(later[0].seq > stored[3].seq, "a later commit gets a higher seq")
        }

        await check(area, "a message committed with a sentTime not after its conversation's newest is stored one ms after it") { f in
            // Several server processes stamp sentTimes each from its own view of a conversation;
            // the store keeps them strictly increasing per conversation, as history pages need.
            let key = privateConversationKey("alice", "bob")
            let first = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 10))[0]
            #expect(first.sentTime == f.now + 10, "a conversation's first message keeps its time")
            let same = try await f.commit(f.privateMessage(from: "bob", to: "alice", at: f.now + 10))[0]
            #expect(same.sentTime == f.now + 11, "the newest's time: stored one ms after it")
            let batch = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 5),
                                           f.groupMessage(from: "alice", group: "g", at: f.now + 1),
                                           f.privateMessage(from: "alice", to: "bob", at: f.now + 3, flags: .none))
            #expect(batch.map { $0.sentTime - f.now } == [12, 1, 13],
                    "earlier times too, in the order given, commands included; another conversation keeps its own")
            #expect(try await f.store.message(appId: f.appId, uid: batch[2].uid)?.sentTime == f.now + 13, "stored as returned")
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: key) == f.now + 13)
            let later = try await f.commit(f.privateMessage(from: "bob", to: "alice", at: f.now + 100))[0]
            #expect(later.sentTime == f.now + 100, "a time after the newest is kept")
            let history = try await f.store.history(appId: f.appId, conversationKey: key, recordTime: 0, count: 10, ascending: true,
                                                    viewer: nil).messages
            #expect(history.map(\.uid) == [first.uid, same.uid, batch[0].uid, later.uid])
            #expect(history.map { $0.sentTime - f.now } == [10, 11, 12, 100])
            let resend = f.privateMessage(from: "alice", to: "bob", at: f.now + 1, clientMessageId: "c")
            let stored = try await f.commit(resend)[0]
            #expect(stored.sentTime == f.now + 101)
            #expect(try await f.store.commit([f.privateMessage(from: "alice", to: "bob", at: f.now + 1, clientMessageId: "c")])
                    == [.duplicate(stored)], "a duplicate comes back with the time it was stored with")
        }

        await check(area, "a message whose (sender, client message id) is stored is not stored again: the first comes back") { f in
            let first = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1, text: "first", clientMessageId: "dup-1"))[0]
            let resend = f.privateMessage(from: "alice", to: "bob", at: f.now + 2, text: "second", clientMessageId: "dup-1")
            #expect(try await f.store.commit([resend]) == [.duplicate(first)])
            let elsewhere = f.privateMessage(from: "alice", to: "carol", at: f.now + 3, text: "third", clientMessageId: "dup-1")
            #expect(try await f.store.commit([elsewhere]) == [.duplicate(first)], "the key is the sender's, whatever the conversation")
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")) == [first.uid], "stored once")
            #expect(try await f.store.message(appId: f.appId, uid: resend.uid) == nil)
            #expect(try await f.store.message(appId: f.appId, uid: elsewhere.uid) == nil)

            // Another sender, another id, or no id: new messages.
            let other = try await f.store.commit([
                f.privateMessage(from: "bob", to: "alice", at: f.now + 4, clientMessageId: "dup-1"),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 5, clientMessageId: "dup-2"),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 6),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 7),
            ])
            #expect(other.allSatisfy { if case .stored = $0 { true } else { false } })
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")).count == 5)

            // A resend between new messages: each outcome in its place, the new ones with
            // consecutive seqs and increasing times, the resend taking neither.
            let mixed = try await f.store.commit([
                f.privateMessage(from: "carol", to: "dave", at: f.now + 50, clientMessageId: "m-1"),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 60, clientMessageId: "dup-1"),
                f.privateMessage(from: "carol", to: "dave", at: f.now + 40, clientMessageId: "m-2"),
            ])
            try #require(mixed.count == 3)
            guard case .stored(let before) = mixed[0], case .stored(let after) = mixed[2] else {
                Issue.record("the new messages are stored: \(mixed)")
                return
            }
            #expect(mixed[1] == .duplicate(first))
            #expect(after.seq == before.seq + 1)
            #expect(before.sentTime == f.now + 50 && after.sentTime == f.now + 51)
        }

        await check(area, "a repeated client message id inside one commit is stored once") { f in
            let x = f.privateMessage(from: "alice", to: "bob", at: f.now + 1, text: "x", clientMessageId: "same")
            let y = f.privateMessage(from: "alice", to: "bob", at: f.now + 2, text: "y", clientMessageId: "same")
            let outcomes = try await f.store.commit([x, y])
            try #require(outcomes.count == 2)
            guard case .stored(let stored) = outcomes[0] else {
                Issue.record("the first is stored: \(outcomes[0])")
                return
            }
            #expect(stored.uid == x.uid)
            #expect(outcomes[1] == .duplicate(stored))
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")) == [x.uid])
        }

        await check(area, "lastSentTime is the newest sentTime of the conversation, commands included; nil without messages") { f in
            let key = privateConversationKey("alice", "bob")
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: key) == nil)
            try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                               f.privateMessage(from: "bob", to: "alice", at: f.now + 3),
                               f.groupMessage(from: "alice", group: "g", at: f.now + 9))
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: key) == f.now + 3)
            // A command (kept for sync only) still takes a sentTime of the conversation.
            try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 4, flags: .none))
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: key) == f.now + 4)
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: groupConversationKey("g")) == f.now + 9)
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: groupConversationKey("other")) == nil)
        }

        await check(area, "message(uid) and messages(uids) return the stored ones and skip unknown uids") { f in
            let stored = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                                            f.groupMessage(from: "bob", group: "g", at: f.now + 2),
                                            f.privateMessage(from: "carol", to: "bob", at: f.now + 3))
            #expect(try await f.store.message(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE") == nil)
            let found = try await f.store.messages(appId: f.appId, uids: [stored[2].uid, "NOPE-NOPE-NOPE-NOPE", stored[0].uid])
            #expect(found.sorted { $0.seq < $1.seq } == [stored[0], stored[2]])
            #expect(try await f.store.messages(appId: f.appId, uids: []).isEmpty)
        }

        await check(area, "conversationMessages reads a time range of cloud history, either way, optionally of one sender") { f in
            let t = f.now
            let m = try await f.commit(
                f.privateMessage(from: "alice", to: "bob", at: t + 10),
                f.privateMessage(from: "bob", to: "alice", at: t + 20),
                f.privateMessage(from: "alice", to: "bob", at: t + 30, flags: .none),
                f.privateMessage(from: "alice", to: "bob", at: t + 40),
                f.privateMessage(from: "bob", to: "alice", at: t + 50),
                f.privateMessage(from: "alice", to: "carol", at: t + 25))
            let key = privateConversationKey("alice", "bob")
            func times(_ start: Int64, _ end: Int64, includeStart: Bool, ascending: Bool, limit: Int = 10,
                       sender: String? = nil) async throws -> [Int64] {
                try await f.store.conversationMessages(appId: f.appId, conversationKey: key, start: start, end: end,
                                                       includeStart: includeStart, ascending: ascending, limit: limit,
                                                       senderId: sender).map { $0.sentTime - t }
            }
            #expect(try await times(t + 10, t + 50, includeStart: true, ascending: true) == [10, 20, 40, 50],
                    "oldest first, commands and other conversations left out")
            #expect(try await times(t + 10, t + 50, includeStart: false, ascending: true) == [20, 40, 50])
            #expect(try await times(t + 10, t + 40, includeStart: true, ascending: true) == [10, 20, 40], "end is inclusive")
            #expect(try await times(t + 10, t + 50, includeStart: true, ascending: true, limit: 2) == [10, 20])
            #expect(try await times(t + 50, t + 10, includeStart: true, ascending: false) == [50, 40, 20, 10],
                    "descending: from start back to end, newest first")
            #expect(try await times(t + 50, t + 10, includeStart: false, ascending: false) == [40, 20, 10])
            #expect(try await times(t + 50, t + 20, includeStart: true, ascending: false) == [50, 40, 20], "end is inclusive")
            #expect(try await times(t + 50, t + 10, includeStart: true, ascending: false, limit: 1) == [50])
            #expect(try await times(t, t + 100, includeStart: true, ascending: true, sender: "alice") == [10, 40])
            #expect(try await times(t + 100, t, includeStart: true, ascending: false, sender: "bob") == [50, 20])
            let all = try await f.store.conversationMessages(appId: f.appId, conversationKey: key, start: t, end: t + 100,
                                                             includeStart: true, ascending: true, limit: 10)
            #expect(all == [m[0], m[1], m[3], m[4]], "full messages, the same as stored")
        }

        await check(area, "messages(sentFrom:afterSeq:to:) pages the app's whole log by (sentTime, seq)") { f in
            let t = f.now
            let m = try await f.commit(
                f.privateMessage(from: "alice", to: "bob", at: t),
                f.groupMessage(from: "bob", group: "g", at: t),
                f.privateMessage(from: "carol", to: "dave", at: t + 1, flags: .none),
                f.privateMessage(from: "alice", to: "bob", at: t + 2))
            #expect(try await f.store.messages(appId: f.appId, sentFrom: t, afterSeq: 0, to: t + 2, limit: 10) == Array(m.prefix(3)),
                    "from inclusive, to exclusive, every kind of message")
            var cursor = (time: t, seq: UInt64(0))
            var paged: [StoredMessage] = []
            for _ in 0..<10 {
                let page = try await f.store.messages(appId: f.appId, sentFrom: cursor.time, afterSeq: cursor.seq, to: t + 3, limit: 1)
                guard let last = page.last else { break }
                paged += page
                cursor = (last.sentTime, last.seq)
            }
            #expect(paged == m, "pages of one, each after the previous cursor, read everything once")
            #expect(try await f.store.messages(appId: f.appId, sentFrom: t + 1, afterSeq: 0, to: t + 10, limit: 10) == Array(m.suffix(2)))
        }

        await check(area, "deleteMessageLog marks one hour of the log deleted") { f in
            #expect(try await f.store.isMessageLogDeleted(appId: f.appId, hour: "2024010112") == false)
            try await f.store.deleteMessageLog(appId: f.appId, hour: "2024010112")
            try await f.store.deleteMessageLog(appId: f.appId, hour: "2024010112")
            #expect(try await f.store.isMessageLogDeleted(appId: f.appId, hour: "2024010112"))
            #expect(try await f.store.isMessageLogDeleted(appId: f.appId, hour: "2024010113") == false)
        }
    }
}
