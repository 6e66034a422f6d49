import Foundation
import IMCore
import IMPush
@testable import IMServer
import IMStore
import Testing

/// The push decision for one recipient (spec/system-push-ultra.md §2.1-2.7): which rule holds a
/// push back, with its code, and what a push says.
@Suite("Push decision rules")
struct PushDecisionTests {
    static let now: Int64 = 1_800_000_000_000 // 2027-01-15T08:00:00Z

    static func message(_ type: ConversationType = .private, objectName: String = TextMessage.objectName,
                        content: String = #"{"content":"hello"}"#, flags: PersistentFlag = .persistedAndCounted,
                        pushContent: String = "", pushData: String = "", disableNotification: Bool = false,
                        channelId: String = "") -> StoredMessage {
        StoredMessage(appId: 1, conversationType: type, conversationKey: "k", targetId: type == .private ? "bob" : "g1",
                      senderId: "ann", objectName: objectName, content: Data(content.utf8), uid: "UID-1", sentTime: now,
                      flags: flags, pushContent: pushContent, pushData: pushData, disableNotification: disableNotification,
                      channelId: channelId)
    }

    static func context(_ message: StoredMessage, config: MessagePushConfig? = nil, mentions: MentionedInfo? = nil,
                        settings: PushAppSettings = PushAppSettings(), templates: [PushTemplateRecord] = [],
                        groupDefault: PushNotificationLevel = .default, senderAlias: String? = nil) -> PushMessageContext {
        PushMessageContext(message: message, pushConfig: config, mentions: mentions, senderName: "Ann", senderAlias: senderAlias,
                           conversationName: "Group One",
                           templates: Dictionary(uniqueKeysWithValues: templates.map { ($0.templateId, $0) }), settings: settings,
                           groupDefaultLevel: groupDefault, now: now)
    }

    static let phone = PushDeviceRecord(appId: 1, userId: "bob", deviceId: "phone", platform: "iOS", kind: .apns,
                                        token: String(repeating: "ab", count: 32), environment: "production", badge: 2, updatedAt: 0)

    static func recipient(devices: [PushDeviceRecord] = [phone], online: [Platform] = [], preferences: PushPreferenceRecord? = nil,
                          profile: PushProfileRecord = .default, remark: String? = nil) -> PushRecipient {
        PushRecipient(userId: "bob", devices: devices, onlinePlatforms: online, preferences: preferences, profile: profile, remark: remark)
    }

    static func notification(_ records: [PushRecord]) throws -> PushNotification {
        let record = try #require(records.first)
        #expect(record.status == .pending, "expected a push, got \(record.status) \(record.code)")
        return try #require(PushNotification(stored: record.notification))
    }

    static func code(_ records: [PushRecord]) -> String? {
        records.count == 1 && records[0].status == .suppressed ? records[0].code : nil
    }

    @Test("an offline recipient with a device gets one push: RongCloud's rc fields, badge, sound, title = sender, body = text")
    func plainPush() throws {
        let records = PushDecision.decide(Self.context(Self.message(pushData: "extra")), for: Self.recipient())
        #expect(records.count == 1)
        let push = try Self.notification(records)
        #expect(push.title == "Ann" && push.body == "hello" && push.badge == 3 && push.sound == "default" && push.appData == "extra")
        #expect(push.rc == ["cType": "PR", "fId": "ann", "oName": "RC:TxtMsg", "tId": "bob", "rId": "bob", "id": "UID-1"])
        #expect(records[0].token == Self.phone.token && records[0].kind == .apns && records[0].environment == "production")
    }

