import Crypto
import Foundation
import IMPush
import IMPushProviders
import NIOCore

/// The three local push providers a server's pushes go to in a test or a benchmark: APNs (HTTP/2,
/// p8 token authentication), FCM (OAuth2 token endpoint and HTTP v1) and a webhook receiver, with
/// the transport aimed at them and the app settings (`/push/settings/set.json`) that use them.
public final class TestPushProviders: Sendable {
    public static let bundleId = "com.example.imserver"
    public static let teamId = "TEAM123456"
    public static let keyId = "KEY1234567"
    public static let webhookSecret = "imserver-test-webhook-secret"

    public let apns: TestAPNsServer
    public let fcm: TestFCMServer
    public let webhook: TestWebhookReceiver
    /// The p8 key (PEM) the local APNs trusts.
    public let p8: String
    /// A service account the local FCM trusts (its token_uri points at it).
    public let serviceAccount: Data

    /// Starts the three servers. `recordRequests` false keeps only APNs' count (benchmarks);
    /// `now` is APNs' clock for provider-token ages.
    public static func start(recordRequests: Bool = true, now: @escaping @Sendable () -> Date = { Date() },
                             eventLoopGroup: (any EventLoopGroup)? = nil) async throws -> TestPushProviders {
        let key = P256.Signing.PrivateKey()
        let apns = try await TestAPNsServer(bundleId: bundleId, teamId: teamId, keys: [keyId: key.publicKey], now: now,
                                            recordRequests: recordRequests, eventLoopGroup: eventLoopGroup)
        let fcm = try await TestFCMServer()
        let webhook = try await TestWebhookReceiver(secret: webhookSecret)
        return TestPushProviders(apns: apns, fcm: fcm, webhook: webhook, p8: key.pemRepresentation,
                                 serviceAccount: try fcm.makeServiceAccount())
    }

    private init(apns: TestAPNsServer, fcm: TestFCMServer, webhook: TestWebhookReceiver, p8: String, serviceAccount: Data) {
        self.apns = apns
        self.fcm = fcm
        self.webhook = webhook
        self.p8 = p8
        self.serviceAccount = serviceAccount
    }

    /// Where the providers are, with the test CA trusted.
    public func endpoints(timeoutSeconds: Int = 10) -> PushEndpoints {
        PushEndpoints(apnsProduction: apns.baseURL, apnsSandbox: apns.baseURL, fcm: fcm.baseURL,
                      extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM, requestTimeoutSeconds: timeoutSeconds)
    }

    /// A transport aimed at these providers (the server that is given it shuts it down).
    public func transport(timeoutSeconds: Int = 10, now: @escaping @Sendable () -> Date = { Date() }) throws -> ProviderPushTransport {
        try ProviderPushTransport(endpoints: endpoints(timeoutSeconds: timeoutSeconds), now: now)
    }

    /// The body of `/push/settings/set.json` giving an app credentials for all three providers.
    public var credentialSettings: [String: Any] {
        [
            "apns": ["bundleId": Self.bundleId, "keyId": Self.keyId, "teamId": Self.teamId, "p8": p8],
            "fcm": ["serviceAccount": String(decoding: serviceAccount, as: UTF8.self)],
            "webhook": ["secret": Self.webhookSecret],
        ]
    }

    /// A 64-character hex APNs device token, different for each `name`.
    public static func apnsToken(_ name: String) -> String {
        SHA256.hash(data: Data("apns-\(name)".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    public func stop() async {
        await apns.stop()
        await fcm.stop()
        await webhook.stop()
    }
}
