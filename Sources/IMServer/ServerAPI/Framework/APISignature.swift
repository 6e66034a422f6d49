import Crypto
import Foundation

/// RongCloud's Server API signature: the hex SHA1 of app secret + Nonce + Timestamp. The server
/// checks it with this; its tests and imbench sign with it.
public enum APISignature {
    public static func sign(secret: String, nonce: String, timestamp: String) -> String {
        Insecure.SHA1.hash(data: Data((secret + nonce + timestamp).utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
