import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

/// The code of a Server API answer (200 on success).
private func code(_ answer: (Int, [String: Any])) -> Int? { answer.1["code"] as? Int }

@Suite("Server API: ultra groups")
struct ServerAPIUltraGroupTests {
    @Test("create, join, quit, refresh, member/exist and dis, with their refusals")
    func membership() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            #expect(code(try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "ug1", "groupName": "Guild"])) == 200)
            #expect(code(try await api.post("/ultragroup/join.json", form: ["userId": "bob,carol", "groupId": "ug1"])) == 200)
            #expect(code(try await api.post("/ultragroup/quit.json", form: ["userId": "carol", "groupId": "ug1"])) == 200)
            let roster = try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "ug1")
            #expect(Set(roster.members.keys) == ["ann", "bob"])
            #expect(roster.channels.keys.sorted() == ["RCDefault"])
            let (_, exists) = try await api.post("/ultragroup/member/exist.json", form: ["groupId": "ug1", "userId": "bob"])
            #expect(exists["status"] as? Bool == true)
            let (_, gone) = try await api.post("/ultragroup/member/exist.json", form: ["groupId": "ug1", "userId": "carol"])
            #expect(gone["status"] as? Bool == false)

            #expect(code(try await api.post("/ultragroup/refresh.json", form: ["groupId": "ug1", "groupName": "New name"])) == 200)
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "ug1").name == "New name")

            // Refusals.
            #expect(code(try await api.post("/ultragroup/join.json", form: ["userId": "dave", "groupId": "nosuch"])) == 24410)
            #expect(code(try await api.post("/ultragroup/refresh.json", form: ["groupId": "nosuch", "groupName": "x"])) == 24410)
            #expect(code(try await api.post("/ultragroup/member/exist.json", form: ["groupId": "nosuch", "userId": "ann"])) == 24410)
            #expect(code(try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "bad id", "groupName": "x"])) == 24403)
            #expect(code(try await api.post("/ultragroup/join.json", form: ["userId": "bad id", "groupId": "ug1"])) == 24403)
            #expect(code(try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupName": "x"])) == 1002, "groupId is required")
            #expect(code(try await api.post("/ultragroup/join.json", form: ["groupId": "ug1"])) == 1002, "userId is required")
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "ug1").members.count == 2, "refused calls change nothing")

            #expect(code(try await api.post("/ultragroup/dis.json", form: ["groupId": "ug1"])) == 200)
            #expect(code(try await api.post("/ultragroup/member/exist.json", form: ["groupId": "ug1", "userId": "ann"])) == 24410)
            #expect(code(try await api.post("/ultragroup/dis.json", form: ["groupId": "ug1"])) == 24410)
            #expect(try await server.core.store.ultraGroupIds(appId: server.app.id, ofUser: "ann").isEmpty)
        }
    }

    @Test("a user in 100 ultra groups joins no 101st: 24412 and nobody is added")
    func groupsPerUser() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            for index in 1...UltraGroupLimits.maxGroupsPerUser {
                try await server.core.ultraGroups.create(appId: server.app.id, groupId: "g\(index)", name: "", ownerId: "ann")
            }
            try await server.core.ultraGroups.create(appId: server.app.id, groupId: "other", name: "", ownerId: "bob")
            let (status, body) = try await server.api.post("/ultragroup/join.json", form: ["userId": "carol,ann", "groupId": "other"])
            #expect(status == 400 && body["code"] as? Int == 24412)
            #expect(Set(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "other").members.keys) == ["bob"], "all or none")
            #expect(code(try await server.api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g101", "groupName": "x"])) == 24412)
            #expect(try await server.core.store.ultraGroupRoster(appId: server.app.id, groupId: "g101") == nil)
            #expect(try await server.core.store.ultraGroupIds(appId: server.app.id, ofUser: "ann").count == 100)
            #expect(code(try await server.api.post("/ultragroup/join.json", form: ["userId": "carol", "groupId": "other"])) == 200)
        }
    }

    @Test("channels: create, get, type change, delete; RCDefault stays public; 50 channels; bad ids")
    func channels() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "news"])) == 200)
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "staff", "type": "1"])) == 200)
            let (_, listed) = try await api.post("/ultragroup/channel/get.json", form: ["groupId": "g", "page": "1", "limit": "10"])
            let list = try #require(listed["channelList"] as? [[String: Any]])
            #expect(Set(list.map { "\($0["channelId"]!):\($0["type"]!)" }) == ["RCDefault:0", "news:0", "staff:1"])
            #expect((list.first?["createTime"] as? String)?.count == 19, "yyyy-MM-dd HH:mm:ss")

            #expect(code(try await api.post("/ultragroup/channel/type/change.json", form: ["groupId": "g", "busChannel": "news", "type": "1"])) == 200)
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "g").channels["news"]?.type == .privateChannel)
            #expect(code(try await api.post("/ultragroup/channel/type/change.json", form: ["groupId": "g", "busChannel": "RCDefault", "type": "1"])) == 24403)
            #expect(code(try await api.post("/ultragroup/channel/del.json", form: ["groupId": "g", "busChannel": "RCDefault"])) == 24403)
            #expect(code(try await api.post("/ultragroup/channel/type/change.json", form: ["groupId": "g", "busChannel": "nosuch", "type": "1"])) == 24414)
            #expect(code(try await api.post("/ultragroup/channel/type/change.json", form: ["groupId": "g", "busChannel": "news", "type": "2"])) == 1002)
            #expect(code(try await api.post("/ultragroup/channel/type/change.json", form: ["groupId": "g", "busChannel": "news"])) == 1002, "type is required")
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "news"])) == 24403, "exists")
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "bad-id"])) == 24403)
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": String(repeating: "a", count: 21)])) == 24403)
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g"])) == 1002, "busChannel is required")
            #expect(code(try await api.post("/ultragroup/channel/create.json", form: ["groupId": "nosuch", "busChannel": "c"])) == 24410)
            #expect(code(try await api.post("/ultragroup/channel/del.json", form: ["groupId": "g", "busChannel": "nosuch"])) == 24414)
            #expect(code(try await api.post("/ultragroup/channel/get.json", form: ["groupId": "g", "limit": "0"])) == 1002)

            #expect(code(try await api.post("/ultragroup/channel/del.json", form: ["groupId": "g", "busChannel": "news"])) == 200)
            for index in 3...UltraGroupLimits.maxChannelsPerGroup {
                try await server.core.ultraGroups.createChannel(appId: server.app.id, groupId: "g", channelId: "c\(index)", type: .publicChannel)
            }
            let (status, body) = try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "onemore"])
            #expect(status == 400 && body["code"] as? Int == 24413)
            let (_, full) = try await api.post("/ultragroup/channel/get.json", form: ["groupId": "g", "limit": "100"])
            #expect((full["channelList"] as? [Any])?.count == 50)
            let (_, second) = try await api.post("/ultragroup/channel/get.json", form: ["groupId": "g", "page": "3", "limit": "20"])
            #expect((second["channelList"] as? [Any])?.count == 10, "page 3 of 20 holds the last 10")
        }
    }

    @Test("private channel users: members only (24406), listed, removed, and the private channels a user sees")
    func privateChannelUsers() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob,carol", "groupId": "g"])
            _ = try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "secret", "type": "1"])
            #expect(code(try await api.post("/ultragroup/channel/private/users/add.json", form: ["groupId": "g", "busChannel": "secret", "userIds": "ann,bob"])) == 200)
            let (status, body) = try await api.post("/ultragroup/channel/private/users/add.json", form: ["groupId": "g", "busChannel": "secret", "userIds": "carol,zed"])
            #expect(status == 400 && body["code"] as? Int == 24406)
            let (_, users) = try await api.post("/ultragroup/channel/private/users/get.json", form: ["groupId": "g", "busChannel": "secret", "page": "1", "pageSize": "50"])
            #expect(users["users"] as? [String] == ["ann", "bob"], "carol was not added with zed")
            #expect(code(try await api.post("/ultragroup/channel/private/users/del.json", form: ["groupId": "g", "busChannel": "secret", "userIds": "bob"])) == 200)
            let (_, after) = try await api.post("/ultragroup/channel/private/users/get.json", form: ["groupId": "g", "busChannel": "secret"])
            #expect(after["users"] as? [String] == ["ann"])
            let (_, seen) = try await api.post("/ultragroup/user/channel/query.json", form: ["groupId": "g", "userId": "ann"])
            #expect(seen["data"] as? [String] == ["secret"])
            let (_, unseen) = try await api.post("/ultragroup/user/channel/query.json", form: ["groupId": "g", "userId": "bob"])
            #expect(unseen["data"] as? [String] == [])
            #expect(code(try await api.post("/ultragroup/channel/private/users/add.json", form: ["groupId": "g", "busChannel": "nosuch", "userIds": "ann"])) == 24414)
            #expect(code(try await api.post("/ultragroup/channel/private/users/add.json", form: ["groupId": "g", "busChannel": "secret"])) == 1002)
            #expect(code(try await api.post("/ultragroup/channel/private/users/get.json", form: ["groupId": "nosuch", "busChannel": "secret"])) == 24410)
        }
    }

    @Test("user groups: add (JSON), members, bindings and the queries; 50 user groups and 100 users (24411)")
    func userGroups() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "g"])
            _ = try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "secret", "type": "1"])
            #expect(code(try await api.post("/ultragroup/usergroup/add.json", json: ["groupId": "g", "userGroups": [["userGroupId": "mods"], ["userGroupId": "vip"]]])) == 200)
            let (_, groups) = try await api.post("/ultragroup/usergroup/query.json", form: ["groupId": "g", "page": "1", "pageSize": "10"])
            #expect((groups["userGroups"] as? [[String: Any]])?.map { $0["userGroupId"] as? String } == ["mods", "vip"])
            #expect(code(try await api.post("/ultragroup/usergroup/user/add.json", form: ["groupId": "g", "userGroupId": "mods", "userIds": "bob"])) == 200)
            #expect(code(try await api.post("/ultragroup/usergroup/user/add.json", form: ["groupId": "g", "userGroupId": "mods", "userIds": "zed"])) == 24406)
            #expect(code(try await api.post("/ultragroup/usergroup/user/add.json", form: ["groupId": "g", "userGroupId": "nosuch", "userIds": "bob"])) == 24403)
            let (_, bobs) = try await api.post("/ultragroup/user/usergroup/query.json", form: ["groupId": "g", "userId": "bob"])
            #expect(bobs["data"] as? [String] == ["mods"])

            #expect(code(try await api.post("/ultragroup/channel/usergroup/bind.json", form: ["groupId": "g", "busChannel": "secret", "userGroupIds": "mods"])) == 200)
            #expect(code(try await api.post("/ultragroup/channel/usergroup/bind.json", form: ["groupId": "g", "busChannel": "secret", "userGroupIds": "nosuch"])) == 24403)
            #expect(code(try await api.post("/ultragroup/channel/usergroup/bind.json", form: ["groupId": "g", "busChannel": "nosuch", "userGroupIds": "mods"])) == 24414)
            let (_, bound) = try await api.post("/ultragroup/channel/usergroup/query.json", form: ["groupId": "g", "busChannel": "secret"])
            #expect(bound["data"] as? [String] == ["mods"])
            let (_, channels) = try await api.post("/ultragroup/usergroup/channel/query.json", form: ["groupId": "g", "userGroupId": "mods"])
            #expect(channels["data"] as? [String] == ["secret"])
            let (_, seen) = try await api.post("/ultragroup/user/channel/query.json", form: ["groupId": "g", "userId": "bob"])
            #expect(seen["data"] as? [String] == ["secret"], "bob sees the private channel through his user group")
            #expect(code(try await api.post("/ultragroup/channel/usergroup/unbind.json", form: ["groupId": "g", "busChannel": "secret", "userGroupIds": "mods"])) == 200)
            let (_, unseen) = try await api.post("/ultragroup/user/channel/query.json", form: ["groupId": "g", "userId": "bob"])
            #expect(unseen["data"] as? [String] == [])
            #expect(code(try await api.post("/ultragroup/usergroup/user/del.json", form: ["groupId": "g", "userGroupId": "mods", "userIds": "bob"])) == 200)
            #expect(code(try await api.post("/ultragroup/usergroup/del.json", form: ["groupId": "g", "userGroupIds": "vip"])) == 200)
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "g").userGroups == ["mods": []])

            // 50 user groups at most.
            let more = (2...UltraGroupLimits.maxUserGroupsPerGroup).map { ["userGroupId": "u\($0)"] }
            #expect(code(try await api.post("/ultragroup/usergroup/add.json", json: ["groupId": "g", "userGroups": more])) == 200)
            #expect(code(try await api.post("/ultragroup/usergroup/add.json", json: ["groupId": "g", "userGroups": [["userGroupId": "fiftyfirst"]]])) == 24411)
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "g").userGroups.count == 50)
            #expect(code(try await api.post("/ultragroup/usergroup/add.json", json: ["groupId": "g", "userGroups": [["id": "x"]]])) == 1002)
            #expect(code(try await api.post("/ultragroup/usergroup/add.json", json: ["groupId": "g", "userGroups": [["userGroupId": "bad-id"]]])) == 24403)

            // 100 users per user group at most.
            let users = (1...101).map { "user\($0)" }
            _ = try await api.post("/ultragroup/join.json", form: ["userId": users.prefix(100).joined(separator: ","), "groupId": "g"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "user101", "groupId": "g"])
            #expect(code(try await api.post("/ultragroup/usergroup/user/add.json", form: ["groupId": "g", "userGroupId": "mods", "userIds": users.prefix(100).joined(separator: ",")])) == 200)
            let (status, body) = try await api.post("/ultragroup/usergroup/user/add.json", form: ["groupId": "g", "userGroupId": "mods", "userIds": "user101"])
            #expect(status == 400 && body["code"] as? Int == 24411)
            #expect(try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "g").userGroups["mods"]?.count == 100)
        }
    }

    @Test("mutes: a muted member's send fails with 24408; whole-channel mute and its whitelist; the queries")
    func mutes() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 1000 }) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "g"])
            let bob = try await server.connectedClient("bob")
            defer { Task { await bob.disconnect() } }
            func send() async -> Int? {
                await failureCode { _ = try await bob.sendMessage(.ultraGroup, targetId: "g", content: TextMessage(content: "hi")) }
            }
            #expect(await send() == nil)

            #expect(code(try await api.post("/ultragroup/userbanned/add.json", form: ["groupId": "g", "userIds": "bob"])) == 200)
            let (_, muted) = try await api.post("/ultragroup/userbanned/get.json", form: ["groupId": "g", "page": "1", "pageSize": "20"])
            #expect((muted["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bob"])
            #expect(await send() == 24408)
            #expect(code(try await api.post("/ultragroup/userbanned/del.json", form: ["groupId": "g", "userIds": "bob"])) == 200)
            #expect(await send() == nil)

            #expect(code(try await api.post("/ultragroup/userbanned/add.json", form: ["groupId": "g", "userIds": "bob", "busChannel": "RCDefault"])) == 200)
            #expect(await send() == 24408, "muted in the channel")
            let (_, inGroup) = try await api.post("/ultragroup/userbanned/get.json", form: ["groupId": "g"])
            #expect((inGroup["users"] as? [Any])?.isEmpty == true, "the whole-group list is another scope")
            _ = try await api.post("/ultragroup/userbanned/del.json", form: ["groupId": "g", "userIds": "bob", "busChannel": "RCDefault"])
            #expect(await send() == nil)

            #expect(code(try await api.post("/ultragroup/globalbanned/set.json", form: ["groupId": "g", "status": "true", "busChannel": "RCDefault"])) == 200)
            let (_, state) = try await api.post("/ultragroup/globalbanned/get.json", form: ["groupId": "g", "busChannel": "RCDefault"])
            #expect(state["status"] as? Bool == true)
            let (_, groupState) = try await api.post("/ultragroup/globalbanned/get.json", form: ["groupId": "g"])
            #expect(groupState["status"] as? Bool == false)
            #expect(await send() == 24408)
            #expect(code(try await api.post("/ultragroup/banned/whitelist/add.json", form: ["groupId": "g", "userIds": "bob", "busChannel": "RCDefault"])) == 200)
            let (_, whitelist) = try await api.post("/ultragroup/banned/whitelist/get.json", form: ["groupId": "g", "busChannel": "RCDefault"])
            #expect((whitelist["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bob"])
            #expect(await send() == nil, "whitelisted")
            #expect(code(try await api.post("/ultragroup/banned/whitelist/del.json", form: ["groupId": "g", "userIds": "bob", "busChannel": "RCDefault"])) == 200)
            #expect(await send() == 24408)
            #expect(code(try await api.post("/ultragroup/globalbanned/set.json", form: ["groupId": "g", "status": "false", "busChannel": "RCDefault"])) == 200)
            #expect(await send() == nil)

            // Refusals change nothing.
            #expect(code(try await api.post("/ultragroup/userbanned/add.json", form: ["groupId": "g", "userIds": "bob", "busChannel": "nosuch"])) == 24414)
            #expect(code(try await api.post("/ultragroup/userbanned/add.json", form: ["groupId": "nosuch", "userIds": "bob"])) == 24410)
            #expect(code(try await api.post("/ultragroup/globalbanned/set.json", form: ["groupId": "g"])) == 1002, "status is required")
            #expect(code(try await api.post("/ultragroup/globalbanned/set.json", form: ["groupId": "g", "status": "maybe"])) == 1002)
            let many = (1...21).map { "u\($0)" }.joined(separator: ",")
            #expect(code(try await api.post("/ultragroup/userbanned/add.json", form: ["groupId": "g", "userIds": many])) == 1005, "20 users per call")
            let roster = try await server.core.ultraGroups.roster(appId: server.app.id, groupId: "g")
            #expect(roster.mutedUsers.values.allSatisfy(\.isEmpty) && roster.mutedChannels.isEmpty)
            #expect(await send() == nil)
        }
    }

    @Test("notdisturb: the group's default level per channel and for the whole group")
    func notDisturb() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g", "unpushLevel": "1"])) == 200)
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g", "unpushLevel": "5", "busChannel": "RCDefault"])) == 200)
            let (_, group) = try await api.post("/ultragroup/notdisturb/get.json", form: ["groupId": "g"])
            #expect(group["unpushLevel"] as? Int == 1 && group["groupId"] as? String == "g" && group["busChannel"] as? String == "")
            let (_, channel) = try await api.post("/ultragroup/notdisturb/get.json", form: ["groupId": "g", "busChannel": "RCDefault"])
            #expect(channel["unpushLevel"] as? Int == 5 && channel["busChannel"] as? String == "RCDefault")
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g", "unpushLevel": "3"])) == 1002)
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g"])) == 1002)
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g", "unpushLevel": "1", "busChannel": "nosuch"])) == 24414)
            #expect(code(try await api.post("/ultragroup/notdisturb/get.json", form: ["groupId": "nosuch"])) == 24410)
            #expect(code(try await api.post("/ultragroup/notdisturb/set.json", form: ["groupId": "g", "unpushLevel": "0"])) == 200)
            #expect(try await server.core.store.ultraGroupUnpushLevel(appId: server.app.id, groupId: "g", channelId: "") == 0)
            // A dismissed group leaves no setting behind.
            _ = try await api.post("/ultragroup/dis.json", form: ["groupId": "g"])
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            let (_, fresh) = try await api.post("/ultragroup/notdisturb/get.json", form: ["groupId": "g", "busChannel": "RCDefault"])
            #expect(fresh["unpushLevel"] as? Int == 0)
        }
    }

    @Test("publish to 3 groups: live delivery to a member online; unknown busChannel or group sends nothing")
    func publish() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            for id in ["g1", "g2", "g3"] {
                _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": id, "groupName": id])
            }
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "g2"])
            _ = try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g2", "busChannel": "news"])
            let bob = try await server.connectedClient("bob")
            defer { Task { await bob.disconnect() } }
            let inbox = EventRecorder(bob.receivedMessages())

            let (status, body) = try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g1", "g2", "g3"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"hello\"}",
            ])
            #expect(status == 200)
            let uids = try #require(body["messageUIDs"] as? [[String: Any]])
            #expect(uids.map { $0["groupId"] as? String } == ["g1", "g2", "g3"])
            let received = try #require(await inbox.first { $0.message.targetId == "g2" })
            #expect(received.message.conversationType == .ultraGroup && received.message.channelId == "RCDefault")
            #expect(received.message.messageUId == uids[1]["messageUID"] as? String)
            #expect((received.message.content as? TextMessage)?.content == "hello")

            let before = try await server.core.store.conversationMessages(
                appId: server.app.id, conversationKey: ultraGroupConversationKey("g1", "RCDefault"), start: 0, end: Int64.max,
                includeStart: true, ascending: true, limit: 100).count
            #expect(before == 1)
            let (refused, why) = try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g1", "g2"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}", "busChannel": "news",
            ])
            #expect(refused == 400 && why["code"] as? Int == 24414, "g1 has no channel news")
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g2", "nosuch"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}",
            ])) == 24410)
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g1", "g2", "g3", "g4"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}",
            ])) == 1005, "at most 3 groups")
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g1"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}", "busChannel": "bad-id",
            ])) == 24403)
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: ["fromUserId": "ann", "toGroupIds": ["g1"], "objectName": "RC:TxtMsg"])) == 1002)
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g1"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}", "isMentioned": 1,
            ])) == 1002, "an @ message without mentionedInfo")
            for group in ["g1", "g2"] {
                let count = try await server.core.store.conversationMessages(
                    appId: server.app.id, conversationKey: ultraGroupConversationKey(group, "RCDefault"), start: 0, end: Int64.max,
                    includeStart: true, ascending: true, limit: 100).count
                #expect(count == 1, "nothing more was sent to \(group)")
            }
            // To a channel: isPersisted=0 keeps it out of history.
            #expect(code(try await api.post("/message/ultragroup/publish.json", json: [
                "fromUserId": "ann", "toGroupIds": ["g2"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"live only\"}", "busChannel": "news",
                "isPersisted": 0,
            ])) == 200)
            let live = try #require(await inbox.first { $0.message.channelId == "news" })
            #expect((live.message.content as? TextMessage)?.content == "live only")
            let now = server.core.clock.nowMilliseconds()
            let (_, history) = try await api.post("/ultragroup/hismsg/query.json", form: [
                "groupId": "g2", "busChannel": "news", "startTime": "\(now - 86_400_000)", "endTime": "\(now)",
            ])
            #expect((history["data"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("publish is limited per app per second")
    func publishRate() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { $0.serverAPI.ultraGroupPublishPerSecond = 4 }) { server in
            for id in ["g1", "g2", "g3"] {
                _ = try await server.api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": id, "groupName": id])
            }
            let message: [String: Any] = ["fromUserId": "ann", "toGroupIds": ["g1", "g2", "g3"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"x\"}"]
            #expect(code(try await server.api.post("/message/ultragroup/publish.json", json: message)) == 200)
            #expect(code(try await server.api.post("/message/ultragroup/publish.json", json: message)) == 1008, "6 messages in a second, 4 allowed")
            clock.advance(milliseconds: 1000)
            #expect(code(try await server.api.post("/message/ultragroup/publish.json", json: message)) == 200)
        }
    }

    @Test("modify, msg/get and history: new content under the same uid, paging around a message, retention")
    func modifyAndHistory() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "g"])
            _ = try await api.post("/group/create.json", form: ["userId": "ann", "groupId": "plain"])
            var uids: [String] = []
            for (index, sender) in ["ann", "bob", "ann", "bob", "ann"].enumerated() {
                let (_, body) = try await api.post("/message/ultragroup/publish.json", json: [
                    "fromUserId": sender, "toGroupIds": ["g"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"m\(index)\"}",
                ])
                uids.append(try #require((body["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String))
                clock.advance(milliseconds: 10)
            }
            let end = "\(clock.nowMilliseconds())", start = "\(clock.nowMilliseconds() - 86_400_000)"

            #expect(code(try await api.post("/ultragroup/msg/modify.json", form: [
                "groupId": "g", "fromUserId": "ann", "msgUID": uids[0], "content": "{\"content\":\"edited\"}", "busChannel": "RCDefault",
            ])) == 200)
            let (_, history) = try await api.post("/ultragroup/hismsg/query.json", form: ["groupId": "g", "busChannel": "RCDefault", "startTime": start, "endTime": end])
            let all = try #require(history["data"] as? [[String: Any]])
            #expect(all.map { $0["msgUID"] as? String } == uids)
            #expect(all.first?["content"] as? String == "{\"content\":\"edited\"}")
            #expect(all.first?["conversionType"] as? Int == 10 && all.first?["groupId"] as? String == "g")
            #expect(code(try await api.post("/ultragroup/msg/modify.json", form: [
                "groupId": "g", "fromUserId": "bob", "msgUID": uids[0], "content": "{\"content\":\"not mine\"}",
            ])) == 20116)
            let (_, group) = try await api.post("/message/group/publish.json", form: [
                "fromUserId": "ann", "toGroupId": "plain", "objectName": "RC:TxtMsg", "content": "{\"content\":\"g\"}",
            ])
            let groupUid = try #require((group["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String)
            #expect(code(try await api.post("/ultragroup/msg/modify.json", form: [
                "groupId": "g", "fromUserId": "ann", "msgUID": groupUid, "content": "{\"content\":\"x\"}",
            ])) == 20116, "a group message is not an ultra group message")
            #expect(code(try await api.post("/ultragroup/msg/modify.json", form: [
                "groupId": "g", "fromUserId": "ann", "msgUID": uids[0], "content": "not json",
            ])) == 1002)

            let (_, fromBob) = try await api.post("/ultragroup/hismsg/query.json", form: [
                "groupId": "g", "busChannel": "RCDefault", "startTime": start, "endTime": end, "fromUserId": "bob", "pageSize": "1",
            ])
            #expect((fromBob["data"] as? [[String: Any]])?.map { $0["msgUID"] as? String } == [uids[1]])
            let (_, around) = try await api.post("/ultragroup/hismsg/msgid/query.json", form: [
                "groupId": "g", "busChannel": "RCDefault", "msgUID": uids[2], "prevNum": "1", "lastNum": "2",
            ])
            #expect((around["data"] as? [[String: Any]])?.map { $0["msgUID"] as? String } == Array(uids[1...4]))
            let (_, got) = try await api.post("/ultragroup/msg/get.json", form: [
                "groupId": "g", "msgs": "[{\"msgUID\":\"\(uids[0])\",\"busChannel\":\"RCDefault\"},{\"msgUID\":\"\(groupUid)\"}]",
            ])
            let messages = try #require(got["data"] as? [[String: Any]])
            #expect(messages.map { $0["msgUID"] as? String } == [uids[0]], "the group message is left out")
            #expect(messages.first?["content"] as? String == "{\"content\":\"edited\"}")
            #expect(messages.first?["sentTime"] as? Int64 == 1_800_000_000_000)

            #expect(code(try await api.post("/ultragroup/hismsg/query.json", form: ["groupId": "g", "busChannel": "RCDefault", "startTime": start, "endTime": end, "pageSize": "101"])) == 1002)
            #expect(code(try await api.post("/ultragroup/hismsg/query.json", form: ["groupId": "g", "busChannel": "RCDefault", "startTime": "0", "endTime": "\(15 * 86_400_000)"])) == 1002)
            #expect(code(try await api.post("/ultragroup/hismsg/query.json", form: ["groupId": "g", "busChannel": "nosuch", "startTime": start, "endTime": end])) == 24414)
            #expect(code(try await api.post("/ultragroup/hismsg/msgid/query.json", form: ["groupId": "g", "busChannel": "RCDefault", "msgUID": groupUid])) == 1002)
            #expect(code(try await api.post("/ultragroup/msg/get.json", form: ["groupId": "g", "msgs": "{}"])) == 1002)

            // Kept 7 days.
            clock.advance(milliseconds: 8 * 86_400_000)
            let (_, expired) = try await api.post("/ultragroup/hismsg/query.json", form: [
                "groupId": "g", "busChannel": "RCDefault", "startTime": "\(clock.nowMilliseconds() - 10 * 86_400_000)", "endTime": "\(clock.nowMilliseconds())",
            ])
            #expect((expired["data"] as? [Any])?.isEmpty == true)
            let (_, none) = try await api.post("/ultragroup/msg/get.json", form: ["groupId": "g", "msgs": "[{\"msgUID\":\"\(uids[0])\"}]"])
            #expect((none["data"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("recall with conversationType 10 and busChannel; expansions of ultra group messages")
    func recallAndExpansion() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "g", "groupName": "G"])
            _ = try await api.post("/ultragroup/create.json", form: ["userId": "ann", "groupId": "other", "groupName": "O"])
            _ = try await api.post("/ultragroup/join.json", form: ["userId": "bob", "groupId": "g"])
            _ = try await api.post("/ultragroup/channel/create.json", form: ["groupId": "g", "busChannel": "news"])
            let bob = try await server.connectedClient("bob")
            defer { Task { await bob.disconnect() } }
            let inbox = EventRecorder(bob.receivedMessages())
            let recalled = EventRecorder(bob.recalledMessages())
            let expansions = EventRecorder(bob.messageExpansionUpdates())
            func publish(_ text: String, expansion: Bool = false) async throws -> String {
                let (_, body) = try await api.post("/message/ultragroup/publish.json", json: [
                    "fromUserId": "ann", "toGroupIds": ["g"], "objectName": "RC:TxtMsg", "content": "{\"content\":\"\(text)\"}",
                    "busChannel": "news", "expansion": expansion,
                ])
                return try #require((body["messageUIDs"] as? [[String: Any]])?.first?["messageUID"] as? String)
            }
            let uid = try await publish("oops")
            #expect(await inbox.first { $0.message.messageUId == uid } != nil)
            let recall: [String: String] = ["fromUserId": "ann", "conversationType": "10", "targetId": "g", "messageUID": uid, "busChannel": "news"]
            var wrongChannel = recall
            wrongChannel["busChannel"] = "RCDefault"
            #expect(code(try await api.post("/message/recall.json", form: wrongChannel)) == 25101, "not a message of RCDefault")
            var notSender = recall
            notSender["fromUserId"] = "bob"
            #expect(code(try await api.post("/message/recall.json", form: notSender)) == 25101)
            #expect(code(try await api.post("/message/recall.json", form: recall)) == 200)
            let recalledOne = try #require(await recalled.first { $0.messageUId == uid }, "bob's device is told on the channel")
            #expect(recalledOne.channelId == "news" && recalledOne.targetId == "g")
            let stored = try #require(try await server.core.store.message(appId: server.app.id, uid: uid))
            #expect(stored.objectName == RecallNotificationMessage.objectName)

            let extended = try await publish("extend me", expansion: true)
            #expect(await inbox.first { $0.message.messageUId == extended } != nil)
            let target: [String: String] = ["msgUID": extended, "userId": "bob", "groupId": "g", "busChannel": "news", "isSyncSender": "1"]
            #expect(code(try await api.post("/ultragroup/message/expansion/set.json", form: target.merging(["extraKeyVal": "{\"k1\":\"v1\",\"k2\":\"v2\"}"]) { a, _ in a })) == 200)
            let change = try #require(await expansions.first { _ in true }, "bob (with isSyncSender) is told on the channel")
            if case .updated(let changes, let message) = change {
                #expect(changes == ["k1": "v1", "k2": "v2"] && message.messageUId == extended && message.channelId == "news")
            } else {
                Issue.record("expected an update, got \(change)")
            }
            #expect(code(try await api.post("/ultragroup/message/expansion/delete.json", form: target.merging(["extraKey": "[\"k1\"]"]) { a, _ in a })) == 200)
            let (_, query) = try await api.post("/ultragroup/message/expansion/query.json", form: ["msgUID": extended, "groupId": "g"])
            let content = try #require(query["extraContent"] as? [String: [String: Any]])
            #expect(content.keys.sorted() == ["k2"] && content["k2"]?["v"] as? String == "v2")
            #expect(code(try await api.post("/ultragroup/message/expansion/query.json", form: ["msgUID": extended, "groupId": "other"])) == 1002)
            #expect(code(try await api.post("/ultragroup/message/expansion/set.json", form: [
                "msgUID": extended, "userId": "bob", "groupId": "other", "extraKeyVal": "{\"k\":\"v\"}",
            ])) == 1002, "not a message of that group")
            #expect(code(try await api.post("/ultragroup/message/expansion/set.json", form: [
                "msgUID": extended, "userId": "zed", "groupId": "g", "extraKeyVal": "{\"k\":\"v\"}",
            ])) == 24406, "only members extend messages")
            #expect(code(try await api.post("/ultragroup/message/expansion/set.json", form: [
                "msgUID": uid, "userId": "bob", "groupId": "g", "extraKeyVal": "{\"k\":\"v\"}",
            ])) == 34008, "a message sent without expansion")
            #expect(try await server.core.store.expansion(appId: server.app.id, uid: extended)?.keys.sorted() == ["k2"])
        }
    }
}
