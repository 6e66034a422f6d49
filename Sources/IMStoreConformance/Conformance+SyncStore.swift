import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `SyncStore`: what a user's offline sync holds (private, system, broadcast and group
    /// messages, each as far as the user may see it), its paging by `limit` and `maxBytes` with the
    /// watermark, and cloud history in both directions with `count`, `maxBytes` and the viewer.
    public func syncStore() async throws {
        let area = "SyncStore"

        await check(area, "a user syncs the private messages they receive, and those they send unless sent without them") { f in
            let m = try await f.commit(
                f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                f.privateMessage(from: "bob", to: "alice", at: f.now + 2),
                f.privateMessage(from: "carol", to: "dave", at: f.now + 3),
                f.privateMessage(from: "alice", to: "bob", at: f.now + 4, includeSender: false))
            func sync(_ user: String) async throws -> SyncPage {
                try await f.store.syncPage(appId: f.appId, userId: user, after: 0, minSentTime: .min, limit: 100, maxBytes: .max)
            }
            let bob = try await sync("bob")
            #expect(bob.messages == [m[0], m[1], m[3]], "in seq order, as stored")
            #expect(!bob.hasMore && bob.watermark >= m[3].seq)
            #expect(try await sync("alice").messages == [m[0], m[1]])
            #expect(try await sync("dave").messages == [m[2]])
            #expect(try await sync("erin").messages.isEmpty)
        }

        await check(area, "system messages reach their recipient, broadcasts every user but their sender") { f in
            let m = try await f.commit(
                f.systemMessage(from: "sys", to: "bob", at: f.now + 1),
                f.systemMessage(from: "sys", to: StoredMessage.everyone, at: f.now + 2),
                f.systemMessage(from: "sys", to: "alice", at: f.now + 3))
            #expect(try await f.syncAll("bob").messages == [m[0], m[1]])
            #expect(try await f.syncAll("alice").messages == [m[1], m[2]])
            #expect(try await f.syncAll("nobody-yet").messages == [m[1]], "a broadcast reaches users the store has not seen")
            #expect(try await f.syncAll("sys").messages.isEmpty)
        }

        await check(area, "group members sync what the group got after they joined, as far as they may see it") { f in
            let before = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now))
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["alice", "bob", "carol"],
                                            maxMembers: 100, preJoinHistory: 0, now: f.now)
            let g = try await f.commit(
                f.groupMessage(from: "alice", group: "g", at: f.now + 1),
                f.groupMessage(from: "bob", group: "g", at: f.now + 2, directedTo: ["carol"]),
                f.groupMessage(from: "carol", group: "g", at: f.now + 3, includeSender: false),
                f.groupMessage(from: "alice", group: "g", at: f.now + 4, flags: .none))
            #expect(try await f.syncAll("alice").messages == [g[0], g[2], g[3]], "a directional message is not alice's")
            #expect(try await f.syncAll("bob").messages == [g[0], g[1], g[2], g[3]], "the sender of a directional message has it")
            #expect(try await f.syncAll("carol").messages == [g[0], g[1], g[3]], "a message sent without the sender's devices")
            #expect(try await f.syncAll("dave").messages.isEmpty, "not a member")
            #expect(try await !(f.syncAll("alice").messages.contains(before[0])), "sent before the group had its members")

            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: ["erin"], maxMembers: 100,
                                            preJoinHistory: 0, now: f.now + 5)
            let later = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + 6))
            #expect(try await f.syncAll("erin").messages == later, "a new member syncs only what was committed after joining")
        }

        await check(area, "a member who quits no longer syncs the group; members of a dismissed group keep what was sent") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["alice", "bob"], maxMembers: 100,
                                            preJoinHistory: 0, now: f.now)
            let g1 = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + 1))
            try await f.store.quitGroup(appId: f.appId, groupId: "g", userIds: ["bob"])
            let g2 = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + 2))
            #expect(try await f.syncAll("bob").messages.isEmpty, "sync holds the messages of the groups one is in")
            #expect(try await f.dismissAndNotify("g", by: "alice", at: f.now + 3) != nil)
            let alice = try await f.syncAll("alice").messages
            #expect(alice.count == 3 && Array(alice.prefix(2)) == g1 + g2,
                    "the former members sync what was sent, the dismissal notification committed after it included")
        }

        await check(area, "a group whose id is also a user's id: its members do not sync that user's private messages") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "bob", name: "Bob's", userIds: ["carol"], maxMembers: 100,
                                            preJoinHistory: 0, now: f.now)
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                                       f.groupMessage(from: "carol", group: "bob", at: f.now + 2))
            #expect(try await f.syncAll("carol").messages == [m[1]])
            #expect(try await f.syncAll("bob").messages == [m[0]])
        }

        await check(area, "ultra group messages are not part of sync, not even for a user named like the group") { f in
            let m = try await f.commit(f.ultraGroupMessage(from: "alice", group: "carol", at: f.now + 1),
                                       f.privateMessage(from: "alice", to: "carol", at: f.now + 2))
            #expect(try await f.syncAll("alice").messages == [m[1]])
            #expect(try await f.syncAll("carol").messages == [m[1]])
        }

        await check(area, "a page starts after `after` and leaves out messages sent before minSentTime") { f in
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now - 1000),
                                       f.privateMessage(from: "alice", to: "bob", at: f.now),
                                       f.privateMessage(from: "alice", to: "bob", at: f.now + 1000))
            #expect(try await f.syncAll("bob", after: m[0].seq).messages == [m[1], m[2]])
            #expect(try await f.syncAll("bob", after: m[2].seq).messages.isEmpty)
            #expect(try await f.syncAll("bob", minSentTime: f.now).messages == [m[1], m[2]])
            #expect(try await f.syncAll("bob", minSentTime: f.now + 1).messages == [m[2]])
            let page = try await f.store.syncPage(appId: f.appId, userId: "bob", after: m[1].seq, minSentTime: .min, limit: 10, maxBytes: .max)
            #expect(page.watermark >= m[2].seq)
        }

        await check(area, "limit: a full page says hasMore and its watermark is where the next page starts") { f in
            var m: [StoredMessage] = []
            for i in 1...5 { m += try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + Int64(i))) }
            func page(after: UInt64, limit: Int) async throws -> SyncPage {
                try await f.store.syncPage(appId: f.appId, userId: "bob", after: after, minSentTime: .min, limit: limit, maxBytes: .max)
            }
            let first = try await page(after: 0, limit: 2)
            #expect(first.messages == [m[0], m[1]] && first.hasMore)
            #expect(first.watermark >= m[1].seq && first.watermark < m[2].seq)
            let second = try await page(after: first.watermark, limit: 2)
            #expect(second.messages == [m[2], m[3]] && second.hasMore)
            #expect(second.watermark >= m[3].seq && second.watermark < m[4].seq)
            let third = try await page(after: second.watermark, limit: 2)
            #expect(third.messages == [m[4]] && !third.hasMore && third.watermark >= m[4].seq)
            let exact = try await page(after: 0, limit: 5)
            #expect(exact.messages == m && !exact.hasMore, "exactly `limit` messages is not more")
            let done = try await page(after: third.watermark, limit: 2)
            #expect(done.messages.isEmpty && !done.hasMore && done.watermark >= third.watermark)
        }

        await check(area, "maxBytes: a page stops before the message that would pass it, and holds at least one message") { f in
            var m: [StoredMessage] = []
            for i in 1...4 { m += try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + Int64(i), padding: 1000)) }
            func page(after: UInt64, maxBytes: Int) async throws -> SyncPage {
                try await f.store.syncPage(appId: f.appId, userId: "bob", after: after, minSentTime: .min, limit: 100, maxBytes: maxBytes)
            }
            let two = m[0].wireSize + m[1].wireSize
            let first = try await page(after: 0, maxBytes: two)
            #expect(first.messages == [m[0], m[1]] && first.hasMore, "a page fills up to maxBytes exactly")
            #expect(first.watermark >= m[1].seq && first.watermark < m[2].seq, "the watermark stops just below the message left out")
            let second = try await page(after: first.watermark, maxBytes: two)
            #expect(second.messages == [m[2], m[3]] && !second.hasMore)
            let tight = try await page(after: 0, maxBytes: two - 1)
            #expect(tight.messages == [m[0]] && tight.hasMore && tight.watermark < m[1].seq)
            let tiny = try await page(after: 0, maxBytes: 1)
            #expect(tiny.messages == [m[0]] && tiny.hasMore, "the first message is always taken")
            #expect(tiny.watermark >= m[0].seq && tiny.watermark < m[1].seq)
        }

        await check(area, "history: newest first before recordTime, oldest first after it, cloud history only") { f in
            let t = f.now
            let h = try await f.commit(
                f.privateMessage(from: "alice", to: "bob", at: t + 10),
                f.privateMessage(from: "bob", to: "alice", at: t + 20),
                f.privateMessage(from: "alice", to: "bob", at: t + 25, flags: .none),
                f.privateMessage(from: "alice", to: "bob", at: t + 27, flags: .isCounted),
                f.privateMessage(from: "alice", to: "bob", at: t + 30),
                f.privateMessage(from: "alice", to: "carol", at: t + 35),
                f.privateMessage(from: "bob", to: "alice", at: t + 40),
                f.privateMessage(from: "alice", to: "bob", at: t + 50))
            let key = privateConversationKey("alice", "bob")
            let (h1, h2, h3, h4, h5) = (h[0], h[1], h[4], h[6], h[7])
            let newest = try await f.store.history(appId: f.appId, conversationKey: key, recordTime: 0, count: 10, ascending: false, viewer: nil)
            #expect(newest.messages == [h5, h4, h3, h2, h1] && !newest.hasMore, "recordTime 0 descending: from the newest")
            #expect(try await f.historyUids(key, recordTime: t + 40, ascending: false) == [h3, h2, h1].map(\.uid), "strictly before")
            #expect(try await f.historyUids(key, recordTime: t + 20, ascending: true) == [h3, h4, h5].map(\.uid), "strictly after")
            #expect(try await f.historyUids(key, recordTime: 0, ascending: true) == [h1, h2, h3, h4, h5].map(\.uid))
        }

        await check(area, "history: count cuts a page with hasMore; exactly count messages is no more") { f in
            var h: [StoredMessage] = []
            for i in 1...5 { h += try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + Int64(10 * i))) }
            let key = privateConversationKey("alice", "bob")
            func page(_ recordTime: Int64, _ count: Int, ascending: Bool = false) async throws -> HistoryPage {
                try await f.store.history(appId: f.appId, conversationKey: key, recordTime: recordTime, count: count,
                                          ascending: ascending, viewer: nil)
            }
            let first = try await page(0, 2)
            #expect(first.messages == [h[4], h[3]] && first.hasMore)
            let second = try await page(h[3].sentTime, 2)
            #expect(second.messages == [h[2], h[1]] && second.hasMore)
            let third = try await page(h[1].sentTime, 2)
            #expect(third.messages == [h[0]] && !third.hasMore)
            let exact = try await page(0, 5)
            #expect(exact.messages.count == 5 && !exact.hasMore)
            let ascending = try await page(0, 3, ascending: true)
            #expect(ascending.messages == [h[0], h[1], h[2]] && ascending.hasMore)
            #expect(try await page(h[4].sentTime, 3, ascending: true).messages.isEmpty)
        }

        await check(area, "history: maxBytes cuts a page with hasMore, after at least one message") { f in
            var h: [StoredMessage] = []
            for i in 1...4 { h += try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now + Int64(i), padding: 2000)) }
            let key = groupConversationKey("g")
            func page(_ maxBytes: Int, ascending: Bool = false) async throws -> HistoryPage {
                try await f.store.history(appId: f.appId, conversationKey: key, recordTime: 0, count: 10, ascending: ascending,
                                          viewer: nil, maxBytes: maxBytes)
            }
            let two = try await page(h[3].wireSize + h[2].wireSize)
            #expect(two.messages == [h[3], h[2]] && two.hasMore)
            let cut = try await page(h[3].wireSize + h[2].wireSize - 1)
            #expect(cut.messages == [h[3]] && cut.hasMore)
            let one = try await page(1)
            #expect(one.messages == [h[3]] && one.hasMore, "at least one message, whatever its size")
            let ascending = try await page(h[0].wireSize + h[1].wireSize + h[2].wireSize, ascending: true)
            #expect(ascending.messages == [h[0], h[1], h[2]] && ascending.hasMore)
            let all = try await page(.max)
            #expect(all.messages.count == 4 && !all.hasMore)
        }

        await check(area, "history: a viewer reads after afterSeq and since minSentTime, directional messages only when theirs") { f in
            let t = f.now
            let g = try await f.commit(
                f.groupMessage(from: "alice", group: "g", at: t + 10),
                f.groupMessage(from: "alice", group: "g", at: t + 20, directedTo: ["bob"]),
                f.groupMessage(from: "carol", group: "g", at: t + 30, directedTo: ["dave", "bobby"]),
                f.groupMessage(from: "alice", group: "g", at: t + 40),
                f.groupMessage(from: "alice", group: "g", at: t + 50))
            let key = groupConversationKey("g")
            func uids(_ viewer: HistoryViewer?) async throws -> [String] { try await f.historyUids(key, viewer: viewer) }
            #expect(try await uids(nil) == g.map(\.uid), "no viewer: everything")
            #expect(try await uids(HistoryViewer(userId: "bob", afterSeq: 0)) == [g[0], g[1], g[3], g[4]].map(\.uid))
            #expect(try await uids(HistoryViewer(userId: "carol", afterSeq: 0)) == [g[0], g[2], g[3], g[4]].map(\.uid),
                    "the sender sees their directional message")
            #expect(try await uids(HistoryViewer(userId: "bo", afterSeq: 0)) == [g[0], g[3], g[4]].map(\.uid),
                    "a user id that is part of a listed one is not listed")
            #expect(try await uids(HistoryViewer(userId: "bobby", afterSeq: 0)) == [g[0], g[2], g[3], g[4]].map(\.uid))
            #expect(try await uids(HistoryViewer(userId: "bob", afterSeq: g[1].seq)) == [g[3], g[4]].map(\.uid))
            #expect(try await uids(HistoryViewer(userId: "bob", afterSeq: 0, minSentTime: t + 40)) == [g[3], g[4]].map(\.uid))
            #expect(try await uids(HistoryViewer(userId: "bob", afterSeq: 0, minSentTime: t + 41)) == [g[4].uid])
            let descending = try await f.store.history(appId: f.appId, conversationKey: key, recordTime: 0, count: 2, ascending: false,
                                                       viewer: HistoryViewer(userId: "dave", afterSeq: 0))
            #expect(descending.messages == [g[4], g[3]] && descending.hasMore)
        }
    }
}

extension Fixture {
    /// Dismisses a group as the server does: the store first, then the notification to its members.
    func dismissAndNotify(_ groupId: String, by operatorId: String, at time: Int64) async throws -> StoredMessage? {
        guard try await store.dismissGroup(appId: appId, groupId: groupId, now: time) else { return nil }
        return try await commit(groupMessage(from: operatorId, group: groupId, at: time, text: "dismissed", flags: .isPersisted)).first
    }
}