    @Test("recipients of one context each get their own push: the shared part written once is not reused when it differs, and every record is the stored form of its notification")
    func sharedPartAcrossRecipients() throws {
        let context = Self.context(Self.message(.group))
        let fcm = PushDeviceRecord(appId: 1, userId: "bob", deviceId: "tablet", platform: "Android", kind: .fcm,
                                   token: "fcm-token", environment: "production", badge: 0, updatedAt: 0)
        var carol = Self.recipient()
        carol.userId = "carol"
        // bob, then carol with a remark for the sender (another body), then bob again, then with two
        // kinds of device (a title left out for APNs only when asked; here both have it).
        let order = [Self.recipient(), carol.with(remark: "Boss"), Self.recipient(), Self.recipient(devices: [Self.phone, fcm])]
        var bodies: [String] = []
        for recipient in order {
            for record in PushDecision.decide(context, for: recipient) {
                let push = try #require(PushNotification(stored: record.notification))
                #expect(record.notification == push.stored, "the record is the stored form of its notification")
                #expect(push.rc["rId"] == recipient.userId && push.id.contains(":\(recipient.userId):\(record.deviceId):"))
                bodies.append(push.body)
            }
        }
        #expect(bodies == ["Ann: hello", "Boss: hello", "Ann: hello", "Ann: hello", "Ann: hello"])

        // Remarks equal as Swift strings (canonically) but not as bytes: each record keeps its own.
        let composed = "Am\u{E9}lie", decomposed = "Ame\u{301}lie"
        #expect(composed == decomposed)
        var written: [[UInt8]] = []
        for remark in [composed, decomposed] {
            let record = try #require(PushDecision.decide(context, for: Self.recipient().with(remark: remark)).first)
            written.append(Array(try #require(PushNotification(stored: record.notification)).body.utf8))
        }
        #expect(written == [Array("\(composed): hello".utf8), Array("\(decomposed): hello".utf8)])
    }

    @Test("online on a phone: no push and no record; online on Web/PC: WEB_ONLINE unless the app and the user allow it")
    func onlineRules() throws {
        let message = Self.message()
        #expect(PushDecision.decide(Self.context(message), for: Self.recipient(online: [.android])).isEmpty)
        #expect(Self.code(PushDecision.decide(Self.context(message), for: Self.recipient(online: [.web]))) == PushCode.webOnline)
        var settings = PushAppSettings()
        settings.webOnlinePushEnabled = true
        #expect(PushDecision.decide(Self.context(message, settings: settings), for: Self.recipient(online: [.windows])).first?.status == .pending)
        settings.userSettingsEnabled = true
        let declined = Self.recipient(online: [.macOS], profile: PushProfileRecord(receiveWhileWebOnline: false))
        #expect(Self.code(PushDecision.decide(Self.context(message, settings: settings), for: declined)) == PushCode.webOnline)
    }

    @Test("suppressions in precedence: silent, quiet hours P17, conversation DND P19, no content P16, no device P23")
    func suppressionCodes() throws {
        #expect(Self.code(PushDecision.decide(Self.context(Self.message(disableNotification: true)), for: Self.recipient())) == PushCode.silent)
        // Quiet hours from 07:00 UTC for 2 hours cover 08:00.
        let quiet = PushPreferenceRecord(quietHours: QuietHours(startTime: "07:00:00", spanMinutes: 120))
        #expect(Self.code(PushDecision.decide(Self.context(Self.message()), for: Self.recipient(preferences: quiet))) == PushCode.quietHours)
        let later = PushPreferenceRecord(quietHours: QuietHours(startTime: "09:00:00", spanMinutes: 120))
        #expect(PushDecision.decide(Self.context(Self.message()), for: Self.recipient(preferences: later)).first?.status == .pending)
        let muted = PushPreferenceRecord(conversationLevel: .blocked)
        #expect(Self.code(PushDecision.decide(Self.context(Self.message()), for: Self.recipient(preferences: muted))) == PushCode.doNotDisturb)
        let custom = Self.message(objectName: "App:Custom", content: #"{"x":1}"#)
        #expect(Self.code(PushDecision.decide(Self.context(custom), for: Self.recipient())) == PushCode.noContent)
        #expect(PushDecision.decide(Self.context(Self.message(objectName: "App:Custom", content: "{}", pushContent: "custom")),
                                    for: Self.recipient()).first?.status == .pending)
        #expect(Self.code(PushDecision.decide(Self.context(Self.message()), for: Self.recipient(devices: []))) == PushCode.noDevice)
        // Silent comes before quiet hours; quiet hours before the conversation's level.
        let both = PushPreferenceRecord(quietHours: QuietHours(startTime: "07:00:00", spanMinutes: 120), conversationLevel: .blocked)
        #expect(Self.code(PushDecision.decide(Self.context(Self.message(disableNotification: true)), for: Self.recipient(preferences: both))) == PushCode.silent)
        #expect(Self.code(PushDecision.decide(Self.context(Self.message()), for: Self.recipient(preferences: both))) == PushCode.quietHours)
    }

    @Test("levels: channel over conversation over type over the group default; -1 (all) overrides a coarser block")
    func levelPrecedence() throws {
        let message = Self.message(.ultraGroup, channelId: "c1")
        func status(_ preferences: PushPreferenceRecord?, groupDefault: PushNotificationLevel = .default) -> String? {
            let records = PushDecision.decide(Self.context(message, groupDefault: groupDefault), for: Self.recipient(preferences: preferences))
            return records.first?.status == .pending ? "push" : records.first?.code
        }
        #expect(status(nil, groupDefault: .blocked) == PushCode.doNotDisturb)
        #expect(status(PushPreferenceRecord(typeLevel: .allMessage), groupDefault: .blocked) == "push")
        #expect(status(PushPreferenceRecord(conversationLevel: .blocked, typeLevel: .allMessage)) == PushCode.doNotDisturb)
        #expect(status(PushPreferenceRecord(channelLevel: .allMessage, conversationLevel: .blocked)) == "push")
        #expect(status(PushPreferenceRecord(channelLevel: .mention)) == PushCode.doNotDisturb)
    }

    @Test("an @ mention passes every do-not-disturb and quiet hours at level 5; mentionedContent is its text")
    func mentionsPass() throws {
        let blocked = PushPreferenceRecord(quietHours: QuietHours(startTime: "07:00:00", spanMinutes: 120, level: .blocked),
                                           conversationLevel: .blocked)
        let message = Self.message(.group)
        let mention = MentionedInfo(type: .users, userIdList: ["bob"], mentionedContent: "Ann mentioned you")
        let push = try Self.notification(PushDecision.decide(Self.context(message, mentions: mention), for: Self.recipient(preferences: blocked)))
        #expect(push.body == "Ann mentioned you" && push.title == "Group One")
        let everyone = MentionedInfo(type: .all)
        #expect(try Self.notification(PushDecision.decide(Self.context(message, mentions: everyone), for: Self.recipient(preferences: blocked))).body == "Ann: hello",
                "a group push's default text names the sender")
        let someoneElse = MentionedInfo(type: .users, userIdList: ["carol"], mentionedContent: "x")
        #expect(Self.code(PushDecision.decide(Self.context(message, mentions: someoneElse), for: Self.recipient(preferences: blocked))) == PushCode.quietHours)
    }

