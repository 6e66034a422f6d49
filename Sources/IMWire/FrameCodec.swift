import Foundation
import IMCore
import SwiftProtobuf

/// Encoding and decoding of the `Frame` envelope that every WebSocket binary message carries.
public enum FrameCodec {
    /// Frames larger than this are refused by both ends (a sync page is bounded well below it).
    public static let maxFrameBytes = 4 * 1024 * 1024

    public static func request<M: SwiftProtobuf.Message>(id: UInt32, op: Im_Op, _ body: M) throws -> [UInt8] {
        FrameEnvelope.bytes(id: id, op: op, payload: try body.serializedBytes() as [UInt8])
    }

    public static func reply<M: SwiftProtobuf.Message>(to request: Im_Frame, _ body: M) throws -> [UInt8] {
        FrameEnvelope.bytes(id: request.id, op: request.op, payload: try body.serializedBytes() as [UInt8])
    }

    /// A success reply without a body (requests whose answer is only "done").
    public static func emptyReply(to request: Im_Frame) -> [UInt8] {
        FrameEnvelope.bytes(id: request.id, op: request.op, payload: [UInt8]())
    }

    /// The longest error message a reply carries: a message that quotes what the client sent is
    /// cut here, so an error reply stays small whatever the request held.
    public static let maxErrorMessageBytes = 1024

    public static func errorReply(to request: Im_Frame, _ error: IMError) -> [UInt8] {
        FrameEnvelope.bytes(id: request.id, op: request.op, payload: [UInt8](), code: Int32(error.code.rawValue),
                            errorMessage: Self.truncated(error.message, maxBytes: maxErrorMessageBytes))
    }

    public static func push<M: SwiftProtobuf.Message>(op: Im_Op, _ body: M) throws -> [UInt8] {
        FrameEnvelope.bytes(id: 0, op: op, payload: try body.serializedBytes() as [UInt8])
    }

    /// `text` cut to at most `maxBytes` UTF-8 bytes at a character boundary, with an ellipsis.
    public static func truncated(_ text: String, maxBytes: Int) -> String {
        guard text.utf8.count > maxBytes else { return text }
        var bytes = 0
        var end = text.unicodeScalars.startIndex
        for index in text.unicodeScalars.indices {
            let size = UTF8.width(text.unicodeScalars[index])
            if bytes + size > maxBytes - 3 { break }
            bytes += size
            end = text.unicodeScalars.index(after: index)
        }
        return String(text.unicodeScalars[..<end]) + "…"
    }

    public static func decode<Bytes: Collection>(_ bytes: Bytes) throws -> Im_Frame where Bytes.Element == UInt8 {
        let array = Array(bytes)
        if let frame = array.withUnsafeBytes({ FrameEnvelope.read($0) }) { return frame }
        return try Im_Frame(serializedBytes: array)
    }
}

extension Im_Frame {
    /// The error a failed reply carries, or nil for a success.
    public var error: IMError? {
        code == 0 ? nil : IMError(ErrorCode(Int(code)), errorMessage)
    }

    public func body<M: SwiftProtobuf.Message>(_ type: M.Type) throws -> M {
        try M(serializedBytes: payload)
    }
}

extension Platform {
    public init?(wire: Im_Platform) {
        self.init(rawValue: wire.rawValue)
    }

    public var wire: Im_Platform { Im_Platform(rawValue: rawValue) ?? .unspecified }
}
