import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `PushStore`: devices and their tokens and badges, profiles, templates and their limit,
    /// remarks, app settings, do-not-disturb preferences, the push records (decisions, cursors,
    /// due pushes, attempts, troubleshooting reads, the sweep), the committed messages the sender
    /// works from, and `pushConfig` through every read of a message.
    ///
    /// Reads across apps (`duePushes`, `committedMessages`) are filtered to the check's apps, and
    /// cursors are per node with a node name of the check's own, so the checks hold on a database
    /// other checks share. The sweep check writes records created in 1970, which no other check does.
    public func pushStore() async throws {
        let area = "PushStore"

        func device(_ f: Fixture, _ user: String, _ deviceId: String, _ kind: PushTokenKind, _ token: String, badge: Int = 0,
                    app: Int64? = nil, at time: Int64 = 0) -> PushDeviceRecord {
            PushDeviceRecord(appId: app ?? f.appId, userId: user, deviceId: deviceId, platform: kind == .fcm ? "android" : "ios", kind: kind,
                             token: token, environment: kind == .apns ? "production" : "", badge: badge, updatedAt: f.now + time)
        }
        func devices(_ f: Fixture, _ users: [String], app: Int64? = nil) async throws -> [String] {
            try await f.store.pushDevices(appId: app ?? f.appId, userIds: users)
                .map { "\($0.userId)/\($0.deviceId)/\($0.kind.rawValue)=\($0.token)" }.sorted()
        }
        func badges(_ f: Fixture, _ user: String) async throws -> [String: Int] {
            Dictionary(try await f.store.pushDevices(appId: f.appId, userIds: [user]).map { ("\($0.deviceId)/\($0.kind.rawValue)", $0.badge) },
                       uniquingKeysWith: { a, _ in a })
        }
        func record(_ f: Fixture, _ message: String, _ user: String, _ deviceId: String = "", status: PushStatus = .pending,
                    code: String = "", next: Int64 = 0, created: Int64? = nil, token: String = "tok", app: Int64? = nil) -> PushRecord {
            PushRecord(appId: app ?? f.appId, messageUid: message, userId: user, deviceId: deviceId, kind: deviceId.isEmpty ? nil : .apns,
                       token: deviceId.isEmpty ? "" : token, environment: deviceId.isEmpty ? "" : "production",
                       notification: deviceId.isEmpty ? Data() : Data(#"{"title":"\#(user)","body":"你好"}"#.utf8), status: status, code: code,
                       nextAttemptAt: next, createdAt: created ?? f.now)
        }
        /// Records as read back, without the ids the store gave them.
        func withoutIds(_ records: [PushRecord]) -> [PushRecord] {
            records.map { var record = $0; record.id = 0; return record }
        }
        func node() -> String { "conformance-node-\(UUID().uuidString)" }

        // MARK: devices

        await check(area, "setPushDevice: one token per device and kind; a token moves to its new holder, in that app only") { f in
            #expect(try await f.store.pushDevices(appId: f.appId, userIds: []).isEmpty)
            #expect(try await f.store.pushDevices(appId: f.appId, userIds: ["alice"]).isEmpty)
            try await f.store.setPushDevice(device(f, "alice", "d1", .apns, "T1"))
            try await f.store.setPushDevice(device(f, "alice", "d1", .fcm, "F1"))
            try await f.store.setPushDevice(device(f, "bob", "d2", .apns, "T2"))
            let stored = try await f.store.pushDevices(appId: f.appId, userIds: ["alice", "bob", "alice", "nobody"])
            #expect(stored.sorted { ($0.userId, $0.kind.rawValue) < ($1.userId, $1.kind.rawValue) }
                    == [device(f, "alice", "d1", .apns, "T1"), device(f, "alice", "d1", .fcm, "F1"), device(f, "bob", "d2", .apns, "T2")],
                    "every field read back; each device once, a user asked twice included")

            try await f.store.setPushDevice(device(f, "alice", "d1", .apns, "T3", at: 5))
            #expect(try await devices(f, ["alice"]) == ["alice/d1/apns=T3", "alice/d1/fcm=F1"], "a new token replaces the device's token of that kind")
            #expect(try await f.store.pushDevices(appId: f.appId, userIds: ["alice"]).first { $0.kind == .apns }?.updatedAt == f.now + 5)

            try await f.store.setPushDevice(device(f, "carol", "d9", .apns, "T3"))
            #expect(try await devices(f, ["alice", "carol"]) == ["alice/d1/fcm=F1", "carol/d9/apns=T3"],
                    "a token taken by another user leaves the first")
            try await f.store.setPushDevice(device(f, "carol", "d8", .apns, "T3"))
            #expect(try await devices(f, ["carol"]) == ["carol/d8/apns=T3"], "and another device of the same user")
            try await f.store.setPushDevice(device(f, "dave", "d7", .fcm, "T2"))
            #expect(try await devices(f, ["bob", "dave"]) == ["bob/d2/apns=T2", "dave/d7/fcm=T2"], "the same text of another kind is another token")

            let b = try await f.otherApp()
            try await f.store.setPushDevice(device(f, "erin", "d1", .apns, "T3", app: b))
            #expect(try await devices(f, ["carol"]) == ["carol/d8/apns=T3"], "another app's device with the same token takes nothing")
            #expect(try await devices(f, ["erin", "carol"], app: b) == ["erin/d1/apns=T3"])
            #expect(try await f.store.pushDevices(appId: b, userIds: ["alice", "bob"]).isEmpty)

            #expect(try await f.store.pushDeviceUsers(appId: f.appId, afterUserId: "", limit: 10) == ["alice", "bob", "carol", "dave"],
                    "the users with a device, each once, in order")
            #expect(try await f.store.pushDeviceUsers(appId: f.appId, afterUserId: "alice", limit: 2) == ["bob", "carol"], "paged after a user")
            #expect(try await f.store.pushDeviceUsers(appId: b, afterUserId: "", limit: 10) == ["erin"], "of that app only")
        }

        await check(area, "removePushDevice removes one kind or every kind of one device; removePushToken removes a token whoever holds it") { f in
            try await f.store.setPushDevice(device(f, "alice", "d1", .apns, "A1"))
            try await f.store.setPushDevice(device(f, "alice", "d1", .apnsVoIP, "V1"))
            try await f.store.setPushDevice(device(f, "alice", "d1", .fcm, "F1"))
            try await f.store.setPushDevice(device(f, "alice", "d2", .apns, "A2"))
            try await f.store.setPushDevice(device(f, "bob", "d1", .apns, "B1"))
            try await f.store.removePushDevice(appId: f.appId, userId: "alice", deviceId: "d1", kind: .apnsVoIP)
            #expect(try await devices(f, ["alice", "bob"]) == ["alice/d1/apns=A1", "alice/d1/fcm=F1", "alice/d2/apns=A2", "bob/d1/apns=B1"])
            try await f.store.removePushDevice(appId: f.appId, userId: "alice", deviceId: "d1", kind: nil)
            #expect(try await devices(f, ["alice", "bob"]) == ["alice/d2/apns=A2", "bob/d1/apns=B1"],
                    "every kind of that device; the user's other device and another user's device of that id stay")
            try await f.store.removePushDevice(appId: f.appId, userId: "alice", deviceId: "d9", kind: nil)

            let b = try await f.otherApp()
            try await f.store.setPushDevice(device(f, "bob", "d1", .apns, "B1", app: b))
            try await f.store.removePushToken(appId: f.appId, kind: .fcm, token: "B1")
            #expect(try await devices(f, ["bob"]) == ["bob/d1/apns=B1"], "a token of another kind is not that token")
            try await f.store.removePushToken(appId: f.appId, kind: .apns, token: "B1")
            #expect(try await devices(f, ["alice", "bob"]) == ["alice/d2/apns=A2"])
            #expect(try await devices(f, ["bob"], app: b) == ["bob/d1/apns=B1"], "another app's token stays")
            try await f.store.removePushDevice(appId: f.appId, userId: "bob", deviceId: "d1", kind: nil)
            #expect(try await devices(f, ["bob"], app: b) == ["bob/d1/apns=B1"])
        }

        await check(area, "badges: set by decisions, kept when the same token comes again, reset by resetPushBadge and by a new token") { f in
            try await f.store.setPushDevice(device(f, "alice", "d1", .apns, "A1", badge: 2))
            try await f.store.setPushDevice(device(f, "alice", "d1", .fcm, "F1"))
            try await f.store.setPushDevice(device(f, "alice", "d2", .fcm, "F2"))
            try await f.store.setPushDevice(device(f, "bob", "d1", .fcm, "B1"))
            #expect(try await badges(f, "alice") == ["d1/apns": 2, "d1/fcm": 0, "d2/fcm": 0], "a new device keeps the badge it is given")
            try await f.store.recordPushDecisions([], badges: [PushBadge(appId: f.appId, userId: "alice", deviceId: "d1", badge: 3),
                                                               PushBadge(appId: f.appId, userId: "alice", deviceId: "d2", badge: 1),
                                                               PushBadge(appId: f.appId, userId: "alice", deviceId: "d2", badge: 4),
                                                               PushBadge(appId: f.appId, userId: "nobody", deviceId: "d1", badge: 9)],
                                                  node: node(), cursor: nil)
            #expect(try await badges(f, "alice") == ["d1/apns": 3, "d1/fcm": 3, "d2/fcm": 4],
                    "every token of the device; a device named twice takes the last")
            #expect(try await badges(f, "bob") == ["d1/fcm": 0], "another user's device of the same id keeps its badge")
            try await f.store.setPushDevice(device(f, "alice", "d1", .apns, "A1", badge: 0, at: 1))
            #expect(try await badges(f, "alice")["d1/apns"] == 3, "the same token again keeps the badge")
            try await f.store.setPushDevice(device(f, "alice", "d2", .fcm, "F2-new", badge: 7, at: 1))
            #expect(try await badges(f, "alice")["d2/fcm"] == 0, "a new token starts again from 0")
            try await f.store.resetPushBadge(appId: f.appId, userId: "alice", deviceId: "d1")
            #expect(try await badges(f, "alice") == ["d1/apns": 0, "d1/fcm": 0, "d2/fcm": 0])
            try await f.store.resetPushBadge(appId: f.appId, userId: "alice", deviceId: "d1")
            #expect(try await badges(f, "alice")["d1/apns"] == 0)
        }

        // MARK: profiles, templates, remarks, settings

        await check(area, "push profiles: the default is not stored; set, read back in bulk, set back to the default") { f in
            #expect(try await f.store.pushProfiles(appId: f.appId, userIds: []).isEmpty)
            try await f.store.setPushProfile(appId: f.appId, userId: "alice", profile: .default)
            #expect(try await f.store.pushProfiles(appId: f.appId, userIds: ["alice"]).isEmpty, "the default is no row")
            let english = PushProfileRecord(language: "en_US", showContent: false, receiveWhileWebOnline: true)
            let quiet = PushProfileRecord(language: nil, showContent: true, receiveWhileWebOnline: false)
            try await f.store.setPushProfile(appId: f.appId, userId: "alice", profile: english)
            try await f.store.setPushProfile(appId: f.appId, userId: "bob", profile: quiet)
            try await f.store.setPushProfile(appId: f.appId, userId: "carol", profile: PushProfileRecord(language: "ar_SA"))
            #expect(try await f.store.pushProfiles(appId: f.appId, userIds: ["alice", "bob", "carol", "dave", "alice"])
                    == ["alice": english, "bob": quiet, "carol": PushProfileRecord(language: "ar_SA")])
            let chinese = PushProfileRecord(language: "zh_CN", showContent: true, receiveWhileWebOnline: false)
            try await f.store.setPushProfile(appId: f.appId, userId: "alice", profile: chinese)
            try await f.store.setPushProfile(appId: f.appId, userId: "bob", profile: .default)
            #expect(try await f.store.pushProfiles(appId: f.appId, userIds: ["alice", "bob"]) == ["alice": chinese])
            let b = try await f.otherApp()
            #expect(try await f.store.pushProfiles(appId: b, userIds: ["alice", "carol"]).isEmpty)
        }

        await check(area, "templates: upsert replaces; the one past the limit is refused and nothing stored; delete; ordered by id bytewise") { f in
            let entries: [String: PushTemplateRecord.Entry] = ["zh_CN": .init(title: "标题", content: "内容"), "en_US": .init(content: "Body")]
            for id in ["b", "a", "B", "a-1", "a|b"] {
                try await f.store.upsertPushTemplate(appId: f.appId, template: PushTemplateRecord(templateId: id, name: "T \(id)", entries: entries,
                                                                                                  updatedAt: f.now), maxTemplates: 100)
            }
            #expect(try await f.store.pushTemplates(appId: f.appId).map(\.templateId) == ["B", "a", "a-1", "a|b", "b"])
            let replaced = PushTemplateRecord(templateId: "a", name: "renamed", entries: ["en_US": .init(title: "New", content: "Other")],
                                              updatedAt: f.now + 9)
            try await f.store.upsertPushTemplate(appId: f.appId, template: replaced, maxTemplates: 100)
            let read = try await f.store.pushTemplates(appId: f.appId)
            #expect(read.count == 5 && read[1] == replaced, "the same id replaces name, entries and time")
            #expect(read[0] == PushTemplateRecord(templateId: "B", name: "T B", entries: entries, updatedAt: f.now), "entries read back")

            #expect(try await f.store.deletePushTemplate(appId: f.appId, templateId: "a-1"))
            #expect(try await f.store.deletePushTemplate(appId: f.appId, templateId: "a-1") == false)
            #expect(try await f.store.deletePushTemplate(appId: f.appId, templateId: "missing") == false)
            #expect(try await f.store.pushTemplates(appId: f.appId).map(\.templateId) == ["B", "a", "a|b", "b"])

            for index in 0..<96 {
                try await f.store.upsertPushTemplate(appId: f.appId, template: PushTemplateRecord(
                    templateId: String(format: "t%03d", index), name: "n", entries: entries, updatedAt: f.now), maxTemplates: 100)
            }
            #expect(try await f.store.pushTemplates(appId: f.appId).count == 100)
            let extra = PushTemplateRecord(templateId: "t100", name: "extra", entries: entries, updatedAt: f.now)
            await #expect(throws: StoreRefusal.tooManyPushTemplates(limit: 100)) {
                try await f.store.upsertPushTemplate(appId: f.appId, template: extra, maxTemplates: 100)
            }
            let full = try await f.store.pushTemplates(appId: f.appId)
            #expect(full.count == 100 && !full.contains { $0.templateId == "t100" }, "the 101st is not stored")
            try await f.store.upsertPushTemplate(appId: f.appId, template: PushTemplateRecord(templateId: "t050", name: "at the limit",
                                                                                              entries: entries, updatedAt: f.now), maxTemplates: 100)
            #expect(try await f.store.pushTemplates(appId: f.appId).first { $0.templateId == "t050" }?.name == "at the limit",
                    "at the limit a template can still be replaced")
            let b = try await f.otherApp()
            try await f.store.upsertPushTemplate(appId: b, template: extra, maxTemplates: 100)
            #expect(try await f.store.pushTemplates(appId: b) == [extra], "the limit is counted per app, and reads are per app")
            #expect(try await f.store.deletePushTemplate(appId: b, templateId: "B") == false)
            #expect(try await f.store.deletePushTemplate(appId: f.appId, templateId: "t000"))
            try await f.store.upsertPushTemplate(appId: f.appId, template: extra, maxTemplates: 100)
            #expect(try await f.store.pushTemplates(appId: f.appId).last == extra, "after a deletion there is room again")
        }

        await check(area, "remarks: set, replace, an empty remark removes; pages after a user id; the names owners give one user") { f in
            try await f.store.setRemarks(appId: f.appId, userId: "alice", remarks: ["bob": "Bobby", "carol": "C", "dave": "D", "a|b": "pipe"])
            try await f.store.setRemarks(appId: f.appId, userId: "bob", remarks: ["carol": "Caroline"])
            try await f.store.setRemarks(appId: f.appId, userId: "alice", remarks: ["carol": "Carol", "dave": "", "zoe": ""])
            func page(after: String, limit: Int) async throws -> [String] {
                try await f.store.remarks(appId: f.appId, userId: "alice", afterUserId: after, limit: limit).map { "\($0.userId)=\($0.remark)" }
            }
            #expect(try await page(after: "", limit: 10) == ["a|b=pipe", "bob=Bobby", "carol=Carol"], "sorted by user id; dave's removed")
            #expect(try await page(after: "", limit: 2) == ["a|b=pipe", "bob=Bobby"])
            #expect(try await page(after: "bob", limit: 2) == ["carol=Carol"])
            #expect(try await page(after: "carol", limit: 2).isEmpty)
            #expect(try await f.store.remarks(appId: f.appId, owners: ["alice", "bob", "erin"], for: "carol") == ["alice": "Carol", "bob": "Caroline"])
            #expect(try await f.store.remarks(appId: f.appId, owners: ["alice", "bob"], for: "bob") == ["alice": "Bobby"])
            #expect(try await f.store.remarks(appId: f.appId, owners: [], for: "bob").isEmpty)
            let b = try await f.otherApp()
            #expect(try await f.store.remarks(appId: b, userId: "alice", afterUserId: "", limit: 10).isEmpty)
            #expect(try await f.store.remarks(appId: b, owners: ["alice", "bob"], for: "carol").isEmpty)
        }

        await check(area, "push settings: nil until set, read back, replaced, per app") { f in
            #expect(try await f.store.pushSettings(appId: f.appId) == nil)
            let first = Data(#"{"apns":{"keyId":"K1"},"language":"zh_CN"}"#.utf8)
            try await f.store.setPushSettings(appId: f.appId, settings: first)
            #expect(try await f.store.pushSettings(appId: f.appId) == first)
            let second = Data([0x00, 0xff, 0x7b, 0x0a])
            try await f.store.setPushSettings(appId: f.appId, settings: second)
            #expect(try await f.store.pushSettings(appId: f.appId) == second, "replaced; any bytes")
            let b = try await f.otherApp()
            #expect(try await f.store.pushSettings(appId: b) == nil)
        }

        // MARK: preferences

        await check(area, "pushPreferences: type-wide, conversation and channel levels and quiet hours, in bulk; users without any and other apps left out") { f in
            func edit(_ user: String, _ edit: ConversationStateEdit, app: Int64? = nil) async throws {
                _ = try await f.store.editConversationState(appId: app ?? f.appId, userId: user, edit, now: f.now)
            }
            let hours = QuietHours(startTime: "22:00:00", spanMinutes: 480, level: .mention, timeZone: "Asia/Shanghai")
            try await edit("alice", .setLevel(ConversationIdentifier(.group, targetId: ""), .blocked))
            try await edit("alice", .setLevel(ConversationIdentifier(.group, targetId: "g1"), .mention))
            try await edit("alice", .setLevel(ConversationIdentifier(.private, targetId: "g1"), .mentionAll))
            try await edit("bob", .setQuietHours(hours))
            try await edit("carol", .setLevel(ConversationIdentifier(.group, targetId: "g2"), .blocked))
            try await edit("dave", .setLevel(ConversationIdentifier(.group, targetId: "g1"), .mention))
            try await edit("dave", .setLevel(ConversationIdentifier(.group, targetId: "g1"), .default))
            try await edit("erin", .setQuietHours(QuietHours(startTime: "01:00:00", spanMinutes: 60)))
            try await edit("erin", .removeQuietHours)
            try await edit("frank", .setLevel(ConversationIdentifier(.group, targetId: "g1"), .allMessage))
            let b = try await f.otherApp()
            try await edit("carol", .setLevel(ConversationIdentifier(.group, targetId: "g1"), .blocked), app: b)
            try await edit("carol", .setQuietHours(hours), app: b)
            try await edit("alice", .setQuietHours(hours), app: b)

            let users = ["alice", "bob", "carol", "dave", "erin", "frank", "nobody", "alice"]
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: users, type: .group, targetId: "g1", channelId: "") == [
                "alice": PushPreferenceRecord(conversationLevel: .mention, typeLevel: .blocked),
                "bob": PushPreferenceRecord(quietHours: hours),
                "frank": PushPreferenceRecord(conversationLevel: .allMessage),
            ], "another conversation's or type's level, a level set back to the default and removed quiet hours leave a user out")
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: users, type: .group, targetId: "g2", channelId: "") == [
                "alice": PushPreferenceRecord(typeLevel: .blocked),
                "bob": PushPreferenceRecord(quietHours: hours),
                "carol": PushPreferenceRecord(conversationLevel: .blocked),
            ])
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: [], type: .group, targetId: "g1", channelId: "").isEmpty)
            #expect(try await f.store.pushPreferences(appId: b, userIds: ["alice", "bob", "carol", "frank"], type: .group, targetId: "g1",
                                                      channelId: "") == [
                "alice": PushPreferenceRecord(quietHours: hours),
                "carol": PushPreferenceRecord(quietHours: hours, conversationLevel: .blocked),
            ], "each app sees its own rows only")
        }

        await check(area, "pushPreferences for an ultra group: the channel's level, the group's and the type's") { f in
            func level(_ user: String, _ target: String, _ channel: String, _ level: PushNotificationLevel) async throws {
                _ = try await f.store.editConversationState(appId: f.appId, userId: user,
                                                            .setLevel(ConversationIdentifier(.ultraGroup, targetId: target, channelId: channel), level),
                                                            now: f.now)
            }
            try await level("alice", "u1", "ch1", .mentionAll)
            try await level("alice", "u1", "", .mention)
            try await level("alice", "", "", .blocked)
            try await level("bob", "u1", "ch2", .blocked)
            try await level("carol", "u2", "ch1", .blocked)
            let users = ["alice", "bob", "carol"]
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: users, type: .ultraGroup, targetId: "u1", channelId: "ch1") == [
                "alice": PushPreferenceRecord(channelLevel: .mentionAll, conversationLevel: .mention, typeLevel: .blocked),
            ], "another channel's or another group's level leaves a user out")
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: users, type: .ultraGroup, targetId: "u1", channelId: "ch2") == [
                "alice": PushPreferenceRecord(conversationLevel: .mention, typeLevel: .blocked),
                "bob": PushPreferenceRecord(channelLevel: .blocked),
            ])
            #expect(try await f.store.pushPreferences(appId: f.appId, userIds: users, type: .ultraGroup, targetId: "u1", channelId: "") == [
                "alice": PushPreferenceRecord(conversationLevel: .mention, typeLevel: .blocked),
            ], "the whole group: channel levels left out")
        }

        // MARK: records

        await check(area, "recordPushDecisions: once per (app, message, user, device), the first kept; the cursor per node only rises") { f in
            let here = node(), there = node()
            #expect(try await f.store.pushCursor(node: here) == nil)
            let first = [record(f, "m1", "alice", "d1"), record(f, "m1", "alice", "d2", token: "other"),
                         record(f, "m1", "bob", status: .suppressed, code: "P16"), record(f, "m2", "alice", "d1", status: .pending, next: f.now + 60)]
            let firstIds = try await f.store.recordPushDecisions(first, badges: [], node: here, cursor: 5)
            #expect(try await f.store.pushCursor(node: here) == 5)
            #expect(try await f.store.pushCursor(node: there) == nil, "cursors are per node")
            let stored = try await f.store.pushRecords(appId: f.appId, messageUid: nil, userId: nil, limit: 100)
            #expect(withoutIds(stored) == Array(first.reversed()), "every field read back, newest first")
            #expect(stored.allSatisfy { $0.id > 0 } && stored.map(\.id) == stored.map(\.id).sorted(by: >), "ids in the order recorded")
            #expect(firstIds == stored.reversed().map(\.id), "each record's id returned in its place")

            let again = [record(f, "m1", "alice", "d1", status: .failed, code: "X", token: "changed"),
                         record(f, "m3", "carol", "d3"), record(f, "m3", "carol", "d3", status: .sent, code: "dup")]
            let againIds = try await f.store.recordPushDecisions(again, badges: [], node: here, cursor: 3)
            #expect(try await f.store.pushCursor(node: here) == 5, "a lower cursor leaves it")
            let m3 = try await f.store.pushRecords(appId: f.appId, messageUid: "m3", userId: nil, limit: 10)
            #expect(againIds == [0, m3.first?.id ?? -1, 0], "0 for the records not written: \(againIds)")
            let m1 = try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: "alice", limit: 10)
            #expect(withoutIds(m1) == [first[1], first[0]], "a record already there is kept")
            #expect(withoutIds(try await f.store.pushRecords(appId: f.appId, messageUid: "m3", userId: nil, limit: 10)) == [again[1]],
                    "of two for one key in one call, the first")
            try await f.store.recordPushDecisions([], badges: [], node: here, cursor: 9)
            #expect(try await f.store.pushCursor(node: here) == 9)
            try await f.store.recordPushDecisions([record(f, "m4", "alice")], badges: [], node: here, cursor: nil)
            #expect(try await f.store.pushCursor(node: here) == 9, "no cursor given: unchanged")
            try await f.store.recordPushDecisions([], badges: [], node: there, cursor: 2)
            #expect(try await f.store.pushCursor(node: there) == 2)
            #expect(try await f.store.pushCursor(node: here) == 9)

            let b = try await f.otherApp()
            try await f.store.recordPushDecisions([record(f, "m1", "alice", "d1", code: "other app", app: b)], badges: [], node: here, cursor: nil)
            #expect(try await f.store.pushRecords(appId: b, messageUid: "m1", userId: "alice", limit: 10).map(\.code) == ["other app"],
                    "the same key in another app is another record")
            #expect(try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: "alice", limit: 10).map(\.code) == ["", ""])
        }

        await check(area, "duePushes: pending records due at now, by next attempt time then id") { f in
            let b = try await f.otherApp()
            try await f.store.recordPushDecisions([
                record(f, "m1", "alice", "d1", next: f.now - 10),
                record(f, "m1", "bob", "d1", next: f.now + 100),
                record(f, "m1", "carol", "d1", next: f.now - 20),
                record(f, "m1", "dave", "d1", status: .sent, next: f.now - 30),
                record(f, "m1", "erin", status: .suppressed, code: "P19", next: f.now - 30),
                record(f, "m2", "alice", "d1", next: f.now - 10),
                record(f, "m1", "alice", "d1", next: f.now - 5, app: b),
            ], badges: [], node: node(), cursor: nil)
            let apps: Set<Int64> = [f.appId, b]
            func due(at now: Int64) async throws -> [String] {
                try await f.store.duePushes(now: now, limit: 1000).filter { apps.contains($0.appId) }
                    .map { "\($0.appId == b ? "B:" : "")\($0.messageUid)/\($0.userId)" }
            }
            #expect(try await due(at: f.now) == ["m1/carol", "m1/alice", "m2/alice", "B:m1/alice"],
                    "ended records and later ones left out; every app's; equal times by id")
            #expect(try await due(at: f.now + 100) == ["m1/carol", "m1/alice", "m2/alice", "B:m1/alice", "m1/bob"], "due exactly at now")
            #expect(try await due(at: f.now - 21).isEmpty)
            #expect(try await f.store.duePushes(now: f.now, limit: 2).count == 2)
            let full = try await f.store.duePushes(now: f.now, limit: 1000).filter { $0.appId == f.appId && $0.messageUid == "m1" && $0.userId == "carol" }
            #expect(withoutIds(full) == [record(f, "m1", "carol", "d1", next: f.now - 20)], "read back whole")
        }

        await check(area, "nextPushAttempt: the earliest next attempt of the pending records, a claim's lease included; ended ones left out") { f in
            // Times no other check writes (theirs are around 0 and f.now), so the minimum over a
            // shared database is this check's while its record is pending.
            let early: Int64 = -7_777_777
            try await f.store.recordPushDecisions([
                record(f, "m1", "alice", "d1", next: early),
                record(f, "m1", "bob", "d1", status: .sent, next: early - 1_000),
                record(f, "m1", "erin", status: .suppressed, code: "P19", next: early - 2_000),
            ], badges: [], node: node(), cursor: nil)
            try await f.store.recordPushDecisions([record(f, "m2", "alice", "d1", next: early + 100_000)], badges: [], node: node(), cursor: nil)
            #expect(try await f.store.nextPushAttempt() == early, "the earliest pending record's, not the sent or suppressed ones' before it")
            let id = try #require(try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: "alice", limit: 1).first).id
            #expect(try await f.store.claimPushes(ids: [id], now: early, leaseUntil: early + 500) == [id])
            #expect(try await f.store.nextPushAttempt() == early + 500, "a claimed record is next due at its lease's end")
            try await f.store.recordPushAttempts([PushAttempt(id: id, status: .sent, code: "ok", attempts: 1, now: f.now)])
            let after = try await f.store.nextPushAttempt()
            #expect(after != early + 500 && after != early, "once answered it is not pending: \(String(describing: after))")
        }

        await check(area, "claimPushes: takes pending, due records once, pushing their next attempt to the lease's end") { f in
            try await f.store.recordPushDecisions([
                record(f, "m1", "due1", "d1", next: f.now - 10), record(f, "m1", "due2", "d1", next: f.now),
                record(f, "m1", "later", "d1", next: f.now + 50), record(f, "m1", "sent", "d1", status: .sent, next: f.now - 10),
            ], badges: [], node: node(), cursor: nil)
            func id(_ user: String) async throws -> Int64 {
                try #require(try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: user, limit: 1).first).id
            }
            let due1 = try await id("due1"), due2 = try await id("due2"), later = try await id("later"), sent = try await id("sent")
            #expect(try await f.store.claimPushes(ids: [], now: f.now, leaseUntil: f.now + 1000).isEmpty)
            #expect(Set(try await f.store.claimPushes(ids: [due1, due2, later, sent, 987_654_321], now: f.now, leaseUntil: f.now + 1000))
                    == [due1, due2], "only pending records due at now")
            #expect(try await f.store.claimPushes(ids: [due1, due2], now: f.now, leaseUntil: f.now + 1000).isEmpty, "a claimed record is not taken again")
            #expect(try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: "due1", limit: 1).first?.nextAttemptAt == f.now + 1000)
            #expect(try await f.store.claimPushes(ids: [due1, later], now: f.now + 1000, leaseUntil: f.now + 2000).count == 2,
                    "due again when the lease ends")
        }

        await check(area, "claimPushes: of concurrent claims of the same records each record goes to one") { f in
            try await f.store.recordPushDecisions((0..<40).map { record(f, "m1", "u\($0)", "d1", next: f.now - 1) }, badges: [], node: node(), cursor: nil)
            let ids = try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: nil, limit: 100).map(\.id)
            let claims = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<4 { group.addTask { try await f.store.claimPushes(ids: ids.shuffled(), now: f.now, leaseUntil: f.now + 1000) } }
                var all: [[Int64]] = []
                for try await claim in group { all.append(claim) }
                return all
            }
            let taken = claims.flatMap { $0 }
            #expect(taken.count == 40 && Set(taken) == Set(ids), "every record claimed exactly once")
        }

        await check(area, "recordPushAttempts: updates pending records only; a record named twice ends with the first attempt that ends it") { f in
            try await f.store.recordPushDecisions([
                record(f, "m1", "p1", "d1"), record(f, "m1", "p2", "d1"), record(f, "m1", "s1", "d1", status: .sent),
                record(f, "m1", "p3", "d1"), record(f, "m1", "p4", "d1"),
            ], badges: [], node: node(), cursor: nil)
            func find(_ user: String) async throws -> PushRecord {
                try #require(try await f.store.pushRecords(appId: f.appId, messageUid: "m1", userId: user, limit: 1).first)
            }
            let p1 = try await find("p1").id, p2 = try await find("p2").id, s1 = try await find("s1").id
            let p3 = try await find("p3").id, p4 = try await find("p4").id
            try await f.store.recordPushAttempts([
                PushAttempt(id: p1, status: .sent, code: "", attempts: 1, now: f.now + 5),
                PushAttempt(id: p2, status: .pending, code: "timeout", attempts: 1, nextAttemptAt: f.now + 60, now: f.now + 5),
                PushAttempt(id: s1, status: .failed, code: "late", attempts: 3, now: f.now + 5),
                PushAttempt(id: p3, status: .pending, code: "timeout", attempts: 1, nextAttemptAt: f.now + 60, now: f.now + 6),
                PushAttempt(id: p3, status: .failed, code: "gave up", attempts: 2, now: f.now + 7),
                PushAttempt(id: p4, status: .sent, code: "", attempts: 1, now: f.now + 6),
                PushAttempt(id: p4, status: .failed, code: "after", attempts: 2, now: f.now + 7),
                PushAttempt(id: 999_999_999, status: .sent, code: "", attempts: 1, now: f.now),
            ])
            var expected = record(f, "m1", "p1", "d1", status: .sent)
            expected.attempts = 1
            expected.updatedAt = f.now + 5
            #expect(withoutIds([try await find("p1")]) == [expected])
            let retried = try await find("p2")
            #expect(retried.status == .pending && retried.code == "timeout" && retried.attempts == 1 && retried.nextAttemptAt == f.now + 60
                    && retried.updatedAt == f.now + 5)
            #expect(withoutIds([try await find("s1")]) == [record(f, "m1", "s1", "d1", status: .sent)], "an ended record is not updated")
            let gaveUp = try await find("p3")
            #expect(gaveUp.status == .failed && gaveUp.code == "gave up" && gaveUp.attempts == 2 && gaveUp.updatedAt == f.now + 7)
            let sent = try await find("p4")
            #expect(sent.status == .sent && sent.attempts == 1 && sent.updatedAt == f.now + 6, "the attempt after the one that ended it is not applied")

            try await f.store.recordPushAttempts([PushAttempt(id: p1, status: .failed, code: "again", attempts: 2, now: f.now + 9),
                                                  PushAttempt(id: p2, status: .invalidToken, code: "BadDeviceToken", attempts: 2, now: f.now + 9)])
            #expect(try await find("p1").status == .sent)
            let invalid = try await find("p2")
            #expect(invalid.status == .invalidToken && invalid.code == "BadDeviceToken" && invalid.attempts == 2 && invalid.updatedAt == f.now + 9)
            try await f.store.recordPushAttempts([])
        }

        await check(area, "pushRecords: by message, by user or both, newest first, limited, in the app only") { f in
            let b = try await f.otherApp()
            try await f.store.recordPushDecisions([
                record(f, "m1", "alice", "d1"), record(f, "m1", "bob", "d1"), record(f, "m2", "alice", "d1"),
                record(f, "m2", "alice", status: .suppressed, code: "P17"), record(f, "m3", "bob", "d2"),
                record(f, "m1", "alice", "d1", app: b),
            ], badges: [], node: node(), cursor: nil)
            func keys(_ message: String?, _ user: String?, limit: Int = 100, app: Int64? = nil) async throws -> [String] {
                try await f.store.pushRecords(appId: app ?? f.appId, messageUid: message, userId: user, limit: limit)
                    .map { "\($0.messageUid)/\($0.userId)/\($0.deviceId)" }
            }
            #expect(try await keys("m1", nil) == ["m1/bob/d1", "m1/alice/d1"])
            #expect(try await keys(nil, "alice") == ["m2/alice/", "m2/alice/d1", "m1/alice/d1"])
            #expect(try await keys("m2", "alice") == ["m2/alice/", "m2/alice/d1"])
            #expect(try await keys(nil, nil) == ["m3/bob/d2", "m2/alice/", "m2/alice/d1", "m1/bob/d1", "m1/alice/d1"])
            #expect(try await keys(nil, "alice", limit: 2) == ["m2/alice/", "m2/alice/d1"])
            #expect(try await keys("m9", nil).isEmpty)
            #expect(try await keys(nil, "carol").isEmpty)
            #expect(try await keys("m1", nil, app: b) == ["m1/alice/d1"])
            #expect(try await keys("m3", nil, app: b).isEmpty)
        }

        await check(area, "deletePushRecords removes ended records created before the cutoff, of every app, and counts them") { f in
            // Times of 1970: no other check writes records this old.
            let b = try await f.otherApp()
            try await f.store.recordPushDecisions([
                record(f, "old", "sent", "d1", status: .sent, created: 1_000),
                record(f, "old", "failed", "d1", status: .failed, created: 2_000),
                record(f, "old", "suppressed", status: .suppressed, code: "P23", created: 3_000),
                record(f, "old", "pending", "d1", created: 1_000),
                record(f, "old", "late", "d1", status: .sent, created: 5_000),
                record(f, "old", "other", "d1", status: .invalidToken, created: 1_500, app: b),
            ], badges: [], node: node(), cursor: nil)
            #expect(try await f.store.deletePushRecords(createdBefore: 5_000) == 4)
            #expect(try await f.store.pushRecords(appId: f.appId, messageUid: "old", userId: nil, limit: 10).map(\.userId).sorted() == ["late", "pending"],
                    "pending records and those created at the cutoff or later stay")
            #expect(try await f.store.pushRecords(appId: b, messageUid: "old", userId: nil, limit: 10).isEmpty)
            #expect(try await f.store.deletePushRecords(createdBefore: 5_000) == 0)
        }

        // MARK: messages

        await check(area, "committedMessages: every app's messages after a seq, in seq order, whole; lastCommittedSeq") { f in
            let b = try await f.otherApp()
            let before = try await f.store.lastCommittedSeq()
            var configured = f.privateMessage(from: "alice", to: "bob", at: f.now + 1)
            configured.pushConfig = Data(#"{"pushTitle":"标题","templateId":"t1"}"#.utf8)
            let m = try await f.commit(configured, f.groupMessage(from: "alice", group: "g", at: f.now + 2),
                                       f.privateMessage(from: "carol", to: "dave", at: f.now + 3, app: b),
                                       f.privateMessage(from: "alice", to: "bob", at: f.now + 4, flags: .none))
            #expect(m[0].seq > before)
            let last = try await f.store.lastCommittedSeq()
            #expect(last >= m[3].seq, "the last seq covers the commit")
            let apps: Set<Int64> = [f.appId, b]
            let after = try await f.store.committedMessages(afterSeq: before, limit: 1000).filter { apps.contains($0.appId) }
            #expect(after == m, "every app's, commands included, in seq order, pushConfig intact")
            #expect(try await f.store.committedMessages(afterSeq: m[0].seq, limit: 2) == [m[1], m[2]], "after the seq, limited")
            #expect(try await f.store.committedMessages(afterSeq: last, limit: 10).allSatisfy { $0.seq > last })
        }

        await check(area, "pushConfig round-trips through commit and every read of a message") { f in
            let config = Data(#"{"pushTitle":"标题","iOSConfig":{"threadId":"t"},"forceShowDetailContent":true}"#.utf8)
            _ = try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["alice", "bob"], maxMembers: 10,
                                            preJoinHistory: 0, now: f.now)
            var one = f.privateMessage(from: "alice", to: "bob", at: f.now + 1, clientMessageId: "c1")
            one.pushConfig = config
            var two = f.groupMessage(from: "alice", group: "g", at: f.now + 2)
            two.pushConfig = Data(#"{"disablePushTitle":true}"#.utf8)
            let plain = f.privateMessage(from: "bob", to: "alice", at: f.now + 3)
            let m = try await f.commit(one, two, plain)
            #expect(m.map(\.pushConfig) == [one.pushConfig, two.pushConfig, Data()])

            for message in m {
                #expect(try await f.store.message(appId: f.appId, uid: message.uid) == message, "message(uid)")
            }
            #expect(try await f.store.messages(appId: f.appId, uids: m.map(\.uid)).sorted { $0.seq < $1.seq } == m, "messages(uids)")
            #expect(try await f.syncAll("bob").messages == m, "sync")
            let key = m[0].conversationKey
            #expect(try await f.store.history(appId: f.appId, conversationKey: key, recordTime: 0, count: 10, ascending: true, viewer: nil).messages
                    == [m[0], m[2]], "history")
            #expect(try await f.store.history(appId: f.appId, conversationKey: m[1].conversationKey, recordTime: 0, count: 10, ascending: false,
                                              viewer: HistoryViewer(userId: "bob", afterSeq: 0)).messages == [m[1]], "a viewer's history")
            #expect(try await f.store.conversationMessages(appId: f.appId, conversationKey: key, start: 0, end: .max, includeStart: true,
                                                           ascending: true, limit: 10, senderId: nil) == [m[0], m[2]], "conversationMessages")
            #expect(try await f.store.messages(appId: f.appId, sentFrom: f.now, afterSeq: 0, to: f.now + 10, limit: 10) == m, "the message log")
            let resent = try await f.store.commit([one])
            #expect(resent == [.duplicate(m[0])], "a resend returns the stored message with its pushConfig")
        }
    }
}
