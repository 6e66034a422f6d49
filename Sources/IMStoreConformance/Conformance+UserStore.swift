import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `UserStore`: profiles, token revocation and blocks (for users the store has not seen too),
    /// black and white lists, push tags and the tag query.
    public func userStore() async throws {
        let area = "UserStore"
        await accountChecks()

        await check(area, "upsertUser registers a user, then updates name and portrait; empty values leave them") { f in
            #expect(try await f.store.user(appId: f.appId, userId: "alice") == nil)
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Alice", portraitUri: "https://p/a.png", now: f.now)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")
                    == UserRecord(userId: "alice", name: "Alice", portraitUri: "https://p/a.png", createdAt: f.now))
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Alicia", portraitUri: "", now: f.now + 10)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")
                    == UserRecord(userId: "alice", name: "Alicia", portraitUri: "https://p/a.png", createdAt: f.now),
                    "registration time kept, empty portrait leaves it")
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "", portraitUri: "https://p/b.png", now: f.now + 20)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")?.name == "Alicia")
            #expect(try await f.store.user(appId: f.appId, userId: "alice")?.portraitUri == "https://p/b.png")
            #expect(try await f.store.user(appId: f.appId, userId: "bob") == nil)
        }

        await check(area, "userAccess: zeros for an unknown user; expireTokens and setBlocked set it, for unseen users too") { f in
            #expect(try await f.store.userAccess(appId: f.appId, userId: "ghost") == UserAccess())
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Alice", portraitUri: "", now: f.now)
            try await f.store.expireTokens(appId: f.appId, userIds: ["alice", "ghost"], before: f.now + 50, now: f.now + 60)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "alice") == UserAccess(tokensValidAfter: f.now + 50))
            #expect(try await f.store.userAccess(appId: f.appId, userId: "ghost") == UserAccess(tokensValidAfter: f.now + 50),
                    "a user the store has not seen is refused all the same")
            try await f.store.setBlocked(appId: f.appId, userIds: ["alice", "phantom"], until: f.now + 1000, now: f.now)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "alice")
                    == UserAccess(tokensValidAfter: f.now + 50, blockedUntil: f.now + 1000))
            #expect(try await f.store.userAccess(appId: f.appId, userId: "phantom").blockedUntil == f.now + 1000)
            #expect(try await f.store.user(appId: f.appId, userId: "alice")?.blockedUntil == f.now + 1000)
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Al", portraitUri: "", now: f.now + 70)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "alice")
                    == UserAccess(tokensValidAfter: f.now + 50, blockedUntil: f.now + 1000), "a profile update keeps both")
            try await f.store.setBlocked(appId: f.appId, userIds: ["alice"], until: 0, now: f.now + 80)
            #expect(try await f.store.userAccess(appId: f.appId, userId: "alice") == UserAccess(tokensValidAfter: f.now + 50))
        }

        await check(area, "blockedUsers lists the users blocked at `now`") { f in
            try await f.store.upsertUser(appId: f.appId, userId: "alice", name: "Alice", portraitUri: "", now: f.now)
            try await f.store.setBlocked(appId: f.appId, userIds: ["alice"], until: f.now + 1000, now: f.now)
            try await f.store.setBlocked(appId: f.appId, userIds: ["bob"], until: f.now + 10, now: f.now)
            try await f.store.setBlocked(appId: f.appId, userIds: ["carol"], until: f.now + 5000, now: f.now)
            try await f.store.setBlocked(appId: f.appId, userIds: ["carol"], until: 0, now: f.now)
            let blocked = try await f.store.blockedUsers(appId: f.appId, now: f.now)
            #expect(blocked.map(\.userId).sorted() == ["alice", "bob"])
            #expect(blocked.first { $0.userId == "alice" }.map { $0.blockedUntil == f.now + 1000 && $0.name == "Alice" } == true)
            #expect(try await f.store.blockedUsers(appId: f.appId, now: f.now + 10).map(\.userId) == ["alice"], "a block ends at `until`")
            #expect(try await f.store.blockedUsers(appId: f.appId, now: f.now + 1000).isEmpty)
        }

        await check(area, "black and white lists: add once, remove, each owner and kind apart") { f in
            try await f.store.addToUserList(appId: f.appId, owner: "alice", kind: .blacklist, members: ["bob", "carol"], now: f.now)
            try await f.store.addToUserList(appId: f.appId, owner: "alice", kind: .blacklist, members: ["bob"], now: f.now + 1)
            try await f.store.addToUserList(appId: f.appId, owner: "alice", kind: .whitelist, members: ["dave"], now: f.now)
            try await f.store.addToUserList(appId: f.appId, owner: "bob", kind: .blacklist, members: ["alice"], now: f.now)
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .blacklist).sorted() == ["bob", "carol"])
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .whitelist) == ["dave"])
            #expect(try await f.store.userList(appId: f.appId, owner: "bob", kind: .blacklist) == ["alice"])
            #expect(try await f.store.userList(appId: f.appId, owner: "carol", kind: .blacklist).isEmpty)
            try await f.store.removeFromUserList(appId: f.appId, owner: "alice", kind: .blacklist, members: ["bob", "nobody"])
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .blacklist) == ["carol"])
            #expect(try await f.store.userList(appId: f.appId, owner: "alice", kind: .whitelist) == ["dave"])
        }

        await check(area, "setUserTags replaces each user's tags; userTags answers for every user asked") { f in
            try await f.store.setUserTags(appId: f.appId, userIds: ["alice", "bob"], tags: ["vip", "beta"])
            try await f.store.setUserTags(appId: f.appId, userIds: ["alice"], tags: ["new", "new"])
            let tags = try await f.store.userTags(appId: f.appId, userIds: ["alice", "bob", "carol"])
            #expect(tags["alice"] == ["new"], "replaced, a tag given twice kept once")
            #expect(tags["bob"]?.sorted() == ["beta", "vip"])
            #expect(tags["carol"] == [], "a user without tags has an empty list")
            #expect(tags.count == 3)
            try await f.store.setUserTags(appId: f.appId, userIds: ["bob"], tags: [])
            #expect(try await f.store.userTags(appId: f.appId, userIds: ["bob"]) == ["bob": []])
        }

        await check(area, "users(withAllTags:anyTag:) is every tag of one list and one of the other, sorted") { f in
            try await f.store.setUserTags(appId: f.appId, userIds: ["dan"], tags: ["vip", "beta"])
            try await f.store.setUserTags(appId: f.appId, userIds: ["bob"], tags: ["vip"])
            try await f.store.setUserTags(appId: f.appId, userIds: ["carl"], tags: ["beta", "x"])
            try await f.store.setUserTags(appId: f.appId, userIds: ["abe"], tags: ["vip", "x"])
            func users(_ all: [String], _ any: [String]) async throws -> [String] {
                try await f.store.users(appId: f.appId, withAllTags: all, anyTag: any)
            }
            #expect(try await users(["vip"], []) == ["abe", "bob", "dan"])
            #expect(try await users(["vip", "beta"], []) == ["dan"])
            #expect(try await users([], ["beta", "x"]) == ["abe", "carl", "dan"])
            #expect(try await users(["vip"], ["beta", "x"]) == ["abe", "dan"])
            #expect(try await users([], []) == [], "no condition at all matches nobody")
            #expect(try await users(["nope"], []) == [])
            #expect(try await users(["vip", "nope"], []) == [])
        }
    }
}
