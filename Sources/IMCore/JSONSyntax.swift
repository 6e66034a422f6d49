import Foundation

/// A check of JSON text (RFC 8259) that builds nothing: one pass over the bytes, no allocation.
///
/// Every message's content is checked on its way in, so the check must cost little more than
/// reading the bytes; a parser that builds objects (`JSONSerialization`) spends most of its time in
/// allocation and reference counting. It accepts what `JSONSerialization` accepts for UTF-8 text,
/// with one exception: strings must be valid UTF-8 without raw control characters, escapes must be
/// complete (a high surrogate escape followed by a low one), numbers follow the grammar and fit a
/// Double (a recipient's parser must be able to read them), and nesting stops at 512 levels.
/// Comments, NaN and single quotes are refused, and so are trailing commas, which
/// `JSONSerialization` lets through but RFC 8259 and JavaScript's `JSON.parse` do not: a content
/// every client can parse is what the server stores.
public enum JSONSyntax {
    /// The deepest nesting accepted, as `JSONSerialization`'s.
    public static let maxDepth = 512

    /// Whether `bytes` is one JSON object (with optional whitespace around it).
    public static func isObject<Bytes: ContiguousBytes>(_ bytes: Bytes) -> Bool {
        bytes.withUnsafeBytes { raw in
            var scanner = Scanner(raw)
            scanner.skipWhitespace()
            guard scanner.peek == UInt8(ascii: "{"), scanner.value(depth: 0) else { return false }
            scanner.skipWhitespace()
            return scanner.atEnd
        }
    }

    /// Whether `bytes` is one JSON value of any kind.
    public static func isValue<Bytes: ContiguousBytes>(_ bytes: Bytes) -> Bool {
        bytes.withUnsafeBytes { raw in
            var scanner = Scanner(raw)
            scanner.skipWhitespace()
            guard scanner.value(depth: 0) else { return false }
            scanner.skipWhitespace()
            return scanner.atEnd
        }
    }

    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(_ bytes: UnsafeRawBufferPointer) {
            self.bytes = bytes
        }

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) -> Bool {
            guard let byte = peek else { return false }
            switch byte {
            case UInt8(ascii: "{"): return container(depth: depth + 1, isObject: true)
            case UInt8(ascii: "["): return container(depth: depth + 1, isObject: false)
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            default: return false
            }
        }

        /// An object (`isObject`: members are `"name": value`) or an array, its brackets included.
        mutating func container(depth: Int, isObject: Bool) -> Bool {
            guard depth <= JSONSyntax.maxDepth else { return false }
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            index += 1  // { or [
            skipWhitespace()
            if peek == close {
                index += 1
                return true
            }
            while true {
                if isObject {
                    guard peek == UInt8(ascii: "\""), string() else { return false }
                    skipWhitespace()
                    guard peek == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipWhitespace()
                }
                guard value(depth: depth) else { return false }
                skipWhitespace()
                if peek == close {
                    index += 1
                    return true
                }
                // A comma must be followed by another member: a trailing comma is refused.
                guard peek == UInt8(ascii: ",") else { return false }
                index += 1
                skipWhitespace()
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            let start = word.utf8Start
            for offset in 0..<count where bytes[index + offset] != start[offset] { return false }
            index += count
            return true
        }

        mutating func digits() -> Int {
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - start
        }

        /// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?, and within a Double's range.
        mutating func number() -> Bool {
            let start = index
            if peek == UInt8(ascii: "-") { index += 1 }
            guard let first = peek else { return false }
            var integerDigits = 0
            if first == UInt8(ascii: "0") {
                index += 1
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(first) {
                integerDigits = digits()
            } else {
                return false
            }
            if peek == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { return false }
            }
            var exponent = 0
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                var sign = 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") {
                    if peek == UInt8(ascii: "-") { sign = -1 }
                    index += 1
                }
                let digitsStart = index
                guard digits() > 0 else { return false }
                for offset in digitsStart..<index {
                    exponent = min(exponent * 10 + Int(bytes[offset] - UInt8(ascii: "0")), 1_000_000)
                }
                exponent *= sign
            }
            // Only a number that may pass Double's largest (about 1.8e308) is read in full: rare,
            // and then an allocation does not matter.
            if integerDigits - 1 + exponent >= 308 {
                let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                guard let value = Double(text), value.isFinite else { return false }
            }
            return true
        }

        /// A string, its quotes included: escapes complete, UTF-8 valid (no overlong forms, no
        /// surrogates, nothing past U+10FFFF), no raw control character.
        mutating func string() -> Bool {
            index += 1  // "
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                case UInt8(ascii: "\\"):
                    guard escape() else { return false }
                case 0x00..<0x20:
                    return false
                case 0x20..<0x80:
                    index += 1
                default:
                    guard multibyte(byte) else { return false }
                }
            }
            return false
        }

        /// One escape after its backslash; a \u high surrogate must be followed by a \u low one.
        mutating func escape() -> Bool {
            index += 1  // \
            guard let byte = peek else { return false }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                 UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                index += 1
                return true
            case UInt8(ascii: "u"):
                index += 1
                guard let unit = hex4() else { return false }
                switch unit {
                case 0xD800...0xDBFF:
                    guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        return false
                    }
                    index += 2
                    guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return false }
                    return true
                case 0xDC00...0xDFFF:
                    return false
                default:
                    return true
                }
            default:
                return false
            }
        }

        mutating func hex4() -> UInt16? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt16 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }

        /// One UTF-8 sequence of two to four bytes starting with `lead` (Unicode's table 3-7).
        mutating func multibyte(_ lead: UInt8) -> Bool {
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: return false
            }
            guard bytes.count - index >= length else { return false }
            let second = bytes[index + 1]
            guard second >= low, second <= high else { return false }
            for offset in 2..<max(2, length) where !(0x80...0xBF).contains(bytes[index + offset]) { return false }
            index += length
            return true
        }
    }
}
