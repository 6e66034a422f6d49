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

    /// Written by hand: every push to an Apple device goes through here, and Foundation's encoder
    /// costs more than the rest of a send. The same document `Encodable` describes (the tests
    /// compare them).
    func encoded() throws -> Data { Data(encodedBytes()) }

    func encodedBytes() -> [UInt8] {
        var json = JSONText()
        json.open()
        json.key("aps")
        json.open()
        json.key("alert")
        switch aps.alert {
        case .body(let body):
            json.string(body)
        case .titled(let title, let body):
            json.open()
            json.field("title", title)
            json.field("body", body)
            json.close()
        }
        if let badge = aps.badge { json.field("badge", badge) }
        if let sound = aps.sound { json.field("sound", sound) }
        if let threadId = aps.threadId { json.field("thread-id", threadId) }
        if let level = aps.interruptionLevel { json.field("interruption-level", level) }
        json.close()
        if let rc {
            json.key("rc")
            json.open()
            for (key, value) in rc.sorted(by: { $0.key < $1.key }) { json.field(key, value) }
            json.close()
        }
        if let appData { json.field("appData", appData) }
        json.close()
        return json.bytes
    }

    /// The document through Foundation's encoder, for comparison in tests.
    func encodedByFoundation() throws -> Data { try makeEncoder().encode(self) }
}

/// A JSON writer for flat documents of strings, numbers and objects; strings escaped as RFC 8259
/// requires (quote, backslash, control characters), slashes and non-ASCII left as they are.
struct JSONText {
    var bytes: [UInt8] = []
    private var needsComma = false

    init() { bytes.reserveCapacity(256) }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func key(_ name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func field(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    mutating func field(_ name: String, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            // Most texts need no escape: they go in as one copy.
            if !utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                              hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }
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
