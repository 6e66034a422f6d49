import Foundation
import GRDB
import IMCore
@testable import IMLib
import IMServer
import IMStore
@testable import IMStoreSQLite
import IMWire
import Logging
import IMServerTesting
import Testing

@Suite("Conversation state: do-not-disturb, quiet hours, pins and tags on every device")
struct ConversationStateTests {
    /// Two online devices of one user that do not kick each other (a phone and a desktop), each
    /// with a recorder of its conversation-state changes.
    static func twoDevices(_ server: TestServer, _ user: String)
        async throws -> (IMClient, IMClient, EventRecorder<ConversationStateChange>) {
        let phone = try await server.connectedClient(user, platform: .iOS)
        let desktop = try await server.connectedClient(user, platform: .macOS)
        return (phone, desktop, EventRecorder(desktop.conversationStateChanges()))
    }

    /// A device of the user that connects now, returned once it has applied `expected` changes
    /// pulled at connect (nil if they did not all arrive).
    static func laterDevice(_ server: TestServer, _ user: String, platform: Platform = .web,
                            expecting expected: [ConversationStateChange]) async throws -> IMClient? {
        let client = server.client(platform: platform)
        let changes = EventRecorder(client.conversationStateChanges())
        try await client.connect(token: try await server.token(user))
        for change in expected {
            guard await changes.first(where: { $0 == change }) != nil else { return nil }
        }
        return client
    }

