import Crypto
import _CryptoExtras
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// Why credentials an operator gave cannot push, in words that say what to fix.
public struct PushCredentialError: Error, CustomStringConvertible, Sendable, Hashable {
    public var message: String
    /// RongCloud's APNs status code for the problem where one exists (§7.3): 67 wrong certificate
    /// password, 68 certificate for another bundle id, 75 wildcard bundle id.
    public var code: Int?

    public init(_ message: String, code: Int? = nil) {
        self.message = message
        self.code = code
    }

    public var description: String { message }
}

extension APNsCredentials: CustomStringConvertible, CustomDebugStringConvertible {
    /// A copy with surrounding whitespace trimmed, after checking that it can push: the bundle id
    /// has no wildcard; a p8 key is a P-256 private key with a 10-character Key ID and Team ID; a
    /// p12 opens with its password, holds a certificate that has not expired at `now` and, when the
    /// certificate names a bundle id (its subject's UID, as Apple's do), names this one.
    public func validated(now: Date = Date()) throws -> APNsCredentials {
        var copy = self
        copy.bundleId = bundleId.trimmingCharacters(in: .whitespacesAndNewlines)
        try Self.checkBundleId(copy.bundleId)
        switch authentication {
        case .token(let p8, let keyId, let teamId):
            let keyId = keyId.trimmingCharacters(in: .whitespacesAndNewlines)
            let teamId = teamId.trimmingCharacters(in: .whitespacesAndNewlines)
            let p8 = Self.normalizedPEM(p8)
            guard Self.isTenAlphanumerics(keyId) else {
                throw PushCredentialError("keyId must be the 10-character Key ID shown with the key in Apple Developer (letters and digits), got \"\(keyId)\"")
            }
            guard Self.isTenAlphanumerics(teamId) else {
                throw PushCredentialError("teamId must be the 10-character Team ID of the Apple Developer account (letters and digits), got \"\(teamId)\"")
            }
            do {
                _ = try P256.Signing.PrivateKey(pemRepresentation: p8)
            } catch {
                throw PushCredentialError("p8 is not a P-256 private key in PEM: give the whole .p8 file from Apple Developer, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----")
            }
            copy.authentication = .token(p8: p8, keyId: keyId, teamId: teamId)
        case .certificate(let p12, let password):
            guard !p12.isEmpty else { throw PushCredentialError("p12 is empty: give the .p12 file exported from Keychain Access", code: 53) }
            let certificate = try Self.openP12(p12, password: password).certificate
            if let expiry = certificate.notValidAfter, expiry < now {
                throw PushCredentialError("the certificate in the p12 expired on \(ISO8601DateFormatter().string(from: expiry)): make a new one in Apple Developer")
            }
            if let uid = certificate.bundleId, uid != copy.bundleId, uid != copy.bundleId + ".voip" {
                throw PushCredentialError("the certificate in the p12 is for bundle id \"\(uid)\", not \"\(copy.bundleId)\"", code: 68)
            }
        }
        return copy
    }

    /// The credentials without key material: Key ID, Team ID and bundle id, or the p12's size and fingerprint.
    public var redacted: String {
        switch authentication {
        case .token(_, let keyId, let teamId):
            "APNs p8 key \(keyId), team \(teamId), bundle \(bundleId)"
        case .certificate(let p12, _):
            "APNs p12 certificate (\(p12.count) bytes, SHA-256 \(Self.fingerprint(p12))), bundle \(bundleId)"
        }
    }

    public var description: String { redacted }
    public var debugDescription: String { redacted }

    package static func checkBundleId(_ bundleId: String) throws {
        guard !bundleId.isEmpty else { throw PushCredentialError("bundleId is empty: give the app's bundle id, e.g. com.example.chat") }
        guard !bundleId.utf8.contains(UInt8(ascii: "*")) else {
            throw PushCredentialError("bundleId \"\(bundleId)\" has a wildcard: APNs pushes only to an explicit bundle id", code: 75)
        }
        // ASCII letters and digits, '.' and '-' (checked per byte: this runs for every push).
        guard bundleId.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2E || $0 == 0x2D }) else {
            throw PushCredentialError("bundleId \"\(bundleId)\" may contain only letters, digits, '.' and '-'")
        }
    }

    private static func isTenAlphanumerics(_ text: String) -> Bool {
        text.utf8.count == 10 && text.unicodeScalars.allSatisfy { $0.isASCII && CharacterSet.alphanumerics.contains($0) }
    }

    /// A key pasted without its PEM lines (the base64 alone) gets them back.
    package static func normalizedPEM(_ text: String) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("-----BEGIN") { return trimmed }
        let body = trimmed.filter { !$0.isWhitespace }
        var lines: [Substring] = []
        var rest = Substring(body)
        while !rest.isEmpty {
            lines.append(rest.prefix(64))
            rest = rest.dropFirst(64)
        }
        return "-----BEGIN PRIVATE KEY-----\n" + lines.joined(separator: "\n") + "\n-----END PRIVATE KEY-----"
    }

    package static func fingerprint(_ bytes: some DataProtocol) -> String {
        hexString(SHA256.hash(data: bytes).prefix(8))
    }

    package struct OpenedP12 {
        package var bundle: NIOSSLPKCS12Bundle
        package var certificate: CertificateFacts
    }

    /// What validation and sending need from the p12's leaf certificate.
    package struct CertificateFacts {
        package var notValidAfter: Date?
        /// The subject's UID (OID 0.9.2342.19200300.100.1.1): Apple's push certificates carry the bundle id there.
        package var bundleId: String?
    }

    package static func openP12(_ p12: Data, password: String) throws -> OpenedP12 {
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: Array(p12), passphrase: Array(password.utf8))
        } catch {
            throw PushCredentialError("the p12 could not be opened with this password: check the password, and that the file is the .p12 exported from Keychain Access with its private key", code: 67)
        }
        guard let leaf = bundle.certificateChain.first else {
            throw PushCredentialError("the p12 holds no certificate: export the push certificate together with its private key", code: 54)
        }
        var facts = CertificateFacts(notValidAfter: Date(timeIntervalSince1970: TimeInterval(leaf.notValidAfter)))
        if let der = try? leaf.toDERBytes(), let parsed = try? Certificate(derEncoded: der) {
            let uid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
            for rdn in parsed.subject {
                for attribute in rdn where attribute.type == uid {
                    facts.bundleId = String(attribute.value)
                }
            }
        }
        return OpenedP12(bundle: bundle, certificate: facts)
    }
}

