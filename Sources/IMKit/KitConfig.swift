import Foundation
import IMCore

/// Every switch of RongCloud's IMKit (`RCIM` and the conversation screens), with the documented
/// defaults (spec imkit-and-overview.md §4.2). Where the documents are silent the choice is
/// written beside the setting.
public struct KitConfig: Sendable, Equatable {
    /// The conversation types the list shows (`displayConversationTypeArray`). The quick start
    /// shows private, group and system; ultra groups are added here because the kit has them.
    public var displayConversationTypes: [ConversationType] = [.private, .group, .system, .ultraGroup]
    /// The types folded into one row each (`collectionConversationTypeArray`): system by default.
    public var collectionConversationTypes: [ConversationType] = [.system]
    /// `enableMessageRecall`.
    public var enableMessageRecall = true
    /// `maxRecallDuration`, seconds.
    public var maxRecallDuration = RecallLimits.defaultWindowSeconds
    /// `reeditDuration`, seconds: how long the sender may put a recalled text back in the input.
    public var reeditDuration = 300
    /// `enableTypingStatus`: typing statuses sent (at most one per 6 s) and shown, private chats only.
    public var enableTypingStatus = true
    /// How long a peer's "typing…" stays without a new status (documents silent: 6 s, the send
    /// throttle, so a peer who keeps typing never flickers).
    public var peerTypingTimeout = Int(TypingLimits.intervalMilliseconds / 1000)
    /// `enabledReadReceiptConversationTypeList`: empty by default (no receipts).
    public var enabledReadReceiptConversationTypes: Set<ConversationType> = []
    /// `enableSyncReadStatus`: reading on this device clears the unread count on the user's others.
    public var enableSyncReadStatus = true
    /// `enableMessageMentioned`: @ in groups opens the member picker.
    public var enableMessageMentioned = true
    /// `enableMessageReference` (quote reply): on, as the IMKit section says.
    public var enableMessageReference = true
    /// `enableSendCombineMessage` (combined forward): off.
    public var enableSendCombineMessage = false
    /// `enablePersistentUserInfoCache`: off, the provider's answers live in memory only.
    public var enablePersistentUserInfoCache = false
    /// `disableMessageNotification`: no local notification at all.
    public var disableMessageNotification = false
    /// `isMediaSelectorContainVideo`: the media picker offers videos.
    public var isMediaSelectorContainVideo = false
    /// `isShowNetworkIndicatorView`: the list shows a banner while not connected.
    public var isShowNetworkIndicatorView = true
    /// `enableUnreadMessageIcon` (documents silent on the default: on).
    public var enableUnreadMessageIcon = true
    /// `enableNewComingMessageIcon` (documents silent on the default: on).
    public var enableNewComingMessageIcon = true
    /// Received GIFs below this are downloaded at once (1 MB).
    public var gifAutoDownloadBytes: Int64 = 1_048_576
    /// The largest GIF the kit sends (2 MB).
    public var gifMaxBytes = Int64(MediaLimits.defaultMaxGifMB) << 20
    /// The longest voice message, seconds.
    public var voiceMaxSeconds = MediaLimits.defaultMaxVoiceSeconds
    /// The longest recorded short video, seconds.
    public var sightRecordMaxSeconds = 10
    /// The longest short video picked from a file, seconds.
    public var sightLocalMaxSeconds = MediaLimits.defaultMaxSightSeconds
    /// The largest message body, bytes (128 KB).
    public var maxMessageBytes = MessageLimits.maxContentBytes
    /// The quick phrases of private chats (`setCommonPhrasesList`), the document's five.
    public var commonPhrases = ["你好", "不错", "是这样", "没问题", "谢谢"]
    /// Messages per history page (documents silent: 20).
    public var historyPageSize = 20
    /// The unread-jump label shows its count above this many unread messages.
    public var unreadLabelThreshold = 10
    /// The language of the kit's texts.
    public var language: KitLanguage = .english
    /// Real-time location sharing: a participant repeats its position this often, seconds
    /// (documents silent: 10 s).
    public var locationUpdateInterval = 10
    /// Real-time location sharing: a peer not heard from for this long has left, seconds
    /// (documents silent: 35 s, three repeats missed).
    public var locationIdleTimeout = 35

