import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `GroupStore`: joining (all or none under `maxMembers`, pre-join history, a dismissed group
    /// started again), quitting, dismissal, renaming, `syncGroups`, the roster, member mutes,
    /// whole-group mutes and the mute whitelist.
    public func groupStore() async throws {
        let area = "GroupStore"

        await check(area, "joinGroup creates a group with its members; group, groupMembers and groups(ofUser) report it") { f in
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "Group", userIds: ["alice", "bob"], maxMembers: 10,
                                                preJoinHistory: 0, now: f.now) == .joined(memberCount: 2))
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == GroupRecord(groupId: "g", name: "Group", createdAt: f.now, memberCount: 2))
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: ["carol", "alice"], maxMembers: 10,
                                                preJoinHistory: 0, now: f.now + 5) == .joined(memberCount: 3), "a member joining again is not counted twice")
            let members = try await f.store.groupMembers(appId: f.appId, groupId: "g")
            #expect(members.sorted { $0.userId < $1.userId } == [GroupMember(userId: "alice", joinedAt: f.now), GroupMember(userId: "bob", joinedAt: f.now),
                                                                 GroupMember(userId: "carol", joinedAt: f.now + 5)],
                    "each member once, with the time they first joined")
            #expect(try await f.store.groups(appId: f.appId, ofUser: "carol") == [GroupRecord(groupId: "g", name: "Group", createdAt: f.now, memberCount: 3)])
            #expect(try await f.store.groups(appId: f.appId, ofUser: "dave").isEmpty)
            #expect(try await f.store.group(appId: f.appId, groupId: "nope") == nil)
            #expect(try await f.store.groupMembers(appId: f.appId, groupId: "nope").isEmpty)
        }

        await check(area, "joinGroup renames the group when given a name and keeps it otherwise; renameGroup") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "A", userIds: ["x"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: ["y"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.name == "A")
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "", userIds: ["z"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.name == "A", "an empty name leaves it")
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "B", userIds: ["x"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == GroupRecord(groupId: "g", name: "B", createdAt: f.now, memberCount: 3))
            #expect(try await f.store.renameGroup(appId: f.appId, groupId: "g", name: "C"))
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.name == "C")
            #expect(try await f.store.renameGroup(appId: f.appId, groupId: "nope", name: "C") == false)
            #expect(try await f.store.group(appId: f.appId, groupId: "nope") == nil, "renaming does not create")
        }

        await check(area, "joinGroup refuses, all or none, a join that would pass maxMembers") { f async throws in
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "b", "c"], maxMembers: 3,
                                                preJoinHistory: 0, now: f.now) == .joined(memberCount: 3), "exactly maxMembers is allowed")
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: ["d"], maxMembers: 3,
                                                preJoinHistory: 0, now: f.now) == .tooManyMembers(limit: 3))
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: ["a", "b"], maxMembers: 3,
                                                preJoinHistory: 0, now: f.now) == .joined(memberCount: 3), "members already in do not count")
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "Renamed", userIds: ["d", "e"], maxMembers: 4,
                                                preJoinHistory: 0, now: f.now) == .tooManyMembers(limit: 4))
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == GroupRecord(groupId: "g", name: "G", createdAt: f.now, memberCount: 3),
                    "nobody added, not renamed")
            #expect(try await Set(f.store.groupRoster(appId: f.appId, groupId: "g")?.members.keys.map { $0 } ?? []) == ["a", "b", "c"])
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "new", name: "New", userIds: ["a", "b", "c", "d"], maxMembers: 3,
                                                preJoinHistory: 0, now: f.now) == .tooManyMembers(limit: 3))
            #expect(try await f.store.group(appId: f.appId, groupId: "new") == nil, "a refused join creates no group")
            #expect(try await f.store.groupRoster(appId: f.appId, groupId: "new") == nil)
            #expect(try await f.store.groups(appId: f.appId, ofUser: "a").map(\.groupId) == ["g"])
        }

        await check(area, "quitGroup removes members and returns how many remain; nil for no such group") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "b", "c"], maxMembers: 10,
                                            preJoinHistory: 0, now: f.now)
            #expect(try await f.store.quitGroup(appId: f.appId, groupId: "g", userIds: ["b", "nobody"]) == 2)
            #expect(try await Set(f.store.groupMembers(appId: f.appId, groupId: "g").map(\.userId)) == ["a", "c"])
            #expect(try await f.store.groups(appId: f.appId, ofUser: "b").isEmpty)
            #expect(try await f.store.groupRoster(appId: f.appId, groupId: "g")?.members["b"] == nil)
            #expect(try await f.store.quitGroup(appId: f.appId, groupId: "nope", userIds: ["a"]) == nil)
            #expect(try await f.store.quitGroup(appId: f.appId, groupId: "g", userIds: ["a", "c"]) == 0)
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.memberCount == 0, "an empty group still exists")
        }

        await check(area, "dismissGroup: gone for the Server API, the roster readable with its members, mute settings gone") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "b"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a"], until: .max, now: f.now)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g"], muted: true)
            try await f.store.addGroupMuteWhitelist(appId: f.appId, groupId: "g", userIds: ["b"])
            let sent = try await f.commit(f.groupMessage(from: "a", group: "g", at: f.now + 1))
            #expect(try await f.store.dismissGroup(appId: f.appId, groupId: "g", now: f.now + 2))
            #expect(try await f.store.dismissGroup(appId: f.appId, groupId: "g", now: f.now + 3) == false, "already dismissed")
            #expect(try await f.store.dismissGroup(appId: f.appId, groupId: "nope", now: f.now + 3) == false)
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == nil)
            #expect(try await f.store.groupMembers(appId: f.appId, groupId: "g").isEmpty)
            #expect(try await f.store.groups(appId: f.appId, ofUser: "a").isEmpty)
            #expect(try await f.store.renameGroup(appId: f.appId, groupId: "g", name: "X") == false)
            #expect(try await f.store.quitGroup(appId: f.appId, groupId: "g", userIds: ["a"]) == nil)
            let roster = try #require(try await f.store.groupRoster(appId: f.appId, groupId: "g"))
            #expect(roster.isDismissed && Set(roster.members.keys) == ["a", "b"], "former members keep their read access")
            #expect(!roster.isMuted && roster.muteWhitelist.isEmpty && roster.mutedUntil.isEmpty)
            #expect(try await f.store.groupMutes(appId: f.appId, groupId: "g", now: f.now).isEmpty)
            #expect(try await f.store.mutedGroups(appId: f.appId, groupIds: ["g"]) == ["g": false])
            #expect(try await f.store.groupMuteWhitelist(appId: f.appId, groupId: "g").isEmpty)
            let member = try #require(roster.members["b"])
            #expect(try await f.historyUids(groupConversationKey("g"), viewer: HistoryViewer(userId: "b", afterSeq: member.historyAfterSeq))
                    == sent.map(\.uid), "and read what was sent before")
        }

        await check(area, "joining a dismissed group starts it again, without its former members and their history") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "Old", userIds: ["a", "b"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            try await f.commit(f.groupMessage(from: "a", group: "g", at: f.now + 1))
            _ = try await f.dismissAndNotify("g", by: "a", at: f.now + 2)
            #expect(try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "New", userIds: ["c"], maxMembers: 10,
                                                preJoinHistory: 10, now: f.now + 100) == .joined(memberCount: 1))
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == GroupRecord(groupId: "g", name: "New", createdAt: f.now + 100, memberCount: 1))
            let roster = try #require(try await f.store.groupRoster(appId: f.appId, groupId: "g"))
            #expect(!roster.isDismissed && Set(roster.members.keys) == ["c"])
            #expect(try await f.store.groups(appId: f.appId, ofUser: "a").isEmpty)
            let c = try #require(roster.members["c"])
            let key = groupConversationKey("g")
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "c", afterSeq: c.historyAfterSeq)).isEmpty,
                    "nothing of the old group is history of the new one, pre-join history or not")
            let fresh = try await f.commit(f.groupMessage(from: "c", group: "g", at: f.now + 101))
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "c", afterSeq: c.historyAfterSeq)) == fresh.map(\.uid))
            #expect(try await f.syncAll("c").messages == fresh)
        }

        await check(area, "preJoinHistory: a new member's history starts that many history messages before joining, never before the group") { f in
            let early = try await f.commit(f.groupMessage(from: "a", group: "g", at: f.now))
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            let m = try await f.commit(
                f.groupMessage(from: "a", group: "g", at: f.now + 1),
                f.groupMessage(from: "a", group: "g", at: f.now + 2),
                f.groupMessage(from: "a", group: "g", at: f.now + 3),
                f.groupMessage(from: "x", group: "g", at: f.now + 4, directedTo: ["a"]),
                f.groupMessage(from: "a", group: "g", at: f.now + 5, flags: .none),
                f.groupMessage(from: "a", group: "g", at: f.now + 6))
            let key = groupConversationKey("g")
            func joined(_ user: String, preJoinHistory: Int) async throws -> GroupRosterRecord.Member {
                _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: nil, userIds: [user], maxMembers: 10,
                                                preJoinHistory: preJoinHistory, now: f.now + 10)
                return try #require(try await f.store.groupRoster(appId: f.appId, groupId: "g")?.members[user])
            }
            let b = try await joined("b", preJoinHistory: 2)
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "b", afterSeq: b.historyAfterSeq)) == [m[2], m[5]].map(\.uid),
                    "the 2 latest messages of history others all see (directional messages and commands do not count)")
            #expect(b.joinedSeq >= m[5].seq && b.historyAfterSeq < b.joinedSeq)
            #expect(try await f.syncAll("b").messages.isEmpty, "sync starts at joining")
            let c = try await joined("c", preJoinHistory: 0)
            #expect(c.historyAfterSeq == c.joinedSeq && c.joinedSeq >= m[5].seq)
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "c", afterSeq: c.historyAfterSeq)).isEmpty)
            let d = try await joined("d", preJoinHistory: 100)
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "d", afterSeq: d.historyAfterSeq)) == [m[0], m[1], m[2], m[5]].map(\.uid),
                    "more than there are: from the group's creation, \(early[0].uid) sent before it left out")
            let later = try await f.commit(f.groupMessage(from: "a", group: "g", at: f.now + 20))
            #expect(try await f.syncAll("b").messages == later)
            #expect(try await f.historyUids(key, viewer: HistoryViewer(userId: "b", afterSeq: b.historyAfterSeq)) == [m[2], m[5], later[0]].map(\.uid))
        }

        await check(area, "syncGroups makes a user a member of exactly these groups, creating missing ones, and returns those left") { f in
            for (group, user) in [("g1", "alice"), ("g2", "alice"), ("g3", "bob")] {
                _ = try await f.store.joinGroup(appId: f.appId, groupId: group, name: group.uppercased(), userIds: [user], maxMembers: 10,
                                                preJoinHistory: 0, now: f.now)
            }
            let left = try await f.store.syncGroups(appId: f.appId, userId: "alice", groups: [("g2", "G2"), ("g3", "G3"), ("g4", "Four")],
                                                    maxMembers: 10, preJoinHistory: 0, now: f.now + 1)
            #expect(left == ["g1"])
            #expect(try await Set(f.store.groups(appId: f.appId, ofUser: "alice").map(\.groupId)) == ["g2", "g3", "g4"])
            #expect(try await f.store.group(appId: f.appId, groupId: "g4") == GroupRecord(groupId: "g4", name: "Four", createdAt: f.now + 1, memberCount: 1))
            #expect(try await f.store.group(appId: f.appId, groupId: "g3")?.memberCount == 2)
            #expect(try await f.store.group(appId: f.appId, groupId: "g1")?.memberCount == 0)
            let all = try await f.store.syncGroups(appId: f.appId, userId: "alice", groups: [], maxMembers: 10, preJoinHistory: 0, now: f.now + 2)
            #expect(Set(all) == ["g2", "g3", "g4"])
            #expect(try await f.store.groups(appId: f.appId, ofUser: "alice").isEmpty)
        }

        await check(area, "syncGroups refuses with tooManyGroupMembers, changing nothing, when a group would pass maxMembers") { f async throws in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "full", name: "Full", userIds: ["x", "y"], maxMembers: 2, preJoinHistory: 0, now: f.now)
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g1", name: "G1", userIds: ["alice"], maxMembers: 2, preJoinHistory: 0, now: f.now)
            await #expect(throws: StoreRefusal.tooManyGroupMembers(limit: 2)) {
                try await f.store.syncGroups(appId: f.appId, userId: "alice", groups: [("g2", "G2"), ("full", "Full")], maxMembers: 2,
                                             preJoinHistory: 0, now: f.now + 1)
            }
            #expect(try await f.store.groups(appId: f.appId, ofUser: "alice").map(\.groupId) == ["g1"], "not taken out of g1")
            #expect(try await f.store.group(appId: f.appId, groupId: "g2") == nil, "g2 not created")
            #expect(try await f.store.group(appId: f.appId, groupId: "full")?.memberCount == 2)
        }

        await check(area, "groupRoster: nil for a group never created; members, mutes and whitelist of one that was") { f in
            #expect(try await f.store.groupRoster(appId: f.appId, groupId: "nope") == nil)
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "b", "c"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a"], until: f.now + 1000, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: nil, userIds: ["b"], until: .max, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "other", userIds: ["c"], until: .max, now: f.now)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g"], muted: true)
            try await f.store.addGroupMuteWhitelist(appId: f.appId, groupId: "g", userIds: ["c"])
            let roster = try #require(try await f.store.groupRoster(appId: f.appId, groupId: "g"))
            #expect(roster.groupId == "g" && Set(roster.members.keys) == ["a", "b", "c"] && !roster.isDismissed)
            #expect(roster.mutedUntil == ["a": f.now + 1000], "mutes of this group only (not the global ones)")
            #expect(roster.isMuted && roster.muteWhitelist == ["c"])
        }

        await check(area, "member mutes: per group or in every group, those still in force listed; muting again updates") { f in
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a", "b"], until: f.now + 1000, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: nil, userIds: ["c"], until: .max, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g2", userIds: ["d"], until: f.now + 10, now: f.now)
            func mutes(_ group: String?, at now: Int64) async throws -> [String] {
                try await f.store.groupMutes(appId: f.appId, groupId: group, now: now).map { "\($0.groupId)/\($0.userId)" }.sorted()
            }
            #expect(try await f.store.groupMutes(appId: f.appId, groupId: "g", now: f.now).sorted { $0.userId < $1.userId }
                    == [GroupMute(groupId: "g", userId: "a", since: f.now, until: f.now + 1000),
                        GroupMute(groupId: "g", userId: "b", since: f.now, until: f.now + 1000)])
            #expect(try await f.store.groupMutes(appId: f.appId, groupId: nil, now: f.now)
                    == [GroupMute(groupId: "", userId: "c", since: f.now, until: .max)], "the global mutes have group \"\"")
            #expect(try await mutes("*", at: f.now) == ["/c", "g/a", "g/b", "g2/d"])
            #expect(try await mutes("g2", at: f.now + 10).isEmpty, "a mute ends at `until`")
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a"], until: f.now + 2000, now: f.now + 5)
            #expect(try await f.store.groupMutes(appId: f.appId, groupId: "g", now: f.now + 5).first { $0.userId == "a" }
                    == GroupMute(groupId: "g", userId: "a", since: f.now + 5, until: f.now + 2000))
            #expect(try await mutes("g", at: f.now + 1500) == ["g/a"])
            try await f.store.unmuteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a", "nobody"])
            try await f.store.unmuteGroupMembers(appId: f.appId, groupId: nil, userIds: ["c"])
            #expect(try await mutes("*", at: f.now) == ["g/b", "g2/d"])
        }

        await check(area, "whole-group mutes and the mute whitelist") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g2", name: "G2", userIds: ["a"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g1", "g2"], muted: true)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g2"], muted: true)
            #expect(try await f.store.mutedGroups(appId: f.appId, groupIds: ["g1", "g3"]) == ["g1": true, "g3": false])
            #expect(try await f.store.mutedGroups(appId: f.appId, groupIds: []) == ["g1": true, "g2": true], "no ids: every muted group")
            #expect(try await f.store.groupRoster(appId: f.appId, groupId: "g2")?.isMuted == true)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g1"], muted: false)
            #expect(try await f.store.mutedGroups(appId: f.appId, groupIds: []) == ["g2": true])

            try await f.store.addGroupMuteWhitelist(appId: f.appId, groupId: "g2", userIds: ["a", "b"])
            try await f.store.addGroupMuteWhitelist(appId: f.appId, groupId: "g2", userIds: ["a"])
            #expect(try await f.store.groupMuteWhitelist(appId: f.appId, groupId: "g2").sorted() == ["a", "b"])
            try await f.store.removeGroupMuteWhitelist(appId: f.appId, groupId: "g2", userIds: ["b", "nobody"])
            #expect(try await f.store.groupMuteWhitelist(appId: f.appId, groupId: "g2") == ["a"])
            #expect(try await f.store.groupMuteWhitelist(appId: f.appId, groupId: "g1").isEmpty)
            #expect(try await f.store.groupRoster(appId: f.appId, groupId: "g2")?.muteWhitelist == ["a"])
        }
    }
}
