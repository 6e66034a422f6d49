import Foundation
import IMCore
import IMPush
import IMStore

/// The troubleshooting codes a decision records (spec/system-push-ultra.md §7.2). RongCloud's
/// P-codes where it has one; the others name their rule.
public enum PushCode {
    /// Not a built-in type and no push content.
    public static let noContent = "P16"
    /// Quiet hours (global do-not-disturb).
    public static let quietHours = "P17"
    /// Do-not-disturb on the conversation (or its channel, type, or the group's default).
    public static let doNotDisturb = "P19"
    /// No device token.
    public static let noDevice = "P23"
    /// The sender made it a silent message (`disableNotification`).
    public static let silent = "SILENT"
    /// The user is online on Web/PC and the phone is not to be pushed meanwhile.
    public static let webOnline = "WEB_ONLINE"
    /// The ultra group push frequency (§2.8) held it back.
    public static let frequency = "ULTRA_GROUP_FREQUENCY"
}

/// What decides one message's pushes: the message and what is known of its conversation. Made
/// once per message and never changed: the shared parts it caches are worked out from it. A class,
/// so that each recipient's decision (and the closures it makes) shares it rather than copy the
/// message and its tables.
final class PushMessageContext {
    let message: StoredMessage
    let pushConfig: MessagePushConfig?
    let mentions: MentionedInfo?
    /// The sender's name (its user id when it has none).
    let senderName: String
    /// The sender's group member push alias (`/group/remarks/set.json`), for group pushes.
    let senderAlias: String?
    /// The group's or ultra group's name, for the default title.
    let conversationName: String?
    let templates: [String: PushTemplateRecord]
    let settings: PushAppSettings
    /// The group's (or its channel's) default do-not-disturb level (ultra groups).
    let groupDefaultLevel: PushNotificationLevel
    let now: Int64
    /// The built-in type's text by language, for the languages asked so far (the content is
    /// parsed once per message and language, not once per recipient).
    let defaultContents = LanguageTexts()
    /// The rc fields every recipient's push shares (`rId` is added per recipient).
    let rc: [String: String]
    /// The stored shared parts of its notifications, by variant (most recipients share one).
    let sharedParts = SharedPartCache()

    init(message: StoredMessage, pushConfig: MessagePushConfig?, mentions: MentionedInfo?, senderName: String, senderAlias: String? = nil,
         conversationName: String?, templates: [String: PushTemplateRecord], settings: PushAppSettings,
         groupDefaultLevel: PushNotificationLevel = .default, now: Int64) {
        self.message = message
        self.pushConfig = pushConfig
        self.mentions = mentions
        self.senderName = senderName
        self.senderAlias = senderAlias
        self.conversationName = conversationName
        self.templates = templates
        self.settings = settings
        self.groupDefaultLevel = groupDefaultLevel
        self.now = now
        var rc = ["cType": message.conversationType.pushCode, "fId": message.senderId, "oName": message.objectName,
                  "tId": message.targetId, "id": message.uid]
        if message.conversationType == .ultraGroup { rc["bId"] = message.channelId }
        if message.objectName == RecallCommandMessage.objectName,
           let recalled = (try? JSONSerialization.jsonObject(with: message.content) as? [String: Any])?["messageUId"] as? String {
            rc["rc-dlt-identifier"] = recalled
        }
        self.rc = rc
    }
}

/// Texts per language, made the first time a language asks.
final class LanguageTexts {
    private var texts: [String: String?] = [:]

    func text(_ language: String, _ make: () -> String?) -> String? {
        if let made = texts[language] { return made }
        let made = make()
        texts[language] = made
        return made
    }
}

/// The stored shared parts of a message's notifications, by what makes them differ from one
/// recipient to another (`Variant`): most recipients of a message have the same, and working out
/// and writing their texts was most of a decision's cost. Nil: the variant has no content (P16).
final class SharedPartCache {
    /// What a recipient's notification depends on beyond the message: recipients with the same
    /// variant get the same shared part.
    struct Variant: Hashable {
        var language: String
        var mentioned: Bool
        /// The name the recipient gave the sender (in a private push's title, a group push's text).
        var remark: String?
        var showDetails: Bool
        /// The title left out (`disablePushTitle`, for every device but FCM's).
        var untitled: Bool

