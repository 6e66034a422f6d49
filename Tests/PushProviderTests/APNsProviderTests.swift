import Crypto
import Foundation
import IMPush
import IMPushProviders
import IMServerTesting
import NIOCore
import NIOPosix
import Testing

/// ProviderPushTransport against the local APNs (TestAPNsServer): HTTP/2 over TLS with the test CA.
@Suite("APNs provider")
struct APNsProviderTests {
    static let bundleId = "com.example.chat"
    static let teamId = "TEAM123456"
    static let keyId = "KEY1234567"

    /// A local APNs trusting one p8 key, the transport pointed at it for both environments, and
    /// token credentials with that key; all on `clock`.
    static func withAPNs(clock: TestClock = TestClock(), serverClock: TestClock? = nil, timeoutSeconds: Int = 30,
                         eventLoopGroup: (any EventLoopGroup)? = nil, initialWindowSize: Int = 1 << 20, maxConcurrentStreams: Int = 1000,
                         connections: Int = 4, _ body: (TestAPNsServer, ProviderPushTransport, PushCredentials) async throws -> Void) async throws {
        let key = P256.Signing.PrivateKey()
        let server = try await TestAPNsServer(bundleId: bundleId, teamId: teamId, keys: [keyId: key.publicKey],
                                              now: (serverClock ?? clock).now, eventLoopGroup: eventLoopGroup,
                                              initialWindowSize: initialWindowSize, maxConcurrentStreams: maxConcurrentStreams)
        let endpoints = PushEndpoints(apnsProduction: server.baseURL, apnsSandbox: server.baseURL,
                                      extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM,
                                      requestTimeoutSeconds: timeoutSeconds, apnsConnections: connections)
        let credentials = PushCredentials(apns: APNsCredentials(
            bundleId: bundleId, authentication: .token(p8: key.pemRepresentation, keyId: keyId, teamId: teamId)))
        do {
            try await withTransport(endpoints, now: clock.now, eventLoopGroup: eventLoopGroup) { transport in
                try await body(server, transport, credentials)
            }
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    static func alert(_ id: String = "msg-1") -> PushNotification {
        PushNotification(id: id, title: "Ann", body: "hello", badge: 3, sound: "default", threadId: "PR:ann",
                         collapseId: "collapse-1", interruptionLevel: "time-sensitive", rc: sampleRC, appData: "xxxx",
                         timeToLiveSeconds: 600)
    }

    @Test("token auth: delivered with RongCloud's payload and APNs' headers, authenticated by a valid ES256 provider token")
    func tokenAuthPayloadAndHeaders() async throws {
        let clock = TestClock()
        try await Self.withAPNs(clock: clock) { server, transport, credentials in
            let token = deviceToken(1)
            let outcome = await transport.send(Self.alert(), to: .apns(token: token, environment: .production, voip: false),
                                               credentials: credentials)
            let apnsId = ProviderPushTransport.apnsId(for: "msg-1")
            #expect(outcome == .delivered(providerId: apnsId))

            let request = try #require(server.requests.first)
            #expect(server.requests.count == 1)
            #expect(request.deviceToken == token)
            #expect(request.httpVersion == "HTTP/2")
            #expect(request.header("apns-topic") == Self.bundleId)
            #expect(request.header("apns-push-type") == "alert")
            #expect(request.header("apns-priority") == "10")
            #expect(request.header("apns-id") == apnsId)
            #expect(request.header("apns-collapse-id") == "collapse-1")
            #expect(request.header("apns-expiration") == String(clock.seconds + 600))
            #expect(request.header("content-type") == "application/json")
            guard case .token(let keyId, let teamId, let issuedAt, _) = request.authentication else {
                Issue.record("not token-authenticated: \(request.authentication)")
                return
            }
            #expect(keyId == Self.keyId && teamId == Self.teamId && issuedAt == clock.seconds)

            let json = try #require(request.json)
            #expect(Set(json.keys) == ["aps", "rc", "appData"])
            let aps = try #require(json["aps"] as? [String: Any])
            #expect(Set(aps.keys) == ["alert", "badge", "sound", "thread-id", "interruption-level"])
            #expect(aps["alert"] as? [String: String] == ["title": "Ann", "body": "hello"])
            #expect(aps["badge"] as? Int == 3)
            #expect(aps["sound"] as? String == "default")
            #expect(aps["thread-id"] as? String == "PR:ann")
            #expect(aps["interruption-level"] as? String == "time-sensitive")
            #expect(json["rc"] as? [String: String] == sampleRC)
            #expect(json["appData"] as? String == "xxxx")
        }
    }

    @Test("no title: alert is the body alone; nil badge, sound and appData are left out, and so are collapse id and expiration")
    func minimalPayload() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let notification = PushNotification(id: "m", body: "[Image]", sound: nil,
                                                rc: ["cType": "UG", "bId": "", "id": "X1"])
            let outcome = await transport.send(notification, to: .apns(token: deviceToken(2), environment: .sandbox, voip: false),
                                               credentials: credentials)
            #expect(outcome == .delivered(providerId: ProviderPushTransport.apnsId(for: "m")))
            let request = try #require(server.requests.first)
            let json = try #require(request.json)
            #expect(Set(json.keys) == ["aps", "rc"])
            #expect(json["aps"] as? [String: String] == ["alert": "[Image]"])
            #expect(json["rc"] as? [String: String] == ["cType": "UG", "bId": "", "id": "X1"])
            #expect(request.header("apns-collapse-id") == nil)
            #expect(request.header("apns-expiration") == nil)
        }
    }

