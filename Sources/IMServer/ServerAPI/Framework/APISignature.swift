import Crypto
import Foundation

/// RongCloud's Server API signature: the hex SHA1 of app secret + Nonce + Timestamp. The server
/// checks it with this; its tests and imbench sign with it.
public enum APISignature {
    public static func sign(secret: String, nonce: String, timestamp: String) -> String {
        hex(Insecure.SHA1.hash(data: Data((secret + nonce + timestamp).utf8)))
    }

    /// Lowercase hex of a digest (Foundation's `String(format:)` per byte costs more than the hash).
    public static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(40)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
