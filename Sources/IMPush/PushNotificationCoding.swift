import Foundation

/// The stored form of a notification: one is written for every decided push and read back for
/// every send, so it is a compact binary record (a version byte, then each field length-prefixed)
/// rather than JSON, whose Foundation coders cost more than the rest of a decision. A JSON
/// document (a record written by hand, or by an earlier build) is read too.
extension PushNotification {
    static let storedVersion: UInt8 = 1

    /// The notification as `push_records.notification` keeps it.
    public var stored: Data {
        var writer = StoredWriter()
        writer.bytes.reserveCapacity(64 + id.utf8.count + body.utf8.count + (title?.utf8.count ?? 0) + rc.count * 24)
        writer.bytes.append(Self.storedVersion)
        writer.string(id)
        writer.optional(title)
        writer.string(body)
        writer.optional(badge)
        writer.optional(sound)
        writer.optional(threadId)
        writer.optional(collapseId)
        writer.optional(interruptionLevel)
        writer.varint(UInt64(rc.count))
        for (key, value) in rc.sorted(by: { $0.key < $1.key }) {
            writer.string(key)
            writer.string(value)
        }
        writer.optional(appData)
        writer.optional(fcmCollapseKey)
        writer.optional(fcmChannelId)
        writer.optional(fcmImageURL)
        writer.optional(timeToLiveSeconds)
        return Data(writer.bytes)
    }

    /// Reads a stored notification (`stored`, or JSON); nil when it is neither.
    public init?(stored data: Data) {
        guard let first = data.first else { return nil }
        if first == UInt8(ascii: "{") {
            guard let decoded = try? JSONDecoder().decode(PushNotification.self, from: data) else { return nil }
            self = decoded
            return
        }
        guard first == Self.storedVersion else { return nil }
        let decoded: PushNotification? = data.withUnsafeBytes { raw in
            var reader = StoredReader(bytes: raw, at: 1)
            guard let id = reader.string(), let title = reader.optionalString(), let body = reader.string(),
                  let badge = reader.optionalInt(), let sound = reader.optionalString(), let threadId = reader.optionalString(),
                  let collapseId = reader.optionalString(), let level = reader.optionalString(),
                  let count = reader.varint(), count <= UInt64(raw.count) else { return nil }
            var rc: [String: String] = [:]
            rc.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let key = reader.string(), let value = reader.string() else { return nil }
                rc[key] = value
            }
            guard let appData = reader.optionalString(), let collapseKey = reader.optionalString(),
                  let channel = reader.optionalString(), let image = reader.optionalString(),
                  let ttl = reader.optionalInt(), reader.atEnd else { return nil }
            return PushNotification(id: id, title: title, body: body, badge: badge, sound: sound, threadId: threadId,
                                    collapseId: collapseId, interruptionLevel: level, rc: rc, appData: appData,
                                    fcmCollapseKey: collapseKey, fcmChannelId: channel, fcmImageURL: image, timeToLiveSeconds: ttl)
        }
        guard let decoded else { return nil }
        self = decoded
    }
}

private struct StoredWriter {
    var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func optional(_ text: String?) {
        guard let text else { return bytes.append(0) }
        bytes.append(1)
        string(text)
    }

    mutating func optional(_ number: Int?) {
        guard let number else { return bytes.append(0) }
        bytes.append(1)
        varint(UInt64(bitPattern: Int64((number << 1) ^ (number >> 63))))
    }
}

/// Option-of-option results: nil is a malformed record, `.some(nil)` an absent field.
private struct StoredReader {
    let bytes: UnsafeRawBufferPointer
    var at: Int

    init(bytes: UnsafeRawBufferPointer, at: Int) {
        self.bytes = bytes
        self.at = at
    }

    var atEnd: Bool { at == bytes.count }

    mutating func byte() -> UInt8? {
        guard at < bytes.count else { return nil }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64 {
            guard let byte = byte() else { return nil }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    mutating func string() -> String? {
        guard let length = varint(), length <= UInt64(bytes.count - at) else { return nil }
        let start = at
        at += Int(length)
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
    }

    mutating func optionalString() -> String?? {
        switch byte() {
        case 0: return .some(nil)
        case 1: return string().map { .some($0) }
        default: return nil
        }
    }

    mutating func optionalInt() -> Int?? {
        switch byte() {
        case 0: return .some(nil)
        case 1:
            guard let raw = varint() else { return nil }
            let value = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
            return .some(Int(value))
        default: return nil
        }
    }
}
