import NIOCore

/// The parts of HTTP/2 (RFC 9113) and HPACK (RFC 7541) the APNs client speaks itself: frame
/// headers, the frame types and flags it reads and writes, and header blocks written as literals
/// without indexing. Such a header block leaves the peer's dynamic table alone, so it depends on
/// no connection state: it can be written by whoever prepares a request, on any thread, before the
/// connection gives the request its stream.
package enum HTTP2Wire {
    package static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    package static let frameHeaderLength = 9
    /// SETTINGS_MAX_FRAME_SIZE's initial value: the largest frame either side may send before the
    /// peer allows more (this side never does).
    package static let defaultMaxFrameSize = 16_384
    package static let defaultWindow = 65_535
    package static let maxWindow = Int(Int32.max)

    package enum FrameType: UInt8 {
        case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6, goAway = 7,
             windowUpdate = 8, continuation = 9
    }

    package enum Flag {
        package static let endStream: UInt8 = 0x1
        package static let ack: UInt8 = 0x1
        package static let endHeaders: UInt8 = 0x4
        package static let padded: UInt8 = 0x8
        package static let priority: UInt8 = 0x20
    }

    package enum Setting: UInt16 {
        case headerTableSize = 1, enablePush = 2, maxConcurrentStreams = 3, initialWindowSize = 4, maxFrameSize = 5,
             maxHeaderListSize = 6
    }

    package enum ErrorCode: UInt32 {
        case noError = 0, protocolError = 1, internalError = 2, flowControlError = 3, settingsTimeout = 4, streamClosed = 5,
             frameSizeError = 6, refusedStream = 7, cancel = 8, compressionError = 9
    }

    /// Writes a frame header: 24-bit length, type, flags, 31-bit stream id.
    package static func writeFrameHeader(_ buffer: inout ByteBuffer, length: Int, type: FrameType, flags: UInt8, stream: UInt32) {
        buffer.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: length))
        buffer.writeInteger(type.rawValue)
        buffer.writeInteger(flags)
        buffer.writeInteger(stream & 0x7FFF_FFFF)
    }

    /// A frame header read off the front of `buffer` when the whole frame is there.
    package struct FrameHeader {
        package var length: Int
        package var type: UInt8
        package var flags: UInt8
        package var stream: UInt32
    }

    package static func peekFrameHeader(_ buffer: ByteBuffer) -> FrameHeader? {
        guard buffer.readableBytes >= frameHeaderLength,
              let high = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
              let low = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt16.self),
              let type = buffer.getInteger(at: buffer.readerIndex + 3, as: UInt8.self),
              let flags = buffer.getInteger(at: buffer.readerIndex + 4, as: UInt8.self),
              let stream = buffer.getInteger(at: buffer.readerIndex + 5, as: UInt32.self) else { return nil }
        return FrameHeader(length: Int(high) << 16 | Int(low), type: type, flags: flags, stream: stream & 0x7FFF_FFFF)
    }

    package static func writeSettings(_ buffer: inout ByteBuffer, _ settings: [(Setting, UInt32)]) {
        writeFrameHeader(&buffer, length: settings.count * 6, type: .settings, flags: 0, stream: 0)
        for (setting, value) in settings {
            buffer.writeInteger(setting.rawValue)
            buffer.writeInteger(value)
        }
    }

    package static func writeWindowUpdate(_ buffer: inout ByteBuffer, stream: UInt32, increment: Int) {
        writeFrameHeader(&buffer, length: 4, type: .windowUpdate, flags: 0, stream: stream)
        buffer.writeInteger(UInt32(increment) & 0x7FFF_FFFF)
    }

    package static func writeRstStream(_ buffer: inout ByteBuffer, stream: UInt32, code: ErrorCode) {
        writeFrameHeader(&buffer, length: 4, type: .rstStream, flags: 0, stream: stream)
        buffer.writeInteger(code.rawValue)
    }

    package static func writeGoAway(_ buffer: inout ByteBuffer, lastStream: UInt32, code: ErrorCode) {
        writeFrameHeader(&buffer, length: 8, type: .goAway, flags: 0, stream: 0)
        buffer.writeInteger(lastStream & 0x7FFF_FFFF)
        buffer.writeInteger(code.rawValue)
    }
}

/// A request's header block as HPACK literals without indexing (no Huffman coding): static-table
/// entries where the whole field is in the table (`:method POST`, `:scheme https`), a static name
/// where the name is, the name spelled out otherwise.
package struct HPACKLiteralBlock {
    package private(set) var bytes: ByteBuffer

    package init(allocator: ByteBufferAllocator = ByteBufferAllocator(), capacity: Int = 512) {
        bytes = allocator.buffer(capacity: capacity)
    }

    /// Static table indices (RFC 7541 Appendix A) of the names and fields used here.
    package enum Static {
        package static let authority = 1
        package static let methodPost = 3
        package static let path = 4
        package static let schemeHTTPS = 7
        package static let authorization = 23
        package static let contentLength = 28
        package static let contentType = 31
    }

    /// A field the static table holds whole.
    package mutating func indexed(_ index: Int) {
        writeInteger(index, prefixBits: 7, marker: 0x80)
    }

    /// A literal without indexing whose name is a static table entry's.
    package mutating func literal(nameIndex: Int, value: String) {
        writeInteger(nameIndex, prefixBits: 4, marker: 0x00)
        writeString(value)
    }

    /// A literal without indexing with its name spelled out (lowercase, as HTTP/2 requires).
    package mutating func literal(name: StaticString, value: String) {
        bytes.writeInteger(UInt8(0))
        writeInteger(name.utf8CodeUnitCount, prefixBits: 7, marker: 0x00)
        name.withUTF8Buffer { _ = bytes.writeBytes($0) }
        writeString(value)
    }

    /// A literal without indexing, its name spelled out and its value given as bytes.
    package mutating func literal(name: StaticString, bytes value: [UInt8]) {
        bytes.writeInteger(UInt8(0))
        writeInteger(name.utf8CodeUnitCount, prefixBits: 7, marker: 0x00)
        name.withUTF8Buffer { _ = bytes.writeBytes($0) }
        writeInteger(value.count, prefixBits: 7, marker: 0x00)
        bytes.writeBytes(value)
    }

    /// Fields written before (another block's bytes).
    package mutating func append(_ fields: ByteBuffer) {
        var fields = fields
        bytes.writeBuffer(&fields)
    }

    private mutating func writeString(_ value: String) {
        writeInteger(value.utf8.count, prefixBits: 7, marker: 0x00)
        bytes.writeString(value)
    }

    /// An HPACK integer with an N-bit prefix (RFC 7541 §5.1), the prefix byte's other bits `marker`.
    private mutating func writeInteger(_ value: Int, prefixBits: Int, marker: UInt8) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            bytes.writeInteger(marker | UInt8(value))
            return
        }
        bytes.writeInteger(marker | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            bytes.writeInteger(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.writeInteger(UInt8(rest))
    }
}
