import Foundation

/// Reads a CHATROOM_MESSAGES push (`Frame{op 60, payload ChatroomMessages}`) straight from its
/// protobuf bytes, taking from each message only what the benchmark needs: whether this member sent
/// it (`sender_user_id`) and the send time and number in its client message id.
///
/// A 10,000-member room at 40 messages/s is 400,000 message receipts a second for the generator,
/// which shares the box with the server; decoding every `Message` into its Swift type (a dozen
/// strings and byte buffers each) would cost the generator more than a core. The field numbers are
/// im.proto's; everything else is skipped by wire type.
enum ChatroomPushReader {
    /// One message of the push.
    struct Item {
        /// The message came from this member's own user.
        var fromSelf: Bool
        /// Send time and message number ("ib:<ns>:<n>"), nil for a message imbench did not send.
        var stamp: (sentAt: UInt64, number: UInt64)?
    }

    enum Outcome: Equatable {
        /// Not a CHATROOM_MESSAGES push: decode it the ordinary way.
        case other
        /// A push with this many messages, each handed to the callback.
        case push(messages: Int)
        /// A CHATROOM_MESSAGES push that does not parse.
        case malformed
    }

    private static let opChatroomMessages: UInt64 = 60

    static func read(_ bytes: UnsafeRawBufferPointer, ownUserId: [UInt8], _ each: (Item) -> Void) -> Outcome {
        // Frame: id = 1 (absent in a push), op = 2, payload = 3.
        var frame = Cursor(bytes, 0, bytes.count)
        var op: UInt64 = 0
        var id: UInt64 = 0
        var payload: Range<Int>?
        while !frame.atEnd {
            guard let (field, wire) = frame.key() else { return .other }
            switch (field, wire) {
            case (1, 0): guard let value = frame.varint() else { return .other }; id = value
            case (2, 0): guard let value = frame.varint() else { return .other }; op = value
            case (3, 2): guard let range = frame.lengthDelimited() else { return .other }; payload = range
            default: guard frame.skip(wire) else { return .other }
            }
        }
        guard op == opChatroomMessages, id == 0 else { return .other }
        guard let payload else { return .push(messages: 0) }
        // ChatroomMessages: room_id = 1, messages = 2 (repeated Message).
        var push = Cursor(bytes, payload.lowerBound, payload.upperBound)
        var count = 0
        while !push.atEnd {
            guard let (field, wire) = push.key() else { return .malformed }
            guard field == 2, wire == 2 else {
                guard push.skip(wire) else { return .malformed }
                continue
            }
            guard let range = push.lengthDelimited(), let item = message(bytes, range, ownUserId: ownUserId) else { return .malformed }
            each(item)
            count += 1
        }
        return .push(messages: count)
    }

    /// Message: sender_user_id = 3, client_message_id = 9.
    private static func message(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, ownUserId: [UInt8]) -> Item? {
        var cursor = Cursor(bytes, range.lowerBound, range.upperBound)
        var item = Item(fromSelf: false, stamp: nil)
        while !cursor.atEnd {
            guard let (field, wire) = cursor.key() else { return nil }
            switch (field, wire) {
            case (3, 2):
                guard let sender = cursor.lengthDelimited() else { return nil }
                item.fromSelf = sender.count == ownUserId.count
                    && ownUserId.withUnsafeBytes { own in memcmp(own.baseAddress!, bytes.baseAddress! + sender.lowerBound, sender.count) == 0 }
            case (9, 2):
                guard let id = cursor.lengthDelimited() else { return nil }
                item.stamp = stamp(UnsafeRawBufferPointer(rebasing: bytes[id]))
            default:
                guard cursor.skip(wire) else { return nil }
            }
        }
        return item
    }

    /// "ib:<ns>:<n>" → (ns, n).
    static func stamp(_ id: UnsafeRawBufferPointer) -> (sentAt: UInt64, number: UInt64)? {
        guard id.count > 3, id[0] == UInt8(ascii: "i"), id[1] == UInt8(ascii: "b"), id[2] == UInt8(ascii: ":") else { return nil }
        var values: (UInt64, UInt64) = (0, 0)
        var field = 0
        var digits = 0
        for byte in id[3...] {
            if byte == UInt8(ascii: ":") {
                guard field == 0, digits > 0 else { return nil }
                field = 1
                digits = 0
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let digit = UInt64(byte - UInt8(ascii: "0"))
            if field == 0 { values.0 = values.0 &* 10 &+ digit } else { values.1 = values.1 &* 10 &+ digit }
            digits += 1
        }
        return field == 1 && digits > 0 ? values : nil
    }

    /// A position in protobuf bytes, up to `end`.
    private struct Cursor {
        let bytes: UnsafeRawBufferPointer
        var position: Int
        let end: Int

        init(_ bytes: UnsafeRawBufferPointer, _ position: Int, _ end: Int) {
            self.bytes = bytes
            self.position = position
            self.end = end
        }

        var atEnd: Bool { position >= end }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while position < end && shift < 64 {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        mutating func key() -> (field: UInt64, wire: UInt64)? {
            guard let key = varint() else { return nil }
            return (key >> 3, key & 7)
        }

        mutating func lengthDelimited() -> Range<Int>? {
            guard let length = varint(), length <= UInt64(end - position) else { return nil }
            let range = position..<(position + Int(length))
            position = range.upperBound
            return range
        }

        mutating func skip(_ wire: UInt64) -> Bool {
            switch wire {
            case 0: return varint() != nil
            case 1: guard end - position >= 8 else { return false }; position += 8; return true
            case 2: return lengthDelimited() != nil
            case 5: guard end - position >= 4 else { return false }; position += 4; return true
            default: return false
            }
        }
    }
}
