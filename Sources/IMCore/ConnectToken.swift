import Foundation

/// The readable part of a connect token: `base64url(claims JSON) "." base64url(signature)`.
///
/// Only the server can verify a token; the client reads the user id from it to open the user's
/// local database before the connection is up (RongCloud's `dbOpened` comes before `success`).
public struct ConnectTokenClaims: Sendable, Equatable, Codable {
    public var appKey: String
    public var userId: String
    public var issuedAt: Int64
    public var nonce: String

    public init(appKey: String, userId: String, issuedAt: Int64, nonce: String) {
        self.appKey = appKey
        self.userId = userId
        self.issuedAt = issuedAt
        self.nonce = nonce
    }

    enum CodingKeys: String, CodingKey {
        case appKey = "a", userId = "u", issuedAt = "t", nonce = "n"
    }

    /// Splits a token into its claims bytes and signature bytes, or nil if it is not shaped like one.
    public static func parts(of token: String) -> (payload: Data, signature: Data)? {
        var token = token
        return token.withUTF8 { bytes -> (Data, Data)? in
            guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")),
                  !bytes[(dot + 1)...].contains(UInt8(ascii: ".")),
                  let payload = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[..<dot])),
                  let signature = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[(dot + 1)...]))
            else { return nil }
            return (payload, signature)
        }
    }

    /// The claims of a token, without verifying its signature.
    public static func unverified(_ token: String) -> ConnectTokenClaims? {
        guard let (payload, _) = parts(of: token) else { return nil }
        return try? JSONDecoder().decode(ConnectTokenClaims.self, from: payload)
    }
}

/// Base64 with the URL-safe alphabet and no padding.
///
/// The alphabets are swapped byte by byte: Foundation's `replacingOccurrences` bridged through
/// NSString and was 3% of the server's CPU in a connect storm (every CONNECT decodes a token).
public enum Base64URL {
    public static func encode(_ data: Data) -> String {
        var bytes = Array(data.base64EncodedData())
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "+"): bytes[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): bytes[index] = UInt8(ascii: "_")
            default: break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Decodes the canonical encoding only: the URL-safe alphabet without padding, with the unused
    /// bits of the last character zero. So each value has exactly one text, and a token cannot be
    /// varied (padding, the standard alphabet, other trailing bits) and still be accepted.
    ///
    /// Decoded in one pass over the bytes (every CONNECT decodes a token: going through Foundation's
    /// decoder and encoding the result again to compare was 2% of a connect storm's CPU).
    public static func decode(_ text: String) -> Data? {
        var text = text
        return text.withUTF8 { decode(bytes: $0) }
    }

    /// `decode` of the text's UTF-8 bytes.
    public static func decode(bytes input: UnsafeBufferPointer<UInt8>) -> Data? {
        guard input.count % 4 != 1 else { return nil }
        var data = Data(count: input.count * 3 / 4)
        var bits: UInt32 = 0
        var held = 0
        let complete = data.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Bool in
            var at = 0
            for byte in input {
                let value: UInt32
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a")) + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0")) + 52
                case UInt8(ascii: "-"): value = 62
                case UInt8(ascii: "_"): value = 63
                default: return false
                }
                bits = bits << 6 | value
                held += 6
                if held >= 8 {
                    held -= 8
                    out[at] = UInt8(truncatingIfNeeded: bits >> UInt32(held))
                    at += 1
                    bits &= (1 << UInt32(held)) - 1
                }
            }
            return true
        }
        // What is left (2 or 4 bits of a last character) must be zero in the canonical text.
        guard complete, bits == 0 else { return nil }
        return data
    }
}
