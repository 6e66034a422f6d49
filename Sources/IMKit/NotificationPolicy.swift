import Foundation
import IMCore
import IMLib

/// A local notification the kit raises for a received message: RongCloud's `UILocalNotification`
/// with its `rc` dictionary (`cType`, `fId`, `oName`, `tId`). Acting on it opens the conversation.
public struct LocalNotification: Sendable, Equatable {
    public var conversationType: ConversationType
    public var targetId: String
    public var channelId: String
    public var senderUserId: String
    public var objectName: String
    /// The sender's name (and the group's, in a group: "name (group)").
    public var title: String
    /// The digest of the message.
    public var body: String
    public var messageId: Int64

    public init(conversationType: ConversationType, targetId: String, channelId: String, senderUserId: String, objectName: String,
                title: String, body: String, messageId: Int64) {
        self.conversationType = conversationType
        self.targetId = targetId
        self.channelId = channelId
        self.senderUserId = senderUserId
        self.objectName = objectName
        self.title = title
        self.body = body
        self.messageId = messageId
    }

    /// `cType` of the `rc` dictionary: PR, GRP, SYS, ... (RongCloud's codes).
    public var cType: String { conversationType.pushCode }

    /// The `rc` dictionary of the notification's user info.
    public var rc: [String: String] { ["cType": cType, "fId": senderUserId, "oName": objectName, "tId": targetId] }
}

/// Why a received message raised no local notification.
public enum NotificationSuppression: String, Sendable, Equatable, Error {
    /// `disableMessageNotification`.
    case disabledGlobally
    /// The message was sent silent (`disableNotification`).
    case silentMessage
    /// Not a stored and counted message (commands, statuses, receipts).
    case notCounted
    /// The user's own message from another device.
    case ownMessage
    /// Its conversation is open on screen and the app has focus.
    case conversationOpen
    /// Do-not-disturb of the conversation or its type, or quiet hours, and no @ of the user.
    case doNotDisturb
    /// A chatroom: no notifications (RongCloud never pushes them either).
    case chatroom
    /// Received while catching up offline messages: the kit raises none for old messages.
    case offline
    /// The app's hook showed its own (`onRCIMCustomLocalNotification` returned YES).
    case handledByApp
}

/// Decides whether a received message raises a local notification, in the document's order: the
/// global switch, the message's silent flag, do-not-disturb (an @ of the user passes it), then the
/// app's hook (spec imkit-and-overview.md §3.3, §4.3 S12).
public struct NotificationPolicy: Sendable {
    /// What the decision needs besides the message.
    public struct Context: Sendable {
        public var currentUserId: String
        /// The conversation open on screen, if any, and whether the app has focus.
        public var openConversation: ConversationIdentifier?
        public var focused: Bool
        /// The conversation's own level (`.default`: its type's decides).
        public var conversationLevel: PushNotificationLevel
        public var typeLevel: PushNotificationLevel
        public var quietHours: QuietHours?
        public var now: Int64

        public init(currentUserId: String, openConversation: ConversationIdentifier? = nil, focused: Bool = true,
                    conversationLevel: PushNotificationLevel = .default, typeLevel: PushNotificationLevel = .default,
                    quietHours: QuietHours? = nil, now: Int64) {
            self.currentUserId = currentUserId
            self.openConversation = openConversation
            self.focused = focused
            self.conversationLevel = conversationLevel
            self.typeLevel = typeLevel
            self.quietHours = quietHours
            self.now = now
        }
    }

    /// The app's hook, run last: true means the app showed its own notification.
    public var customHook: (@Sendable (LocalNotification) -> Bool)?

    public init(customHook: (@Sendable (LocalNotification) -> Bool)? = nil) {
        self.customHook = customHook
    }

    /// Whether the message mentions the user (by name or @all), from its content.
    public static func mentions(_ message: Message, userId: String) -> (user: Bool, everyone: Bool) {
        guard let info = MentionedInfo.of(content: message.contentData) else { return (false, false) }
        return (info.type == .users && info.userIdList.contains(userId), info.type == .all)
    }

    /// The rules that need nothing but the message, the settings and what is on screen, in their
    /// order: a kit checks them before it reads the do-not-disturb levels.
    public static func precheck(_ message: Message, offline: Bool, config: KitConfig, currentUserId: String,
                                openConversation: ConversationIdentifier?, focused: Bool) -> NotificationSuppression? {
        if config.disableMessageNotification { return .disabledGlobally }
        if message.disableNotification { return .silentMessage }
        if message.direction == .send || message.senderUserId == currentUserId { return .ownMessage }
        if message.conversationType == .chatroom { return .chatroom }
        if !message.flags.contains(.isCounted) { return .notCounted }
        if offline { return .offline }
        if focused, openConversation == ConversationIdentifier(message.conversationType, targetId: message.targetId,
                                                                channelId: message.channelId) {
            return .conversationOpen
        }
        return nil
    }

    public func decide(_ message: Message, offline: Bool, config: KitConfig, context: Context,
                       notification: LocalNotification) -> Result<LocalNotification, NotificationSuppression> {
        if let early = Self.precheck(message, offline: offline, config: config, currentUserId: context.currentUserId,
                                     openConversation: context.openConversation, focused: context.focused) {
            return .failure(early)
        }
        let (user, everyone) = Self.mentions(message, userId: context.currentUserId)
        // An @ of this user passes every do-not-disturb (seed 003: @ messages go past all of it).
        if !user {
            let level = context.conversationLevel != .default ? context.conversationLevel : context.typeLevel
            if !level.allowsPush(mentionsUser: user, mentionsEveryone: everyone) { return .failure(.doNotDisturb) }
            if let quiet = context.quietHours, quiet.covers(milliseconds: context.now),
               !quiet.level.allowsPush(mentionsUser: user, mentionsEveryone: everyone) {
                return .failure(.doNotDisturb)
            }
        }
        if let customHook, customHook(notification) { return .failure(.handledByApp) }
        return .success(notification)
    }
}
