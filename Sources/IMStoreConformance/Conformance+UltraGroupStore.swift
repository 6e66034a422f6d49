import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `UltraGroupStore`: groups and members (all or none under `maxGroupsPerUser`), channels
    /// and their limit, private lists, user groups and bindings with their limits, mutes, default
    /// do-not-disturb levels, read times, channel summaries, and modified messages.
    public func ultraGroupStore() async throws {
        let area = "UltraGroupStore"
        let defaultChannel = UltraGroupLimits.defaultChannelId

        await check(area, "createUltraGroup creates the group with its public default channel and the owner; again, it adds the owner") { f in
            let before = try await f.commit(f.privateMessage(from: "x", to: "y", at: f.now))
            #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "Ultra", ownerId: "alice", now: f.now + 1,
                                                       maxGroupsPerUser: 10) == .joined)
            let after = try await f.commit(f.privateMessage(from: "x", to: "y", at: f.now + 2))
            let roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(roster.groupId == "u" && roster.name == "Ultra" && roster.createdAt == f.now + 1)
            #expect(roster.createdSeq >= before[0].seq && roster.createdSeq < after[0].seq, "the log's last seq when created")
            #expect(roster.members == ["alice": UltraGroupRosterRecord.Member(joinedAt: f.now + 1, joinedSeq: roster.createdSeq)])
            #expect(roster.channels == [defaultChannel: UltraGroupChannelRecord(channelId: defaultChannel, type: .publicChannel, createdAt: f.now + 1,
                                                                                createdSeq: roster.createdSeq)])
            #expect(roster.userGroups.isEmpty && roster.mutedUsers.isEmpty && roster.mutedChannels.isEmpty && roster.muteWhitelist.isEmpty)
            #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "Other", ownerId: "bob", now: f.now + 3,
                                                       maxGroupsPerUser: 10) == .joined)
            let again = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(again.name == "Ultra" && again.createdAt == f.now + 1 && Set(again.members.keys) == ["alice", "bob"],
                    "an existing group keeps its name and gains the owner")
            #expect(again.members["bob"]?.joinedAt == f.now + 3 && again.members["bob"].map { $0.joinedSeq >= after[0].seq } == true)
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "alice") == ["u"])
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "nope") == nil)
        }

        await check(area, "createUltraGroup refuses an owner already in maxGroupsPerUser groups and leaves no group behind") { f async throws in
            for id in ["u1", "u2"] {
                #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: id, name: id, ownerId: "alice", now: f.now, maxGroupsPerUser: 2) == .joined)
            }
            #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: "u3", name: "u3", ownerId: "alice", now: f.now,
                                                       maxGroupsPerUser: 2) == .tooManyGroups(userIds: ["alice"]))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u3") == nil)
            #expect(try await Set(f.store.ultraGroupIds(appId: f.appId, ofUser: "alice")) == ["u1", "u2"])
            #expect(try await f.store.createUltraGroup(appId: f.appId, groupId: "u1", name: "u1", ownerId: "alice", now: f.now,
                                                       maxGroupsPerUser: 2) == .joined, "the owner of an existing group is already in it")
        }

        await check(area, "joinUltraGroup adds users all or none under maxGroupsPerUser; notFound without the group") { f in
            #expect(try await f.store.joinUltraGroup(appId: f.appId, groupId: "nope", userIds: ["bob"], now: f.now, maxGroupsPerUser: 10) == .notFound)
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            let sent = try await f.commit(f.ultraGroupMessage(from: "alice", group: "u", at: f.now + 1))
            #expect(try await f.store.joinUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob", "carol", "bob"], now: f.now + 2,
                                                     maxGroupsPerUser: 3) == .joined)
            let roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(Set(roster.members.keys) == ["alice", "bob", "carol"])
            #expect(roster.members["bob"]?.joinedAt == f.now + 2 && roster.members["bob"].map { $0.joinedSeq >= sent[0].seq } == true,
                    "a member reads from the log's last seq when joining")
            for id in ["v1", "v2"] {
                _ = try await f.store.createUltraGroup(appId: f.appId, groupId: id, name: id, ownerId: "bob", now: f.now, maxGroupsPerUser: 3)
            }
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "w", name: "W", ownerId: "owner", now: f.now, maxGroupsPerUser: 3)
            #expect(try await f.store.joinUltraGroup(appId: f.appId, groupId: "w", userIds: ["dave", "bob"], now: f.now,
                                                     maxGroupsPerUser: 3) == .tooManyGroups(userIds: ["bob"]))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "w")?.members.keys.sorted() == ["owner"], "nobody was added")
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "dave").isEmpty)
            #expect(try await f.store.joinUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob"], now: f.now + 9, maxGroupsPerUser: 3) == .joined,
                    "joining a group one is in is not one more")
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.members["bob"]?.joinedAt == f.now + 2, "and changes nothing")
            #expect(try await Set(f.store.ultraGroupIds(appId: f.appId, ofUser: "bob")) == ["u", "v1", "v2"])
        }

        await check(area, "quitUltraGroup removes users from the group, its private channel lists and its user groups") { f in
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            _ = try await f.store.joinUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob", "carol"], now: f.now, maxGroupsPerUser: 10)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .privateChannel, now: f.now, maxChannels: 10)
            #expect(try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["bob", "carol"], add: true))
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug"], now: f.now, maxUserGroups: 10)
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug", userIds: ["bob", "carol"], add: true, maxMembers: 10))
            #expect(try await f.store.quitUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob", "nobody"]))
            let roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(Set(roster.members.keys) == ["alice", "carol"])
            #expect(roster.channels["ch1"]?.members == ["carol"] && roster.userGroups == ["ug": ["carol"]])
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "bob").isEmpty)
            #expect(try await f.store.quitUltraGroup(appId: f.appId, groupId: "nope", userIds: ["alice"]) == false)
        }

        await check(area, "dismissUltraGroup deletes the group and all of it, not its messages; renameUltraGroup") { f in
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            #expect(try await f.store.renameUltraGroup(appId: f.appId, groupId: "u", name: "Renamed"))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.name == "Renamed")
            #expect(try await f.store.renameUltraGroup(appId: f.appId, groupId: "nope", name: "X") == false)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .privateChannel, now: f.now, maxChannels: 10)
            _ = try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["alice"], add: true)
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug"], now: f.now, maxUserGroups: 10)
            try await f.store.setUltraGroupMutedUsers(appId: f.appId, groupId: "u", channelId: "", userIds: ["alice"], until: .max)
            try await f.store.setUltraGroupChannelMuted(appId: f.appId, groupId: "u", channelId: "ch1", muted: true)
            try await f.store.setUltraGroupMuteWhitelist(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["alice"], add: true)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "", level: 5)
            let sent = try await f.commit(f.ultraGroupMessage(from: "alice", group: "u", at: f.now + 1))
            #expect(try await f.store.dismissUltraGroup(appId: f.appId, groupId: "u"))
            #expect(try await f.store.dismissUltraGroup(appId: f.appId, groupId: "u") == false)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u") == nil)
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "alice").isEmpty)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "") == 0)
            #expect(try await f.store.message(appId: f.appId, uid: sent[0].uid) == sent[0], "messages stay until their retention ends")
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "Again", ownerId: "bob", now: f.now + 2, maxGroupsPerUser: 10)
            let fresh = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(fresh.name == "Again" && Set(fresh.members.keys) == ["bob"] && Array(fresh.channels.keys) == [defaultChannel])
            #expect(fresh.userGroups.isEmpty && fresh.mutedUsers.isEmpty && fresh.mutedChannels.isEmpty && fresh.muteWhitelist.isEmpty,
                    "a group created again has nothing of the dismissed one")
            #expect(fresh.createdSeq >= sent[0].seq)
        }

        await check(area, "channels: create (noSuchUltraGroup, channelExists, tooManyChannels refuse), change type, delete") { f in
            await #expect(throws: StoreRefusal.noSuchUltraGroup(groupId: "u")) {
                try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .publicChannel, now: f.now, maxChannels: 3)
            }
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            let sent = try await f.commit(f.ultraGroupMessage(from: "alice", group: "u", channel: "ch1", at: f.now + 1))
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .publicChannel, now: f.now + 2, maxChannels: 3)
            let channel = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels["ch1"])
            #expect(channel.channelId == "ch1" && channel.type == .publicChannel && channel.createdAt == f.now + 2)
            #expect(channel.createdSeq >= sent[0].seq, "a channel reads from the log's last seq when created")
            await #expect(throws: StoreRefusal.channelExists(groupId: "u", channelId: "ch1")) {
                try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .privateChannel, now: f.now, maxChannels: 3)
            }
            await #expect(throws: StoreRefusal.channelExists(groupId: "u", channelId: defaultChannel)) {
                try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: defaultChannel, type: .publicChannel, now: f.now, maxChannels: 3)
            }
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch2", type: .privateChannel, now: f.now, maxChannels: 3)
            await #expect(throws: StoreRefusal.tooManyChannels(groupId: "u", count: 3, limit: 3), "the default channel counts") {
                try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch3", type: .publicChannel, now: f.now, maxChannels: 3)
            }
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels.keys.sorted() == ["RCDefault", "ch1", "ch2"])
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels["ch2"]?.type == .privateChannel)
            #expect(try await f.store.setUltraGroupChannelType(appId: f.appId, groupId: "u", channelId: "ch1", type: .privateChannel))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels["ch1"]?.type == .privateChannel)
            #expect(try await f.store.setUltraGroupChannelType(appId: f.appId, groupId: "u", channelId: "nope", type: .privateChannel) == false)
            #expect(try await f.store.deleteUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch2"))
            #expect(try await f.store.deleteUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch2") == false)
            #expect(try await f.store.deleteUltraGroupChannel(appId: f.appId, groupId: "nope", channelId: "ch1") == false)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch3", type: .publicChannel, now: f.now, maxChannels: 3)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels.keys.sorted() == ["RCDefault", "ch1", "ch3"])

            // A channel deleted with its list and bindings, then created again, starts after its old messages.
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug"], now: f.now, maxUserGroups: 10)
            #expect(try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["alice"], add: true))
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "ch1", userGroupIds: ["ug"], bind: true))
            let old = try await f.commit(f.ultraGroupMessage(from: "alice", group: "u", channel: "ch1", at: f.now + 3))
            #expect(try await f.store.deleteUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1"))
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .privateChannel, now: f.now + 4, maxChannels: 3)
            let again = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            let recreated = try #require(again.channels["ch1"])
            #expect(recreated.members.isEmpty && recreated.userGroups.isEmpty && recreated.createdAt == f.now + 4)
            #expect(recreated.createdSeq >= old[0].seq, "the old channel's messages are below the new one")
            #expect(again.userGroups.keys.sorted() == ["ug"], "the user group itself stays")
        }

        await check(area, "private channel lists and user groups bound to channels decide who sees a private channel") { f in
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            _ = try await f.store.joinUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob", "carol", "dave"], now: f.now, maxGroupsPerUser: 10)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch", type: .privateChannel, now: f.now, maxChannels: 10)
            #expect(try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "ch", userIds: ["bob"], add: true))
            #expect(try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "nope", userIds: ["bob"], add: true) == false)
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1", "ug2"], now: f.now, maxUserGroups: 10)
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug1", userIds: ["carol"], add: true, maxMembers: 10))
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "ch", userGroupIds: ["ug1"], bind: true))
            var roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            var channel = try #require(roster.channels["ch"])
            #expect(channel.members == ["bob"] && channel.userGroups == ["ug1"] && roster.userGroups == ["ug1": ["carol"], "ug2": []])
            #expect(roster.privateAudience(channel) == ["bob", "carol"])
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "ch", userGroupIds: ["ug2", "ug9"], bind: true) == false)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels["ch"]?.userGroups == ["ug1"],
                    "an unknown user group binds none of the call")
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "nope", userGroupIds: ["ug1"], bind: true) == false)
            #expect(try await f.store.setUltraGroupChannelType(appId: f.appId, groupId: "u", channelId: "ch", type: .publicChannel))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.channels["ch"]?.members == ["bob"], "a public channel keeps its list")
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "ch", userGroupIds: ["ug1"], bind: false))
            #expect(try await f.store.setPrivateChannelMembers(appId: f.appId, groupId: "u", channelId: "ch", userIds: ["bob"], add: false))
            roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            channel = try #require(roster.channels["ch"])
            #expect(channel.members.isEmpty && channel.userGroups.isEmpty && roster.userGroups["ug1"] == ["carol"])
        }

        await check(area, "user groups: create (noSuchUltraGroup, tooManyUserGroups refuse), members (userGroupTooLarge refuses), delete") { f in
            await #expect(throws: StoreRefusal.noSuchUltraGroup(groupId: "u")) {
                try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1"], now: f.now, maxUserGroups: 3)
            }
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch", type: .privateChannel, now: f.now, maxChannels: 10)
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1", "ug2"], now: f.now, maxUserGroups: 3)
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1"], now: f.now, maxUserGroups: 3)
            await #expect(throws: StoreRefusal.tooManyUserGroups(groupId: "u", count: 4, limit: 3)) {
                try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug3", "ug4"], now: f.now, maxUserGroups: 3)
            }
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.userGroups.keys.sorted() == ["ug1", "ug2"],
                    "an existing user group is not one more; a refused call creates none")
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug1", userIds: ["a", "b"], add: true, maxMembers: 2))
            await #expect(throws: StoreRefusal.userGroupTooLarge(userGroupId: "ug1", count: 3, limit: 2)) {
                try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug1", userIds: ["c"], add: true, maxMembers: 2)
            }
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug1", userIds: ["a"], add: true, maxMembers: 2))
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.userGroups["ug1"] == ["a", "b"])
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "ug1", userIds: ["a"], add: false, maxMembers: 2))
            #expect(try await f.store.setUserGroupMembers(appId: f.appId, groupId: "u", userGroupId: "nope", userIds: ["a"], add: true, maxMembers: 2) == false)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.userGroups["ug1"] == ["b"])
            #expect(try await f.store.bindUserGroups(appId: f.appId, groupId: "u", channelId: "ch", userGroupIds: ["ug1", "ug2"], bind: true))
            try await f.store.deleteUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1", "nope"])
            let roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(roster.userGroups == ["ug2": []] && roster.channels["ch"]?.userGroups == ["ug2"], "deleted with its members and bindings")
            try await f.store.createUserGroups(appId: f.appId, groupId: "u", userGroupIds: ["ug1"], now: f.now, maxUserGroups: 3)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u")?.userGroups["ug1"] == [], "created again, empty")
        }

        await check(area, "mutes: users per channel or in the whole group, muted channels, the whitelist") { f in
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            _ = try await f.store.joinUltraGroup(appId: f.appId, groupId: "u", userIds: ["bob", "carol", "dave"], now: f.now, maxGroupsPerUser: 10)
            try await f.store.setUltraGroupMutedUsers(appId: f.appId, groupId: "u", channelId: "", userIds: ["bob"], until: f.now + 1000)
            try await f.store.setUltraGroupMutedUsers(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["carol"], until: .max)
            try await f.store.setUltraGroupChannelMuted(appId: f.appId, groupId: "u", channelId: "ch1", muted: true)
            try await f.store.setUltraGroupMuteWhitelist(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["dave", "bob"], add: true)
            var roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(roster.mutedUsers == ["": ["bob": f.now + 1000], "ch1": ["carol": .max]])
            #expect(roster.mutedChannels == ["ch1"] && roster.muteWhitelist == ["ch1": ["dave", "bob"]])
            #expect(roster.muteEnd(userId: "bob", channelId: "ch1", now: f.now) == f.now + 1000, "muted in the whole group")
            #expect(roster.muteEnd(userId: "carol", channelId: "ch1", now: f.now) == .max)
            #expect(roster.muteEnd(userId: "dave", channelId: "ch1", now: f.now) == nil, "whitelisted in a muted channel")
            #expect(roster.muteEnd(userId: "alice", channelId: "ch1", now: f.now) == .max)
            #expect(roster.muteEnd(userId: "alice", channelId: defaultChannel, now: f.now) == nil)
            try await f.store.setUltraGroupMutedUsers(appId: f.appId, groupId: "u", channelId: "", userIds: ["bob"], until: f.now + 50)
            try await f.store.setUltraGroupMutedUsers(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["carol"], until: nil)
            try await f.store.setUltraGroupChannelMuted(appId: f.appId, groupId: "u", channelId: "", muted: true)
            try await f.store.setUltraGroupChannelMuted(appId: f.appId, groupId: "u", channelId: "ch1", muted: false)
            try await f.store.setUltraGroupMuteWhitelist(appId: f.appId, groupId: "u", channelId: "ch1", userIds: ["bob"], add: false)
            roster = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(roster.mutedUsers[""] == ["bob": f.now + 50], "muting again sets the new end")
            #expect(roster.mutedUsers["ch1"]?.isEmpty ?? true, "nil lifts the mute")
            #expect(roster.mutedChannels == [""] && roster.muteWhitelist["ch1"] == ["dave"])
        }

        await check(area, "default do-not-disturb levels per channel: set, read, 0 removes") { f in
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "") == 0)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "", level: 5)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "ch1", level: 1)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "") == 5)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "ch1") == 1)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "ch2") == 0)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "ch1", level: 0)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "", level: -1)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "ch1") == 0)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "") == -1)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "v", channelId: "") == 0)
        }

        await check(area, "summaries: the last message the user may see, and unread and mention counts after their read time") { f in
            let t = f.now
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: t, maxGroupsPerUser: 10)
            let m = try await f.commit(
                f.ultraGroupMessage(from: "bob", group: "u", at: t + 1),
                f.ultraGroupMessage(from: "bob", group: "u", at: t + 2, mentions: MentionedInfo(type: .users, userIdList: ["alice"])),
                f.ultraGroupMessage(from: "carol", group: "u", at: t + 3, mentions: MentionedInfo(type: .all)),
                f.ultraGroupMessage(from: "alice", group: "u", at: t + 4),
                f.ultraGroupMessage(from: "bob", group: "u", at: t + 5, directedTo: ["carol"]),
                f.ultraGroupMessage(from: "bob", group: "u", at: t + 6, mentions: MentionedInfo(type: .users, userIdList: ["alicex", "xalice"])),
                f.ultraGroupMessage(from: "bob", group: "u", at: t + 7, flags: .isPersisted),
                f.ultraGroupMessage(from: "bob", group: "u", channel: "other", at: t + 8))
            try await f.store.setUltraGroupReadTime(appId: f.appId, userId: "alice", groupId: "u", channelId: defaultChannel, time: t + 1)
            func summary(_ user: String, afterSeq: UInt64 = 0, minSentTime: Int64 = .min, channel: String = defaultChannel) async throws
                -> UltraGroupChannelSummary {
                let view = UltraGroupChannelView(groupId: "u", channelId: channel, channelType: .publicChannel, afterSeq: afterSeq)
                let summaries = try await f.store.ultraGroupSummaries(appId: f.appId, userId: user, channels: [view], minSentTime: minSentTime)
                try #require(summaries.count == 1)
                return summaries[0]
            }
            let alice = try await summary("alice")
            #expect(alice.groupId == "u" && alice.channelId == defaultChannel && alice.channelType == .publicChannel)
            #expect(alice.lastMessage == m[6] && alice.readTime == t + 1)
            #expect(alice.unreadCount == 3 && alice.mentionedCount == 2,
                    "unread: others' counted messages she may see after her read time; mentions of her and of everyone")
            let carol = try await summary("carol")
            #expect(carol.readTime == 0 && carol.unreadCount == 5 && carol.mentionedCount == 0, "a directional message counts for its member")
            #expect(try await summary("alice", afterSeq: m[3].seq).unreadCount == 1, "nothing at or below afterSeq")
            #expect(try await summary("alice", afterSeq: m[6].seq).lastMessage == nil)
            let recent = try await summary("alice", minSentTime: t + 3)
            #expect(recent.unreadCount == 2 && recent.mentionedCount == 1, "nothing sent before minSentTime")
            let other = try await summary("alice", channel: "other")
            #expect(other.lastMessage == m[7] && other.unreadCount == 1 && other.readTime == 0, "each channel apart")
            #expect(try await summary("alice", channel: "empty").lastMessage == nil)
            #expect(try await summary("alice", channel: "empty").unreadCount == 0)

            try await f.store.hideMessages(appId: f.appId, userId: "alice", uids: [m[6].uid])
            #expect(try await summary("alice").lastMessage?.uid == m[5].uid, "a message she deleted is not her last")
            try await f.store.setUltraGroupReadTime(appId: f.appId, userId: "alice", groupId: "u", channelId: defaultChannel, time: t + 7)
            let read = try await summary("alice")
            #expect(read.readTime == t + 7 && read.unreadCount == 0 && read.mentionedCount == 0)
            try await f.store.setUltraGroupReadTime(appId: f.appId, userId: "alice", groupId: "u", channelId: defaultChannel, time: t + 2)
            #expect(try await summary("alice").readTime == t + 7, "an earlier read time changes nothing")
        }

        await check(area, "modifyMessage replaces content and mentions; modifiedMessages pages modifications by (time, seq)") { f in
            let keys = [ultraGroupConversationKey("u", "ch1"), ultraGroupConversationKey("u", "ch2")]
            let m = try await f.commit(
                f.ultraGroupMessage(from: "bob", group: "u", channel: "ch1", at: f.now + 1),
                f.ultraGroupMessage(from: "bob", group: "u", channel: "ch1", at: f.now + 2),
                f.ultraGroupMessage(from: "bob", group: "u", channel: "ch2", at: f.now + 3),
                f.ultraGroupMessage(from: "bob", group: "u", channel: "ch3", at: f.now + 4),
                f.ultraGroupMessage(from: "bob", group: "u", channel: "ch1", at: f.now + 5))
            let edited = Fixture.content("edited")
            for (index, time) in [(0, Int64(100)), (1, 100), (2, 50), (3, 60)] {
                try await f.store.modifyMessage(appId: f.appId, uid: m[index].uid, content: edited, mentions: nil, modifiedTime: f.now + time)
            }
            var expected = m[0]
            expected.content = edited
            #expect(try await f.store.message(appId: f.appId, uid: m[0].uid) == expected, "only the content changes")
            func page(after cursor: ModificationCursor, limit: Int = 10, maxBytes: Int = .max, keys: [String] = keys) async throws
                -> (entries: [String], next: ModificationCursor, hasMore: Bool) {
                let page = try await f.store.modifiedMessages(appId: f.appId, conversationKeys: keys, after: cursor, limit: limit, maxBytes: maxBytes)
                #expect(page.messages.allSatisfy { $0.message.content == edited }, "the messages as modified")
                return (page.messages.map { "\($0.modifiedTime - f.now) \($0.message.uid)" }, page.next, page.hasMore)
            }
            let all = try await page(after: ModificationCursor(time: 0))
            #expect(all.entries == ["50 \(m[2].uid)", "100 \(m[0].uid)", "100 \(m[1].uid)"], "by time, then seq; only the keys asked")
            #expect(all.next == ModificationCursor(time: f.now + 100, seq: m[1].seq) && !all.hasMore)
            let first = try await page(after: ModificationCursor(time: 0), limit: 2)
            #expect(first.entries == ["50 \(m[2].uid)", "100 \(m[0].uid)"] && first.hasMore)
            #expect(first.next == ModificationCursor(time: f.now + 100, seq: m[0].seq))
            let second = try await page(after: first.next, limit: 2)
            #expect(second.entries == ["100 \(m[1].uid)"] && !second.hasMore, "the rest of a millisecond after the cursor's seq")
            #expect(try await page(after: ModificationCursor(time: f.now + 100)).entries.isEmpty, "seq 0 covers the whole millisecond")
            #expect(try await page(after: ModificationCursor(time: f.now + 50)).entries == ["100 \(m[0].uid)", "100 \(m[1].uid)"])
            let small = try await page(after: ModificationCursor(time: 0), maxBytes: 1)
            #expect(small.entries == ["50 \(m[2].uid)"] && small.hasMore && small.next == ModificationCursor(time: f.now + 50, seq: m[2].seq),
                    "at least one message; maxBytes cuts")
            let none = try await page(after: ModificationCursor(time: 7), keys: [])
            #expect(none.entries.isEmpty && none.next == ModificationCursor(time: 7) && !none.hasMore)

            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 10)
            let view = UltraGroupChannelView(groupId: "u", channelId: "ch1", channelType: .publicChannel, afterSeq: 0)
            func mentions() async throws -> Int? {
                try await f.store.ultraGroupSummaries(appId: f.appId, userId: "alice", channels: [view], minSentTime: .min).first?.mentionedCount
            }
            #expect(try await mentions() == 0)
            try await f.store.modifyMessage(appId: f.appId, uid: m[4].uid, content: edited, mentions: MentionedInfo(type: .users, userIdList: ["alice"]),
                                            modifiedTime: f.now + 200)
            #expect(try await mentions() == 1, "the new mentions count")
        }
    }
}
