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

/// What decides one message's pushes: the message and what is known of its conversation.
struct PushMessageContext {
    var message: StoredMessage
    var pushConfig: MessagePushConfig?
    var mentions: MentionedInfo?
    /// The sender's name (its user id when it has none).
    var senderName: String
    /// The sender's group member push alias (`/group/remarks/set.json`), for group pushes.
    var senderAlias: String? = nil
    /// The group's or ultra group's name, for the default title.
    var conversationName: String?
    var templates: [String: PushTemplateRecord]
    var settings: PushAppSettings
    /// The group's (or its channel's) default do-not-disturb level (ultra groups).
    var groupDefaultLevel: PushNotificationLevel = .default
    var now: Int64
    /// The built-in type's text by language, for the languages asked so far (the content is
    /// parsed once per message and language, not once per recipient).
    var defaultContents = LanguageTexts()
    /// The rc fields every recipient's push shares (`rId` is added per recipient).
    var rc: [String: String] = [:]
    /// The stored shared part of the notification last decided (most recipients share it).
    var sharedParts = SharedPartCache()

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
        rc = ["cType": message.conversationType.pushCode, "fId": message.senderId, "oName": message.objectName,
              "tId": message.targetId, "id": message.uid]
        if message.conversationType == .ultraGroup { rc["bId"] = message.channelId }
        if message.objectName == RecallCommandMessage.objectName,
           let recalled = (try? JSONSerialization.jsonObject(with: message.content) as? [String: Any])?["messageUId"] as? String {
            rc["rc-dlt-identifier"] = recalled
        }
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

/// The stored shared part of the last notification asked for: the recipients of one message
/// mostly have the same one, and writing it was most of a decision's cost.
final class SharedPartCache {
    private var last: (notification: PushNotification, bytes: [UInt8])?

    func bytes(of notification: PushNotification) -> [UInt8] {
        // String equality is Unicode-canonical: the texts that vary by recipient (a remark in the
        // title or body) are compared by their bytes as well, so the record keeps the recipient's own.
        if let last, last.notification == notification, last.notification.body.utf8.elementsEqual(notification.body.utf8),
           (last.notification.title?.utf8).elementsEqual(notification.title?.utf8) {
            return last.bytes
        }
        let bytes = notification.storedSharedPart
        last = (notification, bytes)
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
                let sender = nonEmpty(recipient.remark) ?? nonEmpty(context.senderAlias) ?? context.senderName
                return "\(sender): \(text)"
            }
        var body = (mentioned ? nonEmpty(context.mentions?.mentionedContent) : nil)
            ?? nonEmpty(config?.pushContent)
            ?? nonEmpty(message.pushContent)
            ?? nonEmpty(templateEntry?.content)
            ?? defaultContent
        if body == nil && mentioned { body = PushLanguage.mentioned(language) }
        guard var body else { return suppressed(PushCode.noContent) }
        let showDetails = settings.showDetails && (!settings.userSettingsEnabled || recipient.profile.showContent)
        if !showDetails && config?.forceShowDetailContent != true { body = PushLanguage.hiddenDetail(language) }

        let defaultTitle: String = switch message.conversationType {
        case .group, .ultraGroup: context.conversationName.flatMap { $0.isEmpty ? nil : $0 } ?? message.targetId
        default: recipient.remark ?? context.senderName
        }
        let title = nonEmpty(config?.pushTitle) ?? nonEmpty(templateEntry?.title) ?? defaultTitle

        let voip = settings.voipObjectNames.contains(message.objectName)
        let devices = recipient.devices.filter { ($0.kind == .apnsVoIP) == voip }
        guard !devices.isEmpty else { return suppressed(PushCode.noDevice) }

        let appData = nonEmpty(config?.pushData) ?? nonEmpty(message.pushData)
        return devices.map { device in
            // What recipients share (no id, badge or rc.rId), written once while it stays the same;
            // the record is that part and the device's own fields (`PushNotification.stored`).
            let shared = PushNotification(
                id: "", title: (config?.disablePushTitle == true && device.kind != .fcm) ? nil : title,
                body: body, badge: nil,
                sound: settings.sounds[message.objectName] ?? settings.sound,
                threadId: config?.iOSConfig?.threadId, collapseId: config?.iOSConfig?.apnsCollapseId,
                interruptionLevel: config?.iOSConfig?.interruptionLevel, rc: context.rc, appData: appData,
                fcmCollapseKey: config?.androidConfig?.fcmCollapseKey, fcmChannelId: config?.androidConfig?.fcmChannelId,
                fcmImageURL: config?.androidConfig?.fcmImageUrl)
            let stored = PushNotification.stored(sharedPart: context.sharedParts.bytes(of: shared),
                                                 id: "\(message.uid):\(recipient.userId):\(device.deviceId):\(device.kind.rawValue)",
                                                 badge: device.badge + 1, recipient: recipient.userId)
            return PushRecord(appId: message.appId, messageUid: message.uid, userId: recipient.userId, deviceId: device.deviceId,
                              kind: device.kind, token: device.token, environment: device.environment,
                              notification: stored, status: .pending,
                              nextAttemptAt: context.now, createdAt: context.now)
        }
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
