import Foundation
import IMPush

// The JSON bodies each provider gets. Optional fields that are nil are left out (the synthesized
// Encodable uses encodeIfPresent).

private func makeEncoder(sorted: Bool = false) -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = sorted ? [.sortedKeys, .withoutEscapingSlashes] : [.withoutEscapingSlashes]
    return encoder
}

/// RongCloud's APNs payload (spec/system-push-ultra.md §2.7): `aps`, the `rc` object and `appData`.
struct APNsPayload: Encodable {
    enum Alert: Encodable {
        case body(String)
        case titled(title: String, body: String)

        private enum Keys: String, CodingKey { case title, body }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .body(let body):
                var container = encoder.singleValueContainer()
                try container.encode(body)
            case .titled(let title, let body):
                var container = encoder.container(keyedBy: Keys.self)
                try container.encode(title, forKey: .title)
                try container.encode(body, forKey: .body)
            }
        }
    }

    struct APS: Encodable {
        var alert: Alert
        var badge: Int?
        var sound: String?
        var threadId: String?
        var interruptionLevel: String?

        enum CodingKeys: String, CodingKey {
            case alert, badge, sound
            case threadId = "thread-id"
            case interruptionLevel = "interruption-level"
        }
    }

    var aps: APS
    var rc: [String: String]?
    var appData: String?

    init(_ notification: PushNotification) {
        aps = APS(alert: notification.title.map { .titled(title: $0, body: notification.body) } ?? .body(notification.body),
                  badge: notification.badge, sound: notification.sound, threadId: notification.threadId,
                  interruptionLevel: notification.interruptionLevel)
        rc = notification.rc.isEmpty ? nil : notification.rc
        appData = notification.appData
    }

    func encoded() throws -> Data { try makeEncoder().encode(self) }
}

/// FCM HTTP v1's `messages:send` body. `data` values must be strings: `rc` goes as its JSON text.
struct FCMMessageBody: Encodable {
    struct Notification: Encodable {
        var title: String?
        var body: String
        var image: String?
    }

    struct AndroidNotification: Encodable {
        var channel_id: String?
    }

    struct Android: Encodable {
        var collapse_key: String?
        var ttl: String?
        var notification: AndroidNotification?
    }

    struct Message: Encodable {
        var token: String
        var notification: Notification
        var data: [String: String]?
        var android: Android?
    }

    var message: Message

    init(_ notification: PushNotification, token: String) throws {
        var data: [String: String] = [:]
        if !notification.rc.isEmpty {
            data["rc"] = String(decoding: try makeEncoder(sorted: true).encode(notification.rc), as: UTF8.self)
        }
        if let appData = notification.appData { data["appData"] = appData }
        let android = Android(collapse_key: notification.fcmCollapseKey,
                              ttl: notification.timeToLiveSeconds.map { "\(max(0, $0))s" },
                              notification: notification.fcmChannelId.map { AndroidNotification(channel_id: $0) })
        let hasAndroid = android.collapse_key != nil || android.ttl != nil || android.notification != nil
        message = Message(token: token,
                          notification: Notification(title: notification.title, body: notification.body, image: notification.fcmImageURL),
                          data: data.isEmpty ? nil : data,
                          android: hasAndroid ? android : nil)
    }

    func encoded() throws -> Data { try makeEncoder().encode(self) }
}

/// What a webhook relay gets: the notification as it is, with its id and the device's URL.
struct WebhookBody: Encodable {
    struct Notification: Encodable {
        var title: String?
        var body: String
        var badge: Int?
        var sound: String?
        var threadId: String?
        var collapseId: String?
        var interruptionLevel: String?
        var rc: [String: String]
        var appData: String?
    }

    var id: String
    var target: String
    var notification: Notification

    init(_ notification: PushNotification, url: String) {
        id = notification.id
        target = url
        self.notification = Notification(title: notification.title, body: notification.body, badge: notification.badge,
                                         sound: notification.sound, threadId: notification.threadId,
                                         collapseId: notification.collapseId, interruptionLevel: notification.interruptionLevel,
                                         rc: notification.rc, appData: notification.appData)
    }

    func encoded() throws -> Data { try makeEncoder(sorted: true).encode(self) }
}
