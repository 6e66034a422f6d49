import Synchronization

/// Generates RongCloud-shaped message UIDs (`XXXX-XXXX-XXXX-XXXX`, 16 base32 digits = 80 bits):
/// 42 bits of milliseconds, a 16-bit per-process counter and 22 random bits. Ids from one process
/// never repeat within a millisecond (65,536 per ms); the store's unique index is the final guard.
public final class MessageUIDGenerator: Sendable {
    private let counter = Mutex<UInt16>(0)
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    public init() {}

    public func next(milliseconds: Int64) -> String {
        let count = counter.withLock { value -> UInt64 in
            value &+= 1
            return UInt64(value)
        }
        let time = UInt64(max(0, milliseconds)) & ((1 << 42) - 1)
        let random = UInt64.random(in: 0..<(1 << 22))
        // The 80-bit id as (high 16 bits, low 64 bits).
        let low = (time << 38) | (count << 22) | random
        let high = time >> 26
        func digit(at shift: Int) -> Int {
            let value: UInt64
            if shift >= 64 {
                value = high >> UInt64(shift - 64)
            } else if shift + 5 <= 64 {
                value = low >> UInt64(shift)
            } else {
                value = (low >> UInt64(shift)) | (high << UInt64(64 - shift))
            }
            return Int(value & 31)
        }
        // Written straight into the string's storage: one allocation per uid (one is made per message).
        return String(unsafeUninitializedCapacity: 19) { chars in
            var written = 0
            for position in 0..<16 {
                if position > 0 && position % 4 == 0 {
                    chars[written] = UInt8(ascii: "-")
                    written += 1
                }
                chars[written] = Self.alphabet[digit(at: 75 - 5 * position)]
                written += 1
            }
            return written
        }
    }
}
