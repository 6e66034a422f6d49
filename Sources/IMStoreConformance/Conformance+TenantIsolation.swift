import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// Tenant isolation, port by port: app A's writes are never visible to app B (with the same
    /// user, group, room and message ids), B's writes never change A's data, and every limit is
    /// counted per app.
    public func tenantIsolation() async throws {
        let area = "Tenant isolation"

        await check(area, "AppStore: updating one app leaves the others") { f in
            let other = try await f.store.upsertApp(appKey: "other-\(UUID().uuidString)", appSecret: "s", name: "Other", now: f.now)
            _ = try await f.store.upsertApp(appKey: other.appKey, appSecret: "s2", name: "Other 2", now: f.now)
            let mine = try await f.store.loadApps().first { $0.id == f.appId }
            #expect(mine?.name == "conformance" && mine?.appSecret == "secret")
        }

        await check(area, "MessageStore: messages, dedup and the message log are per app") { f in
            let b = try await f.otherApp()
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1, clientMessageId: "c1"))
            #expect(try await f.store.message(appId: b, uid: m[0].uid) == nil)
            #expect(try await f.store.messages(appId: b, uids: [m[0].uid]).isEmpty)
            #expect(try await f.store.lastSentTime(appId: b, conversationKey: m[0].conversationKey) == nil)
            #expect(try await f.store.conversationMessages(appId: b, conversationKey: m[0].conversationKey, start: 0, end: .max,
                                                           includeStart: true, ascending: true, limit: 10).isEmpty)
            #expect(try await f.store.messages(appId: b, sentFrom: 0, afterSeq: 0, to: .max, limit: 10).isEmpty)
            let theirs = try await f.store.commit([f.privateMessage(from: "alice", to: "bob", at: f.now + 2, clientMessageId: "c1", app: b)])
            guard case .stored(let stored)? = theirs.first else {
                Issue.record("the same sender and client message id in another app is a new message: \(theirs)")
                return
            }
            #expect(stored.appId == b && stored.uid != m[0].uid)
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: m[0].conversationKey) == f.now + 1)
            try await f.store.deleteMessageLog(appId: b, hour: "2024010100")
            #expect(try await f.store.isMessageLogDeleted(appId: f.appId, hour: "2024010100") == false)
        }

        await check(area, "SyncStore: sync and history are per app") { f in
            let b = try await f.otherApp()
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["bob"], maxMembers: 10, preJoinHistory: 0, now: f.now)
            let m = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1),
                                       f.systemMessage(from: "sys", to: StoredMessage.everyone, at: f.now + 2),
                                       f.groupMessage(from: "alice", group: "g", at: f.now + 3))
            #expect(try await f.syncAll("bob").messages == m)
            #expect(try await f.syncAll("bob", app: b).messages.isEmpty)
            #expect(try await f.syncAll("alice", app: b).messages.isEmpty)
            for message in m {
                #expect(try await f.historyUids(message.conversationKey, app: b).isEmpty)
            }
            _ = try await f.store.joinGroup(appId: b, groupId: "g", name: "G", userIds: ["bob"], maxMembers: 10, preJoinHistory: 5, now: f.now)
            let roster = try #require(try await f.store.groupRoster(appId: b, groupId: "g"))
            #expect(try await f.historyUids(groupConversationKey("g"), viewer: HistoryViewer(userId: "bob", afterSeq: roster.members["bob"]?.historyAfterSeq ?? 0),
                                            app: b).isEmpty, "pre-join history of a group of the same id in another app")
        }

        await check(area, "MessageLifecycleStore: recall, deletion, receipts, deletions and extensions are per app") { f in
            let b = try await f.otherApp()
            var original = f.groupMessage(from: "alice", group: "g", at: f.now + 1)
            original.canIncludeExpansion = true
            let m = try await f.commit(original)
            let uid = m[0].uid
            try await f.store.replaceMessage(appId: b, uid: uid, objectName: "RC:RcNtf", content: Data("{}".utf8))
            try await f.store.requestReadReceipts(appId: b, uid: uid)
            await #expect(throws: StoreRefusal.noSuchMessage(uid: uid)) {
                try await f.store.updateExpansion(appId: b, uid: uid, set: ["k": "v"], remove: [], now: f.now, maxKeys: 10)
            }
            #expect(try await f.store.expansion(appId: b, uid: uid) == nil)
            try await f.store.deleteMessage(appId: b, uid: uid)
            #expect(try await f.store.message(appId: f.appId, uid: uid) == m[0], "untouched by another app's calls")

            let read = ReadReceiptRecord(uid: uid, senderId: "alice", groupId: "g", readerId: "bob", readTime: f.now)
            #expect(try await f.store.recordReads([read], appId: f.appId).count == 1)
            #expect(try await f.store.readReceipts(appId: b, senderId: "alice", after: 0, limit: 10).isEmpty)
            #expect(try await f.store.readers(appId: b, uid: uid, after: 0, limit: 10).total == 0)
            #expect(try await f.store.recordReads([read], appId: b).count == 1, "a reader recorded in one app is new in another")

            try await f.store.hideMessages(appId: b, userId: "bob", uids: [uid])
            try await f.store.clearConversation(appId: b, userId: "bob", conversationKey: m[0].conversationKey, through: .max)
            #expect(try await f.historyUids(m[0].conversationKey, viewer: HistoryViewer(userId: "bob", afterSeq: 0)) == [uid])
        }

        await check(area, "UserStore: users, access, lists and tags are per app") { f in
            let b = try await f.otherApp()
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Alice", portraitUri: "", now: f.now)
            try await f.store.expireTokens(appId: f.appId, userIds: ["alice"], before: f.now, now: f.now)
            try await f.store.setBlocked(appId: f.appId, userIds: ["alice"], until: f.now + 1000, now: f.now)
            try await f.store.addToUserList(appId: f.appId, owner: "alice", kind: .blacklist, members: ["bob"], now: f.now)
            try await f.store.setUserTags(appId: f.appId, userIds: ["alice"], tags: ["vip"])
            #expect(try await f.store.user(appId: b, userId: "alice") == nil)
            #expect(try await f.store.userAccess(appId: b, userId: "alice") == UserAccess())
            #expect(try await f.store.blockedUsers(appId: b, now: f.now).isEmpty)
            #expect(try await f.store.userList(appId: b, owner: "alice", kind: .blacklist).isEmpty)
            #expect(try await f.store.userTags(appId: b, userIds: ["alice"]) == ["alice": []])
            #expect(try await f.store.users(appId: b, withAllTags: ["vip"], anyTag: []).isEmpty)
            try await f.store.upsertUser(appId: b, userId: "alice", name: "Other Alice", portraitUri: "", now: f.now)
            try await f.store.setUserTags(appId: b, userIds: ["alice"], tags: ["other"])
            try await f.store.removeFromUserList(appId: b, owner: "alice", kind: .blacklist, members: ["bob"])
            try await f.store.setBlocked(appId: b, userIds: ["alice"], until: 0, now: f.now)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")?.name == "Alice")
            #expect(try await f.store.userTags(appId: f.appId, userIds: ["alice"]) == ["alice": ["vip"]])
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .blacklist) == ["bob"])
            #expect(try await f.store.userAccess(appId: f.appId, userId: "alice") == UserAccess(tokensValidAfter: f.now, blockedUntil: f.now + 1000))
        }

        await check(area, "GroupStore: groups, members, limits and mutes are per app") { f in
            let b = try await f.otherApp()
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "b"], maxMembers: 2, preJoinHistory: 0, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: "g", userIds: ["a"], until: .max, now: f.now)
            try await f.store.muteGroupMembers(appId: f.appId, groupId: nil, userIds: ["b"], until: .max, now: f.now)
            try await f.store.setGroupMuted(appId: f.appId, groupIds: ["g"], muted: true)
            try await f.store.addGroupMuteWhitelist(appId: f.appId, groupId: "g", userIds: ["b"])
            #expect(try await f.store.group(appId: b, groupId: "g") == nil)
            #expect(try await f.store.groupRoster(appId: b, groupId: "g") == nil)
            #expect(try await f.store.groupMembers(appId: b, groupId: "g").isEmpty)
            #expect(try await f.store.groups(appId: b, ofUser: "a").isEmpty)
            #expect(try await f.store.groupMutes(appId: b, groupId: "*", now: f.now).isEmpty)
            #expect(try await f.store.mutedGroups(appId: b, groupIds: []).isEmpty)
            #expect(try await f.store.groupMuteWhitelist(appId: b, groupId: "g").isEmpty)
            #expect(try await f.store.quitGroup(appId: b, groupId: "g", userIds: ["a"]) == nil)
            #expect(try await f.store.dismissGroup(appId: b, groupId: "g", now: f.now) == false)
            #expect(try await f.store.renameGroup(appId: b, groupId: "g", name: "X") == false)
            #expect(try await f.store.joinGroup(appId: b, groupId: "g", name: "Theirs", userIds: ["c", "d"], maxMembers: 2, preJoinHistory: 0,
                                                now: f.now) == .joined(memberCount: 2), "the member limit counts this app's members")
            _ = try await f.store.syncGroups(appId: b, userId: "a", groups: [], maxMembers: 2, preJoinHistory: 0, now: f.now)
            #expect(try await f.store.group(appId: f.appId, groupId: "g") == GroupRecord(groupId: "g", name: "G", createdAt: f.now, memberCount: 2))
            #expect(try await f.store.groupMutes(appId: f.appId, groupId: "*", now: f.now).count == 2)
            #expect(try await f.store.mutedGroups(appId: f.appId, groupIds: ["g"]) == ["g": true])
            #expect(try await f.store.groupMuteWhitelist(appId: f.appId, groupId: "g") == ["b"])
        }

        await check(area, "SensitiveWordStore: words and their limit are per app") { f in
            let b = try await f.otherApp()
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "bad", replacement: nil),
                                                                        SensitiveWord(word: "rude", replacement: "*")], limit: 2, now: f.now)
            #expect(try await f.store.sensitiveWords(appId: b).isEmpty)
            try await f.store.addSensitiveWords(appId: b, words: [SensitiveWord(word: "x", replacement: nil),
                                                                  SensitiveWord(word: "bad", replacement: "b")], limit: 2, now: f.now)
            try await f.store.removeSensitiveWords(appId: b, words: ["rude"])
            #expect(try await f.store.sensitiveWords(appId: f.appId).count == 2)
            #expect(try await f.store.sensitiveWords(appId: f.appId).first { $0.word == "bad" }?.replacement == nil)
        }

        await check(area, "ConversationStateStore: state, versions and the tag limit are per app") { f in
            let b = try await f.otherApp()
            let bob = ConversationIdentifier(.private, targetId: "bob")
            _ = try await f.store.editConversationState(appId: f.appId, userId: "alice", .setLevel(bob, .blocked), now: f.now)
            _ = try await f.store.editConversationState(appId: f.appId, userId: "alice", .addTag(tagId: "t1", name: "T", limit: 1), now: f.now)
            _ = try await f.store.editConversationState(appId: f.appId, userId: "alice",
                                                        .setQuietHours(QuietHours(startTime: "22:00:00", spanMinutes: 60)), now: f.now)
            #expect(try await f.store.conversationUnpushLevel(appId: b, userId: "alice", type: .private, targetId: "bob", channelId: "") == 0)
            #expect(try await f.store.quietHours(appId: b, userId: "alice") == nil)
            let theirs = try await f.store.conversationStateChanges(appId: b, userId: "alice", since: 0, limit: 100)
            #expect(theirs.isEmpty && theirs.version == 0)
            let added = try await f.store.editConversationState(appId: b, userId: "alice", .addTag(tagId: "t1", name: "Theirs", limit: 1), now: f.now)
            #expect(added.previousVersion == 0 && added.version == 1, "no tagExists nor tooManyTags from the other app")
            _ = try await f.store.editConversationState(appId: b, userId: "alice", .removeTag(tagId: "t1"), now: f.now)
            let mine = try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: 0, limit: 100)
            #expect(mine.version == 3 && mine.tags.map(\.name) == ["T"] && !mine.tags[0].removed)
        }

        await check(area, "ChatroomStore: settings and room history are per app") { f in
            let b = try await f.otherApp()
            try await f.store.putChatroomSettings([ChatroomSettingRecord(appId: f.appId, kind: .block, roomId: "r", item: "alice")])
            let c = f.chatroomMessage(from: "alice", room: "r", at: f.now + 1)
            try await f.store.appendChatroomHistory([c])
            #expect(try await f.store.chatroomSettings(appId: b).isEmpty)
            #expect(try await f.store.chatroomHistory(appId: b, roomId: "r", recordTime: 0, count: 10, ascending: false, minSentTime: .min,
                                                      maxBytes: .max).isEmpty)
            #expect(try await f.store.chatroomMessage(appId: b, uid: c.uid) == nil)
            try await f.store.replaceChatroomMessage(appId: b, uid: c.uid, objectName: "RC:RcNtf", content: Data("{}".utf8))
            try await f.store.deleteChatroomSettings(appId: b, kind: .block, roomId: "r", items: ["alice"])
            #expect(try await f.store.chatroomMessage(appId: f.appId, uid: c.uid) == c)
            #expect(try await f.store.chatroomSettings(appId: f.appId).count == 1)
        }

        await check(area, "UltraGroupStore: groups, channels, limits, levels, read times and modifications are per app") { f in
            let b = try await f.otherApp()
            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u", name: "U", ownerId: "alice", now: f.now, maxGroupsPerUser: 1)
            try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "u", channelId: "ch1", type: .publicChannel, now: f.now, maxChannels: 2)
            try await f.store.setUltraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "", level: 5)
            try await f.store.setUltraGroupReadTime(appId: f.appId, userId: "alice", groupId: "u", channelId: "ch1", time: f.now + 100)
            let m = try await f.commit(f.ultraGroupMessage(from: "bob", group: "u", channel: "ch1", at: f.now + 1))
            try await f.store.modifyMessage(appId: f.appId, uid: m[0].uid, content: Fixture.content("edited"), mentions: nil, modifiedTime: f.now + 5)

            #expect(try await f.store.ultraGroupRoster(appId: b, groupId: "u") == nil)
            #expect(try await f.store.ultraGroupIds(appId: b, ofUser: "alice").isEmpty)
            #expect(try await f.store.joinUltraGroup(appId: b, groupId: "u", userIds: ["bob"], now: f.now, maxGroupsPerUser: 1) == .notFound)
            #expect(try await f.store.ultraGroupUnpushLevel(appId: b, groupId: "u", channelId: "") == 0)
            #expect(try await f.store.modifiedMessages(appId: b, conversationKeys: [m[0].conversationKey], after: ModificationCursor(time: 0),
                                                       limit: 10, maxBytes: .max).messages.isEmpty)
            let view = UltraGroupChannelView(groupId: "u", channelId: "ch1", channelType: .publicChannel, afterSeq: 0)
            let summary = try await f.store.ultraGroupSummaries(appId: b, userId: "alice", channels: [view], minSentTime: 0).first
            #expect(summary?.lastMessage == nil && summary?.readTime == 0)
            try await f.store.modifyMessage(appId: b, uid: m[0].uid, content: Fixture.content("theirs"), mentions: nil, modifiedTime: f.now + 9)

            #expect(try await f.store.createUltraGroup(appId: b, groupId: "u", name: "Theirs", ownerId: "alice", now: f.now, maxGroupsPerUser: 1) == .joined,
                    "the groups-per-user limit counts this app's groups")
            try await f.store.createUltraGroupChannel(appId: b, groupId: "u", channelId: "ch2", type: .publicChannel, now: f.now, maxChannels: 2)
            _ = try await f.store.dismissUltraGroup(appId: b, groupId: "u")
            let mine = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "u"))
            #expect(mine.name == "U" && mine.channels.keys.sorted() == ["RCDefault", "ch1"])
            #expect(try await f.store.ultraGroupUnpushLevel(appId: f.appId, groupId: "u", channelId: "") == 5)
            #expect(try await f.store.message(appId: f.appId, uid: m[0].uid)?.content == Fixture.content("edited"))
            let mySummary = try await f.store.ultraGroupSummaries(appId: f.appId, userId: "alice", channels: [view], minSentTime: 0).first
            #expect(mySummary?.readTime == f.now + 100 && mySummary?.lastMessage?.uid == m[0].uid)
        }
    }
}
