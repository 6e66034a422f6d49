import NIOCore

/// The WebSocket framing of a benchmark connection (RFC 6455 §5), done in place: frames are cut out
/// of the bytes the socket delivered as slices of the same buffer, without a handler per step.
///
/// A 10,000-member chatroom is 50,000 push frames a second for the generator, which shares the box
/// with the server it measures; passing each through a frame decoder, an aggregator and a boxed
/// `WebSocketFrame` per handler cost it more than reading the socket did.
struct WebSocketFrameReader {
    enum Opcode: UInt8 {
        case continuation = 0x0, text = 0x1, binary = 0x2, close = 0x8, ping = 0x9, pong = 0xA
    }

    struct Message {
        var opcode: Opcode
        var payload: ByteBuffer
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    let maxMessageBytes: Int
    /// Bytes of an incomplete frame, kept for the next read.
    private var carried: ByteBuffer?
    /// A fragmented message so far (its opcode and the payloads of its frames).
    private var fragments: (opcode: Opcode, payload: ByteBuffer)?

    init(maxMessageBytes: Int = 4 * 1024 * 1024) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// The whole messages in what was read, in order (control frames among them as they come);
    /// what is left of an incomplete frame waits for the next read.
    mutating func read(_ bytes: ByteBuffer, _ each: (Message) throws -> Void) throws {
        var buffer: ByteBuffer
        let owned = carried != nil
        if var carried {
            self.carried = nil
            var bytes = bytes
            carried.writeBuffer(&bytes)
            buffer = carried
        } else {
            buffer = bytes
        }
        while let frame = try nextFrame(&buffer) {
            if let message = try assemble(frame) { try each(message) }
        }
        guard buffer.readableBytes > 0 else { return }
        if owned {
            // Already this reader's own buffer: the next read's bytes are appended to it, and what
            // was read is dropped once it is as large as what is left (amortised linear copying).
            if buffer.readerIndex >= buffer.readableBytes { buffer.discardReadBytes() }
            carried = buffer
        } else {
            // The incomplete frame's bytes are copied out, so the socket's buffer is not held.
            var rest = ByteBufferAllocator().buffer(capacity: max(buffer.readableBytes, 4096))
            rest.writeBuffer(&buffer)
            carried = rest
        }
    }

    /// One frame off the front of `buffer`, or nil (nothing consumed) when it is not all there.
    private func nextFrame(_ buffer: inout ByteBuffer) throws -> (fin: Bool, opcode: Opcode, payload: ByteBuffer)? {
        let start = buffer.readerIndex
        guard let first = buffer.getInteger(at: start, as: UInt8.self),
              let second = buffer.getInteger(at: start + 1, as: UInt8.self) else { return nil }
        guard first & 0x70 == 0 else { throw Malformed(description: "a frame with reserved bits set") }
        guard let opcode = Opcode(rawValue: first & 0x0F) else {
            throw Malformed(description: "a frame with the unknown opcode \(first & 0x0F)")
        }
        var headerBytes = 2
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let value = buffer.getInteger(at: start + 2, as: UInt16.self) else { return nil }
            length = Int(value)
            headerBytes += 2
        } else if length == 127 {
            guard let value = buffer.getInteger(at: start + 2, as: UInt64.self) else { return nil }
            guard value <= UInt64(maxMessageBytes) else { throw Malformed(description: "a frame of \(value) bytes") }
            length = Int(value)
            headerBytes += 8
        }
        guard length <= maxMessageBytes else { throw Malformed(description: "a frame of \(length) bytes") }
        let masked = second & 0x80 != 0
        let maskAt = start + headerBytes
        if masked { headerBytes += 4 }
        guard buffer.readableBytes >= headerBytes + length else { return nil }
        let key = masked ? buffer.getBytes(at: maskAt, length: 4) : nil
        buffer.moveReaderIndex(forwardBy: headerBytes)
        var payload = buffer.readSlice(length: length)!
        if let key {
            // Servers do not mask (§5.1), but a masked frame is still read correctly.
            var plain = ByteBufferAllocator().buffer(capacity: length)
            var index = 0
            for byte in payload.readableBytesView {
                plain.writeInteger(byte ^ key[index & 3])
                index += 1
            }
            payload = plain
        }
        return (first & 0x80 != 0, opcode, payload)
    }

    /// A frame as part of a message: the message when it is complete.
    private mutating func assemble(_ frame: (fin: Bool, opcode: Opcode, payload: ByteBuffer)) throws -> Message? {
        switch frame.opcode {
        case .close, .ping, .pong:
            guard frame.fin, frame.payload.readableBytes <= 125 else {
                throw Malformed(description: "a control frame fragmented or over 125 bytes")
            }
            return Message(opcode: frame.opcode, payload: frame.payload)
        case .continuation:
            guard var fragments else { throw Malformed(description: "a continuation frame with no message to continue") }
            // Taken out, so that the payload so far is appended to in place.
            self.fragments = nil
            var payload = frame.payload
            guard fragments.payload.readableBytes + payload.readableBytes <= maxMessageBytes else {
                throw Malformed(description: "a message over \(maxMessageBytes) bytes")
            }
            fragments.payload.writeBuffer(&payload)
            guard frame.fin else {
                self.fragments = fragments
                return nil
            }
            return Message(opcode: fragments.opcode, payload: fragments.payload)
        case .text, .binary:
            guard fragments == nil else { throw Malformed(description: "a new message inside a fragmented one") }
            guard frame.fin else {
                var copy = ByteBufferAllocator().buffer(capacity: frame.payload.readableBytes)
                var payload = frame.payload
                copy.writeBuffer(&payload)
                fragments = (frame.opcode, copy)
                return nil
            }
            return Message(opcode: frame.opcode, payload: frame.payload)
        }
    }

    /// A client-to-server frame (§5.2: FIN, masked with `maskKey`) carrying `payload`.
    static func clientFrame(_ opcode: Opcode, payload: some Collection<UInt8>, maskKey: (UInt8, UInt8, UInt8, UInt8),
                            allocator: ByteBufferAllocator) -> ByteBuffer {
        let count = payload.count
        var buffer = allocator.buffer(capacity: count + 14)
        buffer.writeInteger(0x80 | opcode.rawValue)
        switch count {
        case ..<126:
            buffer.writeInteger(0x80 | UInt8(count))
        case ..<65_536:
            buffer.writeInteger(UInt8(0x80 | 126))
            buffer.writeInteger(UInt16(count))
        default:
            buffer.writeInteger(UInt8(0x80 | 127))
            buffer.writeInteger(UInt64(count))
        }
        let key = [maskKey.0, maskKey.1, maskKey.2, maskKey.3]
        buffer.writeBytes(key)
        var index = 0
        for byte in payload {
            buffer.writeInteger(byte ^ key[index & 3])
            index += 1
        }
        return buffer
    }
}
