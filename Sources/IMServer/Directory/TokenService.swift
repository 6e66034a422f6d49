import Crypto
import Foundation
import IMCore
import IMStore

/// Issues and verifies connect tokens.
///
/// A token is `base64url(claims).base64url(HMAC-SHA256(appSecret, claims))` (IMCore's
/// `ConnectTokenClaims`). It names its app, so a token of app A fails on app B with 31004. Tokens do
/// not expire unless the user's tokens are revoked (`tokensValidAfter`), and issuing a new token does
/// not invalidate older ones (spec/imlib-core.md §7.2).
public struct TokenService: Sendable {
    public init() {}

    public func issue(app: AppRecord, userId: String, now: Int64) -> String {
        let claims = ConnectTokenClaims(appKey: app.appKey, userId: userId, issuedAt: now,
                                        nonce: AppRegistry.randomCredential(length: 6))
        return Self.sign(claims, secret: app.appSecret)
    }

    /// `base64url(claims JSON).base64url(HMAC-SHA256(secret, claims))`: the connect token's form,
    /// which the server's other tokens (media) take too.
    static func sign(_ claims: some Encodable, secret: String) -> String {
        let payload = (try? JSONEncoder().encode(claims)) ?? Data()
        return Base64URL.encode(payload) + "." + Base64URL.encode(mac(payload, secret: secret))
    }

    /// A token of that form split and its claims decoded once, before its signature is checked
    /// (the claims name the app whose secret checks it).
    struct Unverified<Claims: Decodable> {
        let claims: Claims
        private let payload: Data
        private let signature: Data

        /// Nil when the token is not shaped like one.
        init?(_ token: String) {
            guard let (payload, signature) = ConnectTokenClaims.parts(of: token),
                  let claims = try? JSONDecoder().decode(Claims.self, from: payload) else { return nil }
            self.claims = claims
            self.payload = payload
            self.signature = signature
        }

        /// Whether the token was signed with `secret`.
        func isSigned(secret: String) -> Bool {
            TokenService.isSignature(signature, of: payload, secret: secret)
        }
    }

    /// Whether `signature` is the HMAC-SHA256 of `payload` with `secret` (compared in constant time).
    fileprivate static func isSignature(_ signature: Data, of payload: Data, secret: String) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: payload, using: SymmetricKey(data: Data(secret.utf8)))
    }

    /// Verifies the token against the app it was presented to; 31004 when it is not valid there.
    public func verify(_ token: String, app: AppRecord) throws -> ConnectTokenClaims {
        // The token is split and decoded once for both the claims and the signature.
        guard let (payload, signature) = ConnectTokenClaims.parts(of: token),
              let claims = try? JSONDecoder().decode(ConnectTokenClaims.self, from: payload),
              claims.appKey == app.appKey,
              Self.isSignature(signature, of: payload, secret: app.appSecret),
              UserID.isValid(claims.userId)
        else {
            throw IMError(.tokenIncorrect, "the token is not valid for app key \(app.appKey): get a new token from your app server (Server API /user/getToken.json) for this app key")
        }
        return claims
    }

    private static func mac(_ payload: Data, secret: String) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: payload, using: SymmetricKey(data: Data(secret.utf8))))
    }
}
