import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `ConversationStateStore`: levels and pins, quiet hours, tags and tagged conversations with
    /// their refusals, versions stamped per user, and the state sync (tombstones, paging).
    public func conversationStateStore() async throws {
        let area = "ConversationStateStore"
        let bob = ConversationIdentifier(.private, targetId: "bob")

        await check(area, "setLevel and setTop stamp one row with the user's next version; conversationUnpushLevel reads the level") { f in
            let first = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setLevel(bob, .mention), now: f.now)
            #expect(first.previousVersion == 0 && first.version == 1)
            #expect(first.settings == [ConversationSettingRecord(conversation: bob, level: .mention, isTop: false, version: 1, updatedAt: f.now)])
            #expect(first.tags.isEmpty && first.links.isEmpty && first.quietHours == nil)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .private, targetId: "bob", channelId: "") == 1)
            let pinned = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setTop(bob, true), now: f.now + 1)
            #expect(pinned.previousVersion == 1 && pinned.version == 2)
            #expect(pinned.settings == [ConversationSettingRecord(conversation: bob, level: .mention, isTop: true, version: 2, updatedAt: f.now + 1)],
                    "the pin keeps the level")
            let blocked = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setLevel(bob, .blocked), now: f.now + 2)
            #expect(blocked.settings.first?.isTop == true && blocked.settings.first?.level == .blocked, "the level keeps the pin")
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .private, targetId: "bob", channelId: "") == 5)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .private, targetId: "carol", channelId: "") == 0)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "bob", type: .private, targetId: "bob", channelId: "") == 0)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .group, targetId: "bob", channelId: "") == 0)

            _ = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setLevel(ConversationIdentifier(.group, targetId: ""), .blocked), now: f.now)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .group, targetId: "", channelId: "") == 5,
                    "an empty target is the level of the whole type")
            _ = try await f.store.editConversationState(appId: f.appId, userId: "alice",
                                                        .setLevel(ConversationIdentifier(.ultraGroup, targetId: "u1", channelId: "ch1"), .mentionAll), now: f.now)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .ultraGroup, targetId: "u1", channelId: "ch1") == 4)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "alice", type: .ultraGroup, targetId: "u1", channelId: "") == 0)
            let bobsFirst = try await f.store.editConversationState(appId: f.appId, userId: "bob", .setTop(bob, true), now: f.now)
            #expect(bobsFirst.previousVersion == 0 && bobsFirst.version == 1, "versions are counted per user")
        }

        await check(area, "quiet hours: set, replace, remove; removing none changes nothing") { f in
            #expect(try await f.store.quietHours(appId: f.appId, userId: "alice") == nil)
            let none = try await f.store.editConversationState(appId: f.appId, userId: "alice", .removeQuietHours, now: f.now)
            #expect(none.isEmpty && none.previousVersion == 0 && none.version == 0)
            let hours = QuietHours(startTime: "22:00:00", spanMinutes: 480, level: .mention, timeZone: "Asia/Shanghai")
            let set = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setQuietHours(hours), now: f.now)
            #expect(set.quietHours == QuietHoursRecord(hours: hours, version: 1) && set.version == 1)
            #expect(try await f.store.quietHours(appId: f.appId, userId: "alice") == hours)
            let other = QuietHours(startTime: "01:30:00", spanMinutes: 60)
            #expect(try await f.store.editConversationState(appId: f.appId, userId: "alice", .setQuietHours(other), now: f.now).quietHours
                    == QuietHoursRecord(hours: other, version: 2))
            #expect(try await f.store.quietHours(appId: f.appId, userId: "alice") == other)
            let removed = try await f.store.editConversationState(appId: f.appId, userId: "alice", .removeQuietHours, now: f.now)
            #expect(removed.quietHours == QuietHoursRecord(hours: nil, version: 3) && removed.previousVersion == 2 && removed.version == 3)
            #expect(try await f.store.quietHours(appId: f.appId, userId: "alice") == nil)
            #expect(try await f.store.quietHours(appId: f.appId, userId: "bob") == nil)
        }

        await check(area, "tags: add, rename, remove, add again; tagExists, tooManyTags and noSuchTag refuse and change nothing") { f in
            func edit(_ edit: ConversationStateEdit, at time: Int64 = 0) async throws -> ConversationStateDeltaRecord {
                try await f.store.editConversationState(appId: f.appId, userId: "alice", edit, now: f.now + time)
            }
            func version() async throws -> UInt64 {
                try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: 0, limit: 100).version
            }
            #expect(try await edit(.addTag(tagId: "t1", name: "Work", limit: 2)).tags
                    == [ConversationTagRecord(tagId: "t1", name: "Work", createdAt: f.now, removed: false, version: 1)])
            await #expect(throws: StoreRefusal.tagExists(tagId: "t1")) { try await edit(.addTag(tagId: "t1", name: "Again", limit: 2)) }
            _ = try await edit(.addTag(tagId: "t2", name: "Home", limit: 2))
            await #expect(throws: StoreRefusal.tooManyTags(tagId: "t3", limit: 2)) { try await edit(.addTag(tagId: "t3", name: "More", limit: 2)) }
            await #expect(throws: StoreRefusal.noSuchTag(tagId: "t9")) { try await edit(.renameTag(tagId: "t9", name: "X")) }
            #expect(try await version() == 2, "refused edits stamp nothing")
            #expect(try await edit(.renameTag(tagId: "t1", name: "Job"), at: 5).tags
                    == [ConversationTagRecord(tagId: "t1", name: "Job", createdAt: f.now, removed: false, version: 3)])
            let same = try await edit(.renameTag(tagId: "t1", name: "Job"))
            #expect(same.isEmpty && same.version == 3, "the same name changes nothing")
            #expect(try await edit(.removeTag(tagId: "t2")).tags
                    == [ConversationTagRecord(tagId: "t2", name: "Home", createdAt: f.now, removed: true, version: 4)])
            #expect(try await edit(.removeTag(tagId: "t2")).isEmpty, "removing a removed tag changes nothing")
            #expect(try await edit(.removeTag(tagId: "t9")).isEmpty, "nor does removing an unknown one")
            await #expect(throws: StoreRefusal.noSuchTag(tagId: "t2")) { try await edit(.renameTag(tagId: "t2", name: "X")) }
            _ = try await edit(.addTag(tagId: "t3", name: "More", limit: 2))
            #expect(try await version() == 5, "a removed tag does not count against the limit")
            await #expect(throws: StoreRefusal.tooManyTags(tagId: "t2", limit: 2)) { try await edit(.addTag(tagId: "t2", name: "Back", limit: 2)) }
            let revived = try await edit(.addTag(tagId: "t2", name: "Back", limit: 3), at: 9)
            #expect(revived.tags == [ConversationTagRecord(tagId: "t2", name: "Back", createdAt: f.now + 9, removed: false, version: 6)])
            let state = try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: 0, limit: 100)
            #expect(state.tags.map(\.tagId).sorted() == ["t1", "t2", "t3"] && state.tags.allSatisfy { !$0.removed })
        }

        await check(area, "tagged conversations: added once, removed, pinned in the tag; noSuchTag and conversationNotInTag refuse") { f in
            func edit(_ edit: ConversationStateEdit) async throws -> ConversationStateDeltaRecord {
                try await f.store.editConversationState(appId: f.appId, userId: "alice", edit, now: f.now)
            }
            let c1 = ConversationIdentifier(.private, targetId: "bob")
            let c2 = ConversationIdentifier(.group, targetId: "g1")
            let c3 = ConversationIdentifier(.system, targetId: "news")
            let c4 = ConversationIdentifier(.private, targetId: "dave")
            _ = try await edit(.addTag(tagId: "t1", name: "One", limit: 20))
            _ = try await edit(.addTag(tagId: "t2", name: "Two", limit: 20))
            await #expect(throws: StoreRefusal.noSuchTag(tagId: "t9")) { try await edit(.addConversations(tagId: "t9", [c1])) }
            let added = try await edit(.addConversations(tagId: "t1", [c1, c2, c1]))
            #expect(added.links == [ConversationTagLinkRecord(tagId: "t1", conversation: c1, isTop: false, removed: false, version: 3, linkedAt: f.now),
                                    ConversationTagLinkRecord(tagId: "t1", conversation: c2, isTop: false, removed: false, version: 4, linkedAt: f.now)],
                    "each conversation once, in the order given")
            #expect(try await edit(.addConversations(tagId: "t1", [c1, c3])).links.map(\.conversation) == [c3], "one already in the tag is skipped")
            await #expect(throws: StoreRefusal.conversationNotInTag(tagId: "t1", type: .private, targetId: "dave")) {
                try await edit(.setTopInTag(tagId: "t1", c4, true))
            }
            #expect(try await edit(.setTopInTag(tagId: "t1", c1, true)).links
                    == [ConversationTagLinkRecord(tagId: "t1", conversation: c1, isTop: true, removed: false, version: 6, linkedAt: f.now)])
            #expect(try await edit(.setTopInTag(tagId: "t1", c1, true)).isEmpty, "pinning again changes nothing")
            let removed = try await edit(.removeConversations(tagId: "t1", [c1, c4]))
            #expect(removed.links == [ConversationTagLinkRecord(tagId: "t1", conversation: c1, isTop: false, removed: true, version: 7, linkedAt: f.now)],
                    "taken out (and unpinned); one not in the tag is passed over")
            await #expect(throws: StoreRefusal.conversationNotInTag(tagId: "t1", type: .private, targetId: "bob")) {
                try await edit(.setTopInTag(tagId: "t1", c1, true))
            }
            _ = try await edit(.addConversations(tagId: "t2", [c2]))
            let untagged = try await edit(.removeTags(c2, tagIds: ["t1", "t2", "t9"]))
            #expect(Set(untagged.links.map(\.tagId)) == ["t1", "t2"] && untagged.links.allSatisfy { $0.removed && $0.conversation == c2 })
            let gone = try await edit(.removeTag(tagId: "t1"))
            #expect(gone.links.map(\.conversation) == [c3] && gone.links.allSatisfy(\.removed), "removing a tag takes its conversations out")
            #expect(gone.tags.map(\.tagId) == ["t1"] && gone.tags.allSatisfy(\.removed))
            #expect(gone.version == gone.previousVersion + 2)
            await #expect(throws: StoreRefusal.noSuchTag(tagId: "t1")) { try await edit(.addConversations(tagId: "t1", [c1])) }
            let state = try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: 0, limit: 100)
            #expect(state.tags.map(\.tagId) == ["t2"] && state.links.isEmpty)
            let back = try await edit(.addConversations(tagId: "t2", [c2]))
            #expect(back.links.map(\.removed) == [false] && back.links.map(\.isTop) == [false], "taken out, then added again")
        }

        await check(area, "removing a tag of several conversations stamps each link once, in the order they were tagged, then the tag") { f in
            func edit(_ edit: ConversationStateEdit) async throws -> ConversationStateDeltaRecord {
                try await f.store.editConversationState(appId: f.appId, userId: "alice", edit, now: f.now)
            }
            let conversations = ["d", "b", "e", "a", "c"].map { ConversationIdentifier(.private, targetId: $0) }
            _ = try await edit(.addTag(tagId: "t", name: "T", limit: 20))
            for conversation in conversations { _ = try await edit(.addConversations(tagId: "t", [conversation])) }
            _ = try await edit(.removeConversations(tagId: "t", [conversations[2]]))
            let before = try await edit(.addConversations(tagId: "t", [conversations[2]]))   // e again: now the newest
            let gone = try await edit(.removeTag(tagId: "t"))
            #expect(gone.previousVersion == before.version && gone.version == before.version + 6, "five links and the tag")
            #expect(gone.links.map(\.conversation.targetId) == ["d", "b", "a", "c", "e"], "in the order they were tagged")
            #expect(gone.links.map(\.version) == Array((before.version + 1)...(before.version + 5)) && gone.links.allSatisfy { $0.removed && !$0.isTop })
            #expect(gone.tags.map(\.version) == [before.version + 6])
            let state = try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: before.version, limit: 100)
            #expect(state.links.map(\.version) == gone.links.map(\.version) && state.links.allSatisfy(\.removed), "stored as answered")
        }

        await check(area, "state sync: from 0 the current state only, later every change, lowest versions first, in pages") { f in
            func edit(_ edit: ConversationStateEdit) async throws {
                _ = try await f.store.editConversationState(appId: f.appId, userId: "alice", edit, now: f.now)
            }
            func changes(since: UInt64, limit: Int = 100) async throws -> ConversationStateDeltaRecord {
                try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: since, limit: limit)
            }
            let c1 = ConversationIdentifier(.private, targetId: "bob")
            let c2 = ConversationIdentifier(.group, targetId: "g1")
            try await edit(.setLevel(c1, .mention))                                     // v1
            try await edit(.setLevel(c2, .blocked))                                     // v2
            try await edit(.setLevel(c2, .default))                                     // v3: c2 back to unset
            try await edit(.addTag(tagId: "t1", name: "One", limit: 20))                // v4
            try await edit(.addTag(tagId: "t2", name: "Two", limit: 20))                // v5
            try await edit(.removeTag(tagId: "t2"))                                     // v6
            try await edit(.setQuietHours(QuietHours(startTime: "23:00:00", spanMinutes: 30)))  // v7
            try await edit(.removeQuietHours)                                           // v8
            try await edit(.addConversations(tagId: "t1", [c1]))                        // v9

            let fresh = try await changes(since: 0)
            #expect(fresh.settings.map(\.conversation) == [c1] && fresh.settings.map(\.version) == [1], "an unset row is left out")
            #expect(fresh.tags.map(\.tagId) == ["t1"] && fresh.links.map(\.version) == [9], "tombstones are left out")
            #expect(fresh.quietHours == nil && fresh.version == 9 && !fresh.more)

            let later = try await changes(since: 3)
            #expect(later.settings.isEmpty)
            #expect(later.tags.map(\.version) == [4, 6] && later.tags.map(\.removed) == [false, true], "tombstones included")
            #expect(later.quietHours == QuietHoursRecord(hours: nil, version: 8), "the removal of the quiet hours")
            #expect(later.links.map(\.version) == [9] && later.version == 9 && !later.more)
            #expect(try await changes(since: 2).settings == [ConversationSettingRecord(conversation: c2, level: .default, isTop: false, version: 3, updatedAt: f.now)])

            let page1 = try await changes(since: 0, limit: 2)
            #expect(page1.settings.map(\.version) == [1] && page1.tags.map(\.version) == [4] && page1.links.isEmpty)
            #expect(page1.more && page1.version == 4, "the version of a full page is its last row's")
            let page2 = try await changes(since: page1.version, limit: 2)
            #expect(page2.tags.map(\.version) == [6] && page2.quietHours?.version == 8 && page2.links.isEmpty && page2.settings.isEmpty)
            #expect(page2.more && page2.version == 8)
            let page3 = try await changes(since: page2.version, limit: 2)
            #expect(page3.links.map(\.version) == [9] && page3.tags.isEmpty && page3.quietHours == nil && !page3.more && page3.version == 9)
            let done = try await changes(since: 9)
            #expect(done.isEmpty && !done.more && done.version == 9)
            let nobody = try await f.store.conversationStateChanges(appId: f.appId, userId: "bob", since: 0, limit: 100)
            #expect(nobody.isEmpty && nobody.version == 0 && !nobody.more)
        }
    }
}