    @Test("a group push names its sender in the default text: the recipient's remark > the sender's group alias > the sender's name; explicit texts and private pushes stay as given")
    func groupSenderName() throws {
        let group = Self.message(.group)
        #expect(try Self.notification(PushDecision.decide(Self.context(group), for: Self.recipient())).body == "Ann: hello")
        let context = Self.context(group, senderAlias: "Captain Ann")
        #expect(try Self.notification(PushDecision.decide(context, for: Self.recipient())).body == "Captain Ann: hello")
        #expect(try Self.notification(PushDecision.decide(context, for: Self.recipient(remark: "Mum"))).body == "Mum: hello")
        let explicit = Self.message(.group, pushContent: "New order")
        #expect(try Self.notification(PushDecision.decide(Self.context(explicit), for: Self.recipient(remark: "Mum"))).body == "New order")
        let direct = try Self.notification(PushDecision.decide(Self.context(Self.message(.private)), for: Self.recipient(remark: "Mum")))
        #expect(direct.body == "hello" && direct.title == "Mum")
    }

    @Test("content precedence: mentionedContent > pushConfig.pushContent > pushContent > template (recipient's language) > default")
    func contentPrecedence() throws {
        var settings = PushAppSettings()
        settings.userSettingsEnabled = true
        let template = PushTemplateRecord(templateId: "t1", name: "t", entries: [
            "zh_CN": .init(title: "模板", content: "模板内容"), "en_US": .init(title: "Template", content: "Template text"),
        ], updatedAt: 0)
        let english = PushProfileRecord(language: "en_US")
        let image = Self.message(objectName: ImageMessage.objectName, content: #"{"content":"","imageUri":"x"}"#)
        func body(_ message: StoredMessage, _ config: MessagePushConfig?, profile: PushProfileRecord = english) throws -> (String?, String) {
            let push = try Self.notification(PushDecision.decide(Self.context(message, config: config, settings: settings, templates: [template]),
                                                                 for: Self.recipient(profile: profile)))
            return (push.title, push.body)
        }
        #expect(try body(image, nil).1 == "[Image]")
        #expect(try body(image, nil, profile: .default).1 == "[图片]")
        #expect(try body(image, MessagePushConfig(templateId: "t1")) == ("Template", "Template text"))
        #expect(try body(image, MessagePushConfig(templateId: "t1"), profile: PushProfileRecord(language: "ja_JP")) == ("模板", "模板内容"))
        let withParam = Self.message(objectName: ImageMessage.objectName, content: "{}", pushContent: "param")
        #expect(try body(withParam, MessagePushConfig(templateId: "t1")).1 == "param")
        #expect(try body(withParam, MessagePushConfig(pushTitle: "T", pushContent: "config", templateId: "t1")) == ("T", "config"))
        let file = Self.message(objectName: FileMessage.objectName, content: #"{"name":"a.pdf","size":1}"#)
        #expect(try body(file, nil).1 == "[File] a.pdf")
        let arabic = PushProfileRecord(language: "ar_SA")
        #expect(try body(Self.message(objectName: LocationMessage.objectName, content: "{}"), nil, profile: arabic).1 == "[موقع]")
    }

    @Test("hidden details: the recipient's profile or the app hides the body unless the sender forces it; disablePushTitle")
    func detailsAndTitle() throws {
        var settings = PushAppSettings()
        settings.userSettingsEnabled = true
        let hiding = PushProfileRecord(showContent: false)
        let message = Self.message()
        let hidden = try Self.notification(PushDecision.decide(Self.context(message, settings: settings), for: Self.recipient(profile: hiding)))
        #expect(hidden.body == "您收到了一条通知")
        let forced = try Self.notification(PushDecision.decide(Self.context(message, config: MessagePushConfig(forceShowDetailContent: true),
                                                                            settings: settings), for: Self.recipient(profile: hiding)))
        #expect(forced.body == "hello")
        let untitled = try Self.notification(PushDecision.decide(Self.context(message, config: MessagePushConfig(disablePushTitle: true)),
                                                                 for: Self.recipient()))
        #expect(untitled.title == nil)
        let remarked = try Self.notification(PushDecision.decide(Self.context(message), for: Self.recipient(remark: "Annie")))
        #expect(remarked.title == "Annie")
    }

    @Test("recall pushes carry rc-dlt-identifier; ultra group pushes bId; commands and chatrooms make none")
    func payloadKinds() throws {
        let recall = Self.message(objectName: RecallCommandMessage.objectName,
                                  content: #"{"messageUId":"OLD-UID","conversationType":1,"targetId":"bob","sentTime":1}"#, flags: .none)
        #expect(PushDecision.isNotification(recall))
        let push = try Self.notification(PushDecision.decide(Self.context(recall), for: Self.recipient()))
        #expect(push.rc["rc-dlt-identifier"] == "OLD-UID" && push.body == "[撤回了一条消息]")
        let ultra = try Self.notification(PushDecision.decide(Self.context(Self.message(.ultraGroup, channelId: "")), for: Self.recipient()))
        #expect(ultra.rc["bId"] == "" && ultra.rc["cType"] == "UG")
        #expect(!PushDecision.isNotification(Self.message(objectName: "RC:CmdMsg", flags: .none)))
        #expect(!PushDecision.isNotification(Self.message(.chatroom)))
    }

    @Test("a push config breaking a rule is refused with 26001 and what to fix")
    func configValidation() throws {
        let cases: [MessagePushConfig] = [
            MessagePushConfig(iOSConfig: .init(apnsCollapseId: String(repeating: "c", count: 65))),
            MessagePushConfig(iOSConfig: .init(interruptionLevel: "loud")),
            MessagePushConfig(androidConfig: .init(categoryHW: "im")),
            MessagePushConfig(androidConfig: .init(typeVivo: "2")),
            MessagePushConfig(androidConfig: .init(categoryVivo: "IM")),
            MessagePushConfig(hmosConfig: .init(category: "Im")),
        ]
        for config in cases {
            #expect(throws: IMError.self) { try config.validate() }
            do {
                try config.validate()
            } catch let error as IMError {
                #expect(error.code == .invalidPushParameter)
            }
        }
        try MessagePushConfig(iOSConfig: .init(apnsCollapseId: String(repeating: "c", count: 64), interruptionLevel: "time-sensitive"),
                              androidConfig: .init(categoryHW: "IM", typeVivo: "1", categoryVivo: "IM")).validate()
    }
}

extension PushRecipient {
    func with(remark: String) -> PushRecipient {
        var copy = self
        copy.remark = remark
        return copy
    }
}