    @Test("apns-id is a UUID derived from the notification id: the same id gives the same apns-id, another id another")
    func stableApnsId() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let target = PushTarget.apns(token: deviceToken(3), environment: .production, voip: false)
            _ = await transport.send(Self.alert("resent"), to: target, credentials: credentials)
            _ = await transport.send(Self.alert("resent"), to: target, credentials: credentials)
            _ = await transport.send(Self.alert("other"), to: target, credentials: credentials)
            let ids = server.requests.map { $0.header("apns-id") }
            #expect(ids.count == 3)
            #expect(ids[0] != nil && ids[0] == ids[1])
            #expect(ids[2] != nil && ids[2] != ids[0])
            let first = try #require(ids[0])
            let uuid = try #require(UUID(uuidString: first))
            #expect(uuid.uuidString.lowercased() == first)
        }
        #expect(ProviderPushTransport.apnsId(for: "resent") == ProviderPushTransport.apnsId(for: "resent"))
        // SHA-256("resent")'s first 16 bytes with the version (8) and variant bits set, as Python's
        // uuid module prints them.
        #expect(ProviderPushTransport.apnsId(for: "resent") == "bddddaec-b8f7-8b52-b214-206fe0d6595d")
    }

    @Test("VoIP: topic <bundle>.voip, push type voip, priority 10")
    func voip() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let outcome = await transport.send(Self.alert("call-1"), to: .apns(token: deviceToken(4), environment: .production, voip: true),
                                               credentials: credentials)
            #expect(outcome == .delivered(providerId: ProviderPushTransport.apnsId(for: "call-1")))
            let request = try #require(server.requests.first)
            #expect(request.header("apns-topic") == Self.bundleId + ".voip")
            #expect(request.header("apns-push-type") == "voip")
            #expect(request.header("apns-priority") == "10")
        }
    }

    @Test("the environment picks the host: sandbox targets go to apnsSandbox, production ones to apnsProduction")
    func environmentPicksHost() async throws {
        let key = P256.Signing.PrivateKey()
        let server = try await TestAPNsServer(bundleId: Self.bundleId, teamId: Self.teamId, keys: [Self.keyId: key.publicKey])
        let closed = try TestPorts.closed()
        let endpoints = PushEndpoints(apnsProduction: "https://127.0.0.1:\(closed)", apnsSandbox: server.baseURL,
                                      extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM,
                                      requestTimeoutSeconds: 30)
        let credentials = PushCredentials(apns: APNsCredentials(
            bundleId: Self.bundleId, authentication: .token(p8: key.pemRepresentation, keyId: Self.keyId, teamId: Self.teamId)))
        try await withTransport(endpoints) { transport in
            let sandbox = await transport.send(Self.alert(), to: .apns(token: deviceToken(5), environment: .sandbox, voip: false),
                                               credentials: credentials)
            let production = await transport.send(Self.alert(), to: .apns(token: deviceToken(5), environment: .production, voip: false),
                                                  credentials: credentials)
            #expect(sandbox == .delivered(providerId: ProviderPushTransport.apnsId(for: "msg-1")))
            #expect(production == .retry(code: "APNs_connection", afterSeconds: nil))
        }
        #expect(server.requestCount == 1)
        await server.stop()
    }

    @Test("the provider token is reused across sends and replaced once it is 50 minutes old")
    func providerTokenCachedAndRefreshed() async throws {
        let clock = TestClock()
        try await Self.withAPNs(clock: clock) { server, transport, credentials in
            let target = PushTarget.apns(token: deviceToken(6), environment: .production, voip: false)
            let start = clock.seconds
            for _ in 0..<3 { #expect(await transport.send(Self.alert(), to: target, credentials: credentials).isDelivered) }
            clock.advance(49 * 60 + 59)
            #expect(await transport.send(Self.alert(), to: target, credentials: credentials).isDelivered)
            clock.advance(1)
            #expect(await transport.send(Self.alert(), to: target, credentials: credentials).isDelivered)
            #expect(await transport.send(Self.alert(), to: target, credentials: credentials).isDelivered)

            let tokens = server.requests.map { request -> (jwt: String, iat: Int)? in
                if case .token(_, _, let iat, let jwt) = request.authentication { return (jwt, iat) }
                return nil
            }.compactMap { $0 }
            #expect(tokens.count == 6)
            #expect(Set(tokens.prefix(4).map(\.jwt)).count == 1, "one token for the first 49:59")
            #expect(tokens.prefix(4).allSatisfy { $0.iat == start })
            #expect(tokens[4].jwt != tokens[0].jwt, "a new token at 50:00")
            #expect(tokens[4].iat == start + 50 * 60)
            #expect(tokens[5].jwt == tokens[4].jwt)
        }
    }

    @Test("403 ExpiredProviderToken: retry, and the cached token is dropped so the next send signs a new one")
    func expiredProviderTokenDropsCache() async throws {
        let clock = TestClock()
        let serverClock = TestClock(clock.date.addingTimeInterval(61 * 60))
        try await Self.withAPNs(clock: clock, serverClock: serverClock) { server, transport, credentials in
            let target = PushTarget.apns(token: deviceToken(7), environment: .production, voip: false)
            let first = await transport.send(Self.alert(), to: target, credentials: credentials)
            #expect(first == .retry(code: "APNs_403{\"reason\":\"ExpiredProviderToken\"}", afterSeconds: nil))
            #expect(server.refusals.map(\.reason) == ["ExpiredProviderToken"])
            // 30 minutes on the transport's clock: a cached token would still be used (and refused again).
            clock.advance(30 * 60)
            let second = await transport.send(Self.alert(), to: target, credentials: credentials)
            #expect(second.isDelivered)
            guard case .token(_, _, let iat, _)? = server.requests.first?.authentication else {
                Issue.record("no token-authenticated request")
                return
            }
            #expect(iat == clock.seconds)
        }
    }

    @Test("a p8 key APNs does not know: 403 InvalidProviderToken fails")
    func unknownKeyFails() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let stranger = PushCredentials(apns: APNsCredentials(
                bundleId: Self.bundleId,
                authentication: .token(p8: P256.Signing.PrivateKey().pemRepresentation, keyId: Self.keyId, teamId: Self.teamId)))
            let outcome = await transport.send(Self.alert(), to: .apns(token: deviceToken(8), environment: .production, voip: false),
                                               credentials: stranger)
            #expect(outcome == .failed(code: "APNs_403{\"reason\":\"InvalidProviderToken\"}"))
            #expect(server.requests.isEmpty)
            _ = credentials
        }
    }

    @Test("answers: BadDeviceToken and 410 Unregistered and DeviceTokenNotForTopic drop the token; 429, 500, 503 retry with Retry-After; 413 fails")
    func answersMapped() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let cases: [(TestAPNsServer.Answer, PushOutcome)] = [
                (.badDeviceToken, .invalidToken(code: "APNS_A2_2400{\"reason\":\"BadDeviceToken\"}")),
                (.unregistered, .invalidToken(code: "APNs_410{\"reason\":\"Unregistered\"}")),
                (.deviceTokenNotForTopic, .invalidToken(code: "APNs_400{\"reason\":\"DeviceTokenNotForTopic\"}")),
                (.tooManyRequests(retryAfter: 30), .retry(code: "APNs_429{\"reason\":\"TooManyRequests\"}", afterSeconds: 30)),
                (.tooManyRequests(retryAfter: nil), .retry(code: "APNs_429{\"reason\":\"TooManyRequests\"}", afterSeconds: nil)),
                (.internalServerError, .retry(code: "APNs_500{\"reason\":\"InternalServerError\"}", afterSeconds: nil)),
                (.serviceUnavailable(retryAfter: 5), .retry(code: "APNs_503{\"reason\":\"ServiceUnavailable\"}", afterSeconds: 5)),
                (.status(413, reason: "PayloadTooLarge"), .failed(code: "APNs_413{\"reason\":\"PayloadTooLarge\"}")),
            ]
            for (index, (answer, expected)) in cases.enumerated() {
                let token = deviceToken(100 + index)
                server.answer(answer, forToken: token)
                let outcome = await transport.send(Self.alert(), to: .apns(token: token, environment: .production, voip: false),
                                                   credentials: credentials)
                #expect(outcome == expected, "\(answer)")
            }
            #expect(server.requestCount == cases.count)
        }
    }

    @Test("a batch gives each push the outcome a send of its own gives, in its place; only the APNs pushes worth sending make requests")
    func batchOutcomesInPlace() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let answers: [(TestAPNsServer.Answer, PushOutcome)] = [
                (.badDeviceToken, .invalidToken(code: "APNS_A2_2400{\"reason\":\"BadDeviceToken\"}")),
                (.unregistered, .invalidToken(code: "APNs_410{\"reason\":\"Unregistered\"}")),
                (.tooManyRequests(retryAfter: 30), .retry(code: "APNs_429{\"reason\":\"TooManyRequests\"}", afterSeconds: 30)),
                (.internalServerError, .retry(code: "APNs_500{\"reason\":\"InternalServerError\"}", afterSeconds: nil)),
                (.status(413, reason: "PayloadTooLarge"), .failed(code: "APNs_413{\"reason\":\"PayloadTooLarge\"}")),
            ]
            var batch: [PushSend] = []
            // nil: delivered.
            var expected: [PushOutcome?] = []
            for (index, (answer, outcome)) in answers.enumerated() {
                let token = deviceToken(200 + index)
                server.answer(answer, forToken: token)
                batch.append(PushSend(Self.alert("answer-\(index)"), to: .apns(token: token, environment: .production, voip: false),
                                      credentials: credentials))
                expected.append(outcome)
                batch.append(PushSend(Self.alert("ok-\(index)"), to: .apns(token: deviceToken(300 + index), environment: index % 2 == 0 ? .production : .sandbox,
                                                                           voip: index == 3), credentials: credentials))
                expected.append(nil)
            }
            let none = PushCredentials()
            batch.insert(PushSend(Self.alert(), to: .apns(token: "not-hex", environment: .production, voip: false), credentials: credentials), at: 3)
            expected.insert(.invalidToken(code: "Rong_DeviceToken_Invalid"), at: 3)
            batch.append(PushSend(Self.alert(), to: .apns(token: deviceToken(400), environment: .production, voip: false), credentials: none))
            expected.append(.failed(code: "PUSH_I9"))
            batch.append(PushSend(Self.alert(), to: .fcm(token: "fcm-token"), credentials: none))
            expected.append(.failed(code: "FCM_NO_CREDENTIALS"))
            batch.insert(PushSend(Self.alert(), to: .webhook(url: "http://127.0.0.1:1/x"), credentials: none), at: 0)
            expected.insert(.failed(code: "WEBHOOK_NO_SECRET"), at: 0)

            let outcomes = await transport.send(batch: batch)
            #expect(outcomes.count == batch.count)
            for (index, (outcome, wanted)) in zip(outcomes, expected).enumerated() {
                if let wanted {
                    #expect(outcome == wanted, "push \(index)")
                } else {
                    #expect(outcome.isDelivered, "push \(index): \(outcome)")
                }
            }
            #expect(server.requestCount == answers.count * 2)
            #expect(Set(server.requests.compactMap { $0.header("apns-id") }).count == answers.count * 2)
            #expect(await transport.send(batch: []) == [])
        }
    }

    @Test("a body past the stream window APNs announced fails at once as APNs_PayloadTooLarge, without a request, and holds up none behind it")
    func bodyPastStreamWindow() async throws {
        try await Self.withAPNs(initialWindowSize: 1024) { server, transport, credentials in
            var large = Self.alert("large")
            large.appData = String(repeating: "d", count: 2000)
            let small = Self.alert("small")
            let batch = [
                PushSend(large, to: .apns(token: deviceToken(500), environment: .production, voip: false), credentials: credentials),
                PushSend(small, to: .apns(token: deviceToken(501), environment: .production, voip: false), credentials: credentials),
                PushSend(large, to: .apns(token: deviceToken(502), environment: .production, voip: false), credentials: credentials),
                PushSend(small, to: .apns(token: deviceToken(503), environment: .production, voip: false), credentials: credentials),
            ]
            let outcomes = await transport.send(batch: batch)
            #expect(outcomes.count == 4)
            #expect(outcomes[0] == .failed(code: "APNs_PayloadTooLarge"))
            #expect(outcomes[2] == .failed(code: "APNs_PayloadTooLarge"))
            #expect(outcomes[1].isDelivered, "\(outcomes[1])")
            #expect(outcomes[3].isDelivered, "\(outcomes[3])")
            #expect(server.requests.map(\.deviceToken) == [deviceToken(501), deviceToken(503)], "only the pushes that fit were sent")
            // On its own, too; and the connection still carries what fits.
            #expect(await transport.send(large, to: .apns(token: deviceToken(504), environment: .production, voip: false),
                                         credentials: credentials) == .failed(code: "APNs_PayloadTooLarge"))
            #expect(await transport.send(small, to: .apns(token: deviceToken(505), environment: .production, voip: false),
                                         credentials: credentials).isDelivered)
            #expect(server.requestCount == 3)
        }
    }

    @Test("a GOAWAY hands the pushes not yet sent to a new connection: all delivered, none retried, none sent twice")
    func goAwayHandsOver() async throws {
        // One stream at a time: the pushes after the first wait on the connection when its GOAWAY comes.
        try await Self.withAPNs(maxConcurrentStreams: 1) { server, transport, credentials in
            let tokens = (600..<605).map { deviceToken($0) }
            server.answer(.goAway, forToken: tokens[0])
            let batch = tokens.enumerated().map { index, token in
                PushSend(Self.alert("goaway-\(index)"), to: .apns(token: token, environment: .production, voip: false), credentials: credentials)
            }
            let outcomes = await transport.send(batch: batch)
            #expect(outcomes.allSatisfy { $0.isDelivered }, "\(outcomes)")
            let requests = server.requests
            #expect(requests.map(\.deviceToken).sorted() == tokens.sorted(), "each push once")
            #expect(requests.first { $0.deviceToken == tokens[0] }?.connectionId == 1)
            #expect(Set(requests.filter { $0.deviceToken != tokens[0] }.map(\.connectionId)) == [2], "the rest on the next connection")
            #expect(server.connectionsAccepted == 2)
        }
    }

    @Test("a GOAWAY that says a sent push was not processed: it goes again on a new connection, with the same apns-id")
    func goAwayUnprocessedHandsOver() async throws {
        try await Self.withAPNs(maxConcurrentStreams: 1) { server, transport, credentials in
            let tokens = (610..<613).map { deviceToken($0) }
            server.answer(.goAwayUnprocessed, forToken: tokens[0])
            let batch = tokens.enumerated().map { index, token in
                PushSend(Self.alert("unprocessed-\(index)"), to: .apns(token: token, environment: .production, voip: false), credentials: credentials)
            }
            let outcomes = await transport.send(batch: batch)
            #expect(outcomes.allSatisfy { $0.isDelivered }, "\(outcomes)")
            let first = server.requests.filter { $0.deviceToken == tokens[0] }
            #expect(first.map(\.connectionId) == [1, 2], "given up unanswered on the first connection, delivered on the second")
            #expect(first.count == 2 && first[0].header("apns-id") == first[1].header("apns-id"))
            #expect(server.requests.filter { $0.deviceToken != tokens[0] }.allSatisfy { $0.connectionId == 2 })
            #expect(server.requestCount == 4)
        }
    }

    @Test("a server that never answers: retry after requestTimeoutSeconds")
    func hangingServerTimesOut() async throws {
        // An event loop group of its own, as the server's push transport has.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        try await Self.withAPNs(timeoutSeconds: 5, eventLoopGroup: group) { server, transport, credentials in
            // The connection first, so the hung push is the only request left to time out.
            let first = await warmUp(transport, Self.alert(), to: .apns(token: deviceToken(8), environment: .production, voip: false),
                                     credentials: credentials)
            #expect(first.isDelivered)
            let token = deviceToken(9)
            server.answer(.hang, forToken: token)
            let started = ContinuousClock.now
            let outcome = await transport.send(Self.alert(), to: .apns(token: token, environment: .production, voip: false),
                                               credentials: credentials)
            #expect(outcome == .retry(code: "APNs_timeout", afterSeconds: nil))
            let waited = ContinuousClock.now - started
            // The server never answers, so without the timeout this would wait until the test's
            // end. The upper bound is loose: in the full suite the tests share two cores and the
            // task that reads the clock may resume seconds late (21.5 s was seen in one run).
            #expect(waited >= .seconds(4) && waited < .seconds(60), "\(waited)")
            #expect(server.requests.last?.deviceToken == token)
            // The connection still serves the next push.
            let next = await transport.send(Self.alert(), to: .apns(token: deviceToken(10), environment: .production, voip: false),
                                            credentials: credentials)
            #expect(next.isDelivered)
            #expect(server.connectionsAccepted == 1)
        }
    }

    @Test("missing credentials and malformed device tokens are answered without a request")
    func missingCredentialsAndBadTokens() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let none = PushCredentials()
            #expect(await transport.send(Self.alert(), to: .apns(token: deviceToken(11), environment: .production, voip: false),
                                         credentials: none) == .failed(code: "PUSH_I9"))
            #expect(await transport.send(Self.alert(), to: .fcm(token: "fcm-token"), credentials: none) == .failed(code: "FCM_NO_CREDENTIALS"))
            #expect(await transport.send(Self.alert(), to: .webhook(url: "http://127.0.0.1:1/x"), credentials: none)
                == .failed(code: "WEBHOOK_NO_SECRET"))
            let broken = PushCredentials(apns: APNsCredentials(
                bundleId: Self.bundleId, authentication: .token(p8: "not a key", keyId: Self.keyId, teamId: Self.teamId)))
            #expect(await transport.send(Self.alert(), to: .apns(token: deviceToken(11), environment: .production, voip: false),
                                         credentials: broken) == .failed(code: "PUSH_I9"))
            for token in ["", "not-hex", "../../x", deviceToken(12) + "/evil", "0a1B2c:d", "00ff\u{10}", "abcdeg", "é0", "\u{30}\u{00}"] {
                #expect(await transport.send(Self.alert(), to: .apns(token: token, environment: .production, voip: false),
                                             credentials: credentials) == .invalidToken(code: "Rong_DeviceToken_Invalid"))
            }
            #expect(await transport.send(Self.alert(), to: .apns(token: String(repeating: "a", count: 401), environment: .production, voip: false),
                                         credentials: credentials) == .invalidToken(code: "Rong_DeviceToken_Invalid"), "past 400 bytes")
            #expect(server.requestCount == 0)
            // Hex in either case, up to 400 bytes, is a token: sent.
            for token in [deviceToken(13).uppercased(), String(repeating: "aF09", count: 100)] {
                #expect(await transport.send(Self.alert(), to: .apns(token: token, environment: .production, voip: false),
                                             credentials: credentials).isDelivered)
            }
            #expect(server.requests.map(\.deviceToken) == [deviceToken(13).uppercased(), String(repeating: "aF09", count: 100)])
        }
    }

    @Test("a dropped connection is replaced: the push after it is delivered over a new one, or retried (APNs_connection), never lost silently")
    func droppedConnection() async throws {
        try await Self.withAPNs { server, transport, credentials in
            let token = deviceToken(1)
            let target = PushTarget.apns(token: token, environment: .production, voip: false)
            let notification = PushNotification(id: "before", body: "one", rc: sampleRC)
            #expect(await warmUp(transport, notification, to: target, credentials: credentials) == .delivered(providerId: ProviderPushTransport.apnsId(for: "before")))
            #expect(server.connectionsAccepted == 1)
            await server.dropConnections()
            var outcomes: [PushOutcome] = []
            for n in 0..<3 {
                let outcome = await transport.send(PushNotification(id: "after-\(n)", body: "two", rc: sampleRC), to: target, credentials: credentials)
                outcomes.append(outcome)
                if case .delivered = outcome { break }
            }
            #expect(outcomes.allSatisfy { $0 == .retry(code: "APNs_connection", afterSeconds: nil) || { if case .delivered = $0 { true } else { false } }($0) },
                    "\(outcomes)")
            #expect({ if case .delivered = outcomes.last { true } else { false } }(), "delivered again after the drop: \(outcomes)")
            #expect(server.connectionsAccepted == 2, "over one new connection")
        }
    }

    @Test("answers with bodies past the connection's first 64 KB window still arrive: the client gives the window back")
    func connectionWindowRefilled() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { group.shutdownGracefully { _ in } }
        // One connection, so that all 3,000 answers come over it (sends in flight at once would
        // otherwise spread over the endpoint's connections).
        try await Self.withAPNs(timeoutSeconds: 120, eventLoopGroup: group, connections: 1) { server, transport, credentials in
            // Each 400 carries {"reason":"BadDeviceToken"}: 3,000 of them are about 80 KB of DATA.
            let count = 3_000
            for n in 0..<count { server.answer(.badDeviceToken, forToken: deviceToken(10_000 + n)) }
            var invalid = 0
            for start in stride(from: 0, to: count, by: 500) {
                invalid += await withTaskGroup(of: Bool.self) { tasks in
                    for n in start..<(start + 500) {
                        tasks.addTask {
                            let outcome = await transport.send(Self.alert("dead-\(n)"), to: .apns(token: deviceToken(10_000 + n), environment: .production, voip: false),
                                                               credentials: credentials)
                            if case .invalidToken = outcome { return true }
                            return false
                        }
                    }
                    return await tasks.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
            }
            #expect(invalid == count, "every answer's body arrived and was read")
            #expect(server.connectionsAccepted == 1)
        }
    }

    @Test("a large batch is spread evenly over the endpoint's connections (each with its own 1,000 streams), a small one goes on one")
    func batchSpreadOverConnections() async throws {
        // 10 streams a connection: with the batch on one connection, 600 pushes would take 60
        // round trips; spread, each connection takes its third.
        try await Self.withAPNs(timeoutSeconds: 120, maxConcurrentStreams: 10, connections: 3) { server, transport, credentials in
            func batch(_ prefix: String, _ count: Int) -> [PushSend] {
                (0..<count).map { PushSend(Self.alert("\(prefix)-\($0)"), to: .apns(token: deviceToken($0), environment: .production, voip: false),
                                           credentials: credentials) }
            }
            let small = await transport.send(batch: batch("small", 150))
            #expect(small.allSatisfy { $0.isDelivered })
            #expect(server.connectionsAccepted == 1, "fewer than 200 a connection: one")
            let large = await transport.send(batch: batch("large", 600))
            #expect(large.count == 600 && large.allSatisfy { $0.isDelivered }, "every push answered, in its place")
            #expect(server.connectionsAccepted == 3)
            let requests = server.requests
            #expect(requests.count == 750 && Set(requests.compactMap { $0.header("apns-id") }).count == 750, "each push once")
            let byConnection = Dictionary(grouping: requests, by: \.connectionId).mapValues(\.count)
            #expect(byConnection[1] == 350 && byConnection.values.sorted() == [200, 200, 350],
                    "the small batch and a third of the large on the first connection, a third on each other: \(byConnection)")
        }
    }

    @Test("small batches in flight at once go on different connections (a sender's batches spread over the connections), one at a time on the first")
    func batchesInFlightTakeTurns() async throws {
        try await Self.withAPNs(timeoutSeconds: 10, connections: 3) { server, transport, credentials in
            func batch(_ prefix: String, _ count: Int, from first: Int) -> [PushSend] {
                (0..<count).map { PushSend(Self.alert("\(prefix)-\($0)"), to: .apns(token: deviceToken(first + $0), environment: .production, voip: false),
                                           credentials: credentials) }
            }
            // One at a time: the first connection only.
            for round in 0..<2 { #expect(await transport.send(batch: batch("alone-\(round)", 50, from: 0)).allSatisfy { $0.isDelivered }) }
            #expect(server.connectionsAccepted == 1, "one call at a time keeps to one connection")
            // A batch whose answer never comes stays in flight (until its timeout)...
            let hung = deviceToken(1_000)
            server.answer(.hang, forToken: hung)
            let held = Task { await transport.send(batch: [PushSend(Self.alert("held"), to: .apns(token: hung, environment: .production, voip: false),
                                                                    credentials: credentials)]) }
            let deadline = ContinuousClock.now + .seconds(20)
            while !server.requests.contains(where: { $0.deviceToken == hung }) {
                guard ContinuousClock.now < deadline else {
                    Issue.record("the held push never reached the server")
                    return
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            // ...so the next goes on the next connection.
            let next = await transport.send(batch: batch("next", 150, from: 100))
            #expect(next.allSatisfy { $0.isDelivered })
            let requests = server.requests
            let heldOn = try #require(requests.first { $0.deviceToken == hung }?.connectionId)
            let nextTokens = Set((100..<250).map(deviceToken))
            let nextOn = Set(requests.filter { nextTokens.contains($0.deviceToken) }.map(\.connectionId))
            #expect(nextOn.count == 1 && !nextOn.contains(heldOn), "the batch sent while another was in flight went on another connection: \(nextOn), held on \(heldOn)")
            #expect(server.connectionsAccepted == 2)
            #expect(await held.value == [.retry(code: "APNs_timeout", afterSeconds: nil)])
        }
    }

    @Test("2,000 pushes at once over one HTTP/2 connection are all delivered")
    func manyConcurrentSends() async throws {
        // Event loops of its own, so the burst does not queue ahead of the other tests' requests on
        // the shared ones, and a generous timeout: it shares the cores with them.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { group.shutdownGracefully { _ in } }
        // One connection allowed: sends in flight at once would otherwise spread over four.
        try await Self.withAPNs(timeoutSeconds: 120, eventLoopGroup: group, connections: 1) { server, transport, credentials in
            // One push first, so the connection is up (and known to be HTTP/2) before the burst.
            #expect(await transport.send(Self.alert("warm-up"), to: .apns(token: deviceToken(0), environment: .production, voip: false),
                                         credentials: credentials).isDelivered)
            let count = 2000
            let delivered = await withTaskGroup(of: Bool.self) { group in
                for n in 0..<count {
                    group.addTask {
                        await transport.send(Self.alert("burst-\(n)"), to: .apns(token: deviceToken(n), environment: .production, voip: false),
                                             credentials: credentials).isDelivered
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(delivered == count)
            let requests = server.requests
            #expect(requests.count == count + 1)
            #expect(Set(requests.map(\.connectionId)).count == 1)
            #expect(requests.allSatisfy { $0.httpVersion == "HTTP/2" })
            #expect(Set(requests.compactMap { $0.header("apns-id") }).count == count + 1)
            #expect(server.connectionsAccepted == 1)
        }
    }
}

/// APNs certificate (p12) authentication.
@Suite("APNs certificate auth")
struct APNsCertificateTests {
    static let bundleId = APNsProviderTests.bundleId

    static func withServer(_ body: (TestAPNsServer, ProviderPushTransport) async throws -> Void) async throws {
        let server = try await TestAPNsServer(bundleId: bundleId, teamId: APNsProviderTests.teamId, keys: [:])
        let endpoints = PushEndpoints(apnsProduction: server.baseURL, apnsSandbox: server.baseURL,
                                      extraTrustRootsPEM: TestCertificateAuthority.shared.rootCertificatePEM,
                                      requestTimeoutSeconds: 30)
        do {
            try await withTransport(endpoints) { transport in try await body(server, transport) }
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    @Test("a p12 from the CA authenticates the TLS connection: delivered, no authorization header, one connection per certificate")
    func certificateAuthDelivers() async throws {
        let p12 = try await TestCertificateAuthority.shared.issueClientP12(commonName: "Apple Push Services: \(Self.bundleId)",
                                                                           bundleId: Self.bundleId, password: "p12-password")
        let apns = try APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: p12, password: "p12-password")).validated()
        try await Self.withServer { server, transport in
            for n in 0..<3 {
                let outcome = await transport.send(APNsProviderTests.alert("cert-\(n)"),
                                                   to: .apns(token: deviceToken(n), environment: .production, voip: false),
                                                   credentials: PushCredentials(apns: apns))
                #expect(outcome == .delivered(providerId: ProviderPushTransport.apnsId(for: "cert-\(n)")))
            }
            let requests = server.requests
            #expect(requests.count == 3)
            for request in requests {
                #expect(request.header("authorization") == nil)
                #expect(request.header("apns-topic") == Self.bundleId)
                guard case .certificate(let subject, let uid) = request.authentication else {
                    Issue.record("not certificate-authenticated: \(request.authentication)")
                    continue
                }
                #expect(subject.contains("Apple Push Services: \(Self.bundleId)"))
                #expect(uid == Self.bundleId)
            }
            #expect(server.connectionsAccepted == 1)
        }
    }

    @Test("a wrong p12 password: refused at validation (code 67) and PUSH_I9 when sent anyway")
    func wrongPassword() async throws {
        let p12 = try await TestCertificateAuthority.shared.issueClientP12(commonName: "push", bundleId: Self.bundleId, password: "right")
        let apns = APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: p12, password: "wrong"))
        let error = #expect(throws: PushCredentialError.self) { try apns.validated() }
        #expect(error?.code == 67)
        #expect(error?.message.contains("password") == true)
        try await Self.withServer { server, transport in
            let outcome = await transport.send(APNsProviderTests.alert(), to: .apns(token: deviceToken(1), environment: .production, voip: false),
                                               credentials: PushCredentials(apns: apns))
            #expect(outcome == .failed(code: "PUSH_I9"))
            #expect(server.requestCount == 0)
        }
    }

    @Test("an expired certificate: refused at validation and APNS_4_4_null when sent anyway")
    func expiredCertificate() async throws {
        let p12 = try await TestCertificateAuthority.shared.issueClientP12(commonName: "push", bundleId: Self.bundleId, password: "pw",
                                                                           notValidAfter: Date().addingTimeInterval(-60))
        let apns = APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: p12, password: "pw"))
        let error = #expect(throws: PushCredentialError.self) { try apns.validated() }
        #expect(error?.message.contains("expired") == true)
        try await Self.withServer { server, transport in
            let outcome = await transport.send(APNsProviderTests.alert(), to: .apns(token: deviceToken(1), environment: .production, voip: false),
                                               credentials: PushCredentials(apns: apns))
            #expect(outcome == .failed(code: "APNS_4_4_null"))
            #expect(server.requestCount == 0)
        }
    }

    @Test("a certificate for another bundle id: refused at validation (code 68)")
    func otherBundle() async throws {
        let p12 = try await TestCertificateAuthority.shared.issueClientP12(commonName: "push", bundleId: "com.example.other", password: "pw")
        let apns = APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: p12, password: "pw"))
        let error = #expect(throws: PushCredentialError.self) { try apns.validated() }
        #expect(error?.code == 68)
        let voip = try await TestCertificateAuthority.shared.issueClientP12(commonName: "voip", bundleId: Self.bundleId + ".voip", password: "pw")
        #expect(throws: Never.self) { try APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: voip, password: "pw")).validated() }
    }

    @Test("a certificate from an authority APNs does not trust is refused: not delivered, nothing taken")
    func untrustedCertificate() async throws {
        let stranger = try TestCertificateAuthority(commonName: "another CA")
        let p12 = try await stranger.issueClientP12(commonName: "push", bundleId: Self.bundleId, password: "pw")
        let apns = APNsCredentials(bundleId: Self.bundleId, authentication: .certificate(p12: p12, password: "pw"))
        try await Self.withServer { server, transport in
            let outcome = await transport.send(APNsProviderTests.alert(), to: .apns(token: deviceToken(1), environment: .production, voip: false),
                                               credentials: PushCredentials(apns: apns))
            #expect(!outcome.isDelivered)
            // Under TLS 1.3 the client's handshake is over before the server checks its certificate,
            // so the refusal arrives as a closed connection; under TLS 1.2 as a failed handshake.
            #expect([PushOutcome.failed(code: "APNs_TLS"), .retry(code: "APNs_connection", afterSeconds: nil)].contains(outcome), "\(outcome)")
            #expect(server.requestCount == 0)
        }
    }
}

extension PushOutcome {
    var isDelivered: Bool {
        if case .delivered = self { return true }
        return false
    }
}