    public init() {}

    /// The names `set(_:to:)` takes, for settings screens and `/set` commands.
    public static let flagNames: [String] = [
        "enableMessageRecall", "maxRecallDuration", "reeditDuration", "enableTypingStatus", "peerTypingTimeout",
        "enabledReadReceiptConversationTypes", "enableSyncReadStatus", "enableMessageMentioned", "enableMessageReference",
        "enableSendCombineMessage", "enablePersistentUserInfoCache", "disableMessageNotification",
        "isMediaSelectorContainVideo", "isShowNetworkIndicatorView", "enableUnreadMessageIcon",
        "enableNewComingMessageIcon", "gifAutoDownloadBytes", "gifMaxBytes", "voiceMaxSeconds", "sightRecordMaxSeconds",
        "sightLocalMaxSeconds", "historyPageSize", "unreadLabelThreshold", "language", "locationUpdateInterval",
        "locationIdleTimeout",
    ]

    /// Changes one setting by name from text (`true`/`false`, a number, a comma-separated list of
    /// conversation types such as `private,group`, `en`/`zh-Hans`).
    ///
    /// - Throws: `IMError` 33003 naming the setting when the name or the value is not valid.
    public mutating func set(_ name: String, to text: String) throws {
        func bool() throws -> Bool {
            switch text.lowercased() {
            case "true", "yes", "on", "1": return true
            case "false", "no", "off", "0": return false
            default: throw IMError(.invalidParameter, "\(name) takes true or false, not '\(text)'")
            }
        }
        func int(_ range: ClosedRange<Int>) throws -> Int {
            guard let value = Int(text), range.contains(value) else {
                throw IMError(.invalidParameter, "\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            }
            return value
        }
        switch name {
        case "enableMessageRecall": enableMessageRecall = try bool()
        case "maxRecallDuration": maxRecallDuration = try int(1...86_400)
        case "reeditDuration": reeditDuration = try int(0...86_400)
        case "enableTypingStatus": enableTypingStatus = try bool()
        case "peerTypingTimeout": peerTypingTimeout = try int(1...600)
        case "enabledReadReceiptConversationTypes":
            var types: Set<ConversationType> = []
            for word in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !word.isEmpty && word != "none" {
                guard let type = KitConfig.conversationTypeNames[word] else {
                    throw IMError(.invalidParameter, "\(name): unknown conversation type '\(word)' (use private, group, ...)")
                }
                types.insert(type)
            }
            enabledReadReceiptConversationTypes = types
        case "enableSyncReadStatus": enableSyncReadStatus = try bool()
        case "enableMessageMentioned": enableMessageMentioned = try bool()
        case "enableMessageReference": enableMessageReference = try bool()
        case "enableSendCombineMessage": enableSendCombineMessage = try bool()
        case "enablePersistentUserInfoCache": enablePersistentUserInfoCache = try bool()
        case "disableMessageNotification": disableMessageNotification = try bool()
        case "isMediaSelectorContainVideo": isMediaSelectorContainVideo = try bool()
        case "isShowNetworkIndicatorView": isShowNetworkIndicatorView = try bool()
        case "enableUnreadMessageIcon": enableUnreadMessageIcon = try bool()
        case "enableNewComingMessageIcon": enableNewComingMessageIcon = try bool()
        case "gifAutoDownloadBytes": gifAutoDownloadBytes = Int64(try int(0...Int(Int32.max)))
        case "gifMaxBytes": gifMaxBytes = Int64(try int(1...Int(Int32.max)))
        case "voiceMaxSeconds": voiceMaxSeconds = try int(1...600)
        case "sightRecordMaxSeconds": sightRecordMaxSeconds = try int(1...120)
        case "sightLocalMaxSeconds": sightLocalMaxSeconds = try int(1...3_600)
        case "historyPageSize": historyPageSize = try int(1...100)
        case "unreadLabelThreshold": unreadLabelThreshold = try int(0...10_000)
        case "locationUpdateInterval":
            let value = try int(1...3_600)
            guard value < locationIdleTimeout else {
                throw IMError(.invalidParameter, "locationUpdateInterval must be shorter than locationIdleTimeout (\(locationIdleTimeout) s), or sharing peers are dropped between their repeats")
            }
            locationUpdateInterval = value
        case "locationIdleTimeout":
            let value = try int(2...86_400)
            guard value > locationUpdateInterval else {
                throw IMError(.invalidParameter, "locationIdleTimeout must be longer than locationUpdateInterval (\(locationUpdateInterval) s), or sharing peers are dropped between their repeats")
            }
            locationIdleTimeout = value
        case "language":
            guard let language = KitLanguage(rawValue: text) else {
                throw IMError(.invalidParameter, "language takes en or zh-Hans, not '\(text)'")
            }
            self.language = language
        default:
            throw IMError(.invalidParameter, "no kit setting is called '\(name)': one of \(KitConfig.flagNames.joined(separator: ", "))")
        }
    }

    /// A setting's value as `set(_:to:)` reads it.
    public func value(of name: String) -> String? {
        switch name {
        case "enableMessageRecall": return "\(enableMessageRecall)"
        case "maxRecallDuration": return "\(maxRecallDuration)"
        case "reeditDuration": return "\(reeditDuration)"
        case "enableTypingStatus": return "\(enableTypingStatus)"
        case "peerTypingTimeout": return "\(peerTypingTimeout)"
        case "enabledReadReceiptConversationTypes":
            let names = enabledReadReceiptConversationTypes.compactMap { type in
                KitConfig.conversationTypeNames.first { $0.value == type }?.key
            }.sorted()
            return names.isEmpty ? "none" : names.joined(separator: ",")
        case "enableSyncReadStatus": return "\(enableSyncReadStatus)"
        case "enableMessageMentioned": return "\(enableMessageMentioned)"
        case "enableMessageReference": return "\(enableMessageReference)"
        case "enableSendCombineMessage": return "\(enableSendCombineMessage)"
        case "enablePersistentUserInfoCache": return "\(enablePersistentUserInfoCache)"
        case "disableMessageNotification": return "\(disableMessageNotification)"
        case "isMediaSelectorContainVideo": return "\(isMediaSelectorContainVideo)"
        case "isShowNetworkIndicatorView": return "\(isShowNetworkIndicatorView)"
        case "enableUnreadMessageIcon": return "\(enableUnreadMessageIcon)"
        case "enableNewComingMessageIcon": return "\(enableNewComingMessageIcon)"
        case "gifAutoDownloadBytes": return "\(gifAutoDownloadBytes)"
        case "gifMaxBytes": return "\(gifMaxBytes)"
        case "voiceMaxSeconds": return "\(voiceMaxSeconds)"
        case "sightRecordMaxSeconds": return "\(sightRecordMaxSeconds)"
        case "sightLocalMaxSeconds": return "\(sightLocalMaxSeconds)"
        case "historyPageSize": return "\(historyPageSize)"
        case "unreadLabelThreshold": return "\(unreadLabelThreshold)"
        case "language": return language.rawValue
        case "locationUpdateInterval": return "\(locationUpdateInterval)"
        case "locationIdleTimeout": return "\(locationIdleTimeout)"
        default: return nil
        }
    }

    static let conversationTypeNames: [String: ConversationType] = [
        "private": .private, "group": .group, "system": .system, "chatroom": .chatroom, "ultragroup": .ultraGroup,
    ]
}
