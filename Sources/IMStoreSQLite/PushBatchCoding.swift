import Foundation
import IMCore
import IMPush
import IMStore

/// How one row of push_batches keeps its records: `records`, what each decision said (written
/// once), and `states`, where each stands (rewritten by claims, attempts and the sweep).
///
/// records (version 2): a version byte, the count (u32), the offset of the shared parts (u32), each
/// record's offset (u32, from the blob's start), then per record its user id, device id, kind (""
/// for a suppression), token and environment as length-prefixed UTF-8, its notification, and its
/// creation time; then the shared parts, a count and each length-prefixed. A notification is the
/// number of the shared part it begins with (0: none) and the rest of its bytes, length-prefixed:
/// the part of a message's notifications that all its recipients share
/// (`PushNotification.sharedPrefixLength`) is kept once, not once per device. Version 1 (still
/// read) has no shared parts and each notification whole. The offsets let a claim or a due read
/// decode only the records it needs.
///
/// states: a version byte, the count (u32), then per record its status (a byte; `swept` for one
/// the retention sweep removed), attempts, next attempt time, update time and code.
enum PushBatchCoding {
    static let version: UInt8 = 2
    /// The records' first format: every notification whole.
    static let singleVersion: UInt8 = 1
    static let statesVersion: UInt8 = 1
    /// A status byte no `PushStatus` has: the record was swept (it no longer exists).
    static let swept: UInt8 = 255
    /// Records one batch holds at most: a record's id is its batch's id × 2^16 + its index.
    static let maxRecords = 65_535
    static let indexBits: Int64 = 16

    static func recordId(batch: Int64, index: Int) -> Int64 { batch << indexBits | Int64(index) }
    static func batch(ofRecord id: Int64) -> Int64 { id >> indexBits }
    static func index(ofRecord id: Int64) -> Int { Int(id & ((1 << indexBits) - 1)) }

    /// One record's state.
    struct State: Equatable {
        var status: UInt8
        var attempts: Int
        var nextAttemptAt: Int64
        var updatedAt: Int64
        var code: String

        init(_ record: PushRecord) {
            status = UInt8(record.status.rawValue)
            attempts = record.attempts
            nextAttemptAt = record.nextAttemptAt
            updatedAt = record.updatedAt
            code = record.code
        }

        init(status: UInt8, attempts: Int, nextAttemptAt: Int64, updatedAt: Int64, code: String) {
            self.status = status
            self.attempts = attempts
            self.nextAttemptAt = nextAttemptAt
            self.updatedAt = updatedAt
            self.code = code
        }

        var isPending: Bool { status == UInt8(PushStatus.pending.rawValue) }
        var exists: Bool { status != PushBatchCoding.swept }
    }

    // MARK: writing

    static func encodeRecords(_ records: some Collection<PushRecord>) -> Data {
        var writer = ByteWriter()
        writer.bytes.reserveCapacity(9 + records.count * 4 + records.reduce(0) { $0 + 48 + $1.token.utf8.count + $1.notification.count / 4 })
        writer.bytes.append(version)
        writer.uint32(UInt32(records.count))
        let sharedOffset = writer.bytes.count
        writer.uint32(0)
        let offsets = writer.bytes.count
        writer.bytes.append(contentsOf: repeatElement(0, count: records.count * 4))
        var shared: [Data] = []
        var sharedIndex: [Data: Int] = [:]
        for (index, record) in records.enumerated() {
            writer.setUInt32(UInt32(writer.bytes.count), at: offsets + index * 4)
            writer.string(record.userId)
            writer.string(record.deviceId)
            writer.string(record.kind?.rawValue ?? "")
            writer.string(record.token)
            writer.string(record.environment)
            let notification = record.notification
            if let length = PushNotification.sharedPrefixLength(of: notification) {
                let prefix = notification.prefix(length)
                // Records of one message come together: the last part is nearly always the one.
                let number: Int
                if let last = shared.last, last == prefix {
                    number = shared.count
                } else if let known = sharedIndex[prefix] {
                    number = known
                } else {
                    shared.append(prefix)
                    number = shared.count
                    sharedIndex[prefix] = number
                }
                writer.varint(UInt64(number))
                writer.data(notification.dropFirst(length))
            } else {
                writer.varint(0)
                writer.data(notification)
            }
            writer.signed(record.createdAt)
        }
        writer.setUInt32(UInt32(writer.bytes.count), at: sharedOffset)
        writer.varint(UInt64(shared.count))
        for part in shared { writer.data(part) }
        return Data(writer.bytes)
    }

