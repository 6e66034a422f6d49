import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// Conversation keys and ids with `%`, `|` and `_` in them: each key names one conversation,
    /// and a store compares keys and ids as plain strings (no pattern matching, no prefix or
    /// substring match).
    public func conversationKeys() async throws {
        let area = "Conversation keys"

        await check(area, "keys escape % and | so that each names exactly one conversation") { _ in
            #expect(privateConversationKey("alice", "bob") == "p|alice|bob" && privateConversationKey("bob", "alice") == "p|alice|bob")
            #expect(groupConversationKey("g1") == "g|g1" && ultraGroupConversationKey("u", "RCDefault") == "u|u|RCDefault")
            #expect(systemConversationKey(sender: "sys", recipient: StoredMessage.everyone) == "s|sys|*" && chatroomConversationKey("r") == "c|r")
            #expect(ConversationKey.escape("50%|x") == "50%25%7Cx")
            #expect(privateConversationKey("acme", "zed|zbob") != privateConversationKey("acme|zed", "zbob"))
            #expect(ultraGroupConversationKey("u|1", "c") != ultraGroupConversationKey("u", "1|c"))
            #expect(groupConversationKey("a|b") != groupConversationKey("a%7Cb"))
            #expect(systemConversationKey(sender: "a|b", recipient: "c") != systemConversationKey(sender: "a", recipient: "b|c"))
        }

        await check(area, "messages of keys that differ only in how ids split stay apart: history, sync, lastSentTime, ranges") { f in
            let m = try await f.commit(f.privateMessage(from: "zbob", to: "acme|zed", at: f.now + 1, text: "secret"),
                                       f.privateMessage(from: "acme", to: "zed|zbob", at: f.now + 2, text: "hello"))
            let first = privateConversationKey("acme|zed", "zbob"), second = privateConversationKey("acme", "zed|zbob")
            #expect(try await f.historyUids(first) == [m[0].uid])
            #expect(try await f.historyUids(second) == [m[1].uid])
            #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: first) == f.now + 1)
            #expect(try await f.store.conversationMessages(appId: f.appId, conversationKey: second, start: 0, end: .max, includeStart: true,
                                                           ascending: true, limit: 10).map(\.uid) == [m[1].uid])
            #expect(try await f.syncAll("acme|zed").messages == [m[0]])
            #expect(try await f.syncAll("zed|zbob").messages == [m[1]])
            #expect(try await f.syncAll("zed").messages.isEmpty)
            #expect(try await f.syncAll("acme").messages == [m[1]])
            try await f.store.clearConversation(appId: f.appId, userId: "zbob", conversationKey: first, through: .max)
            #expect(try await f.historyUids(first, viewer: HistoryViewer(userId: "zbob", afterSeq: 0)).isEmpty)
            #expect(try await f.historyUids(second, viewer: HistoryViewer(userId: "zbob", afterSeq: 0)) == [m[1].uid],
                    "clearing one key clears no other")
        }

        await check(area, "% and _ in ids are plain characters, not patterns") { f in
            let groups = ["50%", "50%25", "500", "a_b", "axb", "a%"]
            for group in groups {
                _ = try await f.store.joinGroup(appId: f.appId, groupId: group, name: group, userIds: ["m-\(group)"], maxMembers: 10,
                                                preJoinHistory: 0, now: f.now)
            }
            var sent: [String: StoredMessage] = [:]
            for (index, group) in groups.enumerated() {
                sent[group] = try await f.commit(f.groupMessage(from: "m-\(group)", group: group, at: f.now + Int64(index))).first
            }
            for group in groups {
                #expect(try await f.historyUids(groupConversationKey(group)) == [sent[group]!.uid], "history of group \(group)")
                #expect(try await f.syncAll("m-\(group)").messages == [sent[group]!], "sync of the member of \(group)")
                #expect(try await f.store.lastSentTime(appId: f.appId, conversationKey: groupConversationKey(group)) == sent[group]!.sentTime)
                #expect(try await f.store.groupMembers(appId: f.appId, groupId: group).map(\.userId) == ["m-\(group)"])
            }
            try await f.store.clearConversation(appId: f.appId, userId: "m-a_b", conversationKey: groupConversationKey("a%"), through: .max)
            #expect(try await f.historyUids(groupConversationKey("a_b"), viewer: HistoryViewer(userId: "m-a_b", afterSeq: 0)) == [sent["a_b"]!.uid])
            try await f.store.setUserTags(appId: f.appId, userIds: ["t1"], tags: ["a_b"])
            try await f.store.setUserTags(appId: f.appId, userIds: ["t2"], tags: ["a%"])
            #expect(try await f.store.users(appId: f.appId, withAllTags: ["axb"], anyTag: []).isEmpty)
            #expect(try await f.store.users(appId: f.appId, withAllTags: [], anyTag: ["a%"]) == ["t2"])
        }

        await check(area, "user ids that contain one another: directional messages and mentions name whole ids") { f in
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["a", "a|b", "b", "ab"], maxMembers: 10,
                                            preJoinHistory: 0, now: f.now)
            let m = try await f.commit(f.groupMessage(from: "ab", group: "g", at: f.now + 1, directedTo: ["a|b"]))
            #expect(try await f.syncAll("a|b").messages == m)
            #expect(try await f.syncAll("a").messages.isEmpty)
            #expect(try await f.syncAll("b").messages.isEmpty)
            #expect(try await f.historyUids(groupConversationKey("g"), viewer: HistoryViewer(userId: "a", afterSeq: 0)).isEmpty)
            #expect(try await f.historyUids(groupConversationKey("g"), viewer: HistoryViewer(userId: "a|b", afterSeq: 0)) == [m[0].uid])

            _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "u|1", name: "U", ownerId: "a", now: f.now, maxGroupsPerUser: 10)
            _ = try await f.commit(f.ultraGroupMessage(from: "x", group: "u|1", at: f.now + 2, mentions: MentionedInfo(type: .users, userIdList: ["a|b"])),
                                   f.ultraGroupMessage(from: "x", group: "u", channel: "1|RCDefault", at: f.now + 3))
            let view = UltraGroupChannelView(groupId: "u|1", channelId: UltraGroupLimits.defaultChannelId, channelType: .publicChannel, afterSeq: 0)
            for (user, mentioned) in [("a", 0), ("b", 0), ("a|b", 1)] {
                let summary = try await f.store.ultraGroupSummaries(appId: f.appId, userId: user, channels: [view], minSentTime: 0).first
                #expect(summary?.unreadCount == 1 && summary?.mentionedCount == mentioned, "mentions of \(user)")
            }
        }
    }
}
