import Foundation
import IMCore
import IMStore

/// How one row of push_batches keeps its records: `records`, what each decision said (written
/// once), and `states`, where each stands (rewritten by claims, attempts and the sweep).
///
/// records: a version byte, the count (u32), each record's offset (u32, from the blob's start), then
/// per record its user id, device id, kind ("" for a suppression), token and environment as
/// length-prefixed UTF-8, the notification as length-prefixed bytes, and its creation time.
/// The offsets let a claim or a due read decode only the records it needs.
///
/// states: a version byte, the count (u32), then per record its status (a byte; `swept` for one
/// the retention sweep removed), attempts, next attempt time, update time and code.
enum PushBatchCoding {
    static let version: UInt8 = 1
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
        writer.bytes.reserveCapacity(5 + records.count * 4 + records.reduce(0) { $0 + 48 + $1.token.utf8.count + $1.notification.count })
        writer.bytes.append(version)
        writer.uint32(UInt32(records.count))
        let offsets = writer.bytes.count
        writer.bytes.append(contentsOf: repeatElement(0, count: records.count * 4))
        for (index, record) in records.enumerated() {
            writer.setUInt32(UInt32(writer.bytes.count), at: offsets + index * 4)
            writer.string(record.userId)
            writer.string(record.deviceId)
            writer.string(record.kind?.rawValue ?? "")
            writer.string(record.token)
            writer.string(record.environment)
            writer.data(record.notification)
            writer.signed(record.createdAt)
        }
        return Data(writer.bytes)
    }

    static func encodeStates(_ states: [State]) -> Data {
        var writer = ByteWriter()
        writer.bytes.reserveCapacity(5 + states.count * 16)
        writer.bytes.append(version)
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
            guard try reader.byte() == version else { throw PushBatchCodingError() }
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

        init(_ data: Data) throws {
            self.data = data
            count = try data.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                guard try reader.byte() == version else { throw PushBatchCodingError() }
                let count = Int(try reader.uint32())
                guard count <= maxRecords, raw.count >= 5 + count * 4 else { throw PushBatchCodingError() }
                return count
            }
        }

        private func reader(at index: Int, _ raw: UnsafeRawBufferPointer) throws -> ByteReader {
            guard index >= 0, index < count else { throw PushBatchCodingError() }
            var header = ByteReader(raw, at: 5 + index * 4)
            return ByteReader(raw, at: Int(try header.uint32()))
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
                let notification = try reader.data()
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
        bytes.append(contentsOf: value)
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
