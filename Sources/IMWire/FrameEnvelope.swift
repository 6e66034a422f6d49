import Foundation
import SwiftProtobuf

/// The `Frame` envelope written and read by hand: every request, reply and push passes through it,
/// and SwiftProtobuf's generic encoder and decoder cost more for these five fields than the
/// work they carry (a PING's decode and its PONG's encode were 8% of the server's CPU holding
/// 19,000 idle connections). The bytes are exactly SwiftProtobuf's: fields in number order, proto3
/// defaults left out, no unknown fields (`FrameEnvelopeTests` compares the two).
public enum FrameEnvelope {
    /// The bytes `Frame { id, op, payload, code, error_message }` takes.
    public static func size(id: UInt32, op: Im_Op, payloadCount: Int, code: Int32 = 0, errorMessageCount: Int = 0) -> Int {
        var size = 0
        if id != 0 { size += 1 + varintSize(UInt64(id)) }
        if op.rawValue != 0 { size += 1 + varintSize(UInt64(bitPattern: Int64(op.rawValue))) }
        if payloadCount > 0 { size += 1 + varintSize(UInt64(payloadCount)) + payloadCount }
        if code != 0 { size += 1 + varintSize(UInt64(bitPattern: Int64(code))) }
        if errorMessageCount > 0 { size += 1 + varintSize(UInt64(errorMessageCount)) + errorMessageCount }
        return size
    }

    /// Writes the envelope at the start of `out`, which holds at least `size(...)` bytes; returns
    /// the bytes written.
    @discardableResult
    public static func write(id: UInt32, op: Im_Op, payload: UnsafeRawBufferPointer, code: Int32 = 0,
                             errorMessage: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
                             into out: UnsafeMutableRawBufferPointer) -> Int {
        var at = 0
        func byte(_ value: UInt8) {
            out[at] = value
            at += 1
        }
        func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                byte(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            byte(UInt8(value))
        }
        func bytes(_ source: UnsafeRawBufferPointer) {
            guard let base = source.baseAddress, source.count > 0 else { return }
            (out.baseAddress! + at).copyMemory(from: base, byteCount: source.count)
            at += source.count
        }
        if id != 0 {
            byte(0x08)
            varint(UInt64(id))
        }
        if op.rawValue != 0 {
            byte(0x10)
            varint(UInt64(bitPattern: Int64(op.rawValue)))
        }
        if payload.count > 0 {
            byte(0x1A)
            varint(UInt64(payload.count))
            bytes(payload)
        }
        if code != 0 {
            byte(0x20)
            varint(UInt64(bitPattern: Int64(code)))
        }
        if errorMessage.count > 0 {
            byte(0x2A)
            varint(UInt64(errorMessage.count))
            bytes(errorMessage)
        }
        return at
    }

    /// The envelope as an array.
    public static func bytes(id: UInt32, op: Im_Op, payload: some ContiguousBytes, code: Int32 = 0, errorMessage: String = "") -> [UInt8] {
        var errorMessage = errorMessage
        return payload.withUnsafeBytes { payload in
            errorMessage.withUTF8 { message in
                let count = size(id: id, op: op, payloadCount: payload.count, code: code, errorMessageCount: message.count)
                return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                    initialized = write(id: id, op: op, payload: payload, code: code, errorMessage: UnsafeRawBufferPointer(message),
                                        into: UnsafeMutableRawBufferPointer(buffer))
                }
            }
        }
    }

    /// Reads an envelope of the fields clients send (id, op, payload, code, error_message, each a
    /// valid encoding), or nil for anything else (unknown or repeated-as-other-type fields, bad
    /// lengths, a truncated varint, an error message that is not UTF-8): the caller then decodes
    /// with SwiftProtobuf, which accepts or refuses as the protocol says.
    public static func read(_ bytes: UnsafeRawBufferPointer) -> Im_Frame? {
        var frame = Im_Frame()
        var at = 0
        let end = bytes.count
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while at < end, shift < 64 {
                let byte = bytes[at]
                at += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }
        func lengthDelimited() -> Range<Int>? {
            guard let length = varint(), length <= UInt64(end - at) else { return nil }
            let range = at..<(at + Int(length))
            at = range.upperBound
            return range
        }
        while at < end {
            guard let tag = varint() else { return nil }
            switch tag {
            case 0x08:
                guard let value = varint() else { return nil }
                frame.id = UInt32(truncatingIfNeeded: value)
            case 0x10:
                guard let value = varint() else { return nil }
                frame.op = Im_Op(rawValue: Int(Int32(truncatingIfNeeded: value))) ?? .UNRECOGNIZED(Int(Int32(truncatingIfNeeded: value)))
            case 0x1A:
                guard let range = lengthDelimited() else { return nil }
                frame.payload = range.isEmpty ? Data() : Data(UnsafeRawBufferPointer(rebasing: bytes[range]))
            case 0x20:
                guard let value = varint() else { return nil }
                frame.code = Int32(truncatingIfNeeded: value)
            case 0x2A:
                guard let range = lengthDelimited() else { return nil }
                guard let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) else { return nil }
                frame.errorMessage = text
            default:
                return nil
            }
        }
        return frame
    }

    private static func varintSize(_ value: UInt64) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }
}
