import IMWire
import NIOCore
import SwiftProtobuf

extension FrameCodec {
    /// The `Frame` a WebSocket message carries, read straight from the buffer it arrived in (no
    /// copy into an array first).
    package static func decode(_ buffer: ByteBuffer) throws -> Im_Frame {
        try Im_Frame(serializedBytes: ArrivedBytes(buffer))
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
