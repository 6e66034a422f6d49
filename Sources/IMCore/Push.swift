import Foundation

/// RongCloud's `RCMessagePushConfig` (spec/system-push-ultra.md §2.5): how a message reads as a
/// push notification. It travels with the message and is used only when a push is made. Encoded
/// as RongCloud's SDKs name the fields.
public struct MessagePushConfig: Codable, Sendable, Hashable {
    /// Hide the title (iOS only).
    public var disablePushTitle: Bool?
    /// The title; above the template's and the default.
    public var pushTitle: String?
    /// The body; above the send call's `pushContent` and the template's.
    public var pushContent: String?
    /// Delivered as `appData`; above the send call's `pushData`.
    public var pushData: String?
    /// Show the body even to a recipient who hides push details.
    public var forceShowDetailContent: Bool?
    /// A multi-language push template of the app (§2.6).
    public var templateId: String?
    public var iOSConfig: IOSPushConfig?
    public var androidConfig: AndroidPushConfig?
    public var hmosConfig: HarmonyPushConfig?

    public init(disablePushTitle: Bool? = nil, pushTitle: String? = nil, pushContent: String? = nil, pushData: String? = nil,
                forceShowDetailContent: Bool? = nil, templateId: String? = nil, iOSConfig: IOSPushConfig? = nil,
                androidConfig: AndroidPushConfig? = nil, hmosConfig: HarmonyPushConfig? = nil) {
        self.disablePushTitle = disablePushTitle
        self.pushTitle = pushTitle
        self.pushContent = pushContent
        self.pushData = pushData
        self.forceShowDetailContent = forceShowDetailContent
        self.templateId = templateId
        self.iOSConfig = iOSConfig
        self.androidConfig = androidConfig
        self.hmosConfig = hmosConfig
    }

    public struct IOSPushConfig: Codable, Sendable, Hashable {
        /// APNs `thread-id`.
        public var threadId: String?
        /// APNs `apns-collapse-id`: at most 64 bytes.
        public var apnsCollapseId: String?
        /// The notification's right-side image (the app renders it).
        public var richMediaUri: String?
        /// `passive`, `active`, `time-sensitive` or `critical`.
        public var interruptionLevel: String?

        public init(threadId: String? = nil, apnsCollapseId: String? = nil, richMediaUri: String? = nil, interruptionLevel: String? = nil) {
            self.threadId = threadId
            self.apnsCollapseId = apnsCollapseId
            self.richMediaUri = richMediaUri
            self.interruptionLevel = interruptionLevel
        }
    }

    public struct AndroidPushConfig: Codable, Sendable, Hashable {
        public var notificationId: String?
        public var channelIdMi: String?
        public var miLargeIconUrl: String?
        public var channelIdHW: String?
        public var hwImageUrl: String?
        /// Uppercase letters, e.g. `IM`.
        public var categoryHW: String?
        /// `LOW` or `NORMAL`.
        public var importanceHW: String?
        public var imageUrlHonor: String?
        /// `LOW` or `NORMAL`.
        public var importanceHonor: String?
        /// "0" (marketing, the default) or "1" (system).
        public var typeVivo: String?
        /// Needs `typeVivo`.
        public var categoryVivo: String?
        public var channelIdOPPO: String?
        public var fcmCollapseKey: String?
        public var fcmImageUrl: String?
        public var fcmChannelId: String?

