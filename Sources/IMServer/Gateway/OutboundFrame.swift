import NIOCore
import IMStore

/// One frame for a client, as WebSocket bytes: the binary message's header and the protobuf
/// `Frame`. It is encoded once, so a push for many sessions is one buffer shared by all of them.
public struct OutboundFrame: Sendable {
    let bytes: ByteBuffer

    /// A server-to-client binary message (RFC 6455 §5.2: FIN, opcode 2, unmasked) carrying `payload`.
    package init(_ payload: [UInt8]) {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(payload.count + 10)
        buffer.writeInteger(UInt8(0x82))
        switch payload.count {
        case ..<126:
            buffer.writeInteger(UInt8(payload.count))
        case ..<65_536:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(payload.count))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(payload.count))
        }
        buffer.writeBytes(payload)
        bytes = buffer
    }

    /// The protobuf `Frame` this carries, without the WebSocket header (what the cluster bus sends).
    var payload: [UInt8] {
        let length = bytes.getInteger(at: bytes.readerIndex + 1, as: UInt8.self) ?? 0
        let header = length == 127 ? 10 : length == 126 ? 4 : 2
        return bytes.getBytes(at: bytes.readerIndex + header, length: bytes.readableBytes - header) ?? []
    }
}
