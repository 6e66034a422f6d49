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

    func encodedBytes() -> [UInt8] { APNsPayloadTemplate(self).payload(badge: aps.badge, recipient: rc?["rId"]) }

    /// The document through Foundation's encoder, for comparison in tests.
    func encodedByFoundation() throws -> Data { try makeEncoder().encode(self) }
}

/// The APNs payload without its badge and `rc.rId`, written once for the recipients of one message
/// (they differ in nothing else): `payload(badge:recipient:)` copies it around the two.
struct APNsPayloadTemplate {
    /// How `rId` goes in at `recipientAt`: as a new `rc` object (the payload has no other `rc`
    /// field), or within `rc` first (before the others) or after an entry.
    private enum RecipientSlot {
        case newObject, first, afterEntry
    }

    private let bytes: [UInt8]
    /// Right after the alert, in `aps`.
    private let badgeAt: Int
    private let recipientAt: Int
    private let recipientSlot: RecipientSlot

    /// `payload`'s badge and `rc["rId"]` are left out.
    init(_ payload: APNsPayload) {
        var json = JSONText()
        json.open()
        json.key("aps")
        json.open()
        json.key("alert")
        switch payload.aps.alert {
        case .body(let body):
            json.string(body)
        case .titled(let title, let body):
            json.open()
            json.field("title", title)
            json.field("body", body)
            json.close()
        }
        badgeAt = json.bytes.count
        if let sound = payload.aps.sound { json.field("sound", sound) }
        if let threadId = payload.aps.threadId { json.field("thread-id", threadId) }
        if let level = payload.aps.interruptionLevel { json.field("interruption-level", level) }
        json.close()
        let entries = (payload.rc ?? [:]).filter { $0.key != "rId" }.sorted { $0.key < $1.key }
        if entries.isEmpty {
            (recipientSlot, recipientAt) = (.newObject, json.bytes.count)
        } else {
            json.key("rc")
            json.open()
            var slot = (RecipientSlot.first, json.bytes.count)
            for (key, value) in entries {
                json.field(key, value)
                if key < "rId" { slot = (.afterEntry, json.bytes.count) }
            }
            json.close()
            (recipientSlot, recipientAt) = slot
        }
        if let appData = payload.appData { json.field("appData", appData) }
        json.close()
        bytes = json.bytes
    }

    /// The payload with this badge and `rc.rId` (each left out when nil).
    func payload(badge: Int?, recipient: String?) -> [UInt8] {
        var json = JSONText(capacity: bytes.count + 40 + (recipient?.utf8.count ?? 0))
        json.raw(bytes[..<badgeAt])
        if let badge {
            json.raw(#","badge":"#.utf8)
            json.raw(String(badge).utf8)
        }
        json.raw(bytes[badgeAt..<recipientAt])
        if let recipient {
            switch recipientSlot {
            case .newObject:
                json.raw(#","rc":{"rId":"#.utf8)
                json.string(recipient)
                json.raw(CollectionOfOne(UInt8(ascii: "}")))
            case .first:
                json.raw(#""rId":"#.utf8)
                json.string(recipient)
                json.raw(CollectionOfOne(UInt8(ascii: ",")))
            case .afterEntry:
                json.raw(#","rId":"#.utf8)
                json.string(recipient)
            }
        }
        json.raw(bytes[recipientAt...])
        return json.bytes
    }
}

/// A JSON writer for flat documents of strings, numbers and objects; strings escaped as RFC 8259
/// requires (quote, backslash, control characters), slashes and non-ASCII left as they are.
struct JSONText {
    var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    /// Bytes that are JSON already.
    mutating func raw(_ json: some Sequence<UInt8>) { bytes.append(contentsOf: json) }

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
