import _CryptoExtras
import Crypto
import Foundation
import IMPush
import IMPushProviders
import IMServerTesting
import Testing

/// Checking credentials an operator sets, and never showing their key material.
@Suite("Push credentials")
struct PushCredentialTests {
    static let p8 = P256.Signing.PrivateKey().pemRepresentation

    static func tokenCredentials(p8: String = p8, keyId: String = "KEY1234567", teamId: String = "TEAM123456",
                                 bundleId: String = "com.example.chat") -> APNsCredentials {
        APNsCredentials(bundleId: bundleId, authentication: .token(p8: p8, keyId: keyId, teamId: teamId))
    }

    @Test("a good p8 passes, trimmed; a p8 pasted without its PEM lines is given them back")
    func goodP8() throws {
        let validated = try Self.tokenCredentials(keyId: " KEY1234567\n", bundleId: " com.example.chat ").validated()
        #expect(validated.bundleId == "com.example.chat")
        // Every character a bundle id may have: both letter ranges' ends, digits, '.' and '-'.
        #expect(try Self.tokenCredentials(bundleId: "AZaz09.com-example").validated().bundleId == "AZaz09.com-example")
        #expect(validated.authentication == .token(p8: Self.p8, keyId: "KEY1234567", teamId: "TEAM123456"))
        let bare = Self.p8.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard case .token(let p8, _, _) = try Self.tokenCredentials(p8: bare).validated().authentication else {
            Issue.record("not token auth")
            return
        }
        #expect(try P256.Signing.PrivateKey(pemRepresentation: p8).rawRepresentation
            == P256.Signing.PrivateKey(pemRepresentation: Self.p8).rawRepresentation)
    }

    @Test("bad APNs credentials are refused with a message that names what to fix")
    func badAPNs() throws {
        let cases: [(APNsCredentials, String, Int?)] = [
            (Self.tokenCredentials(p8: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"), "p8 is not a P-256 private key", nil),
            (Self.tokenCredentials(p8: try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation), "p8 is not a P-256 private key", nil),
            (Self.tokenCredentials(keyId: "KEY123"), "keyId must be the 10-character Key ID", nil),
            (Self.tokenCredentials(teamId: "TEAM-12345"), "teamId must be the 10-character Team ID", nil),
            (Self.tokenCredentials(bundleId: "com.example.*"), "wildcard", 75),
            (Self.tokenCredentials(bundleId: "*"), "wildcard", 75),
            (Self.tokenCredentials(bundleId: "  "), "bundleId is empty", nil),
            (Self.tokenCredentials(bundleId: "com.example/chat"), "may contain only", nil),
            // The characters just outside the letters' ranges, and a letter that is not ASCII.
            (Self.tokenCredentials(bundleId: "com.example@chat"), "may contain only", nil),
            (Self.tokenCredentials(bundleId: "com.example[chat"), "may contain only", nil),
            (Self.tokenCredentials(bundleId: "com.example_chat"), "may contain only", nil),
            (Self.tokenCredentials(bundleId: "com.example`chat"), "may contain only", nil),
            (Self.tokenCredentials(bundleId: "com.example{chat"), "may contain only", nil),
            (Self.tokenCredentials(bundleId: "com.exämple.chat"), "may contain only", nil),
            (APNsCredentials(bundleId: "com.example.chat", authentication: .certificate(p12: Data(), password: "x")), "p12 is empty", 53),
            (APNsCredentials(bundleId: "com.example.chat", authentication: .certificate(p12: Data("junk".utf8), password: "x")), "could not be opened", 67),
        ]
        for (credentials, message, code) in cases {
            let error = #expect(throws: PushCredentialError.self) { try credentials.validated() }
            #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error"), wanted \(message)")
            #expect(error?.code == code)
            #expect(error?.description == error?.message)
        }
    }

    @Test("a service-account JSON is read: project, e-mail, key, key id, token URI")
    func serviceAccountParsed() async throws {
        let server = try await TestFCMServer()
        let json = try server.makeServiceAccount(projectId: "chat-prod", clientEmail: "push@chat-prod.iam.gserviceaccount.com")
        await server.stop()
        let credentials = try FCMCredentials(serviceAccountJSON: json)
        let file = try #require(try JSONSerialization.jsonObject(with: json) as? [String: String])
        #expect(credentials.projectId == "chat-prod")
        #expect(credentials.clientEmail == "push@chat-prod.iam.gserviceaccount.com")
        #expect(credentials.tokenURI == server.tokenURI)
        #expect(credentials.privateKeyId == file["private_key_id"])
        #expect(try _RSA.Signing.PrivateKey(pemRepresentation: credentials.privateKey).keySizeInBits == 2048)
    }

    @Test("bad service-account JSON is refused with a message that names what to fix")
    func badServiceAccount() async throws {
        let server = try await TestFCMServer()
        let good = try #require(try JSONSerialization.jsonObject(with: try server.makeServiceAccount()) as? [String: String])
        await server.stop()
        func variant(_ change: (inout [String: String]) -> Void) throws -> Data {
            var file = good
            change(&file)
            return try JSONSerialization.data(withJSONObject: file)
        }
        let cases: [(Data, String)] = [
            (Data("{not json".utf8), "not a JSON object"),
            (try variant { $0["private_key"] = nil }, "lacks private_key"),
            (try variant { $0["private_key"] = nil; $0["client_email"] = nil }, "lacks client_email, private_key"),
            (try variant { $0["type"] = "authorized_user" }, "not \"service_account\""),
            (try variant { $0["private_key"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }, "private_key is not an RSA private key"),
            (try variant { $0["private_key"] = P256.Signing.PrivateKey().pemRepresentation }, "private_key is not an RSA private key"),
            (try variant { $0["token_uri"] = "not a url" }, "tokenURI"),
        ]
        for (json, message) in cases {
            let error = #expect(throws: PushCredentialError.self) { try FCMCredentials(serviceAccountJSON: json) }
            #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error"), wanted \(message)")
        }
        let missingURI = try FCMCredentials(serviceAccountJSON: try variant { $0["token_uri"] = nil })
        #expect(missingURI.tokenURI == FCMCredentials.googleTokenURI)
    }

    @Test("webhook secrets shorter than 16 characters are refused")
    func webhookSecret() throws {
        let error = #expect(throws: PushCredentialError.self) { try WebhookCredentials(secret: "short").validated() }
        #expect(error?.message.contains("at least 16") == true)
        #expect(throws: Never.self) { try WebhookCredentials(secret: "0123456789abcdef").validated() }
    }

    @Test("descriptions never show key material: p8, p12 password, RSA key, webhook secret")
    func redacted() async throws {
        let server = try await TestFCMServer()
        let fcm = try FCMCredentials(serviceAccountJSON: try server.makeServiceAccount())
        await server.stop()
        let p12 = try await TestCertificateAuthority.shared.issueClientP12(commonName: "push", bundleId: "com.example.chat", password: "hunter2-password")
        let certificate = APNsCredentials(bundleId: "com.example.chat", authentication: .certificate(p12: p12, password: "hunter2-password"))
        let token = Self.tokenCredentials()
        let webhook = WebhookCredentials(secret: "webhook-secret-value")
        let all = PushCredentials(apns: token, fcm: fcm, webhook: webhook)

        let texts = [token.redacted, certificate.redacted, fcm.redacted, webhook.redacted, all.redacted,
                     "\(all)", String(describing: certificate), String(reflecting: fcm), "\(PushCredentials(apns: certificate))"]
        let p8Body = Self.p8.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let rsaBody = fcm.privateKey.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        for text in texts {
            #expect(!text.contains("PRIVATE KEY"))
            #expect(!text.contains(String(p8Body.prefix(20))))
            #expect(!text.contains(String(rsaBody.prefix(20))))
            #expect(!text.contains("hunter2"))
            #expect(!text.contains("webhook-secret-value"))
            #expect(!text.contains(p12.base64EncodedString().prefix(20)))
        }
        #expect(token.redacted.contains("KEY1234567") && token.redacted.contains("TEAM123456") && token.redacted.contains("com.example.chat"))
        #expect(fcm.redacted.contains(fcm.projectId) && fcm.redacted.contains(fcm.clientEmail))
        #expect(certificate.redacted.contains("com.example.chat"))
    }

    @Test("extraTrustRootsPEM that holds no certificate is refused when the transport is made")
    func badTrustRoots() throws {
        #expect(throws: PushCredentialError.self) { try ProviderPushTransport(endpoints: PushEndpoints(extraTrustRootsPEM: "nothing")) }
    }
}
