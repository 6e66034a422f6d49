import Foundation
import IMPush
import IMPushProviders
import IMServerTesting
import Testing

/// ProviderPushTransport against the local FCM (TestFCMServer): the OAuth2 exchange and HTTP v1 sends.
@Suite("FCM provider")
struct FCMProviderTests {
    static func withFCM(clock: TestClock = TestClock(), timeoutSeconds: Int = 30,
                        _ body: (TestFCMServer, ProviderPushTransport, PushCredentials) async throws -> Void) async throws {
        let server = try await TestFCMServer(now: clock.now)
        let endpoints = PushEndpoints(fcm: server.baseURL, extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM,
                                      requestTimeoutSeconds: timeoutSeconds)
        do {
            let fcm = try FCMCredentials(serviceAccountJSON: try server.makeServiceAccount())
            try await withTransport(endpoints, now: clock.now) { transport in
                try await body(server, transport, PushCredentials(fcm: fcm))
            }
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    static let notification = PushNotification(
        id: "msg-1", title: "Ann", body: "hello", rc: sampleRC, appData: "xxxx", fcmCollapseKey: "chat-ann",
        fcmChannelId: "messages", fcmImageURL: "https://example.com/a.png", timeToLiveSeconds: 600)

    @Test("the send carries the notification, rc as a JSON string in data, appData and the android options")
    func payload() async throws {
        try await Self.withFCM { server, transport, credentials in
            let outcome = await transport.send(Self.notification, to: .fcm(token: "reg-token-1"), credentials: credentials)
            guard case .delivered(let name?) = outcome else {
                Issue.record("not delivered: \(outcome)")
                return
            }
            #expect(name.hasPrefix("projects/imserver-test/messages/"))
            let sent = try #require(server.messages.first)
            #expect(sent.projectId == "imserver-test")
            let message = try #require(sent.message)
            #expect(Set(message.keys) == ["token", "notification", "data", "android"])
            #expect(message["token"] as? String == "reg-token-1")
            #expect(message["notification"] as? [String: String]
                == ["title": "Ann", "body": "hello", "image": "https://example.com/a.png"])
            let data = try #require(message["data"] as? [String: String])
            #expect(Set(data.keys) == ["rc", "appData"])
            #expect(data["appData"] == "xxxx")
            let rc = try JSONSerialization.jsonObject(with: Data(try #require(data["rc"]).utf8)) as? [String: String]
            #expect(rc == sampleRC)
            let android = try #require(message["android"] as? [String: Any])
            #expect(android["collapse_key"] as? String == "chat-ann")
            #expect(android["ttl"] as? String == "600s")
            #expect(android["notification"] as? [String: String] == ["channel_id": "messages"])
        }
    }

    @Test("a plain notification has no data or android part")
    func plainPayload() async throws {
        try await Self.withFCM { server, transport, credentials in
            let outcome = await transport.send(PushNotification(id: "m", title: "T", body: "B"), to: .fcm(token: "t"), credentials: credentials)
            #expect(outcome.isDelivered)
            let message = try #require(server.messages.first?.message)
            #expect(Set(message.keys) == ["token", "notification"])
        }
    }

    @Test("one token exchange serves many sends, concurrent ones included, until 5 minutes before it expires")
    func accessTokenCached() async throws {
        let clock = TestClock()
        try await Self.withFCM(clock: clock) { server, transport, credentials in
            let start = clock.seconds
            let delivered = await withTaskGroup(of: Bool.self) { group in
                for n in 0..<20 {
                    group.addTask { await transport.send(Self.notification, to: .fcm(token: "t\(n)"), credentials: credentials).isDelivered }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(delivered == 20)
            #expect(server.tokenExchanges.count == 1)

            let exchange = try #require(server.tokenExchanges.first)
            #expect(exchange.error == nil)
            #expect(exchange.clientEmail == credentials.fcm?.clientEmail)
            #expect(exchange.keyId != nil && exchange.keyId == credentials.fcm?.privateKeyId)
            #expect(exchange.scope == "https://www.googleapis.com/auth/firebase.messaging")
            #expect(exchange.audience == credentials.fcm?.tokenURI)
            #expect(exchange.issuedAt == start && exchange.expiresAt == start + 3600)

            clock.advance(3600 - 300 - 1)
            #expect(await transport.send(Self.notification, to: .fcm(token: "a"), credentials: credentials).isDelivered)
            #expect(server.tokenExchanges.count == 1)
            clock.advance(1)
            #expect(await transport.send(Self.notification, to: .fcm(token: "b"), credentials: credentials).isDelivered)
            #expect(server.tokenExchanges.count == 2)
            let tokens = server.messages.map(\.accessToken)
            #expect(Set(tokens.prefix(21)).count == 1)
            #expect(tokens.last != tokens.first)
        }
    }

    @Test("401: the cached access token is dropped (retry), and the next send exchanges for a new one")
    func unauthenticatedRefetches() async throws {
        try await Self.withFCM { server, transport, credentials in
            #expect(await transport.send(Self.notification, to: .fcm(token: "t"), credentials: credentials).isDelivered)
            server.revokeAccessTokens()
            let refused = await transport.send(Self.notification, to: .fcm(token: "t"), credentials: credentials)
            #expect(refused == .retry(code: "FCM_401_UNAUTHENTICATED", afterSeconds: nil))
            #expect(server.unauthenticatedCount == 1)
            #expect(await transport.send(Self.notification, to: .fcm(token: "t"), credentials: credentials).isDelivered)
            #expect(server.tokenExchanges.count == 2)
        }
    }

    @Test("answers: UNREGISTERED and an invalid token drop the token; 429 and 503 retry with Retry-After; another INVALID_ARGUMENT fails")
    func answersMapped() async throws {
        try await Self.withFCM { server, transport, credentials in
            let cases: [(TestFCMServer.Answer, PushOutcome)] = [
                (.unregistered, .invalidToken(code: "FCM_UNREGISTERED")),
                (.invalidToken, .invalidToken(code: "FCM_INVALID_ARGUMENT")),
                (.invalidArgument, .failed(code: "FCM_400_INVALID_ARGUMENT")),
                (.quotaExceeded(retryAfter: 20), .retry(code: "FCM_429_QUOTA_EXCEEDED", afterSeconds: 20)),
                (.unavailable(retryAfter: nil), .retry(code: "FCM_503_UNAVAILABLE", afterSeconds: nil)),
                (.unavailable(retryAfter: 7), .retry(code: "FCM_503_UNAVAILABLE", afterSeconds: 7)),
                (.internalError, .retry(code: "FCM_500_INTERNAL", afterSeconds: nil)),
            ]
            for (index, (answer, expected)) in cases.enumerated() {
                server.answer(answer, forToken: "token-\(index)")
                let outcome = await transport.send(Self.notification, to: .fcm(token: "token-\(index)"), credentials: credentials)
                #expect(outcome == expected, "\(answer)")
            }
            #expect(server.messages.count == cases.count)
            #expect(await transport.send(Self.notification, to: .fcm(token: ""), credentials: credentials)
                == .invalidToken(code: "Rong_DeviceToken_Invalid"))
        }
    }

    @Test("a hung send retries after the timeout")
    func hangingSend() async throws {
        try await Self.withFCM(timeoutSeconds: 5) { server, transport, credentials in
            // The access token first, so the hung send is the only request left to time out.
            let first = await warmUp(transport, Self.notification, to: .fcm(token: "fast"), credentials: credentials)
            #expect(first.isDelivered)
            server.answer(.hang, forToken: "slow")
            let outcome = await transport.send(Self.notification, to: .fcm(token: "slow"), credentials: credentials)
            #expect(outcome == .retry(code: "FCM_timeout", afterSeconds: nil))
            #expect(server.messages.last?.token == "slow")
        }
    }

    @Test("the token endpoint: a 503 retries and the next send exchanges again; a key Google does not know fails with invalid_grant")
    func tokenEndpointFailures() async throws {
        try await Self.withFCM { server, transport, credentials in
            server.failTokenRequests([503])
            #expect(await transport.send(Self.notification, to: .fcm(token: "t"), credentials: credentials)
                == .retry(code: "FCM_AUTH_503", afterSeconds: nil))
            #expect(await transport.send(Self.notification, to: .fcm(token: "t"), credentials: credentials).isDelivered)
            #expect(server.tokenExchanges.count == 2)

            // A service account whose key the server never saw (made by another server).
            let other = try await TestFCMServer()
            let foreign = try FCMCredentials(serviceAccountJSON: try other.makeServiceAccount())
            await other.stop()
            var stranger = try #require(credentials.fcm)
            stranger.privateKey = foreign.privateKey
            #expect(await transport.send(Self.notification, to: .fcm(token: "t"), credentials: PushCredentials(fcm: stranger))
                == .failed(code: "FCM_AUTH_400_invalid_grant"))
            #expect(server.tokenExchanges.last?.error == "invalid_grant")
        }
    }
}
