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
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2,
              let payload = Base64URL.decode(String(parts[0])),
              let signature = Base64URL.decode(String(parts[1]))
        else { return nil }
        return (payload, signature)
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
    public static func decode(_ text: String) -> Data? {
        var bytes = Array(text.utf8)
        guard bytes.count % 4 != 1 else { return nil }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                continue
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            default: return nil
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        guard let data = Data(base64Encoded: Data(bytes)), encode(data) == text else { return nil }
        return data
    }
}