        public init(notificationId: String? = nil, channelIdMi: String? = nil, miLargeIconUrl: String? = nil,
                    channelIdHW: String? = nil, hwImageUrl: String? = nil, categoryHW: String? = nil, importanceHW: String? = nil,
                    imageUrlHonor: String? = nil, importanceHonor: String? = nil, typeVivo: String? = nil, categoryVivo: String? = nil,
                    channelIdOPPO: String? = nil, fcmCollapseKey: String? = nil, fcmImageUrl: String? = nil, fcmChannelId: String? = nil) {
            self.notificationId = notificationId
            self.channelIdMi = channelIdMi
            self.miLargeIconUrl = miLargeIconUrl
            self.channelIdHW = channelIdHW
            self.hwImageUrl = hwImageUrl
            self.categoryHW = categoryHW
            self.importanceHW = importanceHW
            self.imageUrlHonor = imageUrlHonor
            self.importanceHonor = importanceHonor
            self.typeVivo = typeVivo
            self.categoryVivo = categoryVivo
            self.channelIdOPPO = channelIdOPPO
            self.fcmCollapseKey = fcmCollapseKey
            self.fcmImageUrl = fcmImageUrl
            self.fcmChannelId = fcmChannelId
        }
    }

    public struct HarmonyPushConfig: Codable, Sendable, Hashable {
        public var imageUrl: String?
        /// Uppercase letters.
        public var category: String?

        public init(imageUrl: String? = nil, category: String? = nil) {
            self.imageUrl = imageUrl
            self.category = category
        }
    }

    /// Whether nothing is set.
    public var isEmpty: Bool { self == MessagePushConfig() }

    /// Checks every field's rule; throws 26001 naming the field and what it must be.
    public func validate() throws {
        func refuse(_ text: String) -> IMError { IMError(.invalidPushParameter, "invalid push config: \(text)") }
        let uppercase = { (value: String) in !value.isEmpty && value.allSatisfy { $0.isASCII && $0.isUppercase } }
        if let id = iOSConfig?.apnsCollapseId, id.utf8.count > PushLimits.maxCollapseIdBytes {
            throw refuse("iOSConfig.apnsCollapseId is \(id.utf8.count) bytes; APNs takes at most \(PushLimits.maxCollapseIdBytes)")
        }
        if let level = iOSConfig?.interruptionLevel, !PushLimits.interruptionLevels.contains(level) {
            throw refuse("iOSConfig.interruptionLevel must be one of \(PushLimits.interruptionLevels.sorted().joined(separator: ", ")), got '\(level)'")
        }
        if let category = androidConfig?.categoryHW, !uppercase(category) {
            throw refuse("androidConfig.categoryHW must be uppercase letters such as IM, got '\(category)'")
        }
        if let category = hmosConfig?.category, !uppercase(category) {
            throw refuse("hmosConfig.category must be uppercase letters such as IM, got '\(category)'")
        }
        for (name, value) in [("importanceHW", androidConfig?.importanceHW), ("importanceHonor", androidConfig?.importanceHonor)] {
            if let value, !["LOW", "NORMAL"].contains(value.uppercased()) {
                throw refuse("androidConfig.\(name) must be LOW or NORMAL, got '\(value)'")
            }
        }
        if let type = androidConfig?.typeVivo, !["0", "1"].contains(type) {
            throw refuse("androidConfig.typeVivo must be \"0\" (marketing) or \"1\" (system), got '\(type)'")
        }
        if androidConfig?.categoryVivo != nil && androidConfig?.typeVivo == nil {
            throw refuse("androidConfig.categoryVivo needs androidConfig.typeVivo")
        }
        if let id = templateId, id.isEmpty || id.count > PushLimits.maxTemplateIdLength {
            throw refuse("templateId must be 1 to \(PushLimits.maxTemplateIdLength) characters")
        }
        for (name, value) in [("pushTitle", pushTitle), ("pushContent", pushContent), ("pushData", pushData)] {
            if let value, value.utf8.count > PushLimits.maxFieldBytes {
                throw refuse("\(name) is \(value.utf8.count) bytes; at most \(PushLimits.maxFieldBytes)")
            }
        }
    }

    /// The config as a message carries it: JSON, or empty when nothing is set.
    public func encoded() -> Data {
        guard !isEmpty else { return Data() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)) ?? Data()
    }

    /// The config a message carries; empty data is no config. Throws 26001 for JSON that is not one.
    public static func decode(_ data: Data) throws -> MessagePushConfig? {
        guard !data.isEmpty else { return nil }
        do {
            return try JSONDecoder().decode(MessagePushConfig.self, from: data)
        } catch {
            throw IMError(.invalidPushParameter, "invalid push config: not a MessagePushConfig JSON object (\(error))")
        }
    }
}

