import IMWire
import NIOCore
import SwiftProtobuf

extension FrameCodec {
    /// The `Frame` a WebSocket message carries, read straight from the buffer it arrived in (no
    /// copy into an array first): by hand (`FrameEnvelope`), or by SwiftProtobuf when the frame
    /// holds more than a client sends.
    package static func decode(_ buffer: ByteBuffer) throws -> Im_Frame {
        if let frame = buffer.withUnsafeReadableBytes({ FrameEnvelope.read($0) }) { return frame }
        return try Im_Frame(serializedBytes: ArrivedBytes(buffer))
    }
}

/// A `ByteBuffer`'s readable bytes as SwiftProtobuf reads its input: decoding only borrows them.
struct ArrivedBytes: SwiftProtobufContiguousBytes {
    var buffer: ByteBuffer

    init(_ buffer: ByteBuffer) {
        self.buffer = buffer
    }

    init(repeating byte: UInt8, count: Int) {
        buffer = ByteBuffer(repeating: byte, count: count)
    }

    init<S: Sequence>(_ sequence: S) where S.Element == UInt8 {
        buffer = ByteBuffer(bytes: Array(sequence))
    }

    var count: Int { buffer.readableBytes }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeReadableBytes(body)
    }

    mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeMutableReadableBytes(body)
    }
}