        /// Texts that vary by recipient are compared by their bytes as well: String equality is
        /// Unicode-canonical, and the record keeps the recipient's own form. (Equal bytes are
        /// canonically equal, so the hash still agrees.)
        static func == (a: Variant, b: Variant) -> Bool {
            a.mentioned == b.mentioned && a.showDetails == b.showDetails && a.untitled == b.untitled
                && a.language.utf8.elementsEqual(b.language.utf8) && (a.remark?.utf8).elementsEqual(b.remark?.utf8)
        }
    }

    private var last: (variant: Variant, bytes: [UInt8]?)?
    private var made: [Variant: [UInt8]?] = [:]

    func bytes(of variant: Variant, _ make: () -> PushNotification?) -> [UInt8]? {
        if let last, last.variant == variant { return last.bytes }
        let bytes: [UInt8]?
        if let known = made[variant] {
            bytes = known
        } else {
            bytes = make()?.storedSharedPart
            made[variant] = bytes
        }
        last = (variant, bytes)
        return bytes
    }
}

/// One recipient as the decision sees it.
struct PushRecipient {
    var userId: String
    var devices: [PushDeviceRecord]
    /// The platforms of the user's live sessions (every node).
    var onlinePlatforms: [Platform]
    var preferences: PushPreferenceRecord?
    var profile: PushProfileRecord
    /// The name the recipient gave the sender.
    var remark: String?
    /// The ultra group push frequency has no room left for this user.
    var overFrequency = false
}

/// Decides one message's push for one recipient: nothing (online, or not a notification), a
/// suppression with its code, or one notification per device. Pure: the service gathers what it
/// reads.
enum PushDecision {
    /// Whether a message of this kind makes pushes at all: stored messages of every conversation
    /// but chatrooms, and of a type with a push attribute (not commands or status, except the
    /// recall command).
    static func isNotification(_ message: StoredMessage) -> Bool {
        guard message.conversationType != .chatroom else { return false }
        if message.objectName == RecallCommandMessage.objectName { return true }
        return message.flags.contains(.isPersisted) || message.flags.contains(.isCounted)
    }

    static func decide(_ context: PushMessageContext, for recipient: PushRecipient) -> [PushRecord] {
        let message = context.message
        let settings = context.settings
        func suppressed(_ code: String) -> [PushRecord] {
            [PushRecord(appId: message.appId, messageUid: message.uid, userId: recipient.userId, status: .suppressed, code: code,
                        createdAt: context.now)]
        }
        // Online on a phone: it gets the message live.
        if recipient.onlinePlatforms.contains(where: { $0.loginClass == .mobile }) { return [] }
        if recipient.onlinePlatforms.contains(where: { $0.loginClass != .mobile }) {
            let userAllows = !settings.userSettingsEnabled || recipient.profile.receiveWhileWebOnline
            if !settings.webOnlinePushEnabled || !userAllows { return suppressed(PushCode.webOnline) }
        }
        if message.disableNotification { return suppressed(PushCode.silent) }

        let mentionsUser = context.mentions.map { $0.type == .users && $0.userIdList.contains(recipient.userId) } ?? false
        let mentionsEveryone = context.mentions?.type == .all
        let mentioned = mentionsUser || mentionsEveryone
        // 「@ 消息推送会越过所有免打扰逻辑」(seed 003): a mention passes quiet hours and every level.
        if !mentioned {
            if let quiet = recipient.preferences?.quietHours, quiet.covers(milliseconds: context.now),
               !quiet.level.allowsPush(mentionsUser: false, mentionsEveryone: false) {
                return suppressed(PushCode.quietHours)
            }
            let preferences = recipient.preferences ?? PushPreferenceRecord()
            let level = [preferences.channelLevel, preferences.conversationLevel, preferences.typeLevel, context.groupDefaultLevel]
                .first { $0 != .default } ?? .default
            if !level.allowsPush(mentionsUser: false, mentionsEveryone: false) { return suppressed(PushCode.doNotDisturb) }
        }
        if recipient.overFrequency { return suppressed(PushCode.frequency) }

        let language = (settings.userSettingsEnabled ? recipient.profile.language : nil) ?? settings.defaultLanguage
        let showDetails = settings.showDetails && (!settings.userSettingsEnabled || recipient.profile.showContent)
        let config = context.pushConfig
        // What recipients share (no id, badge or rc.rId) is worked out and written once per
        // variant; the record is that part and the device's own fields (`PushNotification.stored`).
        let titled = SharedPartCache.Variant(language: language, mentioned: mentioned, remark: recipient.remark, showDetails: showDetails,
                                             untitled: false)
        guard let titledPart = context.sharedParts.bytes(of: titled, { sharedNotification(context, titled) }) else {
            return suppressed(PushCode.noContent)
        }
        let voip = settings.voipObjectNames.contains(message.objectName)
        var devices = recipient.devices
        devices.removeAll { ($0.kind == .apnsVoIP) != voip }
        guard !devices.isEmpty else { return suppressed(PushCode.noDevice) }

        var records: [PushRecord] = []
        records.reserveCapacity(devices.count)
        for device in devices {
            var sharedPart = titledPart
            if config?.disablePushTitle == true && device.kind != .fcm {
                var untitled = titled
                untitled.untitled = true
                sharedPart = context.sharedParts.bytes(of: untitled, { sharedNotification(context, untitled) }) ?? titledPart
            }
            let stored = PushNotification.stored(sharedPart: sharedPart,
                                                 id: "\(message.uid):\(recipient.userId):\(device.deviceId):\(device.kind.rawValue)",
                                                 badge: device.badge + 1, recipient: recipient.userId)
            records.append(PushRecord(appId: message.appId, messageUid: message.uid, userId: recipient.userId, deviceId: device.deviceId,
                                      kind: device.kind, token: device.token, environment: device.environment,
                                      notification: stored, status: .pending,
                                      nextAttemptAt: context.now, createdAt: context.now))
        }
        return records
    }

