import Foundation
import IMCore

/// A device's push token: one per (app, user, device, kind). A token belongs to one user of an
/// app at a time (a phone signed in as another user takes its token along).
public struct PushDeviceRecord: Sendable, Equatable {
    public var appId: Int64
    public var userId: String
    public var deviceId: String
    /// The platform the device signed in with (`ios`, `android`, ...).
    public var platform: String
    public var kind: PushTokenKind
    public var token: String
    /// `production` or `sandbox` for APNs tokens; empty otherwise.
    public var environment: String
    /// Pushes sent since the device was last online: the next push's badge is this plus one.
    public var badge: Int
    public var updatedAt: Int64

    public init(appId: Int64, userId: String, deviceId: String, platform: String, kind: PushTokenKind, token: String,
                environment: String = "", badge: Int = 0, updatedAt: Int64) {
        self.appId = appId
        self.userId = userId
        self.deviceId = deviceId
        self.platform = platform
        self.kind = kind
        self.token = token
        self.environment = environment
        self.badge = badge
        self.updatedAt = updatedAt
    }
}

/// RongCloud's `RCPushProfile` as stored: the user's push language (nil: the app's default),
/// whether pushes show the message, and whether the phone gets pushes while the user is online on
/// Web/PC (where the app allows users to choose).
public struct PushProfileRecord: Sendable, Equatable, Codable {
    public var language: String?
    public var showContent: Bool
    public var receiveWhileWebOnline: Bool

    public init(language: String? = nil, showContent: Bool = true, receiveWhileWebOnline: Bool = true) {
        self.language = language
        self.showContent = showContent
        self.receiveWhileWebOnline = receiveWhileWebOnline
    }

    public static let `default` = PushProfileRecord()
}

/// A multi-language push template of an app (§2.6): per language a title (optional) and a body.
public struct PushTemplateRecord: Sendable, Equatable, Codable {
    public struct Entry: Sendable, Equatable, Codable {
        public var title: String?
        public var content: String

        public init(title: String? = nil, content: String) {
            self.title = title
            self.content = content
        }
    }

    public var templateId: String
    public var name: String
    /// Keyed by language id (`zh_CN`, `en_US`, ...), matched exactly.
    public var entries: [String: Entry]
    public var updatedAt: Int64

    public init(templateId: String, name: String, entries: [String: Entry], updatedAt: Int64) {
        self.templateId = templateId
        self.name = name
        self.entries = entries
        self.updatedAt = updatedAt
    }
}

/// What a user's do-not-disturb settings say about one conversation: read in bulk for a
/// message's offline recipients.
public struct PushPreferenceRecord: Sendable, Equatable {
    public var quietHours: QuietHours?
    /// The user's level for this conversation's channel (ultra groups; `.default` elsewhere).
    public var channelLevel: PushNotificationLevel
    /// The user's level for the conversation (for an ultra group: the whole group).
    public var conversationLevel: PushNotificationLevel
    /// The user's level for the whole conversation type.
    public var typeLevel: PushNotificationLevel

    public init(quietHours: QuietHours? = nil, channelLevel: PushNotificationLevel = .default,
                conversationLevel: PushNotificationLevel = .default, typeLevel: PushNotificationLevel = .default) {
        self.quietHours = quietHours
        self.channelLevel = channelLevel
        self.conversationLevel = conversationLevel
        self.typeLevel = typeLevel
    }
}

/// Where a push stands.
public enum PushStatus: Int, Sendable, Codable, CaseIterable {
    /// Decided, waiting to be sent (or to be tried again at `nextAttemptAt`).
    case pending = 0
    /// The provider took it.
    case sent = 1
    /// The provider refused it, or every attempt failed.
    case failed = 2
    /// The provider called the token invalid; the token was deleted.
    case invalidToken = 3
    /// No push: a rule held it back (`code` says which: P16, P17, P19, P23 ...).
    case suppressed = 4
}

/// One push decision for one recipient: a push to one device, or a suppression of the user's
/// push (`deviceId` empty). Kept after it ends, for the troubleshooting view, until swept.
public struct PushRecord: Sendable, Equatable {
    public var id: Int64
    public var appId: Int64
    public var messageUid: String
    public var userId: String
    public var deviceId: String
    public var kind: PushTokenKind?
    public var token: String
    public var environment: String
    /// The notification (IMPush.PushNotification as JSON); empty for a suppression.
    public var notification: Data
    public var status: PushStatus
    /// The troubleshooting code: P16/P17/P19/P23 for suppressions, the provider's for failures.
    public var code: String
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(id: Int64 = 0, appId: Int64, messageUid: String, userId: String, deviceId: String = "", kind: PushTokenKind? = nil,
                token: String = "", environment: String = "", notification: Data = Data(), status: PushStatus, code: String = "",
                attempts: Int = 0, nextAttemptAt: Int64 = 0, createdAt: Int64, updatedAt: Int64? = nil) {
        self.id = id
        self.appId = appId
        self.messageUid = messageUid
        self.userId = userId
        self.deviceId = deviceId
        self.kind = kind
        self.token = token
        self.environment = environment
        self.notification = notification
        self.status = status
        self.code = code
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }
}

/// The outcome of one attempt at a pending push.
public struct PushAttempt: Sendable, Equatable {
    public var id: Int64
    public var status: PushStatus
    public var code: String
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var now: Int64

    public init(id: Int64, status: PushStatus, code: String, attempts: Int, nextAttemptAt: Int64 = 0, now: Int64) {
        self.id = id
        self.status = status
        self.code = code
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.now = now
    }
}