/// The limits of push, each with its source.
public enum PushLimits {
    /// 「apnsCollapseId 不超过 64 字节」 (§2.5).
    public static let maxCollapseIdBytes = 64
    /// APNs' interruption levels (§2.5).
    public static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]
    /// 「每个应用最多 100 个模板」 (§2.6).
    public static let maxTemplatesPerApp = 100
    public static let maxTemplateIdLength = 64
    /// A title, body or pushData; APNs' whole payload is 4 KB.
    public static let maxFieldBytes = 2048
    /// A device token or endpoint.
    public static let maxTokenLength = 4096
}

/// What a device registers to receive pushes (IMLib's `setPushToken`).
public enum PushTokenKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// An APNs device token (hex).
    case apns
    /// A PushKit (VoIP) token.
    case apnsVoIP = "apns_voip"
    /// An FCM registration token.
    case fcm
    /// An HTTP(S) URL of the app's own relay (web push, a self-hosted gateway).
    case webhook
}

/// The push languages with built-in texts, and those texts (§2.3).
public enum PushLanguage {
    public static let chinese = "zh_CN"
    public static let english = "en_US"
    public static let arabic = "ar_SA"
    public static let builtIn: [String] = [chinese, english, arabic]

    /// A language id as push profiles and templates name them: letters, '_' and '-', 2 to 16 (zh_CN, en_US, ar_SA).
    public static func isLanguageId(_ text: String) -> Bool {
        (2...16).contains(text.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "_" || $0 == "-") }
    }

    /// 「您收到了一条通知」: the body of a push whose recipient hides details.
    public static func hiddenDetail(_ language: String) -> String {
        switch language {
        case english: "You received a notification"
        case arabic: "لقد تلقيت إشعارًا"
        default: "您收到了一条通知"
        }
    }

    /// The body of an @ message without `mentionedContent` ("Someone @ed you").
    public static func mentioned(_ language: String) -> String {
        switch language {
        case english: "Someone @ed you"
        case arabic: "أشار إليك شخص ما"
        default: "有人@了你"
        }
    }

    /// The default body of a built-in type, or nil when the type has none (then P16 without a
    /// pushContent). `content` is the message's content JSON.
    public static func defaultContent(objectName: String, content: Data, language: String) -> String? {
        func pick(_ zh: String, _ en: String, _ ar: String) -> String {
            switch language {
            case english: en
            case arabic: ar
            default: zh
            }
        }
        func field(_ name: String) -> String? {
            (try? JSONSerialization.jsonObject(with: content) as? [String: Any])?[name] as? String
        }
        switch objectName {
        case TextMessage.objectName, ReferenceMessage.objectName:
            return field("content")
        case ImageMessage.objectName, GIFMessage.objectName:
            return pick("[图片]", "[Image]", "[صورة]")
        case HQVoiceMessage.objectName, "RC:VcMsg":
            return pick("[语音]", "[Voice]", "[رسالة صوتية]")
        case FileMessage.objectName:
            let name = field("name").map { " " + $0 } ?? ""
            return pick("[文件]", "[File]", "[ملف]") + name
        case SightMessage.objectName:
            return pick("[小视频]", "[Video]", "[فيديو]")
        case LocationMessage.objectName:
            return pick("[位置]", "[Location]", "[موقع]")
        case RichContentMessage.objectName:
            return field("title") ?? pick("[图文]", "[Link]", "[رابط]")
        case CombineMessage.objectName:
            return pick("[聊天记录]", "[Chat history]", "[سجل الدردشة]")
        case RecallCommandMessage.objectName:
            return pick("[撤回了一条消息]", "[recalled a message]", "[تم سحب رسالة]")
        default:
            return nil
        }
    }
}
