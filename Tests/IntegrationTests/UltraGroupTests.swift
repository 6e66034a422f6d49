import Foundation
import IMCore
@testable import IMLib
import IMServer
import IMStore
import IMWire
import IMServerTesting
import Testing

@Suite("Ultra groups end to end")
struct UltraGroupTests {
    /// A connected device whose first ultra group catch-up has finished.
    static func member(_ server: TestServer, _ user: String, platform: Platform = .linux)
        async throws -> (IMClient, EventRecorder<ReceivedMessage>) {
        let client = server.client(platform: platform)
        let inbox = EventRecorder(client.receivedMessages())
        let caughtUp = EventRecorder(client.ultraGroupSyncCompleted())
        try await client.connect(token: try await server.token(user))
        // The catch-up follows the offline sync, the receipt and the conversation-state pulls: a
        // chain of requests and database writes that the whole suite's load on two cores can
        // stretch past the recorder's default 20 s.
        #expect(await caughtUp.wait(for: 1, timeout: .seconds(60)).count == 1, "ultra group catch-up of \(user) finished")
        return (client, inbox)
    }

    /// Ultra group `groupId` owned by the first user, with the others as members.
    static func group(_ server: TestServer, _ groupId: String, _ users: [String]) async throws {
        let appId = server.app.id
        try await server.core.ultraGroups.create(appId: appId, groupId: groupId, name: groupId, ownerId: users[0])
        if users.count > 1 { try await server.core.ultraGroups.join(appId: appId, groupId: groupId, userIds: Array(users.dropFirst())) }
    }

    static func send(_ client: IMClient, _ groupId: String, _ channelId: String, _ text: String,
                     mentions: MentionedInfo? = nil) async throws -> Message {
        try await client.sendMessage(.ultraGroup, targetId: groupId, channelId: channelId,
                                     content: TextMessage(content: text, mentionedInfo: mentions))
    }

    static func sendCode(_ client: IMClient, _ groupId: String, _ channelId: String, _ text: String) async -> Int? {
        await failureCode { _ = try await send(client, groupId, channelId, text) }
    }

    static func text(_ message: Message) -> String? { message.content(as: TextMessage.self)?.content }

    @Test("members online get a channel's messages once, RCDefault without a channel; an offline member gets nothing at reconnect and catches up from the channel summary and history")
    func deliveryAndCatchUp() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.group(server, "ug1", ["alice", "bob", "carol"])
            try await server.core.ultraGroups.createChannel(appId: server.app.id, groupId: "ug1", channelId: "news", type: .publicChannel)
            let (alice, _) = try await Self.member(server, "alice")
            let (bob, bobInbox) = try await Self.member(server, "bob")

            let first = try await Self.send(alice, "ug1", "", "hello default")
            #expect(first.channelId == UltraGroupLimits.defaultChannelId)
            _ = try await Self.send(alice, "ug1", "news", "hello news")
            let got = await bobInbox.wait(for: 2)
            #expect(got.count == 2)
            #expect(got.map { "\($0.message.channelId):\(Self.text($0.message) ?? "")" } == ["RCDefault:hello default", "news:hello news"])
            #expect(got.allSatisfy { $0.message.conversationType == .ultraGroup && $0.message.targetId == "ug1" && !$0.offline })

