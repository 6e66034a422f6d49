import IMStore
import IMWire
import NIOCore

/// One frame for a client, as WebSocket bytes: the binary message's header and the protobuf
/// `Frame`. It is encoded once, so a push for many sessions is one buffer shared by all of them.
public struct OutboundFrame: Sendable {
    let bytes: ByteBuffer

    /// A server-to-client binary message (RFC 6455 §5.2: FIN, opcode 2, unmasked) carrying `payload`.
    package init(_ payload: [UInt8]) {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(payload.count + 10)
        Self.writeHeader(length: payload.count, into: &buffer)
        buffer.writeBytes(payload)
        bytes = buffer
    }

    /// The `Frame { id, op, payload }` written straight after its WebSocket header, in one buffer
    /// (no protobuf message, no array in between).
    package init(id: UInt32, op: Im_Op, payload: UnsafeRawBufferPointer) {
        let length = FrameEnvelope.size(id: id, op: op, payloadCount: payload.count)
        var buffer = ByteBuffer()
        buffer.reserveCapacity(length + 10)
        Self.writeHeader(length: length, into: &buffer)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { out in
            FrameEnvelope.write(id: id, op: op, payload: payload, into: out)
        }
        bytes = buffer
    }

    /// The answer to a PING: `Pong { server_time }`.
    static func pong(to id: UInt32, now: Int64) -> OutboundFrame {
        withUnsafeTemporaryAllocation(byteCount: 11, alignment: 1) { body in
            var at = 0
            if now != 0 {
                body[0] = 0x08
                at = 1
                var value = UInt64(bitPattern: now)
                while value >= 0x80 {
                    body[at] = UInt8(truncatingIfNeeded: value) | 0x80
                    value >>= 7
                    at += 1
                }
                body[at] = UInt8(value)
                at += 1
            }
            return OutboundFrame(id: id, op: .ping, payload: UnsafeRawBufferPointer(rebasing: body[..<at]))
        }
    }

    private static func writeHeader(length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0x82))
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length))
        case ..<65_536:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }

    /// The protobuf `Frame` this carries, without the WebSocket header (what the cluster bus sends).
    var payload: [UInt8] {
        let length = bytes.getInteger(at: bytes.readerIndex + 1, as: UInt8.self) ?? 0
        let header = length == 127 ? 10 : length == 126 ? 4 : 2
        return bytes.getBytes(at: bytes.readerIndex + header, length: bytes.readableBytes - header) ?? []
    }
}