    static func message(_ body: () async throws -> Void) async -> String {
        do {
            try await body()
            return ""
        } catch let error as IMError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// Everything the server holds for the user, from a new device's point of view.
    static func serverState(_ server: TestServer, _ user: String) async throws -> ConversationStateDeltaRecord {
        try await server.core.store.conversationStateChanges(appId: server.app.id, userId: user, since: 0, limit: 1000)
    }

    @Test("do-not-disturb set on one device reaches the other at once and a later device at connect; messages still arrive and count")
    func doNotDisturbOnEveryDevice() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["ann", "bob"])
            let (phone, desktop, desktopChanges) = try await Self.twoDevices(server, "ann")
            let bob = try await server.connectedClient("bob")
            let desktopInbox = EventRecorder(desktop.receivedMessages())
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "before"))
            #expect(await desktopInbox.wait(for: 1).count == 1)

            #expect(try await phone.setConversationNotificationStatus(.private, targetId: "bob", isBlocked: true) == .doNotDisturb)
            #expect(try await phone.getConversationNotificationStatus(.private, targetId: "bob") == .doNotDisturb, "the device that set it sees it at once")
            let bobConversation = ConversationIdentifier(.private, targetId: "bob")
            #expect(await desktopChanges.first { $0 == .notificationLevel(bobConversation, .mention) } != nil, "the desktop hears of it live")
            #expect(try await desktop.getConversationNotificationStatus(.private, targetId: "bob") == .doNotDisturb)
            #expect(try await desktop.getConversationNotificationLevel(.private, targetId: "bob") == .mention)
            #expect(try await desktop.getBlockedConversationList(types: [.private]).map(\.targetId) == ["bob"])
            #expect(try await desktop.getConversation(.private, targetId: "bob")?.notificationLevel == .mention)

            // The 5.x level form, the other way round.
            try await desktop.setConversationNotificationLevel(.group, targetId: "g1", level: .blocked)
            let phoneChanges = EventRecorder(phone.conversationStateChanges())
            try await desktop.setConversationNotificationLevel(.group, targetId: "g1", level: .mentionUsers)
            let g1 = ConversationIdentifier(.group, targetId: "g1")
            #expect(await phoneChanges.first { $0 == .notificationLevel(g1, .mentionUsers) } != nil)
            #expect(try await phone.getConversationNotificationLevel(.group, targetId: "g1") == .mentionUsers)

            // Do-not-disturb holds back pushes only: the message arrives, is stored and counts.
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "while muted"))
            #expect(await desktopInbox.wait(for: 2).count == 2)
            #expect(try await desktop.getConversation(.private, targetId: "bob")?.unreadMessageCount == 2)
            #expect(try await desktop.getUnreadCount(types: [.private], containBlocked: true) == 2)
            #expect(try await desktop.getUnreadCount(types: [.private], containBlocked: false) == 0)

            // A device that logs in later gets the whole state with its first connect.
            let web = try #require(try await Self.laterDevice(server, "ann", expecting: [
                .notificationLevel(bobConversation, .mention), .notificationLevel(g1, .mentionUsers),
            ]))
            #expect(try await web.getConversationNotificationStatus(.private, targetId: "bob") == .doNotDisturb)
            #expect(try await web.getConversationNotificationStatus(.group, targetId: "g1") == .doNotDisturb)
            #expect(try await web.getConversationNotificationStatus(.private, targetId: "carol") == .notify)

            // Unblocking travels the same way; bob's own settings were never touched.
            try await phone.setConversationNotificationStatus(.private, targetId: "bob", isBlocked: false)
            #expect(await desktopChanges.first { $0 == .notificationLevel(bobConversation, .default) } != nil)
            #expect(try await desktop.getBlockedConversationList(types: [.private]).isEmpty)
            #expect(try await bob.getConversationNotificationStatus(.private, targetId: "ann") == .notify)
            #expect(try await Self.serverState(server, "bob").isEmpty)
            for client in [phone, desktop, bob, web] { await client.disconnect() }
        }
    }

    @Test("a pin travels to the other device and to a later one; pinned conversations come first")
    func pinsOnEveryDevice() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (phone, desktop, desktopChanges) = try await Self.twoDevices(server, "ann")
            let desktopInbox = EventRecorder(desktop.receivedMessages())
            for friend in ["carol", "dave", "erin"] {
                _ = try await phone.sendMessage(.private, targetId: friend, content: TextMessage(content: "hi \(friend)"))
            }
            #expect(await desktopInbox.wait(for: 3).count == 3)
            #expect(try await desktop.getConversationList(types: [.private]).map(\.targetId) == ["erin", "dave", "carol"])

            #expect(try await phone.setConversationToTop(.private, targetId: "carol", isTop: true))
            #expect(try await phone.getTopConversationList(types: [.private]).map(\.targetId) == ["carol"])
            let carol = ConversationIdentifier(.private, targetId: "carol")
            #expect(await desktopChanges.first { $0 == .top(carol, isTop: true) } != nil)
            #expect(try await desktop.getTopConversationList(types: [.private]).map(\.targetId) == ["carol"])
            #expect(try await desktop.getConversationList(types: [.private]).map(\.targetId) == ["carol", "erin", "dave"])

            // A pin of a conversation the device has no message of yet puts it in the list.
            try await phone.setConversationToTop(.private, targetId: "zed", isTop: true)
            let zed = ConversationIdentifier(.private, targetId: "zed")
            #expect(await desktopChanges.first { $0 == .top(zed, isTop: true) } != nil)
            #expect(Set(try await desktop.getTopConversationList(types: [.private]).map(\.targetId)) == ["carol", "zed"])

            let web = try #require(try await Self.laterDevice(server, "ann", expecting: [.top(carol, isTop: true), .top(zed, isTop: true)]))
            #expect(Set(try await web.getTopConversationList(types: [.private]).map(\.targetId)) == ["carol", "zed"])

            try await desktop.setConversationToTop(.private, targetId: "carol", isTop: false)
            let webChanges = EventRecorder(web.conversationStateChanges())
            try await desktop.setConversationToTop(.private, targetId: "zed", isTop: false)
            #expect(await webChanges.first { $0 == .top(zed, isTop: false) } != nil)
            #expect(try await web.getTopConversationList(types: [.private]).isEmpty)

            #expect(await failureCode { try await phone.setConversationToTop(.chatroom, targetId: "room", isTop: true) } == ErrorCode.invalidParameter.rawValue)
            for client in [phone, desktop, web] { await client.disconnect() }
        }
    }

    @Test("quiet hours take 0 < spanMins < 1440: 0 and 1440 are refused and store nothing, 1439 reaches every device, removal too")
    func quietHours() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (phone, desktop, desktopChanges) = try await Self.twoDevices(server, "ann")

            for span in [0, 1440, -5] {
                #expect(await failureCode { try await phone.setNotificationQuietHours(startTime: "00:00:00", spanMinutes: span) } == ErrorCode.invalidParameter.rawValue)
            }
            #expect(await Self.message { try await phone.setNotificationQuietHours(startTime: "00:00:00", spanMinutes: 1440) }.contains("1 to 1439"))
            for start in ["24:00:00", "8:00:00", "08:00", "ab:cd:ef"] {
                #expect(await failureCode { try await phone.setNotificationQuietHours(startTime: start, spanMinutes: 60) } == ErrorCode.invalidParameter.rawValue)
            }
            #expect(try await server.core.store.quietHours(appId: server.app.id, userId: "ann") == nil, "nothing stored")
            #expect(try await phone.getNotificationQuietHours() == nil)

            try await phone.setNotificationQuietHours(startTime: "00:00:00", spanMinutes: 1439)
            let set = try #require(try await phone.getNotificationQuietHours())
            #expect(set.startTime == "00:00:00" && set.spanMinutes == 1439 && set.level == .blocked)
            // The first change the desktop hears of is the accepted one: the refused calls sent nothing.
            #expect(await desktopChanges.wait(for: 1).first == .quietHours(set))
            #expect(try await desktop.getNotificationQuietHours() == set)
            #expect(try await server.core.store.quietHours(appId: server.app.id, userId: "ann") == set)

            try await desktop.setNotificationQuietHours(startTime: "22:30:00", spanMinutes: 480, level: .mention)
            let web = try #require(try await Self.laterDevice(server, "ann", expecting: [
                .quietHours(QuietHours(startTime: "22:30:00", spanMinutes: 480, level: .mention, timeZone: set.timeZone)),
            ]))
            #expect(try await web.getNotificationQuietHours()?.level == .mention)

            try await phone.removeNotificationQuietHours()
            #expect(try await phone.getNotificationQuietHours() == nil)
            #expect(await desktopChanges.first { $0 == .quietHours(nil) } != nil)
            #expect(try await desktop.getNotificationQuietHours() == nil)
            #expect(try await server.core.store.quietHours(appId: server.app.id, userId: "ann") == nil)
            for client in [phone, desktop, web] { await client.disconnect() }
        }
    }

    @Test("tags and the conversations in them reach the other device live and a later device at connect")
    func tagsOnEveryDevice() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            try await GroupChatTests.createGroup(server, "g1", ["ann", "bob"])
            let (phone, desktop, desktopChanges) = try await Self.twoDevices(server, "ann")
            let bob = try await server.connectedClient("bob")
            let desktopInbox = EventRecorder(desktop.receivedMessages())
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "one"))
            _ = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "two"))
            #expect(await desktopInbox.wait(for: 2).count == 2)
            let bobChat = ConversationIdentifier(.private, targetId: "bob")
            let g1 = ConversationIdentifier(.group, targetId: "g1")
            let carolChat = ConversationIdentifier(.private, targetId: "carol")

            try await phone.addTag(tagId: "work", tagName: "Work")
            #expect(await desktopChanges.first { $0 == .tag(tagId: "work", name: "Work") } != nil)
            try await phone.addConversationsToTag(tagId: "work", conversations: [bobChat, g1, carolChat])
            #expect(await desktopChanges.first { $0 == .conversationTagged(tagId: "work", carolChat, isTopInTag: false) } != nil)
            #expect(try await desktop.getTags().map(\.tagId) == ["work"])
            #expect(try await desktop.getTags().first?.count == 3)
            #expect(try await desktop.getTagsFromConversation(g1).map(\.tag.tagName) == ["Work"])
            // Newest first; carol has no message on this device and comes last.
            #expect(try await desktop.getConversationsFromTagByPage(tagId: "work").map(\.targetId) == ["g1", "bob", "carol"])
            #expect(try await desktop.getConversationsFromTagByPage(tagId: "work", count: 1).map(\.targetId) == ["g1"])
            #expect(try await desktop.getUnreadCountByTag(tagId: "work", containBlocked: true) == 2)

            try await phone.setConversationToTopInTag(tagId: "work", conversation: bobChat, isTop: true)
            #expect(await desktopChanges.first { $0 == .conversationTagged(tagId: "work", bobChat, isTopInTag: true) } != nil)
            #expect(try await desktop.getConversationsFromTagByPage(tagId: "work").map(\.targetId) == ["bob", "g1", "carol"])
            #expect(try await desktop.getTagsFromConversation(bobChat).first?.isTop == true)

            try await phone.setConversationNotificationStatus(.group, targetId: "g1", isBlocked: true)
            #expect(await desktopChanges.first { $0 == .notificationLevel(g1, .mention) } != nil)
            #expect(try await desktop.getUnreadCountByTag(tagId: "work", containBlocked: false) == 1)

            try await desktop.updateTag(tagId: "work", tagName: "Office")
            try await desktop.addTag(tagId: "fun", tagName: "Fun")
            try await desktop.addConversationsToTag(tagId: "fun", conversations: [g1])
            try await desktop.removeConversationsFromTag(tagId: "work", conversations: [carolChat])
            let phoneChanges = EventRecorder(phone.conversationStateChanges())
            try await desktop.removeTagsFromConversation(g1, tagIds: ["work"])
            #expect(await phoneChanges.first { $0 == .conversationUntagged(tagId: "work", g1) } != nil)
            #expect(try await phone.getTags().map(\.tagName) == ["Office", "Fun"])
            #expect(try await phone.getConversationsFromTagByPage(tagId: "work").map(\.targetId) == ["bob"])
            #expect(try await phone.getTagsFromConversation(g1).map(\.tag.tagId) == ["fun"])

            // A new device gets what stands now, not the history of how it came about.
            let web = try #require(try await Self.laterDevice(server, "ann", expecting: [
                .tag(tagId: "work", name: "Office"), .tag(tagId: "fun", name: "Fun"),
                .conversationTagged(tagId: "work", bobChat, isTopInTag: true), .conversationTagged(tagId: "fun", g1, isTopInTag: false),
            ]))
            #expect(try await web.getTags().map(\.count) == [1, 1])
            #expect(try await web.getConversationsFromTagByPage(tagId: "fun").map(\.targetId) == ["g1"])

            // Removing a tag takes its conversations out of it everywhere.
            try await phone.removeTag(tagId: "work")
            #expect(await desktopChanges.first { $0 == .tagRemoved(tagId: "work") } != nil)
            #expect(try await desktop.getTags().map(\.tagId) == ["fun"])
            #expect(try await desktop.getTagsFromConversation(bobChat).isEmpty)
            #expect(try await desktop.getConversationsFromTagByPage(tagId: "work").isEmpty)
            #expect(try await bob.getTags().isEmpty)
            #expect(try await Self.serverState(server, "bob").isEmpty, "other users are unaffected")
            for client in [phone, desktop, bob, web] { await client.disconnect() }
        }
    }

    @Test("tag limits: 20 tags, 10-character ids, 15-character names, 1000 conversations a call (34013), only private, group and system (34012); a refused call stores nothing")
    func tagLimits() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let invalid = ErrorCode.invalidParameter.rawValue

            for index in 1...20 {
                try await ann.addTag(tagId: "t\(index)", tagName: "Tag \(index)")
            }
            let before = try await Self.serverState(server, "ann")
            #expect(before.tags.count == 20)
            #expect(await failureCode { try await ann.addTag(tagId: "t21", tagName: "One too many") } == invalid)
            #expect(await Self.message { try await ann.addTag(tagId: "t21", tagName: "One too many") }.contains("at most 20 tags"))
            #expect(await failureCode { try await ann.addTag(tagId: "t1", tagName: "Again") } == invalid, "a tag id is added once")
            try await ann.removeTag(tagId: "t20")

            #expect(await failureCode { try await ann.addTag(tagId: "abcdefghijk", tagName: "Long id") } == invalid)
            try await ann.addTag(tagId: "abcdefghij", tagName: "fifteen chars!!")
            #expect(await failureCode { try await ann.updateTag(tagId: "t1", tagName: "sixteen chars!!!") } == invalid)
            #expect(await failureCode { try await ann.addTag(tagId: "x", tagName: "") } == invalid)
            #expect(await failureCode { try await ann.updateTag(tagId: "nope", tagName: "Nope") } == invalid, "no such tag")

            let many = (0...1000).map { ConversationIdentifier(.private, targetId: "u\($0)") }
            #expect(await failureCode { try await ann.addConversationsToTag(tagId: "t1", conversations: many) } == ErrorCode.tagConversationsExceeded.rawValue)
            #expect(await failureCode { try await ann.addConversationsToTag(tagId: "t1", conversations: [ConversationIdentifier(.chatroom, targetId: "room")]) }
                    == ErrorCode.tagUnsupportedConversationType.rawValue)
            #expect(await failureCode { try await ann.addConversationsToTag(tagId: "t1", conversations: [ConversationIdentifier(.ultraGroup, targetId: "ug")]) }
                    == ErrorCode.tagUnsupportedConversationType.rawValue)
            #expect(await failureCode { try await ann.addConversationsToTag(tagId: "t99", conversations: [ConversationIdentifier(.private, targetId: "bob")]) }
                    == invalid, "no such tag")
            #expect(await failureCode { try await ann.setConversationToTopInTag(tagId: "t1", conversation: ConversationIdentifier(.private, targetId: "bob"), isTop: true) }
                    == invalid, "not in the tag")
            let after = try await Self.serverState(server, "ann")
            #expect(after.links.isEmpty)
            #expect(Set(after.tags.map(\.tagId)) == Set((1...19).map { "t\($0)" } + ["abcdefghij"]))
            #expect(try await ann.getTags().count == 20)

            // 1000 conversations is the most one call takes. A new device pulls them in pages.
            try await ann.addConversationsToTag(tagId: "t1", conversations: Array(many.prefix(1000)))
            #expect(try await ann.getTags().first { $0.tagId == "t1" }?.count == 1000)
            let web = try #require(try await Self.laterDevice(server, "ann", expecting: [
                .conversationTagged(tagId: "t1", many[999], isTopInTag: false),
            ]))
            #expect(try await web.getTags().count == 20)
            #expect(try await web.getTags().first { $0.tagId == "t1" }?.count == 1000)
            #expect(try await web.getConversationsFromTagByPage(tagId: "t1", count: 2000).count == 1000)
            let firstPage = try await server.core.store.conversationStateChanges(appId: server.app.id, userId: "ann", since: 0, limit: 500)
            #expect(firstPage.more && firstPage.tags.count + firstPage.links.count == 500)
            await ann.disconnect()
            await web.disconnect()
        }
    }

    @Test("the server checks every request itself: a client that skips the SDK's checks gets the same codes and changes nothing")
    func serverChecksRawRequests() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let connection = WireConnection(url: server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws",
                                            logger: Logger(label: "raw"), onPush: { _, _ in }, onClose: { _, _ in })
            // The token first: the server closes a socket that sends no CONNECT within its handshake timeout.
            let token = try await server.token("ann")
            try await connection.open()
            var connect = Im_ConnectRequest()
            connect.appKey = server.app.appKey
            connect.token = token
            connect.platform = .web
            _ = try await connection.request(.connect, connect, timeout: .seconds(10))

            var tag = Im_ConversationTagRequest()
            tag.tagID = "t1"
            tag.name = "One"
            #expect(await failureCode { _ = try await connection.request(.editConversationTag, tag, timeout: .seconds(10)) } == nil)
            tag.tagID = "abcdefghijk"
            #expect(await failureCode { _ = try await connection.request(.editConversationTag, tag, timeout: .seconds(10)) } == ErrorCode.invalidParameter.rawValue)
            tag.tagID = "t2"
            tag.name = String(repeating: "n", count: 16)
            #expect(await failureCode { _ = try await connection.request(.editConversationTag, tag, timeout: .seconds(10)) } == ErrorCode.invalidParameter.rawValue)

            var link = Im_TagConversationsRequest()
            link.tagIds = ["t1"]
            link.conversations = (0...1000).map { Im_ConversationRef(ConversationIdentifier(.private, targetId: "u\($0)")) }
            #expect(await failureCode { _ = try await connection.request(.tagConversations, link, timeout: .seconds(10)) } == ErrorCode.tagConversationsExceeded.rawValue)
            link.conversations = [Im_ConversationRef(ConversationIdentifier(.chatroom, targetId: "room"))]
            #expect(await failureCode { _ = try await connection.request(.tagConversations, link, timeout: .seconds(10)) } == ErrorCode.tagUnsupportedConversationType.rawValue)

            var quiet = Im_SetQuietHoursRequest()
            quiet.startTime = "00:00:00"
            quiet.spanMins = 1440
            #expect(await failureCode { _ = try await connection.request(.setQuietHours, quiet, timeout: .seconds(10)) } == ErrorCode.invalidParameter.rawValue)
            quiet.spanMins = 0
            #expect(await failureCode { _ = try await connection.request(.setQuietHours, quiet, timeout: .seconds(10)) } == ErrorCode.invalidParameter.rawValue)

            var level = Im_SetConversationNotificationRequest()
            level.conversation = Im_ConversationRef(ConversationIdentifier(.private, targetId: "bob"))
            level.level = 3
            #expect(await failureCode { _ = try await connection.request(.setConversationNotification, level, timeout: .seconds(10)) } == ErrorCode.invalidParameter.rawValue)

            let state = try await Self.serverState(server, "ann")
            #expect(state.tags.map(\.tagId) == ["t1"] && state.links.isEmpty && state.settings.isEmpty && state.quietHours == nil)
            await connection.close()
        }
    }

    @Test("the Server API's do-not-disturb and pin reach the user's online devices at once")
    func serverAPIChangesReachDevices() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (phone, desktop, desktopChanges) = try await Self.twoDevices(server, "ann")
            let phoneChanges = EventRecorder(phone.conversationStateChanges())
            let bobChat = ConversationIdentifier(.private, targetId: "bob")

            var (status, body) = try await server.api.post("/conversation/notification/set.json",
                                                          form: ["conversationType": "1", "requestId": "ann", "targetId": "bob", "isMuted": "1"])
            #expect(status == 200 && body["code"] as? Int == 200, "\(body)")
            for changes in [phoneChanges, desktopChanges] {
                #expect(await changes.first { $0 == .notificationLevel(bobChat, .mention) } != nil)
            }
            #expect(try await desktop.getConversationNotificationStatus(.private, targetId: "bob") == .doNotDisturb)
            (status, body) = try await server.api.post("/conversation/notification/get.json",
                                                      form: ["conversationType": "1", "requestId": "ann", "targetId": "bob"])
            #expect(body["isMuted"] as? Int == 1)

            // A change made on a device is visible to the Server API.
            try await phone.setConversationNotificationLevel(.private, targetId: "carol", level: .blocked)
            (status, body) = try await server.api.post("/conversation/notification/get.json",
                                                      form: ["conversationType": "1", "requestId": "ann", "targetId": "carol"])
            #expect(body["isMuted"] as? Int == 1 && body["unpushLevel"] as? Int == 5)

            (status, body) = try await server.api.post("/conversation/top/set.json",
                                                      form: ["userId": "ann", "conversationType": "1", "targetId": "bob", "setTop": "true"])
            #expect(status == 200 && body["code"] as? Int == 200, "\(body)")
            #expect(await desktopChanges.first { $0 == .top(bobChat, isTop: true) } != nil)
            #expect(try await desktop.getTopConversationList(types: [.private]).map(\.targetId) == ["bob"])

            (status, body) = try await server.api.post("/conversation/type/notification/set.json",
                                                      form: ["conversationType": "3", "requestId": "ann", "unpushLevel": "5"])
            #expect(status == 200 && body["code"] as? Int == 200, "\(body)")
            #expect(await desktopChanges.first { $0 == .notificationLevel(ConversationIdentifier(.group, targetId: ""), .blocked) } != nil)
            #expect(try await desktop.getConversationTypeNotificationLevel(.group) == .blocked)
            #expect(try await desktop.getConversationNotificationStatus(.group, targetId: "any-group") == .doNotDisturb,
                    "a group without its own level takes the type's")
            (status, body) = try await server.api.post("/conversation/type/notification/get.json", form: ["conversationType": "3", "requestId": "ann"])
            #expect(body["isMuted"] as? Int == 1 && body["unpushLevel"] as? Int == 5)

            // Refused calls: 1002 with the reason, and nothing changes.
            let before = try await Self.serverState(server, "ann")
            for (path, form) in [
                ("/conversation/top/set.json", ["userId": "ann", "conversationType": "1", "targetId": "bob"]),
                ("/conversation/top/set.json", ["userId": "ann", "conversationType": "1", "targetId": "bob", "setTop": "maybe"]),
                ("/conversation/top/set.json", ["userId": "ann", "conversationType": "4", "targetId": "room", "setTop": "true"]),
                ("/conversation/top/set.json", ["userId": "a b", "conversationType": "1", "targetId": "bob", "setTop": "true"]),
                ("/conversation/notification/set.json", ["conversationType": "1", "requestId": "ann", "targetId": "bob", "unpushLevel": "3"]),
                ("/conversation/type/notification/set.json", ["conversationType": "3", "requestId": "ann", "unpushLevel": "7"]),
                ("/conversation/type/notification/set.json", ["conversationType": "99", "requestId": "ann", "unpushLevel": "1"]),
            ] {
                (status, body) = try await server.api.post(path, form: form)
                #expect(status == 400 && body["code"] as? Int == 1002, "\(path) \(form): \(body)")
                #expect((body["errorMessage"] as? String)?.isEmpty == false)
            }
            #expect(try await Self.serverState(server, "ann") == before)
            for client in [phone, desktop] { await client.disconnect() }
        }
    }

    @Test("do-not-disturb levels stored before the state had versions reach devices after the upgrade")
    func upgradeStampsEarlierLevels() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-upgrade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let old = try DatabaseQueue(path: directory.appendingPathComponent("imserver.sqlite").path)
        try SQLiteStore.migrator.migrate(old, upTo: "v3-groups")
        try await old.write { db in
            try db.execute(sql: """
                INSERT INTO conversation_settings (app_id, user_id, conv_type, target_id, channel_id, unpush_level) VALUES
                    (1, 'ann', 1, 'bob', '', 1), (1, 'ann', 3, 'g1', '', 5), (1, 'bob', 1, 'ann', '', 1)
                """)
        }
        try old.close()

        let store = try SQLiteStore(directory: directory.path)
        let ann = try await store.conversationStateChanges(appId: 1, userId: "ann", since: 0, limit: 100)
        #expect(ann.settings.map(\.version).sorted() == [1, 2] && ann.version == 2)
        #expect(Set(ann.settings.map(\.level)) == [.mention, .blocked])
        #expect(try await store.conversationStateChanges(appId: 1, userId: "bob", since: 0, limit: 100).version == 1)
        let edit = try await store.editConversationState(appId: 1, userId: "ann", .setTop(ConversationIdentifier(.private, targetId: "bob"), true), now: 1)
        #expect(edit.previousVersion == 2 && edit.version == 3)
        #expect(edit.settings.first?.level == .mention && edit.settings.first?.isTop == true, "the pin keeps the level")
    }
}
