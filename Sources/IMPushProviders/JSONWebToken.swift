import Crypto
import _CryptoExtras
import Foundation

/// Base64url without padding (RFC 7515 §2), as JSON Web Tokens use it.
enum Base64URL {
    static func encode(_ bytes: some DataProtocol) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.last == "=" { text.removeLast() }
        return text
    }
}

/// The compact JSON Web Tokens the providers ask for: APNs' ES256 provider token and the RS256
/// assertion Google exchanges for an OAuth2 access token.
enum JSONWebToken {
    private static func signingInput(header: some Encodable, claims: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Base64URL.encode(try encoder.encode(header)) + "." + Base64URL.encode(try encoder.encode(claims))
    }

    struct APNsHeader: Encodable { var alg = "ES256"; var kid: String }
    struct APNsClaims: Encodable { var iss: String; var iat: Int }

    /// APNs' provider token: `{alg: ES256, kid}` and `{iss: teamId, iat}`, signed with the p8 key
    /// (the signature is the raw r‖s pair, as JWS wants it).
    static func apnsProviderToken(key: P256.Signing.PrivateKey, keyId: String, teamId: String, issuedAt: Date) throws -> String {
        let input = try signingInput(header: APNsHeader(kid: keyId),
                                     claims: APNsClaims(iss: teamId, iat: Int(issuedAt.timeIntervalSince1970)))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    struct GoogleHeader: Encodable { var alg = "RS256"; var typ = "JWT"; var kid: String? }
    struct GoogleClaims: Encodable { var iss: String; var scope: String; var aud: String; var iat: Int; var exp: Int }

    /// The scope FCM's HTTP v1 API needs.
    static let firebaseMessagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// The service account's assertion for the OAuth2 JWT bearer grant (RFC 7523), valid one hour.
    static func googleAssertion(key: _RSA.Signing.PrivateKey, keyId: String?, clientEmail: String, audience: String,
                                issuedAt: Date) throws -> String {
        let iat = Int(issuedAt.timeIntervalSince1970)
        let input = try signingInput(
            header: GoogleHeader(kid: keyId),
            claims: GoogleClaims(iss: clientEmail, scope: firebaseMessagingScope, aud: audience, iat: iat, exp: iat + 3600))
        let signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

