import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `UserStore`'s accounts: listing and deleting users, deactivation and what it erases, the
    /// one-to-one chat mute, hosted profiles. Run as part of `userStore()`.
    func accountChecks() async {
        let area = "UserStore (accounts)"

        await check(area, "users pages registered users by registration time; deleteUsers forgets them and refuses their tokens until they register again") { f in
            for (index, user) in ["u1", "u2", "u3"].enumerated() {
                try await f.store.upsertUser(appId: f.appId, userId: user, name: user.uppercased(), portraitUri: "p", now: f.now + Int64(index))
            }
            let other = try await f.otherApp()
            try await f.store.upsertUser(appId: other, userId: "u9", name: "", portraitUri: "", now: f.now)
            let first = try await f.store.users(appId: f.appId, offset: 0, limit: 2, descending: false)
            #expect(first.total == 3 && first.users.map(\.userId) == ["u1", "u2"])
            #expect(try await f.store.users(appId: f.appId, offset: 2, limit: 2, descending: false).users.map(\.userId) == ["u3"])
            #expect(try await f.store.users(appId: f.appId, offset: 0, limit: 5, descending: true).users.map(\.userId) == ["u3", "u2", "u1"])

            try await f.store.addToUserList(appId: f.appId, owner: "u2", kind: .blacklist, members: ["u1"], now: f.now)
            try await f.store.deleteUsers(appId: f.appId, userIds: ["u2"], now: f.now + 100)
            #expect(try await f.store.user(appId: f.appId, userId: "u2") == nil)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "u2").tokensValidAfter == f.now + 101, "tokens issued up to the deletion are refused")
            #expect(try await f.store.userList(appId: f.appId, owner: "u2", kind: .blacklist).isEmpty)
            let rest = try await f.store.users(appId: f.appId, offset: 0, limit: 5, descending: false)
            #expect(rest.total == 2 && rest.users.map(\.userId) == ["u1", "u3"])

            try await f.store.upsertUser(appId: f.appId, userId: "u2", name: "", portraitUri: "", now: f.now + 200)
            #expect(try await f.store.user(appId: f.appId, userId: "u2") == UserRecord(userId: "u2", name: "", portraitUri: "", createdAt: f.now + 200),
                    "registered again: a new user, nothing of the old name or time")
            #expect(try await f.store.users(appId: other, offset: 0, limit: 5, descending: false).users.map(\.userId) == ["u9"])
        }

        await check(area, "deactivateUsers erases personal data and marks the users; reactivateUsers starts their history after the log's end") { f in
            try await f.store.upsertUser(appId: f.appId, userId: "bob", name: "Bob", portraitUri: "p", now: f.now)
            try await f.store.addToUserList(appId: f.appId, owner: "bob", kind: .whitelist, members: ["alice"], now: f.now)
            try await f.store.addToUserList(appId: f.appId, owner: "alice", kind: .blacklist, members: ["bob"], now: f.now)
            try await f.store.setUserTags(appId: f.appId, userIds: ["bob", "alice"], tags: ["vip"])
            try await f.store.setRemarks(appId: f.appId, userId: "bob", remarks: ["alice": "Al"])
            try await f.store.setGroupRemark(appId: f.appId, groupId: "g1", userId: "bob", remark: "Bobby")
            #expect(try await f.store.mergeHostedProfile(appId: f.appId, userId: "bob", profile: #"{"name":"B"}"#, extProfile: "{}", now: f.now))
            _ = try await f.store.editConversationState(appId: f.appId, userId: "bob", .setLevel(ConversationIdentifier(.private, targetId: "alice"), .blocked), now: f.now)
            _ = try await f.store.editConversationState(appId: f.appId, userId: "bob", .addTag(tagId: "t1", name: "Work", limit: 20), now: f.now)
            let sent = try await f.commit(f.privateMessage(from: "alice", to: "bob", at: f.now + 1))

            try await f.store.deactivateUsers(appId: f.appId, userIds: ["bob", "ghost"], now: f.now + 10)
            try await f.store.deactivateUsers(appId: f.appId, userIds: ["bob"], now: f.now + 20)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "bob").deactivatedAt == f.now + 10, "a second deactivation keeps the first time")
            #expect(try await f.store.deactivatedUsers(appId: f.appId, offset: 0, limit: 10) == ["bob", "ghost"])
            #expect(try await f.store.deactivatedUsers(appId: f.appId, offset: 1, limit: 10) == ["ghost"])
            #expect(try await f.store.user(appId: f.appId, userId: "bob").map { $0.name == "" && $0.portraitUri == "" } == true)
            #expect(try await f.store.userList(appId: f.appId, owner: "bob", kind: .whitelist).isEmpty)
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .blacklist) == ["bob"], "other users' lists stay")
            #expect(try await f.store.userTags(appId: f.appId, userIds: ["bob", "alice"]) == ["bob": [], "alice": ["vip"]])
            #expect(try await f.store.remarks(appId: f.appId, userId: "bob", afterUserId: "", limit: 10).isEmpty)
            #expect(try await f.store.hostedProfiles(appId: f.appId, userIds: ["bob"]).isEmpty)
            #expect(try await f.store.groupRemark(appId: f.appId, groupId: "g1", userId: "bob") == nil)
            #expect(try await f.store.conversationUnpushLevel(appId: f.appId, userId: "bob", type: .private, targetId: "alice", channelId: "") == 0)

            try await f.store.reactivateUsers(appId: f.appId, userIds: ["bob", "carol"], now: f.now + 30)
            let access = try await f.store.userAccess(appId: f.appId, userId: "bob")
            #expect(access.deactivatedAt == 0 && access.historyAfterSeq >= sent[0].seq)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "carol") == UserAccess(), "a user never deactivated is left alone")
            #expect(try await f.store.deactivatedUsers(appId: f.appId, offset: 0, limit: 10) == ["ghost"])
        }

        await check(area, "group member push aliases: set, replaced, per group and app, removed by an empty one") { f in
            try await f.store.setGroupRemark(appId: f.appId, groupId: "g1", userId: "ann", remark: "Annie")
            try await f.store.setGroupRemark(appId: f.appId, groupId: "g1", userId: "ann", remark: "Captain")
            try await f.store.setGroupRemark(appId: f.appId, groupId: "g2", userId: "ann", remark: "Ann B")
            #expect(try await f.store.groupRemark(appId: f.appId, groupId: "g1", userId: "ann") == "Captain")
            #expect(try await f.store.groupRemark(appId: f.appId, groupId: "g2", userId: "ann") == "Ann B")
            #expect(try await f.store.groupRemark(appId: f.appId, groupId: "g1", userId: "ben") == nil)
            #expect(try await f.store.groupRemark(appId: try await f.otherApp(), groupId: "g1", userId: "ann") == nil)
            try await f.store.setGroupRemark(appId: f.appId, groupId: "g1", userId: "ann", remark: "")
            #expect(try await f.store.groupRemark(appId: f.appId, groupId: "g1", userId: "ann") == nil)
        }

        await check(area, "the one-to-one chat mute: set for unseen users too, lifted, listed by user id, per app") { f in
            try await f.store.setPrivateChatMuted(appId: f.appId, userIds: ["zed", "ann"], muted: true, now: f.now)
            try await f.store.setPrivateChatMuted(appId: f.appId, userIds: ["bob"], muted: true, now: f.now)
            try await f.store.setPrivateChatMuted(appId: f.appId, userIds: ["bob", "nobody"], muted: false, now: f.now)
            #expect(try await f.store.privateChatMutedUsers(appId: f.appId) == ["ann", "zed"])
            #expect(try await f.store.privateChatMutedUsers(appId: try await f.otherApp()).isEmpty)
        }

        await check(area, "hosted profiles: merged key by key with a growing version, only for known users, listed by registration time, removed") { f in
            try await f.store.upsertUser(appId: f.appId, userId: "ann", name: "", portraitUri: "", now: f.now + 2)
            try await f.store.upsertUser(appId: f.appId, userId: "ben", name: "", portraitUri: "", now: f.now + 1)
            #expect(try await !f.store.mergeHostedProfile(appId: f.appId, userId: "ghost", profile: #"{"name":"G"}"#, extProfile: "{}", now: f.now))
            #expect(try await f.store.mergeHostedProfile(appId: f.appId, userId: "ann", profile: #"{"name":"Ann","level":3}"#, extProfile: #"{"ext_a":"1"}"#, now: f.now))
            #expect(try await f.store.mergeHostedProfile(appId: f.appId, userId: "ann", profile: #"{"level":4}"#, extProfile: #"{"ext_b":"2"}"#, now: f.now))
            #expect(try await f.store.mergeHostedProfile(appId: f.appId, userId: "ben", profile: "{}", extProfile: #"{"ext_c":"3"}"#, now: f.now + 5))
            let ann = try #require(try await f.store.hostedProfiles(appId: f.appId, userIds: ["ann"]).first)
            #expect(Self.json(ann.profile) == Self.json(#"{"name":"Ann","level":4}"#))
            #expect(Self.json(ann.extProfile) == Self.json(#"{"ext_a":"1","ext_b":"2"}"#))
            #expect(ann.version == f.now + 1, "the version passes the previous one even within a millisecond")
            #expect(try await f.store.hostedProfiles(appId: f.appId, userIds: ["ghost", "ben", "ann"]).map(\.userId) == ["ben", "ann"])
            #expect(try await f.store.hostedProfiles(appId: f.appId, offset: 0, limit: 10, descending: false).map(\.userId) == ["ben", "ann"])
            #expect(try await f.store.hostedProfiles(appId: f.appId, offset: 1, limit: 10, descending: true).map(\.userId) == ["ben"])
            #expect(try await f.store.hostedProfiles(appId: try await f.otherApp(), userIds: ["ann"]).isEmpty)
            try await f.store.removeHostedProfiles(appId: f.appId, userIds: ["ann"])
            #expect(try await f.store.hostedProfiles(appId: f.appId, userIds: ["ann", "ben"]).map(\.userId) == ["ben"])
        }
    }

    private static func json(_ text: String) -> NSDictionary? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? NSDictionary
    }
}
