import Crypto
import Foundation
import IMPush
import IMPushProviders
import IMServerTesting
import Testing

/// ProviderPushTransport against a local webhook relay (TestWebhookReceiver).
@Suite("Webhook provider")
struct WebhookProviderTests {
    static let secret = "relay-secret-0123456789"

    static func withReceiver(secret receiverSecret: String = secret, tls: Bool = false, clock: TestClock = TestClock(),
                             timeoutSeconds: Int = 30,
                             _ body: (TestWebhookReceiver, ProviderPushTransport, PushCredentials) async throws -> Void) async throws {
        let receiver = try await TestWebhookReceiver(secret: receiverSecret, authority: tls ? .shared : nil)
        let endpoints = PushEndpoints(extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM,
                                      requestTimeoutSeconds: timeoutSeconds)
        do {
            try await withTransport(endpoints, now: clock.now) { transport in
                try await body(receiver, transport, PushCredentials(webhook: WebhookCredentials(secret: secret)))
            }
            await receiver.stop()
        } catch {
            await receiver.stop()
            throw error
        }
    }

    static let notification = PushNotification(id: "msg-1", title: "Ann", body: "hello", badge: 2, threadId: "PR:ann",
                                               rc: sampleRC, appData: "xxxx")

    @Test("delivered: the body, the push id and timestamp headers, and a signature the relay verifies")
    func signedDelivery() async throws {
        let clock = TestClock()
        try await Self.withReceiver(clock: clock) { receiver, transport, credentials in
            let url = receiver.url("/devices/1")
            #expect(await transport.send(Self.notification, to: .webhook(url: url), credentials: credentials) == .delivered(providerId: nil))
            let delivery = try #require(receiver.deliveries.first)
            #expect(delivery.path == "/devices/1")
            #expect(delivery.signatureValid)
            #expect(delivery.header("content-type") == "application/json")
            #expect(delivery.header("x-imserver-push-id") == "msg-1")
            #expect(delivery.header("x-imserver-timestamp") == String(clock.seconds))
            // The signature, recomputed here from the documented rule.
            let signed = Data("\(clock.seconds).".utf8) + delivery.body
            let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Data(Self.secret.utf8)))
            #expect(delivery.header("x-imserver-signature") == "sha256=" + hex(mac))

            let json = try #require(delivery.json)
            #expect(json["id"] as? String == "msg-1")
            #expect(json["target"] as? String == url)
            let notification = try #require(json["notification"] as? [String: Any])
            #expect(notification["title"] as? String == "Ann")
            #expect(notification["body"] as? String == "hello")
            #expect(notification["badge"] as? Int == 2)
            #expect(notification["sound"] as? String == "default")
            #expect(notification["threadId"] as? String == "PR:ann")
            #expect(notification["rc"] as? [String: String] == sampleRC)
            #expect(notification["appData"] as? String == "xxxx")
            #expect(notification["collapseId"] == nil)
        }
    }

    @Test("a relay with another secret finds the signature invalid")
    func wrongSecretDetected() async throws {
        try await Self.withReceiver(secret: "some-other-secret-000") { receiver, transport, credentials in
            #expect(await transport.send(Self.notification, to: .webhook(url: receiver.url("/d")), credentials: credentials).isDelivered)
            #expect(receiver.deliveries.first?.signatureValid == false)
        }
    }

    @Test("answers: 404 and 410 drop the target; 429 and 503 retry with Retry-After; 400 fails")
    func answersMapped() async throws {
        try await Self.withReceiver { receiver, transport, credentials in
            let cases: [(TestWebhookReceiver.Answer, PushOutcome)] = [
                (.status(204), .delivered(providerId: nil)),
                (.status(404), .invalidToken(code: "WEBHOOK_404")),
                (.status(410), .invalidToken(code: "WEBHOOK_410")),
                (.status(429, retryAfter: 9), .retry(code: "WEBHOOK_429", afterSeconds: 9)),
                (.status(503), .retry(code: "WEBHOOK_503", afterSeconds: nil)),
                (.status(400), .failed(code: "WEBHOOK_400")),
            ]
            for (index, (answer, expected)) in cases.enumerated() {
                receiver.answer(answer, forPath: "/d/\(index)")
                let outcome = await transport.send(Self.notification, to: .webhook(url: receiver.url("/d/\(index)")), credentials: credentials)
                #expect(outcome == expected, "\(answer)")
            }
            #expect(receiver.deliveries.count == cases.count)
        }
    }

    @Test("a relay that never answers: retry after the timeout")
    func hangingRelay() async throws {
        try await Self.withReceiver(timeoutSeconds: 5) { receiver, transport, credentials in
            let first = await warmUp(transport, Self.notification, to: .webhook(url: receiver.url("/fast")), credentials: credentials)
            #expect(first.isDelivered)
            receiver.answer(.hang, forPath: "/slow")
            let outcome = await transport.send(Self.notification, to: .webhook(url: receiver.url("/slow")), credentials: credentials)
            #expect(outcome == .retry(code: "WEBHOOK_timeout", afterSeconds: nil))
            #expect(receiver.deliveries.last?.path == "/slow")
        }
    }

    @Test("an https relay whose certificate chains to extraTrustRootsPEM is reached; a URL that is not http(s) is an invalid target")
    func httpsAndBadURLs() async throws {
        try await Self.withReceiver(tls: true) { receiver, transport, credentials in
            #expect(receiver.baseURL.hasPrefix("https://"))
            #expect(await transport.send(Self.notification, to: .webhook(url: receiver.url("/s")), credentials: credentials).isDelivered)
            #expect(receiver.deliveries.first?.signatureValid == true)
            for url in ["ftp://127.0.0.1/x", "not a url", ""] {
                #expect(await transport.send(Self.notification, to: .webhook(url: url), credentials: credentials)
                    == .invalidToken(code: "Rong_DeviceToken_Invalid"))
            }
        }
    }

    @Test("an https relay not trusted: the TLS handshake fails, at once rather than at the deadline")
    func untrustedRelay() async throws {
        let receiver = try await TestWebhookReceiver(secret: Self.secret, authority: .shared)
        try await withTransport(PushEndpoints(requestTimeoutSeconds: 60)) { transport in
            let started = ContinuousClock.now
            let outcome = await transport.send(Self.notification, to: .webhook(url: receiver.url("/s")),
                                               credentials: PushCredentials(webhook: WebhookCredentials(secret: Self.secret)))
            #expect(outcome == .failed(code: "WEBHOOK_TLS"))
            #expect(ContinuousClock.now - started < .seconds(30))
        }
        #expect(receiver.deliveries.isEmpty)
        await receiver.stop()
    }

    @Test("nothing listening: retry, at once rather than at the deadline")
    func refused() async throws {
        let port = try TestPorts.closed()
        try await withTransport(PushEndpoints(requestTimeoutSeconds: 60)) { transport in
            let started = ContinuousClock.now
            let outcome = await transport.send(Self.notification, to: .webhook(url: "http://127.0.0.1:\(port)/x"),
                                               credentials: PushCredentials(webhook: WebhookCredentials(secret: Self.secret)))
            #expect(outcome == .retry(code: "WEBHOOK_connection", afterSeconds: nil))
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }
}