    static func encodeStates(_ states: [State]) -> Data {
        var writer = ByteWriter()
        writer.bytes.reserveCapacity(5 + states.count * 16)
        writer.bytes.append(statesVersion)
        writer.uint32(UInt32(states.count))
        for state in states {
            writer.bytes.append(state.status)
            writer.varint(UInt64(max(0, state.attempts)))
            writer.signed(state.nextAttemptAt)
            writer.signed(state.updatedAt)
            writer.string(state.code)
        }
        return Data(writer.bytes)
    }

    /// The batch's next_attempt_at: its pending records' earliest, nil when none is pending.
    static func nextAttempt(_ states: [State]) -> Int64? {
        states.lazy.filter(\.isPending).map(\.nextAttemptAt).min()
    }

    // MARK: reading

    static func decodeStates(_ data: Data) throws -> [State] {
        try data.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            guard try reader.byte() == statesVersion else { throw PushBatchCodingError() }
            let count = Int(try reader.uint32())
            guard count <= maxRecords else { throw PushBatchCodingError() }
            var states: [State] = []
            states.reserveCapacity(count)
            for _ in 0..<count {
                states.append(State(status: try reader.byte(), attempts: Int(clamping: try reader.varint()),
                                    nextAttemptAt: try reader.signed(), updatedAt: try reader.signed(), code: try reader.string()))
            }
            return states
        }
    }

    /// The records' fields, read through their offsets.
    struct Records {
        let data: Data
        let count: Int
        let version: UInt8
        /// Where the records' offsets begin.
        private let offsets: Int
        /// The shared parts (version 2).
        private let shared: [Data]

        init(_ data: Data) throws {
            self.data = data
            (version, count, offsets, shared) = try data.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                let version = try reader.byte()
                guard version == PushBatchCoding.version || version == singleVersion else { throw PushBatchCodingError() }
                let count = Int(try reader.uint32())
                var shared: [Data] = []
                if version == PushBatchCoding.version {
                    var parts = ByteReader(raw, at: Int(try reader.uint32()))
                    let partCount = try parts.varint()
                    guard partCount <= UInt64(raw.count) else { throw PushBatchCodingError() }
                    shared.reserveCapacity(Int(partCount))
                    for _ in 0..<partCount { shared.append(try parts.data()) }
                }
                guard count <= maxRecords, raw.count >= reader.offset + count * 4 else { throw PushBatchCodingError() }
                return (version, count, reader.offset, shared)
            }
        }

        private func reader(at index: Int, _ raw: UnsafeRawBufferPointer) throws -> ByteReader {
            guard index >= 0, index < count else { throw PushBatchCodingError() }
            var header = ByteReader(raw, at: offsets + index * 4)
            return ByteReader(raw, at: Int(try header.uint32()))
        }

        private func notification(_ reader: inout ByteReader) throws -> Data {
            guard version == PushBatchCoding.version else { return try reader.data() }
            let number = try reader.varint()
            guard number > 0 else { return try reader.data() }
            guard number <= UInt64(shared.count) else { throw PushBatchCodingError() }
            return shared[Int(number) - 1] + (try reader.data())
        }

        /// The user of record `index`.
        func userId(_ index: Int) throws -> String {
            try data.withUnsafeBytes { raw in
                var reader = try reader(at: index, raw)
                return try reader.string()
            }
        }

        /// Record `index` whole, with its state and id.
        func record(_ index: Int, batch: Int64, appId: Int64, messageUid: String, state: State) throws -> PushRecord {
            try data.withUnsafeBytes { raw in
                var reader = try reader(at: index, raw)
                let userId = try reader.string(), deviceId = try reader.string(), kind = try reader.string()
                let token = try reader.string(), environment = try reader.string()
                let notification = try notification(&reader)
                let createdAt = try reader.signed()
                return PushRecord(id: PushBatchCoding.recordId(batch: batch, index: index), appId: appId, messageUid: messageUid,
                                  userId: userId, deviceId: deviceId, kind: kind.isEmpty ? nil : PushTokenKind(rawValue: kind),
                                  token: token, environment: environment, notification: notification,
                                  status: PushStatus(rawValue: Int(state.status)) ?? .failed, code: state.code,
                                  attempts: state.attempts, nextAttemptAt: state.nextAttemptAt, createdAt: createdAt,
                                  updatedAt: state.updatedAt)
            }
        }

        /// The (user, device) key and the creation time of record `index`.
        func key(_ index: Int) throws -> (key: String, createdAt: Int64) {
            try data.withUnsafeBytes { raw in
                var reader = try reader(at: index, raw)
                let userId = try reader.string(), deviceId = try reader.string()
                for _ in 0..<3 { try reader.skipLengthPrefixed() }
                if version == PushBatchCoding.version { _ = try reader.varint() }
                try reader.skipLengthPrefixed()
                return (PushBatchCoding.key(userId: userId, deviceId: deviceId), try reader.signed())
            }
        }
    }

    /// A decision's identity within its message: one record per (user, device).
    static func key(userId: String, deviceId: String) -> String {
        var key = userId
        key.reserveCapacity(userId.utf8.count + deviceId.utf8.count + 1)
        key.append("\u{0}")
        key.append(deviceId)
        return key
    }
}