extension FCMCredentials: CustomStringConvertible, CustomDebugStringConvertible {
    /// Google's token endpoint, for a service-account file that names none.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    private struct ServiceAccountFile: Decodable {
        var type: String?
        var project_id: String?
        var private_key_id: String?
        var private_key: String?
        var client_email: String?
        var token_uri: String?
    }

    /// Reads the service-account JSON the Firebase console gives (Project settings › Service
    /// accounts › Generate new private key) and checks it as `validated()` does.
    public init(serviceAccountJSON: Data) throws {
        let file: ServiceAccountFile
        do {
            file = try JSONDecoder().decode(ServiceAccountFile.self, from: serviceAccountJSON)
        } catch {
            throw PushCredentialError("the service account is not a JSON object: give the whole .json file the Firebase console downloads")
        }
        guard file.type == "service_account" else {
            throw PushCredentialError("the JSON's type is \(file.type.map { "\"\($0)\"" } ?? "missing"), not \"service_account\": give a service account key file (Firebase console › Project settings › Service accounts)")
        }
        let missing = [("project_id", file.project_id), ("client_email", file.client_email), ("private_key", file.private_key)]
            .filter { $0.1?.isEmpty ?? true }.map(\.0)
        guard missing.isEmpty else {
            throw PushCredentialError("the service account JSON lacks \(missing.joined(separator: ", ")): give the whole file as downloaded")
        }
        self.init(projectId: file.project_id!, clientEmail: file.client_email!, privateKey: file.private_key!,
                  tokenURI: file.token_uri ?? Self.googleTokenURI, privateKeyId: file.private_key_id)
        self = try validated()
    }

    /// A copy with surrounding whitespace trimmed, after checking that the private key is an RSA
    /// key of at least 2048 bits in PEM, the token URI an http(s) URL, and the other fields present.
    public func validated() throws -> FCMCredentials {
        var copy = self
        copy.projectId = projectId.trimmingCharacters(in: .whitespacesAndNewlines)
        copy.clientEmail = clientEmail.trimmingCharacters(in: .whitespacesAndNewlines)
        copy.tokenURI = tokenURI.trimmingCharacters(in: .whitespacesAndNewlines)
        copy.privateKey = privateKey.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !copy.projectId.isEmpty,
              copy.projectId.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-") }) else {
            throw PushCredentialError("projectId \"\(copy.projectId)\" is not a Firebase project id (lowercase letters, digits and '-')")
        }
        guard copy.clientEmail.contains("@") else {
            throw PushCredentialError("clientEmail \"\(copy.clientEmail)\" is not a service account's e-mail address")
        }
        guard let url = URL(string: copy.tokenURI), url.scheme == "https" || url.scheme == "http", url.host != nil else {
            throw PushCredentialError("tokenURI \"\(copy.tokenURI)\" is not an https URL")
        }
        do {
            _ = try _RSA.Signing.PrivateKey(pemRepresentation: copy.privateKey)
        } catch {
            throw PushCredentialError("private_key is not an RSA private key (2048 bits or more) in PEM: give the service account file's private_key as it is, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----")
        }
        return copy
    }

    /// The credentials without key material.
    public var redacted: String {
        "FCM project \(projectId), service account \(clientEmail), key \(privateKeyId ?? APNsCredentials.fingerprint(Data(privateKey.utf8)))"
    }

    public var description: String { redacted }
    public var debugDescription: String { redacted }
}

extension WebhookCredentials: CustomStringConvertible, CustomDebugStringConvertible {
    /// The shortest secret accepted.
    public static let minimumSecretLength = 16

    /// Checks that the secret is at least `minimumSecretLength` characters.
    public func validated() throws -> WebhookCredentials {
        guard secret.count >= Self.minimumSecretLength else {
            throw PushCredentialError("the webhook secret must be at least \(Self.minimumSecretLength) characters (it has \(secret.count))")
        }
        return self
    }

    public var redacted: String { "webhook secret (\(secret.count) characters)" }
    public var description: String { redacted }
    public var debugDescription: String { redacted }
}

extension PushCredentials: CustomStringConvertible, CustomDebugStringConvertible {
    /// Each provider's credentials validated (see each type's `validated`).
    public func validated(now: Date = Date()) throws -> PushCredentials {
        PushCredentials(apns: try apns?.validated(now: now), fcm: try fcm?.validated(), webhook: try webhook?.validated())
    }

    public var redacted: String {
        let parts = [apns?.redacted, fcm?.redacted, webhook?.redacted].compactMap { $0 }
        return parts.isEmpty ? "no push credentials" : parts.joined(separator: "; ")
    }

    public var description: String { redacted }
    public var debugDescription: String { redacted }
}

/// Lowercase hex of bytes.
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: text, as: UTF8.self)
}
