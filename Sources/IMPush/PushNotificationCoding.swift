import Foundation

/// The stored form of a notification: one is written for every decided push and read back for
/// every send, so it is a compact binary record (a version byte, then each field length-prefixed)
/// rather than JSON, whose Foundation coders cost more than the rest of a decision. A JSON
/// document (a record written by hand, or by an earlier build) is read too.
extension PushNotification {
    static let storedVersion: UInt8 = 1
    /// The form in two parts: what the recipients of a message share, then the recipient's own.
    static let partedVersion: UInt8 = 2

    /// The notification as a push record keeps it: a version byte (2), the length of what every
    /// recipient of the message shares and that part (the notification without its id, badge and
    /// `rc.rId`, in the single form of version 1), then the id, the badge and `rc.rId`. A store
    /// keeps the shared part of a message's thousands of records once (`sharedPrefixLength`).
    public var stored: Data {
        var shared = self
        shared.id = ""
        shared.badge = nil
        let recipient = shared.rc.removeValue(forKey: "rId")
        return Self.stored(sharedPart: shared.singleForm, id: id, badge: badge, recipient: recipient)
    }

    /// What `stored` keeps as the shared part of a notification whose id is empty, whose badge is
    /// nil and whose `rc` has no `rId` (the part every recipient of a message has alike).
    public var storedSharedPart: [UInt8] { singleForm }

    /// `stored` of a notification from its shared part (`storedSharedPart`) and its own fields,
    /// for a decision that writes the shared part once for many recipients.
    public static func stored(sharedPart: [UInt8], id: String, badge: Int?, recipient: String?) -> Data {
        var writer = StoredWriter()
        writer.bytes.reserveCapacity(sharedPart.count + 24 + id.utf8.count + (recipient?.utf8.count ?? 0))
        writer.bytes.append(partedVersion)
        writer.varint(UInt64(sharedPart.count))
        writer.bytes.append(contentsOf: sharedPart)
        writer.string(id)
        writer.optional(badge)
        writer.optional(recipient)
        return Data(writer.bytes)
    }

    /// How many leading bytes of a stored notification the recipients of its message share (the
    /// version, the shared part's length and that part); nil for a form without such a part.
    public static func sharedPrefixLength(of stored: some Collection<UInt8>) -> Int? {
        var index = stored.startIndex
        guard index != stored.endIndex, stored[index] == partedVersion else { return nil }
        index = stored.index(after: index)
        var length: UInt64 = 0
        var shift: UInt64 = 0
        var header = 1
        while index != stored.endIndex, shift < 64 {
            let byte = stored[index]
            index = stored.index(after: index)
            header += 1
            length |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 {
                guard length <= UInt64(stored.count - header) else { return nil }
                return header + Int(length)
            }
            shift += 7
        }
        return nil
    }

    /// Version 1: every field in one run.
    private var singleForm: [UInt8] {
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
        return writer.bytes
    }

    /// Reads a stored notification (`stored`, or JSON); nil when it is neither.
    public init?(stored data: Data) {
        guard let first = data.first else { return nil }
        if first == UInt8(ascii: "{") {
            guard let decoded = try? JSONDecoder().decode(PushNotification.self, from: data) else { return nil }
            self = decoded
            return
        }
        if first == Self.partedVersion {
            guard let parted = data.withUnsafeBytes({ raw -> PushNotification? in
                var reader = StoredReader(bytes: raw, at: 1)
                guard let length = reader.varint(), length <= UInt64(raw.count - reader.at) else { return nil }
                let start = reader.at
                reader.at += Int(length)
                guard var shared = Self.singleForm(UnsafeRawBufferPointer(rebasing: raw[start..<reader.at])),
                      let id = reader.string(), let badge = reader.optionalInt(), let recipient = reader.optionalString(),
                      reader.atEnd else { return nil }
                shared.id = id
                shared.badge = badge
                if let recipient { shared.rc["rId"] = recipient }
                return shared
            }) else { return nil }
            self = parted
            return
        }
        guard first == Self.storedVersion, let decoded = data.withUnsafeBytes({ Self.singleForm($0) }) else { return nil }
        self = decoded
    }

    /// Reads version 1.
    fileprivate static func singleForm(_ raw: UnsafeRawBufferPointer) -> PushNotification? {
        guard raw.first == storedVersion else { return nil }
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
}

/// Reads stored notifications, decoding the part that recipients of one message share once: a
/// batch of a group message's pushes is thousands of records with one such part.
public struct StoredNotificationReader {
    /// Each shared part met, decoded, with its number (in order of first reading).
    private var shared: [Data: (part: Int, notification: PushNotification)] = [:]
    /// The part read last: the records of a message come together, so comparing with it spares
    /// hashing the part for nearly every record.
    private var last: (key: Data, base: (part: Int, notification: PushNotification))?

    public init() {}

    /// The notification whole, its `rc["rId"]` included.
    public mutating func read(_ stored: Data) -> PushNotification? {
        readApart(stored).map { $0.notification.with(recipient: $0.recipient) }
    }

    /// The notification, the number of its shared part and its `rc["rId"]`: notifications this
    /// reader gave with one number differ only in `id`, `badge` and `rc["rId"]` (nil: a record
    /// without a shared part). A shared part's record gives its `rId` apart (`recipient`), its
    /// notification's `rc` being the shared part's, not copied to add it (`PushSend.recipient`); a
    /// record without a shared part gives its notification whole and no `recipient`.
    public mutating func readApart(_ stored: Data) -> (notification: PushNotification, part: Int?, recipient: String?)? {
        guard let length = PushNotification.sharedPrefixLength(of: stored) else {
            return PushNotification(stored: stored).map { ($0, nil, nil) }
        }
        let key = stored.prefix(length)
        let base: (part: Int, notification: PushNotification)
        if let last, last.key == key {
            base = last.base
        } else if let known = shared[key] {
            base = known
            last = (Data(key), known)
        } else {
            // The shared part as `init(stored:)` reads it: the single form after the version and its length.
            guard let decoded = key.withUnsafeBytes({ raw -> PushNotification? in
                var reader = StoredReader(bytes: raw, at: 1)
                guard reader.varint() != nil else { return nil }
                return PushNotification.singleForm(UnsafeRawBufferPointer(rebasing: raw[reader.at...]))
            }) else { return nil }
            base = (shared.count, decoded)
            shared[Data(key)] = base
            last = (Data(key), base)
        }
        let own: (id: String, badge: Int?, recipient: String?)? = stored.withUnsafeBytes { raw in
            var reader = StoredReader(bytes: raw, at: length)
            guard let id = reader.string(), let badge = reader.optionalInt(), let recipient = reader.optionalString(),
                  reader.atEnd else { return nil }
            return (id, badge, recipient)
        }
        guard let own else { return nil }
        var notification = base.notification
        notification.id = own.id
        notification.badge = own.badge
        return (notification, base.part, own.recipient)
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