struct PushBatchCodingError: Error, CustomStringConvertible {
    var description: String { "a push_batches row is not in the format this build reads" }
}

private struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func uint32(_ value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func setUInt32(_ value: UInt32, at offset: Int) {
        bytes[offset] = UInt8(truncatingIfNeeded: value >> 24)
        bytes[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
        bytes[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
        bytes[offset + 3] = UInt8(truncatingIfNeeded: value)
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// Zigzag: small negative numbers stay short.
    mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func data(_ value: Data) {
        varint(UInt64(value.count))
        // Through its buffer: appending a Data as a sequence copies it a byte at a time.
        value.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }
}

private struct ByteReader {
    let raw: UnsafeRawBufferPointer
    var offset: Int

    init(_ raw: UnsafeRawBufferPointer, at offset: Int = 0) {
        self.raw = raw
        self.offset = offset
    }

    mutating func byte() throws -> UInt8 {
        guard offset < raw.count else { throw PushBatchCodingError() }
        defer { offset += 1 }
        return raw[offset]
    }

    mutating func uint32() throws -> UInt32 {
        guard offset + 4 <= raw.count else { throw PushBatchCodingError() }
        defer { offset += 4 }
        return UInt32(raw[offset]) << 24 | UInt32(raw[offset + 1]) << 16 | UInt32(raw[offset + 2]) << 8 | UInt32(raw[offset + 3])
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte()
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
            guard shift < 64 else { throw PushBatchCodingError() }
        }
    }

    mutating func signed() throws -> Int64 {
        let value = try varint()
        return Int64(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
    }

    private mutating func length() throws -> Int {
        let length = try varint()
        guard length <= UInt64(raw.count - offset) else { throw PushBatchCodingError() }
        return Int(length)
    }

    mutating func string() throws -> String {
        let length = try length()
        defer { offset += length }
        return String(decoding: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length]), as: UTF8.self)
    }

    mutating func data() throws -> Data {
        let length = try length()
        defer { offset += length }
        return Data(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length]))
    }

    mutating func skipLengthPrefixed() throws {
        offset += try length()
    }
}