    /// The notification every recipient of `variant` gets but for its id, badge and `rc.rId`; nil
    /// when it has no content (P16).
    private static func sharedNotification(_ context: PushMessageContext, _ variant: SharedPartCache.Variant) -> PushNotification? {
        let message = context.message
        let settings = context.settings
        let language = variant.language
        let config = context.pushConfig
        let template = config?.templateId.flatMap { context.templates[$0] }
        let templateEntry = template.flatMap { $0.entries[language] ?? $0.entries[settings.defaultLanguage] }
        let nonEmpty = { (text: String?) in text.flatMap { $0.isEmpty ? nil : $0 } }
        // A group push's default text names its sender ("Ann: hello"): the name the recipient gave
        // the sender, else the sender's alias in the group, else the sender's name.
        let defaultContent = context.defaultContents
            .text(language) { PushLanguage.defaultContent(objectName: message.objectName, content: message.content, language: language) }
            .map { text in
                guard message.conversationType == .group else { return text }
                let sender = nonEmpty(variant.remark) ?? nonEmpty(context.senderAlias) ?? context.senderName
                return "\(sender): \(text)"
            }
        var body = (variant.mentioned ? nonEmpty(context.mentions?.mentionedContent) : nil)
            ?? nonEmpty(config?.pushContent)
            ?? nonEmpty(message.pushContent)
            ?? nonEmpty(templateEntry?.content)
            ?? defaultContent
        if body == nil && variant.mentioned { body = PushLanguage.mentioned(language) }
        guard var body else { return nil }
        if !variant.showDetails && config?.forceShowDetailContent != true { body = PushLanguage.hiddenDetail(language) }

        let defaultTitle: String = switch message.conversationType {
        case .group, .ultraGroup: context.conversationName.flatMap { $0.isEmpty ? nil : $0 } ?? message.targetId
        default: variant.remark ?? context.senderName
        }
        let title = nonEmpty(config?.pushTitle) ?? nonEmpty(templateEntry?.title) ?? defaultTitle
        return PushNotification(
            id: "", title: variant.untitled ? nil : title,
            body: body, badge: nil,
            sound: settings.sounds[message.objectName] ?? settings.sound,
            threadId: config?.iOSConfig?.threadId, collapseId: config?.iOSConfig?.apnsCollapseId,
            interruptionLevel: config?.iOSConfig?.interruptionLevel, rc: context.rc, appData: nonEmpty(config?.pushData) ?? nonEmpty(message.pushData),
            fcmCollapseKey: config?.androidConfig?.fcmCollapseKey, fcmChannelId: config?.androidConfig?.fcmChannelId,
            fcmImageURL: config?.androidConfig?.fcmImageUrl)
    }
}

private extension Optional where Wrapped == String.UTF8View {
    func elementsEqual(_ other: String.UTF8View?) -> Bool {
        switch (self, other) {
        case (nil, nil): true
        case (let a?, let b?): a.elementsEqual(b)
        default: false
        }
    }
}