            // Carol was offline: no offline messages, but the catch-up pulls both channels.
            let carol = server.client()
            let carolInbox = EventRecorder(carol.receivedMessages())
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            let synced = EventRecorder(carol.offlineMessageSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(await synced.wait(for: 1).count == 1)
            let result = try #require(await caughtUp.wait(for: 1).first)
            #expect(result.channels == 2 && result.fetched == 2)
            #expect(carolInbox.items.isEmpty, "ultra group messages never come as offline messages")
            let defaultChannel = try #require(try await carol.getConversation(.ultraGroup, targetId: "ug1"))
            #expect(defaultChannel.channelId == "RCDefault" && defaultChannel.unreadMessageCount == 1)
            let news = try #require(try await carol.getConversation(.ultraGroup, targetId: "ug1", channelId: "news"))
            #expect(news.unreadMessageCount == 1)
            #expect(try await carol.getHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news").compactMap(Self.text) == ["hello news"])
            #expect(try await carol.getUltraGroupUnreadCount(targetId: "ug1") == 2)
            #expect(try await carol.getConversationsForAllChannels(targetId: "ug1").count == 2)

            // A live message after the catch-up is received once, and a second catch-up pulls nothing.
            _ = try await Self.send(bob, "ug1", "news", "later")
            let live = await carolInbox.wait(for: 1)
            #expect(live.count == 1 && Self.text(live[0].message) == "later")
            #expect(try await carol.syncUltraGroups().fetched == 0)

            // Refusals: not a member, unknown channel, unknown group, bad channel id; nothing stored.
            let (dave, _) = try await Self.member(server, "dave")
            #expect(await Self.sendCode(dave, "ug1", "", "x") == 24406)
            #expect(await Self.sendCode(alice, "ug1", "nochan", "x") == 24414)
            #expect(await Self.sendCode(alice, "nogroup", "", "x") == 24410)
            #expect(await Self.sendCode(alice, "ug1", "bad-id!", "x") == 33003)
            let history = try await alice.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news", count: 10)
            #expect(history.messages.compactMap(Self.text) == ["later", "hello news"])
            #expect(await failureCode { _ = try await dave.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", count: 10) } == 24406)
        }
    }

    @Test("a private channel is seen, sent to, received and read only by its listed members and its bound user groups; 24416 for the others; changes reach the members")
    func privateChannels() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let service = server.core.ultraGroups
            let appId = server.app.id
            try await Self.group(server, "ug2", ["alice", "bob", "carol"])
            try await service.createChannel(appId: appId, groupId: "ug2", channelId: "vip", type: .privateChannel)
            try await service.setPrivateChannelUsers(appId: appId, groupId: "ug2", channelId: "vip", userIds: ["bob"], add: true)
            try await service.createUserGroups(appId: appId, groupId: "ug2", userGroupIds: ["mods"])
            try await service.setUserGroupUsers(appId: appId, groupId: "ug2", userGroupId: "mods", userIds: ["carol"], add: true)
            let (alice, aliceInbox) = try await Self.member(server, "alice")
            let (bob, _) = try await Self.member(server, "bob")
            let (carol, carolInbox) = try await Self.member(server, "carol")
            let carolEvents = EventRecorder(carol.ultraGroupEvents())

            _ = try await Self.send(bob, "ug2", "vip", "for the list")
            #expect(await Self.sendCode(carol, "ug2", "vip", "x") == 24416)
            #expect(await Self.sendCode(alice, "ug2", "vip", "x") == 24416)
            #expect(await failureCode { _ = try await alice.getRemoteHistoryMessages(.ultraGroup, targetId: "ug2", channelId: "vip", count: 10) } == 24416)
            #expect(try await alice.syncUltraGroups().channels == 1, "alice sees RCDefault only")

            // Binding carol's user group lets her in: she is told, can send, and reads the history.
            try await service.bindUserGroups(appId: appId, groupId: "ug2", channelId: "vip", userGroupIds: ["mods"], bind: true)
            let shown = await carolEvents.first { $0.kind == .channelChanged && $0.channelId == "vip" }
            #expect(shown?.channelType == .privateChannel)
            #expect(try await carol.syncUltraGroups().channels == 2)
            #expect(try await carol.getRemoteHistoryMessages(.ultraGroup, targetId: "ug2", channelId: "vip", count: 10)
                .messages.compactMap(Self.text) == ["for the list"])
            _ = try await Self.send(carol, "ug2", "vip", "carol joins in")
            _ = try await Self.send(bob, "ug2", "", "to everyone")
            #expect(await carolInbox.first { Self.text($0.message) == "to everyone" } != nil)
            // Alice got the public message, never the private ones.
            #expect(await aliceInbox.first { Self.text($0.message) == "to everyone" } != nil)
            #expect(aliceInbox.items.allSatisfy { $0.message.channelId != "vip" })

            // Unbinding hides the channel from carol again.
            try await service.bindUserGroups(appId: appId, groupId: "ug2", channelId: "vip", userGroupIds: ["mods"], bind: false)
            #expect(await carolEvents.first { $0.kind == .channelHidden && $0.channelId == "vip" } != nil)
            #expect(await Self.sendCode(carol, "ug2", "vip", "x") == 24416)

            // A public channel turned private keeps its history from those not listed.
            try await service.createChannel(appId: appId, groupId: "ug2", channelId: "open", type: .publicChannel)
            _ = try await Self.send(alice, "ug2", "open", "said in public")
            try await service.setChannelType(appId: appId, groupId: "ug2", channelId: "open", type: .privateChannel)
            #expect(await carolEvents.first { $0.kind == .channelHidden && $0.channelId == "open" } != nil)
            #expect(await failureCode { _ = try await carol.getRemoteHistoryMessages(.ultraGroup, targetId: "ug2", channelId: "open", count: 10) } == 24416)
            // RCDefault stays public and cannot be deleted.
            #expect(await failureCode { try await service.setChannelType(appId: appId, groupId: "ug2", channelId: "RCDefault", type: .privateChannel) } == 24403)
            #expect(await failureCode { try await service.deleteChannel(appId: appId, groupId: "ug2", channelId: "RCDefault") } == 24403)
        }
    }

    @Test("the sender modifies a message: members and the sender's second device see it live, an offline device at its catch-up, history returns it; 20116 otherwise")
    func modification() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.group(server, "ug3", ["alice", "bob", "carol"])
            let (alice, _) = try await Self.member(server, "alice")
            let (aliceMac, _) = try await Self.member(server, "alice", platform: .iOS)
            let (bob, bobInbox) = try await Self.member(server, "bob")
            let bobChanges = EventRecorder(bob.messageModifications())
            let macChanges = EventRecorder(aliceMac.messageModifications())
            // Carol reads the original, then goes offline.
            let (carol, carolInbox) = try await Self.member(server, "carol")
            let sent = try await Self.send(alice, "ug3", "", "tpyo")
            #expect(await carolInbox.wait(for: 1).count == 1)
            await carol.disconnect()
            #expect(await bobInbox.wait(for: 1).count == 1)

            let modified = try await alice.modifyUltraGroupMessage(messageUId: sent.messageUId, content: TextMessage(content: "typo"))
            #expect(Self.text(modified) == "typo" && modified.messageUId == sent.messageUId)
            let seen = await bobChanges.wait(for: 1)
            #expect(seen.count == 1 && Self.text(seen[0]) == "typo" && seen[0].sentTime == sent.sentTime)
            #expect(await macChanges.wait(for: 1).first.map(Self.text) == "typo")
            let bobCopy = try #require(try await bob.getHistoryMessages(.ultraGroup, targetId: "ug3").first)
            #expect(Self.text(bobCopy) == "typo")
            let history = try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug3", count: 5)
            #expect(history.messages.map(\.messageUId) == [sent.messageUId] && history.messages.compactMap(Self.text) == ["typo"])

            // Carol's device held the original: its catch-up applies the modification.
            let carolChanges = EventRecorder(carol.messageModifications())
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(try #require(await caughtUp.wait(for: 1).first).modified == 1)
            #expect(await carolChanges.wait(for: 1).first.map(Self.text) == "typo")
            #expect(try await carol.getHistoryMessages(.ultraGroup, targetId: "ug3").compactMap(Self.text) == ["typo"])

            // A blocked word is refused (21501) and the message keeps its content; a replaced one is replaced.
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "forbidden"])
            _ = try await server.api.post("/sensitiveword/add.json", form: ["word": "darn", "replaceWord": "***"])
            #expect(await failureCode { _ = try await alice.modifyUltraGroupMessage(messageUId: sent.messageUId, content: TextMessage(content: "forbidden")) } == 21501)
            #expect(Self.text(try await alice.modifyUltraGroupMessage(messageUId: sent.messageUId, content: TextMessage(content: "darn typo"))) == "*** typo")

            // Only the sender, only ultra group messages, only the same content type.
            #expect(await failureCode { _ = try await bob.modifyUltraGroupMessage(messageUId: sent.messageUId, content: TextMessage(content: "mine")) } == 20116)
            let privateMessage = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "dm"))
            #expect(await failureCode { _ = try await alice.modifyUltraGroupMessage(messageUId: privateMessage.messageUId, content: TextMessage(content: "x")) } == 20116)
            #expect(await failureCode { _ = try await alice.modifyUltraGroupMessage(messageUId: sent.messageUId, content: CommandMessage(name: "n", data: "d")) } == 33003)
            let stored = try #require(try await server.core.store.message(appId: server.app.id, uid: sent.messageUId))
            #expect(try JSONDecoder().decode(TextMessage.self, from: stored.content).content == "*** typo")
        }
    }

    @Test("unread and mention counts per channel come from the server; reading one channel clears it on every device and leaves the others")
    func unreadMentionsAndReadSync() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.group(server, "ug4", ["alice", "bob", "carol"])
            try await server.core.ultraGroups.createChannel(appId: server.app.id, groupId: "ug4", channelId: "news", type: .publicChannel)
            let (alice, _) = try await Self.member(server, "alice")
            _ = try await Self.send(alice, "ug4", "", "one")
            _ = try await Self.send(alice, "ug4", "", "hey bob", mentions: MentionedInfo(type: .users, userIdList: ["bob"]))
            _ = try await Self.send(alice, "ug4", "", "hey carol", mentions: MentionedInfo(type: .users, userIdList: ["carol"]))
            _ = try await Self.send(alice, "ug4", "news", "all of you", mentions: MentionedInfo(type: .all))
            _ = try await Self.send(alice, "ug4", "news", "two")

            let (bob, _) = try await Self.member(server, "bob")
            let (bobMac, _) = try await Self.member(server, "bob", platform: .iOS)
            for device in [bob, bobMac] {
                #expect(try await device.getConversation(.ultraGroup, targetId: "ug4")?.unreadMessageCount == 3)
                #expect(try await device.getConversation(.ultraGroup, targetId: "ug4")?.mentionedCount == 1)
                #expect(try await device.getConversation(.ultraGroup, targetId: "ug4", channelId: "news")?.unreadMessageCount == 2)
                #expect(try await device.getUltraGroupUnreadMentionedCount(targetId: "ug4") == 2)
                #expect(try await device.getUltraGroupAllUnreadMentionedCount() == 2)
            }
            let macEvents = EventRecorder(bobMac.ultraGroupEvents())
            try await bob.syncUltraGroupReadStatus(targetId: "ug4")
            #expect(await macEvents.first { $0.kind == .readSynced && $0.channelId == "RCDefault" } != nil)
            #expect(try await bobMac.getConversation(.ultraGroup, targetId: "ug4")?.unreadMessageCount == 0)
            #expect(try await bobMac.getConversation(.ultraGroup, targetId: "ug4", channelId: "news")?.unreadMessageCount == 2)
            // A new device reads the same counts from the server; its own messages never count.
            let (bobWeb, _) = try await Self.member(server, "bob", platform: .web)
            #expect(try await bobWeb.getConversation(.ultraGroup, targetId: "ug4")?.unreadMessageCount == 0)
            #expect(try await bobWeb.getConversation(.ultraGroup, targetId: "ug4", channelId: "news")?.mentionedCount == 1)
            #expect(try await alice.syncUltraGroups().channels == 2)
            #expect(try await alice.getUltraGroupUnreadCount(targetId: "ug4") == 0)
            #expect(await failureCode { try await bob.syncUltraGroupReadStatus(targetId: "ug4", channelId: "nochan") } == 24414)
        }
    }

    @Test("history starts at joining and ends at the retention; 100 groups per user (24412) and 50 channels per group (24413)")
    func retentionAndLimits() async throws {
        let clock = ManualClock(milliseconds: 1_700_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let service = server.core.ultraGroups
            let appId = server.app.id
            try await Self.group(server, "ug5", ["alice"])
            let (alice, _) = try await Self.member(server, "alice")
            _ = try await Self.send(alice, "ug5", "", "before bob")
            try await service.join(appId: appId, groupId: "ug5", userIds: ["bob"])
            _ = try await Self.send(alice, "ug5", "", "after bob")
            let (bob, _) = try await Self.member(server, "bob")
            #expect(try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug5", count: 10).messages.compactMap(Self.text) == ["after bob"])
            clock.advance(milliseconds: 8 * 86_400_000)
            #expect(try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug5", count: 10).messages.isEmpty)
            #expect(try await alice.syncUltraGroups().channels == 1)

            for index in 1..<UltraGroupLimits.maxGroupsPerUser {
                try await service.create(appId: appId, groupId: "many\(index)", name: "g", ownerId: "alice")
            }
            #expect(await failureCode { try await service.create(appId: appId, groupId: "one-too-many", name: "g", ownerId: "alice") } == 24412)
            #expect(await failureCode { try await service.join(appId: appId, groupId: "many1", userIds: ["bob", "alice"]) } == nil)
            #expect(await failureCode { try await service.join(appId: appId, groupId: "ug5", userIds: ["carol", "alice"]) } == nil)
            try await Self.group(server, "limits", ["bob"])
            #expect(await failureCode { try await service.join(appId: appId, groupId: "limits", userIds: ["carol", "alice"]) } == 24412)
            #expect(try await service.roster(appId: appId, groupId: "limits").members.keys.sorted() == ["bob"], "nobody was added")
            for index in 1..<UltraGroupLimits.maxChannelsPerGroup {
                try await service.createChannel(appId: appId, groupId: "limits", channelId: "c\(index)", type: .publicChannel)
            }
            #expect(await failureCode { try await service.createChannel(appId: appId, groupId: "limits", channelId: "c50", type: .publicChannel) } == 24413)
            #expect(try await service.roster(appId: appId, groupId: "limits").channels.count == UltraGroupLimits.maxChannelsPerGroup)
        }
    }

    @Test("a catch-up pulls what a device missed even when a newer message reached it first, and never shows others' directional messages")
    func catchUpGapAndDirectional() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.group(server, "ug6", ["alice", "bob", "carol"])
            let (alice, _) = try await Self.member(server, "alice")
            let (carol, _) = try await Self.member(server, "carol")
            _ = try await Self.send(alice, "ug6", "", "seen")
            try await waitUntil { try await carol.getHistoryMessages(.ultraGroup, targetId: "ug6").count == 1 }
            await carol.disconnect()
            _ = try await Self.send(alice, "ug6", "", "missed 1")
            _ = try await Self.send(alice, "ug6", "", "missed 2")
            let newest = try await Self.send(alice, "ug6", "", "newest")
            // The newest reaches the device before its catch-up does (as a push released after the
            // offline sync would).
            var wire = Im_Message()
            wire.conversationType = Int32(ConversationType.ultraGroup.rawValue)
            wire.targetID = "ug6"
            wire.channelID = UltraGroupLimits.defaultChannelId
            wire.senderUserID = "alice"
            wire.objectName = TextMessage.objectName
            wire.content = newest.contentData
            wire.messageUid = newest.messageUId
            wire.sentTime = newest.sentTime
            wire.flags = PersistentFlag.persistedAndCounted.rawValue
            await carol.receive([wire], offline: false, hasPackage: false, watermark: nil)
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(try #require(await caughtUp.wait(for: 1).first).fetched == 2)
            #expect(try await carol.getHistoryMessages(.ultraGroup, targetId: "ug6").compactMap(Self.text) == ["newest", "missed 2", "missed 1", "seen"])

            // A directional message to bob is neither carol's last message nor counted for her.
            let (bob, _) = try await Self.member(server, "bob")
            _ = try await alice.sendDirectionalMessage(.ultraGroup, targetId: "ug6", toUserIds: ["bob"], content: TextMessage(content: "just bob"))
            try await waitUntil { try await bob.getHistoryMessages(.ultraGroup, targetId: "ug6").first.map(Self.text) == "just bob" }
            let before = try #require(try await carol.getConversation(.ultraGroup, targetId: "ug6"))
            #expect(try await carol.syncUltraGroups().fetched == 0)
            let after = try #require(try await carol.getConversation(.ultraGroup, targetId: "ug6"))
            #expect(after.unreadMessageCount == before.unreadMessageCount && after.latestMessageId == before.latestMessageId)
            #expect(try await carol.getHistoryMessages(.ultraGroup, targetId: "ug6").compactMap(Self.text).contains("just bob") == false)
        }
    }

    @Test("recall and extensions work in a channel: members online get them at once, a device away finds the recall at its catch-up")
    func recallAndExtensions() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await Self.group(server, "ug7", ["alice", "bob", "carol"])
            try await server.core.ultraGroups.createChannel(appId: server.app.id, groupId: "ug7", channelId: "news", type: .publicChannel)
            let (alice, _) = try await Self.member(server, "alice")
            let (bob, bobInbox) = try await Self.member(server, "bob")
            let (carol, carolInbox) = try await Self.member(server, "carol")
            let bobRecalls = EventRecorder(bob.recalledMessages())
            let aliceExpansions = EventRecorder(alice.messageExpansionUpdates())

            let sent = try await alice.sendMessage(.ultraGroup, targetId: "ug7", channelId: "news", content: TextMessage(content: "take me back"),
                                                   canIncludeExpansion: true)
            #expect(await bobInbox.wait(for: 1).count == 1)
            #expect(await carolInbox.wait(for: 1).count == 1)
            try await bob.updateMessageExpansion(["vote": "yes"], messageUId: sent.messageUId)
            let expansion = await aliceExpansions.wait(for: 1).first
            if case .updated(let changes, let message)? = expansion {
                #expect(changes == ["vote": "yes"] && message.channelId == "news")
            } else {
                Issue.record("alice got no extension update: \(String(describing: expansion))")
            }
            await carol.disconnect()

            let recalled = try await alice.recallMessage(sent)
            #expect(recalled.objectName == RecallNotificationMessage.objectName)
            #expect(await bobRecalls.wait(for: 1).first?.messageUId == sent.messageUId)
            let history = try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug7", channelId: "news", count: 5)
            #expect(history.messages.map(\.objectName) == [RecallNotificationMessage.objectName])

            // Carol's device still holds the original: its catch-up recalls it.
            let carolRecalls = EventRecorder(carol.recalledMessages())
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(try #require(await caughtUp.wait(for: 1).first).modified == 1)
            #expect(await carolRecalls.wait(for: 1).first?.messageUId == sent.messageUId)
            #expect(try await carol.getHistoryMessages(.ultraGroup, targetId: "ug7", channelId: "news").map(\.objectName) == [RecallNotificationMessage.objectName])
            // Someone else's message is not theirs to recall.
            let bobs = try await bob.sendMessage(.ultraGroup, targetId: "ug7", channelId: "news", content: TextMessage(content: "mine"))
            var forged = bobs
            forged.direction = .send
            #expect(await failureCode { _ = try await alice.recallMessage(forged) } == 25101)
        }
    }

    @Test("a device away through more modifications than one summary lists gets them all, a page at a time")
    func modificationPaging() async throws {
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 100_000 }) { server in
            try await Self.group(server, "ug8", ["alice", "carol"])
            let (alice, _) = try await Self.member(server, "alice")
            let (carol, carolInbox) = try await Self.member(server, "carol")
            let count = UltraGroupService.maxModifiedPerSummary + 20
            var sent: [Message] = []
            for index in 0..<count { sent.append(try await Self.send(alice, "ug8", "", "v1 \(index)")) }
            #expect(await carolInbox.wait(for: count).count == count)
            await carol.disconnect()
            for message in sent {
                _ = try await alice.modifyUltraGroupMessage(messageUId: message.messageUId, content: TextMessage(content: "v2"))
            }
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(try #require(await caughtUp.wait(for: 1).first).modified == count)
            let local = try await carol.getHistoryMessages(.ultraGroup, targetId: "ug8", count: 20)
            #expect(local.count == 20 && local.allSatisfy { Self.text($0) == "v2" })
            #expect(try await carol.syncUltraGroups().modified == 0, "nothing is applied twice")
        }
    }

    @Test("modifications of 5 MB in one millisecond reach a device away in summaries that each fit the frame budget")
    func modificationsInOneMillisecond() async throws {
        let clock = ManualClock()
        try await withTestServer(try await TestServer.start(clock: clock) { $0.session.clientSendsPerSecond = 100_000 }) { server in
            try await Self.group(server, "ug9", ["alice", "carol"])
            let (alice, _) = try await Self.member(server, "alice")
            let (carol, carolInbox) = try await Self.member(server, "carol")
            let count = 40
            var sent: [Message] = []
            for index in 0..<count { sent.append(try await Self.send(alice, "ug9", "", "v1 \(index)")) }
            #expect(await carolInbox.wait(for: count).count == count)
            await carol.disconnect()
            clock.advance(milliseconds: 1000)
            // The clock stands still: every modification has the same millisecond, 40 x 120 KB in all.
            let large = String(repeating: "y", count: 120_000)
            for message in sent {
                _ = try await alice.modifyUltraGroupMessage(messageUId: message.messageUId, content: TextMessage(content: "v2 \(large)"))
            }

            // Over the wire: each summary within the budget, every modification once.
            let raw = try await MessageRulesTests.rawConnection(server, user: "carol")
            var request = Im_UltraGroupSummaryRequest()
            request.modifiedSince = 1
            var uids: [String] = []
            for _ in 0..<20 {
                let frame = try await raw.request(.ultraGroupSummary, request, timeout: .seconds(10))
                #expect(frame.payload.count <= MessageLimits.frameBudgetBytes + 200_000, "a summary of \(frame.payload.count) bytes")
                let summary = try frame.body(Im_UltraGroupSummary.self)
                uids += summary.modified.map(\.messageUid)
                guard summary.moreModified else { break }
                request.modifiedSince = summary.serverTime
                request.modifiedAfterSeq = summary.modifiedThroughSeq
                request.modifiedOnly = true
            }
            #expect(uids.count == count && Set(uids) == Set(sent.map(\.messageUId)), "each modification once")
            await raw.close()

            // And IMLib catches them all up.
            let caughtUp = EventRecorder(carol.ultraGroupSyncCompleted())
            try await carol.connect(token: try await server.token("carol"))
            #expect(try #require(await caughtUp.wait(for: 1).first).modified == count)
            #expect(try await carol.syncUltraGroups().modified == 0, "nothing is applied twice")
        }
    }

    @Test("per channel: typing reaches the channel's online members, drafts and local search stay apart, remote delete and clear touch one channel of this user's history")
    func perChannel() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            try await Self.group(server, "ug1", ["ann", "bob"])
            try await server.core.ultraGroups.createChannel(appId: server.app.id, groupId: "ug1", channelId: "news", type: .publicChannel)
            let (ann, _) = try await Self.member(server, "ann")
            let (bob, bobInbox) = try await Self.member(server, "bob")

            let typing = EventRecorder(bob.typingStatusUpdates())
            #expect(try await ann.sendTypingStatus(.ultraGroup, targetId: "ug1", channelId: "news", typingContentType: "RC:TxtMsg"))
            #expect(try await ann.sendTypingStatus(.ultraGroup, targetId: "ug1", typingContentType: "RC:TxtMsg"), "another channel is throttled apart")
            let statuses = await typing.wait(for: 2)
            #expect(Set(statuses.map(\.channelId)) == ["news", "RCDefault"] && statuses.allSatisfy { $0.userId == "ann" && $0.targetId == "ug1" })
            #expect(await failureCode { _ = try await ann.sendTypingStatus(.private, targetId: "bob", channelId: "news", typingContentType: "RC:TxtMsg") } == 33003)

            #expect(try await bob.saveTextMessageDraft(.ultraGroup, targetId: "ug1", channelId: "news", content: "news draft"))
            #expect(try await bob.saveTextMessageDraft(.ultraGroup, targetId: "ug1", content: "default draft"))
            #expect(try await bob.getTextMessageDraft(.ultraGroup, targetId: "ug1", channelId: "news") == "news draft")
            #expect(try await bob.getTextMessageDraft(.ultraGroup, targetId: "ug1") == "default draft")
            #expect(try await bob.clearTextMessageDraft(.ultraGroup, targetId: "ug1", channelId: "news"))
            #expect(try await bob.getTextMessageDraft(.ultraGroup, targetId: "ug1", channelId: "news") == nil)
            #expect(try await bob.getTextMessageDraft(.ultraGroup, targetId: "ug1") == "default draft")

            let first = try await Self.send(ann, "ug1", "news", "weather today")
            clock.advance(milliseconds: 10)
            let second = try await Self.send(ann, "ug1", "news", "weather tomorrow")
            clock.advance(milliseconds: 10)
            _ = try await Self.send(ann, "ug1", "", "weather in the default channel")
            #expect(await bobInbox.wait(for: 3).count == 3)
            #expect(try await bob.searchMessages(.ultraGroup, targetId: "ug1", channelId: "news", keyword: "weather").map(Self.text)
                    == ["weather tomorrow", "weather today"])
            #expect(try await bob.searchMessages(.ultraGroup, targetId: "ug1", keyword: "weather").map(Self.text) == ["weather in the default channel"])
            #expect(try await bob.searchMessages(.ultraGroup, targetId: "ug1", channelId: "news", userId: "ann").count == 2)

            try await bob.deleteRemoteMessages(.ultraGroup, targetId: "ug1", channelId: "news", messages: [second])
            #expect(try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news", count: 10).messages.map(\.messageUId)
                    == [first.messageUId], "gone from bob's history")
            #expect(try await ann.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news", count: 10).messages.count == 2,
                    "ann keeps hers")
            try await bob.clearHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news", recordTime: 0, clearRemote: true)
            #expect(try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news", count: 10).messages.isEmpty)
            #expect(try await bob.getHistoryMessages(.ultraGroup, targetId: "ug1", channelId: "news").isEmpty, "and from this device")
            #expect(try await bob.getRemoteHistoryMessages(.ultraGroup, targetId: "ug1", count: 10).messages.count == 1, "the default channel keeps its message")
            await ann.disconnect(); await bob.disconnect()
        }
    }
}
