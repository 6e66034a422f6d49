import Foundation
import IMCore
import IMPush
import IMStore

/// A push-only notification (RongCloud's 不落地通知: `/push.json` without a message,
/// `/push/user.json`, `/push/custom.json`): no message is stored or delivered; each device of the
/// audience gets the notification whether or not its user is online, and do-not-disturb settings
/// (which are about conversations) do not apply.
public struct DirectPush: Sendable, Equatable {
    public var title: String?
    public var body: String
    /// The body on iOS devices and on the others, when the call gave one per platform.
    public var iosBody: String?
    public var androidBody: String?
    /// `ios` and/or `android`: the devices' platforms; empty: every device (webhooks included).
    public var platforms: Set<String> = []
    public var badge: Int?
    public var sound: String?
    public var threadId: String?
    public var collapseId: String?
    public var interruptionLevel: String?
    /// The extras, as JSON text: the notification's `appData`.
    public var appData: String?
    public var fcmCollapseKey: String?
    public var fcmChannelId: String?
    public var imageURL: String?

    public init(title: String? = nil, body: String) {
        self.title = title
        self.body = body
    }

    /// Whether a device of this platform and kind is in the audience.
    func includes(_ device: PushDeviceRecord) -> Bool {
        guard !platforms.isEmpty else { return true }
        switch device.kind {
        case .apns, .apnsVoIP: return platforms.contains("ios")
        case .fcm: return platforms.contains("android")
        case .webhook: return platforms.contains(device.platform.lowercased())
        }
    }
}

extension PushService {
    /// Users per page when a push goes to everyone.
    static let directPage = 1_000

    /// Records the push for every device of these users (VoIP tokens excepted) and wakes the
    /// sender; `id` is the call's id, kept as the records' message uid. Returns the devices.
    @discardableResult
    public func pushDirect(_ push: DirectPush, appId: Int64, userIds: [String], id: String) async throws -> Int {
        let devices = try await store.pushDevices(appId: appId, userIds: userIds)
            .filter { $0.kind != .apnsVoIP && push.includes($0) }
        guard !devices.isEmpty else { return 0 }
        let now = clock.nowMilliseconds()
        let records = devices.map { device in
            let notification = PushNotification(
                id: "\(id):\(device.userId):\(device.deviceId):\(device.kind.rawValue)", title: push.title,
                body: (device.kind == .apns ? push.iosBody : push.androidBody) ?? push.body,
                badge: push.badge, sound: push.sound ?? "default", threadId: push.threadId, collapseId: push.collapseId,
                interruptionLevel: push.interruptionLevel, rc: ["id": id, "rId": device.userId], appData: push.appData,
                fcmCollapseKey: push.fcmCollapseKey, fcmChannelId: push.fcmChannelId, fcmImageURL: push.imageURL)
            return PushRecord(appId: appId, messageUid: id, userId: device.userId, deviceId: device.deviceId, kind: device.kind,
                              token: device.token, environment: device.environment,
                              notification: notification.stored, status: .pending,
                              nextAttemptAt: now, createdAt: now)
        }
        try await store.recordPushDecisions(records, badges: [], node: node, cursor: nil)
        wake.signal()
        return records.count
    }

    /// Records the push for every device of the app, a page of users at a time.
    @discardableResult
    public func pushDirectToAll(_ push: DirectPush, appId: Int64, id: String) async throws -> Int {
        var after = ""
        var total = 0
        while true {
            let users = try await store.pushDeviceUsers(appId: appId, afterUserId: after, limit: Self.directPage)
            guard let last = users.last else { return total }
            total += try await pushDirect(push, appId: appId, userIds: users, id: id)
            after = last
        }
    }
}