/// A device badge after a decision.
public struct PushBadge: Sendable, Equatable {
    public var appId: Int64
    public var userId: String
    public var deviceId: String
    public var badge: Int

    public init(appId: Int64, userId: String, deviceId: String, badge: Int) {
        self.appId = appId
        self.userId = userId
        self.deviceId = deviceId
        self.badge = badge
    }
}

/// Push notifications: devices, profiles, templates, remarks, app settings, and the durable record
/// of every decision (the outbox the sender works from).
public protocol PushStore: Sendable {
    /// Stores the device's token (replacing its token of that kind) and takes the same token away
    /// from any other user or device of the app.
    func setPushDevice(_ device: PushDeviceRecord) async throws
    /// Removes the device's tokens (every kind when `kind` is nil): logout, disconnect without push.
    func removePushDevice(appId: Int64, userId: String, deviceId: String, kind: PushTokenKind?) async throws
    /// Removes a token the provider called invalid, whoever holds it.
    func removePushToken(appId: Int64, kind: PushTokenKind, token: String) async throws
    /// The devices of these users.
    func pushDevices(appId: Int64, userIds: [String]) async throws -> [PushDeviceRecord]
    /// The users of the app with at least one device, in id order, after `afterUserId` (broadcast
    /// pushes page through them).
    func pushDeviceUsers(appId: Int64, afterUserId: String, limit: Int) async throws -> [String]
    /// Sets the device's badge back to 0 (it came online).
    func resetPushBadge(appId: Int64, userId: String, deviceId: String) async throws

    /// Profiles of these users that differ from the default.
    func pushProfiles(appId: Int64, userIds: [String]) async throws -> [String: PushProfileRecord]
    func setPushProfile(appId: Int64, userId: String, profile: PushProfileRecord) async throws

    /// Creates or replaces a template; refuses `.tooManyPushTemplates` past `maxTemplates` templates.
    func upsertPushTemplate(appId: Int64, template: PushTemplateRecord, maxTemplates: Int) async throws
    /// Returns false if there was no such template.
    func deletePushTemplate(appId: Int64, templateId: String) async throws -> Bool
    func pushTemplates(appId: Int64) async throws -> [PushTemplateRecord]

    /// Sets the names `userId` gives other users (their remarks); an empty remark removes one.
    func setRemarks(appId: Int64, userId: String, remarks: [String: String]) async throws
    /// The remarks `userId` gave, by user, sorted by user id, after `afterUserId`.
    func remarks(appId: Int64, userId: String, afterUserId: String, limit: Int) async throws -> [(userId: String, remark: String)]
    /// The names these owners give `targetId` (owners without a remark for it are left out).
    func remarks(appId: Int64, owners: [String], for targetId: String) async throws -> [String: String]
    /// Sets the name `userId` shows as the sender of group `groupId`'s pushes (RongCloud's group
    /// member push alias); an empty remark removes it.
    func setGroupRemark(appId: Int64, groupId: String, userId: String, remark: String) async throws
    /// The group member push alias of `userId` in `groupId`, if set.
    func groupRemark(appId: Int64, groupId: String, userId: String) async throws -> String?

    /// The app's push settings and credentials, as the server encodes them (nil: never set).
    func pushSettings(appId: Int64) async throws -> Data?
    func setPushSettings(appId: Int64, settings: Data) async throws

    /// The do-not-disturb settings of these users for one conversation (users without any are left out).
    func pushPreferences(appId: Int64, userIds: [String], type: ConversationType, targetId: String,
                         channelId: String) async throws -> [String: PushPreferenceRecord]

    /// Records decisions in one transaction: each record once per (app, message, user, device)
    /// (a record already there is kept), the devices' new badges, and, when given, how far this
    /// node has decided (`cursor`: the seq of the last message decided). Returns the records' ids
    /// in the order given, 0 for one not written (its key was stored already, or came earlier).
    @discardableResult
    func recordPushDecisions(_ records: [PushRecord], badges: [PushBadge], node: String, cursor: UInt64?) async throws -> [Int64]
    /// The seq up to which `node` has decided pushes, nil if it never recorded one.
    func pushCursor(node: String) async throws -> UInt64?
    /// Messages of every app committed after `seq`, in seq order (decisions a crash interrupted).
    func committedMessages(afterSeq seq: UInt64, limit: Int) async throws -> [StoredMessage]
    /// The highest seq committed so far (0 when none).
    func lastCommittedSeq() async throws -> UInt64
    /// Pending pushes due at `now`, oldest first.
    func duePushes(now: Int64, limit: Int) async throws -> [PushRecord]
    /// The earliest next attempt time of the pending pushes of every app (a lease's end for those
    /// being sent), or nil when none is pending: the sender then waits to be told of new ones.
    func nextPushAttempt() async throws -> Int64?
    /// Takes these pending pushes for sending: each that is still pending and due at `now` gets
    /// `leaseUntil` as its next attempt time, atomically, and its id is returned. Of several nodes
    /// that read the same due pushes only one takes each; a push whose sender dies is due again
    /// when the lease ends. Returns a subset of `ids`, each once (the sender counts on it: fewer ids
    /// than asked for means some were taken elsewhere).
    func claimPushes(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64]
    /// Records attempts; a pending record is updated only while still pending.
    func recordPushAttempts(_ attempts: [PushAttempt]) async throws
    /// The records of an app, newest first: of one message, one user, or both.
    func pushRecords(appId: Int64, messageUid: String?, userId: String?, limit: Int) async throws -> [PushRecord]
    /// Deletes ended records created before `before`; returns how many.
    func deletePushRecords(createdBefore before: Int64) async throws -> Int
}
