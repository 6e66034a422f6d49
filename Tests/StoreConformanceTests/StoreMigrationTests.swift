import Foundation
import IMCore
import IMStore
import IMStoreMigration
import IMServerTesting
import IMStorePostgres
import IMStoreSQLite
import Logging
import Testing

/// `imserver migrate`: an embedded installation seeded through the ports, copied into PostgreSQL,
/// reads back the same through every port; new messages, reads and apps come after the copied ones.
@Suite("SQLite to PostgreSQL migration")
struct StoreMigrationTests {
    static let logger = Logger(label: "imserver-tests-migrate") { _ in SwiftLogNoOpLogHandler() }
    static let now: Int64 = 1_700_000_000_000

    @Test("every table is copied: the ports of both stores answer the same, and new seqs come after the copied ones")
    func copiesEverything() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-migrate-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sqlite = try SQLiteStore(directory: directory)
        let seeded = try await Self.seed(sqlite)

        let databases = try await TestPostgres.shared.databases()
        let name = "imserver_test_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        try await databases.admin("CREATE DATABASE \(name)")
        let url = databases.url(of: name)
        var postgres: PostgresStore?
        do {
            let copied = try await SQLiteToPostgres.copy(fromDataDirectory: directory, to: url, logger: Self.logger)
            let rows = Dictionary(uniqueKeysWithValues: copied.map { ($0.table, $0.rows) })
            #expect(copied.first?.table == "apps", "apps first: users refer to them")
            #expect(rows["apps"] == 2 && rows["messages"] == seeded.messages.count && rows["message_reads"] == 3)
            for table in ["users", "user_lists", "user_tags", "chat_groups", "group_members", "group_mutes", "muted_groups",
                          "group_mute_whitelist", "sensitive_words", "conversation_settings", "conversation_state_users",
                          "conversation_tags", "conversation_tag_links", "hidden_messages", "cleared_conversations", "deleted_message_logs",
                          "chatroom_settings", "chatroom_messages", "ultra_groups", "ultra_group_members", "ultra_group_channels",
                          "ultra_group_channel_members", "ultra_group_user_groups", "ultra_group_user_group_members",
                          "ultra_group_channel_bindings", "ultra_group_mutes", "ultra_group_muted_channels", "ultra_group_mute_whitelist",
                          "ultra_group_reads", "ultra_group_unpush_levels", "push_devices", "push_profiles", "push_templates",
                          "user_remarks", "push_settings", "push_records", "push_cursors"] {
                #expect((rows[table] ?? 0) > 0, "the seed wrote \(table) and the copy copied it")
            }
            let store = try await PostgresStore.connect(url: url, logger: Self.logger, poolSize: 2)
            postgres = store
            try await Self.compare(sqlite, store, seeded)

            // Later writes come after everything copied.
            let app = seeded.apps[0]
            let next = try await store.commit([StoredMessage(
                appId: app, conversationType: .private, conversationKey: privateConversationKey("alice", "bob"), targetId: "bob",
                senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"after"}"#.utf8), uid: "AFTER-MIGRATION-0001",
                sentTime: Self.now, flags: .persistedAndCounted)])[0].message
            #expect(next.seq > seeded.messages.map(\.seq).max()!, "a new commit's seq is above every migrated one")
            #expect(next.sentTime > seeded.messages.filter { $0.appId == app && $0.conversationKey == privateConversationKey("alice", "bob") }
                        .map(\.sentTime).max()!,
                    "and its sentTime after its conversation's newest")
            let read = try await store.recordReads([ReadReceiptRecord(uid: seeded.groupMessage.uid, senderId: "alice", groupId: "team",
                                                                      readerId: "zoe", readTime: Self.now)], appId: app)
            #expect(read.count == 1 && read[0].seq > 3, "read receipt seqs go on after the copied ones")
            let newApp = try await store.upsertApp(appKey: "new-app", appSecret: "s", name: "new", now: Self.now)
            #expect(newApp.id > seeded.apps.max()!, "app ids go on after the copied ones")
            let sqliteRecords = try await sqlite.pushRecords(appId: seeded.apps[1], messageUid: nil, userId: nil, limit: 100)
            try await store.recordPushDecisions([PushRecord(appId: app, messageUid: "after", userId: "alice", status: .suppressed, code: "P16",
                                                            createdAt: Self.now)], badges: [], node: "node-0", cursor: nil)
            let newRecord = try #require(try await store.pushRecords(appId: app, messageUid: "after", userId: nil, limit: 1).first)
            #expect(newRecord.id > sqliteRecords.map(\.id).max()! + 1, "push record ids go on after the copied ones and the swept one")

            // Into a database that holds data: refused, nothing changes.
            do {
                _ = try await SQLiteToPostgres.copy(fromDataDirectory: directory, to: url, logger: Self.logger)
                Issue.record("a second copy into the same database was accepted")
            } catch let error as IMError {
                #expect(error.message.contains("already holds data"), "\(error.message)")
            }
            #expect(try await store.loadApps().count == 3)
        } catch {
            if let postgres { await postgres.close() }
            try? sqlite.close()
            try? await databases.drop(name)
            throw error
        }
        if let postgres { await postgres.close() }
        try sqlite.close()
        try await databases.drop(name)
    }

    @Test("a directory without an embedded database is refused before anything is written")
    func noSource() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-migrate-\(UUID().uuidString)").path
        do {
            _ = try await SQLiteToPostgres.copy(fromDataDirectory: directory, to: "postgres://u@127.0.0.1:1/db", logger: Self.logger)
            Issue.record("accepted a directory without a database")
        } catch let error as IMError {
            #expect(error.message.hasPrefix("no embedded database at"), "\(error.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory), "nothing was created")
    }

    // MARK: the seed

    struct Seeded {
        var apps: [Int64]
        var messages: [StoredMessage]
        var groupMessage: StoredMessage
        var users: [String]
        var conversationKeys: [String]
    }

    /// A realistic mix in two apps, written through the ports.
    static func seed(_ store: SQLiteStore) async throws -> Seeded {
        let uids = MessageUIDGenerator()
        var time = now
        func stamp() -> Int64 { time += 7; return time }
        let users = ["alice", "bob", "carol", "dave", "zoe"]
        var apps: [Int64] = []
        var messages: [StoredMessage] = []
        var groupMessage: StoredMessage?
        for index in 0..<2 {
            let app = try await store.upsertApp(appKey: "app-\(index)", appSecret: "secret-\(index)", name: "App \(index)", now: now).id
            apps.append(app)
            for user in users { try await store.upsertUser(appId: app, userId: user, name: "\(user) \(index)", portraitUri: "https://p/\(user)", now: now) }
            try await store.setBlocked(appId: app, userIds: ["dave"], until: now + 86_400_000, now: now)
            try await store.expireTokens(appId: app, userIds: ["carol"], before: now - 5, now: now)
            try await store.addToUserList(appId: app, owner: "alice", kind: .blacklist, members: ["dave"], now: now)
            try await store.addToUserList(appId: app, owner: "bob", kind: .whitelist, members: ["alice", "carol"], now: now)
            try await store.setUserTags(appId: app, userIds: ["alice", "bob"], tags: ["vip", "beta"])
            try await store.setUserTags(appId: app, userIds: ["carol"], tags: ["beta"])

            _ = try await store.joinGroup(appId: app, groupId: "team", name: "Team", userIds: ["alice", "bob", "carol"], maxMembers: 100,
                                          preJoinHistory: 0, now: now)
            _ = try await store.joinGroup(appId: app, groupId: "old", name: "Old", userIds: ["alice", "dave"], maxMembers: 100,
                                          preJoinHistory: 0, now: now)
            try await store.muteGroupMembers(appId: app, groupId: "team", userIds: ["carol"], until: .max, now: now)
            try await store.muteGroupMembers(appId: app, groupId: nil, userIds: ["dave"], until: now + 1_000_000, now: now)
            try await store.setGroupMuted(appId: app, groupIds: ["team"], muted: true)
            try await store.addGroupMuteWhitelist(appId: app, groupId: "team", userIds: ["alice"])
            try await store.addSensitiveWords(appId: app, words: [SensitiveWord(word: "bad", replacement: nil),
                                                                  SensitiveWord(word: "meh", replacement: "***")], limit: 100, now: now)

            func message(_ type: ConversationType, _ key: String, from: String, to: String, flags: PersistentFlag = .persistedAndCounted,
                         text: String, channel: String = "", directed: [String] = [], mentions: MentionedInfo? = nil,
                         clientId: String = "") -> StoredMessage {
                let sent = stamp()
                var message = StoredMessage(appId: app, conversationType: type, conversationKey: key, targetId: to, senderId: from,
                                            objectName: "RC:TxtMsg", content: Data(#"{"content":"\#(text)"}"#.utf8),
                                            uid: uids.next(milliseconds: sent), sentTime: sent, flags: flags, clientMessageId: clientId,
                                            pushContent: "push \(text)", channelId: channel, includeSender: type != .system,
                                            directedUserIds: directed)
                message.canIncludeExpansion = type == .private
                message.expansion = type == .private ? ["k": text] : [:]
                message.mentions = mentions
                if type != .system && !text.hasPrefix("command") {
                    message.pushConfig = Data(#"{"pushTitle":"\#(text)","forceShowDetailContent":true}"#.utf8)
                }
                return message
            }
            _ = try await store.createUltraGroup(appId: app, groupId: "ug", name: "Ultra", ownerId: "alice", now: now, maxGroupsPerUser: 10)
            _ = try await store.joinUltraGroup(appId: app, groupId: "ug", userIds: ["bob", "carol"], now: now, maxGroupsPerUser: 10)
            try await store.createUltraGroupChannel(appId: app, groupId: "ug", channelId: "news", type: .privateChannel, now: now, maxChannels: 10)
            try await store.createUserGroups(appId: app, groupId: "ug", userGroupIds: ["editors"], now: now, maxUserGroups: 10)
            _ = try await store.setUserGroupMembers(appId: app, groupId: "ug", userGroupId: "editors", userIds: ["bob"], add: true, maxMembers: 10)
            _ = try await store.bindUserGroups(appId: app, groupId: "ug", channelId: "news", userGroupIds: ["editors"], bind: true)
            _ = try await store.setPrivateChannelMembers(appId: app, groupId: "ug", channelId: "news", userIds: ["carol"], add: true)
            try await store.setUltraGroupMutedUsers(appId: app, groupId: "ug", channelId: "", userIds: ["carol"], until: now + 60_000)
            try await store.setUltraGroupChannelMuted(appId: app, groupId: "ug", channelId: "news", muted: true)
            try await store.setUltraGroupMuteWhitelist(appId: app, groupId: "ug", channelId: "news", userIds: ["bob"], add: true)
            try await store.setUltraGroupUnpushLevel(appId: app, groupId: "ug", channelId: "news", level: 2)

            var batch: [StoredMessage] = []
            for round in 0..<4 {
                batch.append(message(.private, privateConversationKey("alice", "bob"), from: "alice", to: "bob", text: "hi \(round)",
                                     clientId: "a-\(round)"))
                batch.append(message(.private, privateConversationKey("alice", "bob"), from: "bob", to: "alice", text: "yo \(round)"))
                batch.append(message(.private, privateConversationKey("carol", "alice"), from: "carol", to: "alice", flags: .none,
                                     text: "command \(round)"))
                batch.append(message(.group, groupConversationKey("team"), from: "alice", to: "team", text: "team \(round)"))
                batch.append(message(.group, groupConversationKey("team"), from: "bob", to: "team", text: "to carol \(round)",
                                     directed: ["carol"]))
                batch.append(message(.ultraGroup, ultraGroupConversationKey("ug", UltraGroupLimits.defaultChannelId), from: "alice",
                                     to: "ug", text: "ultra \(round)", channel: UltraGroupLimits.defaultChannelId,
                                     mentions: MentionedInfo(type: .users, userIdList: ["bob"])))
                batch.append(message(.ultraGroup, ultraGroupConversationKey("ug", "news"), from: "bob", to: "ug", text: "news \(round)",
                                     channel: "news"))
            }
            batch.append(message(.system, systemConversationKey(sender: "sys", recipient: StoredMessage.everyone), from: "sys",
                                 to: StoredMessage.everyone, text: "broadcast"))
            batch.append(message(.system, systemConversationKey(sender: "sys", recipient: "bob"), from: "sys", to: "bob", text: "notice"))
            let stored = try await store.commit(batch).map(\.message)
            messages += stored
            _ = try await store.dismissGroup(appId: app, groupId: "old", now: stamp())
            let team = stored.first { $0.conversationType == .group && $0.directedUserIds.isEmpty }!
            if index == 0 {
                groupMessage = team
                try await store.requestReadReceipts(appId: app, uid: team.uid)
                _ = try await store.recordReads([ReadReceiptRecord(uid: team.uid, senderId: "alice", groupId: "team", readerId: "bob", readTime: stamp()),
                                                 ReadReceiptRecord(uid: team.uid, senderId: "alice", groupId: "team", readerId: "carol", readTime: stamp())],
                                                appId: app)
            } else {
                _ = try await store.recordReads([ReadReceiptRecord(uid: team.uid, senderId: "alice", groupId: "team", readerId: "bob", readTime: stamp())],
                                                appId: app)
            }
            let privateOne = stored.first { $0.conversationType == .private && $0.canIncludeExpansion }!
            _ = try await store.updateExpansion(appId: app, uid: privateOne.uid, set: ["extra": "1"], remove: [], now: stamp(), maxKeys: 20)
            try await store.hideMessages(appId: app, userId: "bob", uids: [privateOne.uid])
            try await store.clearConversation(appId: app, userId: "alice", conversationKey: privateConversationKey("alice", "bob"),
                                              through: stored[1].sentTime)
            let recalled = stored.first { $0.conversationKey == privateConversationKey("alice", "bob") && $0.senderId == "bob" }!
            try await store.replaceMessage(appId: app, uid: recalled.uid, objectName: "RC:RcNtf", content: Data(#"{"recalled":true}"#.utf8))
            let ultra = stored.first { $0.conversationType == .ultraGroup }!
            try await store.modifyMessage(appId: app, uid: ultra.uid, content: Data(#"{"content":"edited"}"#.utf8),
                                          mentions: MentionedInfo(type: .all, userIdList: []), modifiedTime: stamp())
            try await store.setUltraGroupReadTime(appId: app, userId: "bob", groupId: "ug", channelId: UltraGroupLimits.defaultChannelId,
                                                  time: stored[6].sentTime)
            try await store.deleteMessageLog(appId: app, hour: "2023111422")

            for (user, edit) in [("alice", ConversationStateEdit.setLevel(ConversationIdentifier(.private, targetId: "bob"), .blocked)),
                                 ("alice", .setTop(ConversationIdentifier(.group, targetId: "team"), true)),
                                 ("alice", .setQuietHours(QuietHours(startTime: "22:00:00", spanMinutes: 480, level: .blocked, timeZone: "UTC"))),
                                 ("bob", .addTag(tagId: "work", name: "Work", limit: 20)),
                                 ("bob", .addConversations(tagId: "work", [ConversationIdentifier(.group, targetId: "team")])),
                                 ("bob", .addTag(tagId: "gone", name: "Gone", limit: 20)),
                                 ("bob", .removeTag(tagId: "gone"))] {
                _ = try await store.editConversationState(appId: app, userId: user, edit, now: stamp())
            }
            try await store.putChatroomSettings([ChatroomSettingRecord(appId: app, kind: .block, roomId: "lobby", item: "dave", until: now + 10_000),
                                                 ChatroomSettingRecord(appId: app, kind: .keepAlive, roomId: "", item: "lobby")])
            try await store.appendChatroomHistory((0..<3).map { round in
                let sent = stamp()
                return StoredMessage(appId: app, conversationType: .chatroom, conversationKey: chatroomConversationKey("lobby"),
                                     targetId: "lobby", senderId: "carol", objectName: "RC:TxtMsg", content: Data(#"{"content":"room \#(round)"}"#.utf8),
                                     uid: uids.next(milliseconds: sent), sentTime: sent, flags: .persistedAndCounted, clientMessageId: "r\(round)")
            })

            for (user, device, kind) in [("alice", "d1", PushTokenKind.apns), ("alice", "d1", .fcm), ("bob", "d2", .fcm)] {
                try await store.setPushDevice(PushDeviceRecord(appId: app, userId: user, deviceId: device, platform: "ios", kind: kind,
                                                               token: "\(kind.rawValue)-\(user)-\(index)",
                                                               environment: kind == .apns ? "sandbox" : "", updatedAt: stamp()))
            }
            try await store.setPushProfile(appId: app, userId: "alice", profile: PushProfileRecord(language: "en_US", showContent: false))
            try await store.setPushProfile(appId: app, userId: "bob", profile: PushProfileRecord(receiveWhileWebOnline: false))
            for id in ["welcome", "alert"] {
                try await store.upsertPushTemplate(appId: app, template: PushTemplateRecord(
                    templateId: id, name: "\(id) \(index)", entries: ["zh_CN": .init(title: "标题", content: id), "en_US": .init(content: id)],
                    updatedAt: stamp()), maxTemplates: 100)
            }
            try await store.setRemarks(appId: app, userId: "alice", remarks: ["bob": "Bobby \(index)", "carol": "C"])
            try await store.setPushSettings(appId: app, settings: Data(#"{"app":\#(index)}"#.utf8))
            let pushed = stored[0]
            func decision(_ user: String, _ device: String, _ status: PushStatus, code: String = "", created: Int64? = nil) -> PushRecord {
                PushRecord(appId: app, messageUid: pushed.uid, userId: user, deviceId: device, kind: device.isEmpty ? nil : .fcm,
                           token: device.isEmpty ? "" : "fcm-\(user)-\(index)", notification: device.isEmpty ? Data() : Data(#"{"body":"hi"}"#.utf8),
                           status: status, code: code, nextAttemptAt: now + 1_000, createdAt: created ?? stamp())
            }
            try await store.recordPushDecisions([decision("bob", "d2", .pending), decision("alice", "d1", .pending),
                                                 decision("carol", "", .suppressed, code: "P16"),
                                                 decision("dave", "d3", .sent, created: 1_000)],
                                                badges: [PushBadge(appId: app, userId: "bob", deviceId: "d2", badge: 3)],
                                                node: "node-\(index)", cursor: stored.last!.seq)
            let attempted = try await store.pushRecords(appId: app, messageUid: pushed.uid, userId: "alice", limit: 1)
            try await store.recordPushAttempts(attempted.map { PushAttempt(id: $0.id, status: .failed, code: "401", attempts: 1, now: stamp()) })
            // The newest record is swept: its id is not given again after the copy either.
            #expect(try await store.deletePushRecords(createdBefore: 2_000) == 1)
        }
        let keys = Set(messages.map(\.conversationKey)).sorted()
        return Seeded(apps: apps, messages: messages, groupMessage: groupMessage!, users: users, conversationKeys: keys)
    }

    // MARK: the comparison

    /// Everything the ports answer, from both stores.
    static func compare(_ a: SQLiteStore, _ b: PostgresStore, _ seeded: Seeded) async throws {
        #expect(try await a.loadApps() == b.loadApps())
        for app in seeded.apps {
            for user in seeded.users {
                #expect(try await a.user(appId: app, userId: user) == b.user(appId: app, userId: user))
                #expect(try await a.userAccess(appId: app, userId: user) == b.userAccess(appId: app, userId: user))
                for kind in UserListKind.allCases {
                    #expect(try await a.userList(appId: app, owner: user, kind: kind) == b.userList(appId: app, owner: user, kind: kind))
                }
                #expect(try await a.groups(appId: app, ofUser: user) == b.groups(appId: app, ofUser: user))
                #expect(try await a.ultraGroupIds(appId: app, ofUser: user) == b.ultraGroupIds(appId: app, ofUser: user))
                let syncA = try await syncAll(a, app: app, user: user), syncB = try await syncAll(b, app: app, user: user)
                #expect(syncA == syncB, "sync of \(user)")
                #expect(!syncA.isEmpty || user == "zoe")
                for since in [UInt64(0), 1] {
                    let stateA = try await a.conversationStateChanges(appId: app, userId: user, since: since, limit: 100)
                    let stateB = try await b.conversationStateChanges(appId: app, userId: user, since: since, limit: 100)
                    #expect(stateA == stateB, "conversation state of \(user) since \(since)")
                }
                #expect(try await a.quietHours(appId: app, userId: user) == b.quietHours(appId: app, userId: user))
                #expect(try await a.readReceipts(appId: app, senderId: user, after: 0, limit: 100)
                        == b.readReceipts(appId: app, senderId: user, after: 0, limit: 100))
                let views = [UltraGroupLimits.defaultChannelId, "news"].map {
                    UltraGroupChannelView(groupId: "ug", channelId: $0, channelType: .publicChannel, afterSeq: 0)
                }
                #expect(try await a.ultraGroupSummaries(appId: app, userId: user, channels: views, minSentTime: .min)
                        == b.ultraGroupSummaries(appId: app, userId: user, channels: views, minSentTime: .min))
            }
            #expect(try await a.blockedUsers(appId: app, now: now) == b.blockedUsers(appId: app, now: now))
            #expect(try await a.userTags(appId: app, userIds: seeded.users) == b.userTags(appId: app, userIds: seeded.users))
            #expect(try await a.users(appId: app, withAllTags: ["beta"], anyTag: []) == b.users(appId: app, withAllTags: ["beta"], anyTag: []))
            for group in ["team", "old"] {
                #expect(try await a.group(appId: app, groupId: group) == b.group(appId: app, groupId: group))
                #expect(try await a.groupMembers(appId: app, groupId: group) == b.groupMembers(appId: app, groupId: group))
                let rosterA = try await a.groupRoster(appId: app, groupId: group), rosterB = try await b.groupRoster(appId: app, groupId: group)
                #expect(rosterA?.members == rosterB?.members && rosterA?.isDismissed == rosterB?.isDismissed
                        && rosterA?.isMuted == rosterB?.isMuted && rosterA?.muteWhitelist == rosterB?.muteWhitelist
                        && rosterA?.mutedUntil == rosterB?.mutedUntil, "roster of \(group)")
                #expect(try await a.groupMuteWhitelist(appId: app, groupId: group) == b.groupMuteWhitelist(appId: app, groupId: group))
            }
            #expect(try await a.groupMutes(appId: app, groupId: "*", now: now) == b.groupMutes(appId: app, groupId: "*", now: now))
            #expect(try await a.mutedGroups(appId: app, groupIds: []) == b.mutedGroups(appId: app, groupIds: []))
            #expect(try await a.sensitiveWords(appId: app) == b.sensitiveWords(appId: app))
            for key in seeded.conversationKeys {
                #expect(try await a.lastSentTime(appId: app, conversationKey: key) == b.lastSentTime(appId: app, conversationKey: key))
                for ascending in [false, true] {
                    #expect(try await a.history(appId: app, conversationKey: key, recordTime: 0, count: 100, ascending: ascending, viewer: nil).messages
                            == b.history(appId: app, conversationKey: key, recordTime: 0, count: 100, ascending: ascending, viewer: nil).messages,
                            "history of \(key)")
                    for user in seeded.users {
                        let viewer = HistoryViewer(userId: user, afterSeq: 0)
                        #expect(try await a.history(appId: app, conversationKey: key, recordTime: 0, count: 100, ascending: ascending, viewer: viewer).messages
                                == b.history(appId: app, conversationKey: key, recordTime: 0, count: 100, ascending: ascending, viewer: viewer).messages,
                                "history of \(key) as \(user) sees it")
                    }
                }
            }
            for message in seeded.messages where message.appId == app {
                #expect(try await a.message(appId: app, uid: message.uid) == b.message(appId: app, uid: message.uid))
                #expect(try await a.expansion(appId: app, uid: message.uid) == b.expansion(appId: app, uid: message.uid))
                let readersA = try await a.readers(appId: app, uid: message.uid, after: 0, limit: 10)
                let readersB = try await b.readers(appId: app, uid: message.uid, after: 0, limit: 10)
                #expect(readersA.readers == readersB.readers && readersA.total == readersB.total)
            }
            let rosterA = try await a.ultraGroupRoster(appId: app, groupId: "ug"), rosterB = try await b.ultraGroupRoster(appId: app, groupId: "ug")
            #expect(rosterA?.name == rosterB?.name && rosterA?.createdSeq == rosterB?.createdSeq && rosterA?.members == rosterB?.members
                    && rosterA?.channels == rosterB?.channels && rosterA?.userGroups == rosterB?.userGroups
                    && rosterA?.mutedUsers == rosterB?.mutedUsers && rosterA?.mutedChannels == rosterB?.mutedChannels
                    && rosterA?.muteWhitelist == rosterB?.muteWhitelist, "ultra group roster")
            #expect(try await a.ultraGroupUnpushLevel(appId: app, groupId: "ug", channelId: "news")
                    == b.ultraGroupUnpushLevel(appId: app, groupId: "ug", channelId: "news"))
            let keys = [ultraGroupConversationKey("ug", UltraGroupLimits.defaultChannelId)]
            let modifiedA = try await a.modifiedMessages(appId: app, conversationKeys: keys, after: ModificationCursor(time: 0), limit: 10, maxBytes: .max)
            let modifiedB = try await b.modifiedMessages(appId: app, conversationKeys: keys, after: ModificationCursor(time: 0), limit: 10, maxBytes: .max)
            #expect(modifiedA.messages.map(\.message) == modifiedB.messages.map(\.message) && modifiedA.next == modifiedB.next
                    && !modifiedA.messages.isEmpty)
            #expect(try await a.chatroomSettings(appId: app).count == 2)
            #expect(try await Set(a.chatroomSettings(appId: app).map { "\($0)" }) == Set(b.chatroomSettings(appId: app).map { "\($0)" }))
            #expect(try await a.chatroomHistory(appId: app, roomId: "lobby", recordTime: 0, count: 10, ascending: true, minSentTime: .min, maxBytes: .max)
                    == b.chatroomHistory(appId: app, roomId: "lobby", recordTime: 0, count: 10, ascending: true, minSentTime: .min, maxBytes: .max))
            #expect(try await b.isMessageLogDeleted(appId: app, hour: "2023111422"))
            #expect(try await a.conversationUnpushLevel(appId: app, userId: "alice", type: .private, targetId: "bob", channelId: "")
                    == b.conversationUnpushLevel(appId: app, userId: "alice", type: .private, targetId: "bob", channelId: ""))

            func devices(_ store: some PushStore) async throws -> [PushDeviceRecord] {
                try await store.pushDevices(appId: app, userIds: seeded.users).sorted { ($0.userId, $0.kind.rawValue) < ($1.userId, $1.kind.rawValue) }
            }
            let devicesA = try await devices(a)
            #expect(devicesA.count == 3 && devicesA.contains { $0.badge == 3 })
            #expect(try await devicesA == devices(b), "devices, tokens and badges")
            let profiles = try await a.pushProfiles(appId: app, userIds: seeded.users)
            #expect(profiles.count == 2)
            #expect(try await profiles == b.pushProfiles(appId: app, userIds: seeded.users))
            let templates = try await a.pushTemplates(appId: app)
            #expect(templates.count == 2)
            #expect(try await templates == b.pushTemplates(appId: app))
            let remarksA = try await a.remarks(appId: app, userId: "alice", afterUserId: "", limit: 10)
            let remarksB = try await b.remarks(appId: app, userId: "alice", afterUserId: "", limit: 10)
            #expect(remarksA.count == 2 && remarksA.map { "\($0.userId)=\($0.remark)" } == remarksB.map { "\($0.userId)=\($0.remark)" })
            #expect(try await a.remarks(appId: app, owners: ["alice"], for: "bob") == b.remarks(appId: app, owners: ["alice"], for: "bob"))
            let settings = try await a.pushSettings(appId: app)
            #expect(settings != nil)
            #expect(try await settings == b.pushSettings(appId: app))
            #expect(try await a.pushPreferences(appId: app, userIds: seeded.users, type: .private, targetId: "bob", channelId: "")
                    == b.pushPreferences(appId: app, userIds: seeded.users, type: .private, targetId: "bob", channelId: ""))
            let recordsA = try await a.pushRecords(appId: app, messageUid: nil, userId: nil, limit: 100)
            #expect(recordsA.count == 3 && recordsA.map(\.status).contains(.failed))
            #expect(try await recordsA == b.pushRecords(appId: app, messageUid: nil, userId: nil, limit: 100), "push records, ids included")
        }
        for node in ["node-0", "node-1"] {
            let cursor = try await a.pushCursor(node: node)
            #expect(cursor != nil)
            #expect(try await cursor == b.pushCursor(node: node))
        }
        #expect(try await a.lastCommittedSeq() == b.lastCommittedSeq())
        let committed = try await a.committedMessages(afterSeq: 0, limit: 1_000)
        #expect(committed.count == seeded.messages.count && committed.contains { !$0.pushConfig.isEmpty })
        #expect(try await committed == b.committedMessages(afterSeq: 0, limit: 1_000), "the message log with pushConfig")
        #expect(try await a.duePushes(now: now + 1_000, limit: 100) == b.duePushes(now: now + 1_000, limit: 100))
        #expect(try await a.duePushes(now: now + 1_000, limit: 100).count == 2)
    }

    static func syncAll(_ store: some SyncStore, app: Int64, user: String) async throws -> [StoredMessage] {
        var messages: [StoredMessage] = []
        var watermark: UInt64 = 0
        for _ in 0..<100 {
            let page = try await store.syncPage(appId: app, userId: user, after: watermark, minSentTime: .min, limit: 5, maxBytes: .max)
            messages += page.messages
            watermark = max(watermark, page.watermark)
            if !page.hasMore { break }
        }
        return messages
    }
}
