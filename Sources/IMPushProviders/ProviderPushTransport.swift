import AsyncHTTPClient
import Crypto
import _CryptoExtras
import Foundation
import IMPush
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif
import NIOHTTP1
import NIOSSL
import Synchronization

/// Sends to APNs over its own HTTP/2 connections (`APNsHTTP2Client`: one per endpoint and TLS
/// identity, a p12 certificate being one), and to FCM HTTP v1 and webhook relays over one shared
/// `HTTPClient`.
///
/// APNs provider tokens are cached per (team, key) and renewed after 50 minutes; FCM access
/// tokens per service account until 5 minutes before they expire. Times come from `now`.
///
/// Outcome codes (`PushOutcome`'s `code`):
///
/// | provider | answer | outcome | code |
/// |---|---|---|---|
/// | any | target malformed (APNs token not hex, empty FCM token, webhook URL not http(s)) | invalidToken | `Rong_DeviceToken_Invalid` |
/// | APNs | no APNs credentials, or a p8/p12 that does not load | failed | `PUSH_I9` |
/// | APNs | p12 certificate expired | failed | `APNS_4_4_null` |
/// | APNs | 200 | delivered(apns-id) | |
/// | APNs | 400 BadDeviceToken | invalidToken | `APNS_A2_2400{"reason":"BadDeviceToken"}` |
/// | APNs | 400 DeviceTokenNotForTopic | invalidToken | `APNs_400{"reason":"DeviceTokenNotForTopic"}` |
/// | APNs | 410 (Unregistered, ExpiredToken) | invalidToken | `APNs_410{"reason":"Unregistered"}` |
/// | APNs | 403 ExpiredProviderToken (cached token dropped) | retry | `APNs_403{"reason":"ExpiredProviderToken"}` |
/// | APNs | 429, 5xx | retry(Retry-After) | `APNs_<status>{"reason":…}` |
/// | APNs | other 4xx (403 InvalidProviderToken, 413…) | failed | `APNs_<status>{"reason":…}` |
/// | FCM | no FCM credentials | failed | `FCM_NO_CREDENTIALS` |
/// | FCM | private key does not load | failed | `FCM_BAD_CREDENTIALS` |
/// | FCM | token endpoint 4xx | failed | `FCM_AUTH_<status>_<error>` |
/// | FCM | token endpoint 429, 5xx | retry(Retry-After) | `FCM_AUTH_<status>` |
/// | FCM | 200 | delivered(message name) | |
/// | FCM | UNREGISTERED | invalidToken | `FCM_UNREGISTERED` |
/// | FCM | 400 INVALID_ARGUMENT about `message.token` | invalidToken | `FCM_INVALID_ARGUMENT` |
/// | FCM | 401 (cached access token dropped) | retry | `FCM_401_<errorCode>` |
/// | FCM | 429, 5xx | retry(Retry-After) | `FCM_<status>_<errorCode>` |
/// | FCM | other | failed | `FCM_<status>_<errorCode>` |
/// | webhook | no secret | failed | `WEBHOOK_NO_SECRET` |
/// | webhook | 2xx | delivered(nil) | |
/// | webhook | 404, 410 | invalidToken | `WEBHOOK_404`, `WEBHOOK_410` |
/// | webhook | 429, 5xx | retry(Retry-After) | `WEBHOOK_<status>` |
/// | webhook | other | failed | `WEBHOOK_<status>` |
/// | any | no answer within `requestTimeoutSeconds` | retry | `APNs_timeout`, `FCM_timeout`, `FCM_AUTH_timeout`, `WEBHOOK_timeout` |
/// | any | connection refused, reset or closed | retry | `APNs_connection`, `FCM_connection`, `FCM_AUTH_connection`, `WEBHOOK_connection` |
/// | any | TLS handshake refused (untrusted server, certificate rejected) | failed | `APNs_TLS`, `FCM_TLS`, `FCM_AUTH_TLS`, `WEBHOOK_TLS` |
///
/// A connection that cannot be made fails at once (not retried inside the transport). Under TLS 1.3
/// a client certificate the server rejects shows as a closed connection (`APNs_connection`).
public final class ProviderPushTransport: PushTransport {
    public let endpoints: PushEndpoints
    private let now: @Sendable () -> Date
    private let client: HTTPClient
    private let configuration: HTTPClient.Configuration
    private let eventLoopGroup: any EventLoopGroup
    /// The event loop group this transport made (and shuts down), if it made one.
    private let ownLoops: MultiThreadedEventLoopGroup?
    /// APNs connections by endpoint and TLS identity ("token", or the p12's fingerprint).
    private let apnsClients = Mutex<APNsClients>(APNsClients())
    private let apnsTokens = Mutex<[String: APNsProviderToken]>([:])
    private let fcmTokens = Mutex<[String: FCMTokenState]>([:])

    /// How long an APNs provider token is used (APNs refuses one older than an hour).
    public static let apnsTokenLifetime: TimeInterval = 50 * 60
    /// How long before its expiry an FCM access token is replaced.
    public static let fcmTokenMargin: TimeInterval = 5 * 60

    /// `now` gives the time for provider tokens, `apns-expiration` and webhook timestamps;
    /// `eventLoopGroup` nil: AsyncHTTPClient's shared one. Throws when
    /// `endpoints.extraTrustRootsPEM` holds no PEM certificate.
    public convenience init(endpoints: PushEndpoints = PushEndpoints(), now: @escaping @Sendable () -> Date = { Date() },
                            eventLoopGroup: (any EventLoopGroup)? = nil) throws {
        try self.init(endpoints: endpoints, now: now, eventLoopGroup: eventLoopGroup, ownLoops: nil)
    }

    private init(endpoints: PushEndpoints, now: @escaping @Sendable () -> Date, eventLoopGroup: (any EventLoopGroup)?,
                 ownLoops: MultiThreadedEventLoopGroup?) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = endpoints.extraTrustRootsPEM {
            let roots = (try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))) ?? []
            guard !roots.isEmpty else {
                throw PushCredentialError("extraTrustRootsPEM holds no PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)")
            }
            tls.additionalTrustRoots = [.certificates(roots)]
        }
        let timeout = TimeAmount(endpoints.requestTimeout)
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow,
                                                     timeout: .init(connect: timeout, read: timeout))
        configuration.httpVersion = .automatic
        // A connection that cannot be made fails its requests at once (retry outcomes: the caller
        // owns retries) instead of holding them until the deadline while AHC tries again.
        configuration.connectionPool.retryConnectionEstablishment = false
        self.endpoints = endpoints
        self.now = now
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup ?? HTTPClient.defaultEventLoopGroup
        self.ownLoops = ownLoops
        self.client = HTTPClient(eventLoopGroup: self.eventLoopGroup, configuration: configuration)
    }

    public func send(_ notification: PushNotification, to target: PushTarget, credentials: PushCredentials) async -> PushOutcome {
        switch target {
        case .apns(let token, let environment, let voip):
            guard let apns = credentials.apns else { return .failed(code: "PUSH_I9") }
            return await sendAPNs(notification, token: token, environment: environment, voip: voip, credentials: apns)
        case .fcm(let token):
            guard let fcm = credentials.fcm else { return .failed(code: "FCM_NO_CREDENTIALS") }
            return await sendFCM(notification, token: token, credentials: fcm)
        case .webhook(let url):
            guard let webhook = credentials.webhook, !webhook.secret.isEmpty else { return .failed(code: "WEBHOOK_NO_SECRET") }
            return await sendWebhook(notification, url: url, credentials: webhook)
        }
    }

    /// A transport on an event loop of its own whose thread runs at a lower scheduling priority
    /// (nice `nice`): the server's background I/O, kept from the cores its gateway needs.
    public convenience init(endpoints: PushEndpoints, backgroundThreadNice nice: Int32) throws {
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        _ = try? loops.next().submit {
            #if canImport(Glibc)
            // On Linux a nice value is per thread: PRIO_PROCESS with 0 is the calling thread.
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
            #endif
        }.wait()
        try self.init(endpoints: endpoints, now: { Date() }, eventLoopGroup: loops, ownLoops: loops)
    }

    /// Closes every connection. Call it before the transport is released (HTTPClient requires it).
    public func shutdown() async {
        let apns = apnsClients.withLock { state in
            state.closed = true
            defer { state.clients = [:] }
            return Array(state.clients.values)
        }
        for client in apns { await client.close() }
        try? await client.shutdown()
        try? await ownLoops?.shutdownGracefully()
    }

    // MARK: APNs

    /// The `apns-id` for a notification id: the first 16 bytes of its SHA-256 as a UUID (version
    /// 8, RFC 9562), lowercase. The same notification id always gives the same apns-id.
    public static func apnsId(for notificationId: String) -> String {
        String(decoding: apnsIdBytes(for: notificationId), as: UTF8.self)
    }

    /// The apns-id as its 36 ASCII bytes (the header block takes them as they are).
    static func apnsIdBytes(for notificationId: String) -> [UInt8] {
        var hasher = SHA256()
        var id = notificationId
        id.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        let digest = hasher.finalize()
        let digits: StaticString = "0123456789abcdef"
        var text = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        var at = 0
        for (index, var byte) in digest.prefix(16).enumerated() {
            if index == 6 { byte = (byte & 0x0F) | 0x80 }
            if index == 8 { byte = (byte & 0x3F) | 0x80 }
            if index == 4 || index == 6 || index == 8 || index == 10 { at += 1 }
            text[at] = digits.utf8Start[Int(byte >> 4)]
            text[at + 1] = digits.utf8Start[Int(byte & 0x0F)]
            at += 2
        }
        return text
    }

    /// Sends every push of `batch`: the APNs ones are written onto their connection together and
    /// awaited together; FCM and webhook ones are sent concurrently, each as `send` does.
    public func send(batch: [PushSend]) async -> [PushOutcome] {
        var outcomes = [PushOutcome?](repeating: nil, count: batch.count)
        // The APNs requests by connection, with where their outcomes go.
        var byClient: [ObjectIdentifier: (client: APNsHTTP2Client, requests: [(index: Int, request: APNsRequest)])] = [:]
        var others: [Int] = []
        // What the pushes of one app, environment and push type share (their connection, the
        // provider token, the header block's constant fields), made once per batch.
        var contexts: [APNsContextKey: Result<APNsContext, OutcomeFailure>] = [:]
        var lastContext: (key: APNsContextKey, context: Result<APNsContext, OutcomeFailure>)?
        // The payload without badge and rId, written once per shared part.
        var templates: [Int: APNsPayloadTemplate] = [:]
        // (The pushes are read in place by index: a copy of each would retain every string of its notification.)
        for index in batch.indices {
            guard case .apns(let token, let environment, let voip) = batch[index].target else {
                others.append(index)
                continue
            }
            guard let apns = batch[index].credentials.apns else {
                outcomes[index] = .failed(code: "PUSH_I9")
                continue
            }
            let key = APNsContextKey(credentials: apns, environment: environment, voip: voip)
            let context: Result<APNsContext, OutcomeFailure>
            // Pushes of one app come together and share their credentials' storage, so comparing
            // with the last key is quick; hashing the key (the p8 with it) is the slower way.
            if let last = lastContext, last.key == key {
                context = last.context
            } else if let made = contexts[key] {
                context = made
            } else {
                context = apnsContext(credentials: apns, environment: environment, voip: voip)
                contexts[key] = context
            }
            lastContext = (key, context)
            let template: APNsPayloadTemplate
            if let part = batch[index].sharedPart, let made = templates[part] {
                template = made
            } else {
                template = APNsPayloadTemplate(APNsPayload(batch[index].notification))
                if let part = batch[index].sharedPart { templates[part] = template }
            }
            switch context.flatMap({ prepareAPNs(batch[index].notification, recipient: batch[index].recipient, token: token,
                                                 template: template, context: $0) }) {
            case .success(let request):
                byClient[ObjectIdentifier(request.client), default: (request.client, [])].requests.append((index, request))
            case .failure(let failure):
                outcomes[index] = failure.outcome
            }
        }
        await withTaskGroup(of: [(Int, PushOutcome)].self) { group in
            for (client, requests) in byClient.values {
                group.addTask {
                    let responses = await client.post(requests.map(\.request.post))
                    // (By index, not copying the requests; a missing answer leaves its push NOT_SENT.)
                    return zip(requests.indices, responses).map { (requests[$0].index, self.apnsOutcome(requests[$0].request, $1)) }
                }
            }
            for index in others {
                let push = batch[index]
                group.addTask { [(index, await self.send(push.whole, to: push.target, credentials: push.credentials))] }
            }
            for await done in group {
                for (index, outcome) in done { outcomes[index] = outcome }
            }
        }
        return outcomes.map { $0 ?? .failed(code: "NOT_SENT") }
    }

    /// An APNs request ready to go: its connection, the POST, and what judging the answer needs.
    private struct APNsRequest: Sendable {
        var client: APNsHTTP2Client
        var post: APNsHTTP2Client.Post
        var notificationId: String
        var providerToken: (key: String, token: String)?
    }

    private func sendAPNs(_ notification: PushNotification, token: String, environment: PushEnvironment, voip: Bool,
                          credentials: APNsCredentials) async -> PushOutcome {
        let prepared = apnsContext(credentials: credentials, environment: environment, voip: voip)
            .flatMap { prepareAPNs(notification, token: token, template: APNsPayloadTemplate(APNsPayload(notification)), context: $0) }
        switch prepared {
        case .success(let request):
            return apnsOutcome(request, await request.client.post([request.post])[0])
        case .failure(let failure):
            return failure.outcome
        }
    }

    /// Pushes that share an APNs context: the same credentials, environment and push type.
    private struct APNsContextKey: Hashable {
        var credentials: APNsCredentials
        var environment: PushEnvironment
        var voip: Bool
    }

    /// What every push of one context shares: the connection, the provider token, and the header
    /// block's constant fields before and after `:path`.
    private struct APNsContext {
        var client: APNsHTTP2Client
        var providerToken: (key: String, token: String)?
        /// `:method`, `:scheme`, `:authority`.
        var head: ByteBuffer
        /// `authorization`, `apns-topic`, `apns-push-type`, `apns-priority`, `content-type`.
        var fields: ByteBuffer
    }

    /// The context of pushes with these credentials, or the outcome that makes sending them pointless.
    private func apnsContext(credentials: APNsCredentials, environment: PushEnvironment, voip: Bool) -> Result<APNsContext, OutcomeFailure> {
        guard (try? APNsCredentials.checkBundleId(credentials.bundleId)) != nil else { return .failure(OutcomeFailure(outcome: .failed(code: "PUSH_I9"))) }
        let base = Self.trimmed(environment == .production ? endpoints.apnsProduction : endpoints.apnsSandbox)
        let client: APNsHTTP2Client
        var authorization: String?
        var providerToken: (key: String, token: String)?
        switch credentials.authentication {
        case .token(let p8, let keyId, let teamId):
            guard let token = apnsProviderToken(p8: p8, keyId: keyId, teamId: teamId) else { return .failure(OutcomeFailure(outcome: .failed(code: "PUSH_I9"))) }
            providerToken = token
            authorization = "bearer " + token.token
            switch apnsClient(base: base, identity: nil) {
            case .success(let tokenClient): client = tokenClient
            case .failure(let failure): return .failure(failure)
            }
        case .certificate(let p12, let password):
            switch apnsClient(base: base, identity: (p12, password)) {
            case .success(let certificateClient): client = certificateClient
            case .failure(let failure): return .failure(failure)
            }
        }
        var head = HPACKLiteralBlock(capacity: 64)
        head.indexed(HPACKLiteralBlock.Static.methodPost)
        head.indexed(HPACKLiteralBlock.Static.schemeHTTPS)
        head.literal(nameIndex: HPACKLiteralBlock.Static.authority, value: client.authority)
        var fields = HPACKLiteralBlock(capacity: 160 + (authorization?.utf8.count ?? 0))
        if let authorization { fields.literal(nameIndex: HPACKLiteralBlock.Static.authorization, value: authorization) }
        fields.literal(name: "apns-topic", value: voip ? credentials.bundleId + ".voip" : credentials.bundleId)
        fields.literal(name: "apns-push-type", value: voip ? "voip" : "alert")
        fields.literal(name: "apns-priority", value: "10")
        fields.literal(nameIndex: HPACKLiteralBlock.Static.contentType, value: "application/json")
        return .success(APNsContext(client: client, providerToken: providerToken, head: head.bytes, fields: fields.bytes))
    }

    /// The request for one APNs push, or the outcome that makes sending it pointless. `template`
    /// is the notification's payload, but for its badge and `rc.rId`; `recipient` is its `rc.rId`
    /// when kept apart from the notification (`PushSend.recipient`).
    private func prepareAPNs(_ notification: PushNotification, recipient: String? = nil, token: String, template: APNsPayloadTemplate,
                             context: APNsContext) -> Result<APNsRequest, OutcomeFailure> {
        guard Self.isAPNsDeviceToken(token) else { return .failure(OutcomeFailure(outcome: .invalidToken(code: "Rong_DeviceToken_Invalid"))) }
        let body = template.payload(badge: notification.badge, recipient: recipient ?? notification.rc["rId"])
        // The header block, written here rather than on the connection's event loop: literals
        // without indexing depend on no connection state.
        var block = HPACKLiteralBlock(capacity: context.head.readableBytes + context.fields.readableBytes + 160 + token.utf8.count)
        block.append(context.head)
        block.literal(nameIndex: HPACKLiteralBlock.Static.path, value: "/3/device/" + token)
        block.append(context.fields)
        block.literal(name: "apns-id", bytes: Self.apnsIdBytes(for: notification.id))
        if let collapseId = notification.collapseId { block.literal(name: "apns-collapse-id", value: collapseId) }
        if let ttl = notification.timeToLiveSeconds {
            let expiration = ttl <= 0 ? 0 : Int(now().timeIntervalSince1970) + ttl
            block.literal(name: "apns-expiration", value: String(expiration))
        }
        block.literal(nameIndex: HPACKLiteralBlock.Static.contentLength, value: String(body.count))
        let post = APNsHTTP2Client.Post(headerBlock: block.bytes, body: ByteBuffer(bytes: body),
                                        deadline: .now() + TimeAmount(endpoints.requestTimeout))
        return .success(APNsRequest(client: context.client, post: post, notificationId: notification.id, providerToken: context.providerToken))
    }

    /// What APNs' answer (or the failure to get one) to `request` means.
    private func apnsOutcome(_ request: APNsRequest, _ result: Result<APNsHTTP2Client.Response, any Error>) -> PushOutcome {
        let response: APNsHTTP2Client.Response
        switch result {
        case .success(let answer): response = answer
        case .failure(let error): return Self.apnsTransportOutcome(error)
        }
        if response.status == 200 {
            return .delivered(providerId: response.headers.first(name: "apns-id") ?? Self.apnsId(for: request.notificationId))
        }
        let reason = Self.jsonObject(response.body)?["reason"] as? String
        if response.status == 403, reason == "ExpiredProviderToken", let providerToken = request.providerToken {
            apnsTokens.withLock { tokens in
                if tokens[providerToken.key]?.token == providerToken.token { tokens[providerToken.key] = nil }
            }
        }
        var answerHeaders = HTTPHeaders()
        if let retry = response.headers.first(name: "retry-after") { answerHeaders.add(name: "retry-after", value: retry) }
        return Self.apnsOutcome(status: response.status, reason: reason, retryAfter: retryAfter(answerHeaders))
    }

    private struct APNsClients {
        var clients: [String: APNsHTTP2Client] = [:]
        var closed = false
    }

    /// The connection to `base` for this TLS identity (nil: token authentication), made on first use.
    private func apnsClient(base: String, identity: (p12: Data, password: String)?) -> Result<APNsHTTP2Client, OutcomeFailure> {
        var key = base
        if let identity { key += "|" + APNsCredentials.fingerprint(identity.p12 + Data([0]) + Data(identity.password.utf8)) }
        if let client = apnsClients.withLock({ $0.closed ? nil : $0.clients[key] }) { return .success(client) }
        var tls = configuration.tlsConfiguration ?? .makeClientConfiguration()
        if let identity {
            guard let opened = try? APNsCredentials.openP12(identity.p12, password: identity.password) else {
                return .failure(OutcomeFailure(outcome: .failed(code: "PUSH_I9")))
            }
            if let expiry = opened.certificate.notValidAfter, expiry < now() {
                return .failure(OutcomeFailure(outcome: .failed(code: "APNS_4_4_null")))
            }
            tls.certificateChain = opened.bundle.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(opened.bundle.privateKey)
        }
        let timeout = TimeAmount(endpoints.requestTimeout)
        return apnsClients.withLock { state -> Result<APNsHTTP2Client, OutcomeFailure> in
            guard !state.closed else { return .failure(OutcomeFailure(outcome: .retry(code: "APNs_connection", afterSeconds: nil))) }
            if let client = state.clients[key] { return .success(client) }
            guard let client = try? APNsHTTP2Client(baseURL: base, tls: tls, eventLoop: eventLoopGroup.next(), connectTimeout: timeout,
                                                      connections: endpoints.apnsConnections) else {
                return .failure(OutcomeFailure(outcome: .failed(code: "APNs_TLS")))
            }
            state.clients[key] = client
            return .success(client)
        }
    }

    /// A request APNs gave no answer to.
    static func apnsTransportOutcome(_ error: any Error) -> PushOutcome {
        switch error {
        case APNsClientError.timeout, ChannelError.connectTimeout:
            return .retry(code: "APNs_timeout", afterSeconds: nil)
        case APNsClientError.badURL:
            return .failed(code: "APNs_URL")
        case APNsClientError.notHTTP2:
            return .failed(code: "APNs_TLS")
        case APNsClientError.bodyTooLarge:
            // Sending it again would not make it fit.
            return .failed(code: "APNs_PayloadTooLarge")
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            return .failed(code: "APNs_TLS")
        default:
            return .retry(code: "APNs_connection", afterSeconds: nil)
        }
    }

    /// APNs' answer other than 200 as an outcome (see the table on the type).
    static func apnsOutcome(status: Int, reason: String?, retryAfter: Int?) -> PushOutcome {
        let reasonJSON = reason.map { "{\"reason\":\"\($0.filter { $0.isLetter || $0.isNumber })\"}" } ?? ""
        let code = "APNs_\(status)\(reasonJSON)"
        switch (status, reason) {
        case (400, "BadDeviceToken"): return .invalidToken(code: "APNS_A2_2400\(reasonJSON)")
        case (400, "DeviceTokenNotForTopic"), (410, _): return .invalidToken(code: code)
        case (403, "ExpiredProviderToken"): return .retry(code: code, afterSeconds: retryAfter)
        case (429, _), (500..., _): return .retry(code: code, afterSeconds: retryAfter)
        default: return .failed(code: code)
        }
    }

    /// APNs device tokens are hex (64 characters today; Apple says they may grow).
    static func isAPNsDeviceToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard !utf8.isEmpty, utf8.count <= 400 else { return false }
        // (Read in place when the string is contiguous, as a stored token is.)
        return utf8.withContiguousStorageIfAvailable(isHex) ?? isHex(utf8)
    }

    private static func isHex(_ bytes: some Collection<UInt8>) -> Bool {
        for byte in bytes {
            // Lowercased (bit 0x20 set), a hex digit is 0-9 or a-f; '0'-'9' already have the bit.
            let lower = byte | 0x20
            guard (lower >= 0x30 && lower <= 0x39 && byte == lower) || (lower >= 0x61 && lower <= 0x66) else { return false }
        }
        return true
    }

    /// The cached provider token for (team, key, p8), or a new one when there is none or it is
    /// `apnsTokenLifetime` old. Nil when the p8 does not load.
    private func apnsProviderToken(p8: String, keyId: String, teamId: String) -> (key: String, token: String)? {
        let cacheKey = "\(teamId)|\(keyId)|\(p8)"
        let now = now()
        return apnsTokens.withLock { tokens -> (key: String, token: String)? in
            if let cached = tokens[cacheKey], now.timeIntervalSince(cached.issuedAt) < Self.apnsTokenLifetime,
               now.timeIntervalSince(cached.issuedAt) >= -60 {
                return (cacheKey, cached.token)
            }
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: APNsCredentials.normalizedPEM(p8)),
                  let token = try? JSONWebToken.apnsProviderToken(key: key, keyId: keyId, teamId: teamId, issuedAt: now) else {
                return nil
            }
            tokens[cacheKey] = APNsProviderToken(token: token, issuedAt: now)
            return (cacheKey, token)
        }
    }

    private struct OutcomeFailure: Error {
        var outcome: PushOutcome
    }

    // MARK: FCM

    private func sendFCM(_ notification: PushNotification, token: String, credentials: FCMCredentials) async -> PushOutcome {
        guard !token.isEmpty, !token.contains(where: \.isWhitespace) else { return .invalidToken(code: "Rong_DeviceToken_Invalid") }
        let accessToken: FCMAccessToken
        do {
            accessToken = try await fcmAccessToken(credentials)
        } catch let failure as OutcomeFailure {
            return failure.outcome
        } catch {
            return .retry(code: "FCM_AUTH_connection", afterSeconds: nil)
        }
        guard let body = try? FCMMessageBody(notification, token: token).encoded() else { return .failed(code: "FCM_PAYLOAD") }
        var headers = HTTPHeaders()
        headers.add(name: "authorization", value: "Bearer \(accessToken.token)")
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        let project = credentials.projectId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? credentials.projectId
        let response: Response
        do {
            response = try await post(client, url: Self.trimmed(endpoints.fcm) + "/v1/projects/\(project)/messages:send",
                                      headers: headers, body: body)
        } catch {
            return Self.transportOutcome(error, prefix: "FCM")
        }
        if response.status == 200 {
            return .delivered(providerId: Self.jsonObject(response.body)?["name"] as? String)
        }
        if response.status == 401 {
            fcmTokens.withLock { states in
                if case .ready(let cached) = states[accessToken.cacheKey], cached.token == accessToken.token {
                    states[accessToken.cacheKey] = nil
                }
            }
        }
        return Self.fcmOutcome(status: response.status, body: response.body, retryAfter: retryAfter(response.headers))
    }

    /// FCM's answer other than 200 as an outcome (see the table on the type).
    static func fcmOutcome(status: Int, body: ByteBuffer, retryAfter: Int?) -> PushOutcome {
        let error = jsonObject(body)?["error"] as? [String: Any]
        let details = error?["details"] as? [[String: Any]] ?? []
        let errorCode = details.lazy.compactMap { $0["errorCode"] as? String }.first ?? error?["status"] as? String
        let code = "FCM_\(status)" + (errorCode.map { "_" + $0.filter { $0.isLetter || $0.isNumber || $0 == "_" } } ?? "")
        if errorCode == "UNREGISTERED" { return .invalidToken(code: "FCM_UNREGISTERED") }
        if errorCode == "INVALID_ARGUMENT" {
            let fields = details.flatMap { ($0["fieldViolations"] as? [[String: Any]]) ?? [] }.compactMap { $0["field"] as? String }
            let message = (error?["message"] as? String ?? "").lowercased()
            if fields.contains("message.token") || message.contains("registration token") {
                return .invalidToken(code: "FCM_INVALID_ARGUMENT")
            }
            return .failed(code: code)
        }
        switch status {
        case 401 where errorCode != "THIRD_PARTY_AUTH_ERROR", 429, 500...: return .retry(code: code, afterSeconds: retryAfter)
        default: return .failed(code: code)
        }
    }

    private struct FCMAccessToken: Sendable {
        var cacheKey: String
        var token: String
        var refreshAt: Date
    }

    private enum FCMTokenState {
        case ready(FCMAccessToken)
        case pending(Task<FCMAccessToken, any Error>)
    }

    /// The cached access token, or one exchange shared by every send that needs it meanwhile.
    private func fcmAccessToken(_ credentials: FCMCredentials) async throws -> FCMAccessToken {
        let cacheKey = "\(credentials.clientEmail)|\(credentials.tokenURI)|\(credentials.privateKey)"
        let now = now()
        let state = fcmTokens.withLock { states -> FCMTokenState in
            switch states[cacheKey] {
            case .ready(let token) where now < token.refreshAt:
                return .ready(token)
            case .pending(let task):
                return .pending(task)
            default:
                let task = Task { try await self.exchangeAssertion(credentials, cacheKey: cacheKey) }
                states[cacheKey] = .pending(task)
                return .pending(task)
            }
        }
        let task: Task<FCMAccessToken, any Error>
        switch state {
        case .ready(let token): return token
        case .pending(let pending): task = pending
        }
        do {
            let token = try await task.value
            fcmTokens.withLock { states in
                if case .pending(let pending) = states[cacheKey], pending == task { states[cacheKey] = .ready(token) }
            }
            return token
        } catch {
            fcmTokens.withLock { states in
                if case .pending(let pending) = states[cacheKey], pending == task { states[cacheKey] = nil }
            }
            throw error
        }
    }

    /// Signs the service account's assertion and exchanges it at the token URI (RFC 7523).
    private func exchangeAssertion(_ credentials: FCMCredentials, cacheKey: String) async throws -> FCMAccessToken {
        let issuedAt = now()
        guard let key = try? _RSA.Signing.PrivateKey(pemRepresentation: credentials.privateKey),
              let assertion = try? JSONWebToken.googleAssertion(key: key, keyId: credentials.privateKeyId,
                                                               clientEmail: credentials.clientEmail,
                                                               audience: credentials.tokenURI, issuedAt: issuedAt) else {
            throw OutcomeFailure(outcome: .failed(code: "FCM_BAD_CREDENTIALS"))
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let response: Response
        do {
            response = try await post(client, url: credentials.tokenURI, headers: headers, body: Data(form.utf8))
        } catch {
            throw OutcomeFailure(outcome: Self.transportOutcome(error, prefix: "FCM_AUTH"))
        }
        let json = Self.jsonObject(response.body)
        guard response.status == 200 else {
            let error = (json?["error"] as? String).map { "_" + $0.filter { $0.isLetter || $0.isNumber || $0 == "_" } } ?? ""
            if response.status == 429 || response.status >= 500 {
                throw OutcomeFailure(outcome: .retry(code: "FCM_AUTH_\(response.status)", afterSeconds: retryAfter(response.headers)))
            }
            throw OutcomeFailure(outcome: .failed(code: "FCM_AUTH_\(response.status)\(error)"))
        }
        guard let token = json?["access_token"] as? String, !token.isEmpty else {
            throw OutcomeFailure(outcome: .retry(code: "FCM_AUTH_BAD_ANSWER", afterSeconds: nil))
        }
        let lifetime = (json?["expires_in"] as? NSNumber)?.doubleValue ?? 3600
        return FCMAccessToken(cacheKey: cacheKey, token: token,
                              refreshAt: issuedAt.addingTimeInterval(max(0, lifetime - Self.fcmTokenMargin)))
    }

    // MARK: Webhooks

    private func sendWebhook(_ notification: PushNotification, url: String, credentials: WebhookCredentials) async -> PushOutcome {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = parsed.host, !host.isEmpty else {
            return .invalidToken(code: "Rong_DeviceToken_Invalid")
        }
        guard let body = try? WebhookBody(notification, url: url).encoded() else { return .failed(code: "WEBHOOK_PAYLOAD") }
        let timestamp = String(Int(now().timeIntervalSince1970))
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "x-imserver-push-id", value: notification.id)
        headers.add(name: "x-imserver-timestamp", value: timestamp)
        headers.add(name: "x-imserver-signature", value: "sha256=" + Self.webhookSignature(secret: credentials.secret, timestamp: timestamp, body: body))
        let response: Response
        do {
            response = try await post(client, url: url, headers: headers, body: body)
        } catch {
            return Self.transportOutcome(error, prefix: "WEBHOOK")
        }
        switch response.status {
        case 200..<300: return .delivered(providerId: nil)
        case 404, 410: return .invalidToken(code: "WEBHOOK_\(response.status)")
        case 429, 500...: return .retry(code: "WEBHOOK_\(response.status)", afterSeconds: retryAfter(response.headers))
        default: return .failed(code: "WEBHOOK_\(response.status)")
        }
    }

    /// The hex HMAC-SHA256, under the app's secret, of `timestamp + "." + body`: what a relay
    /// recomputes to check `X-IMServer-Signature` (after `sha256=`).
    public static func webhookSignature(secret: String, timestamp: String, body: Data) -> String {
        var signed = Data(timestamp.utf8)
        signed.append(UInt8(ascii: "."))
        signed.append(body)
        let code = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Data(secret.utf8)))
        return hexString(code)
    }

    // MARK: HTTP

    private struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: ByteBuffer
    }

    private func post(_ client: HTTPClient, url: String, headers: HTTPHeaders, body: Data) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers = headers
        request.body = .bytes(ByteBuffer(bytes: body))
        let timeout = TimeAmount(endpoints.requestTimeout)
        let deadline = NIODeadline.now() + timeout
        let response = try await client.execute(request, deadline: deadline)
        let responseBody = try await response.body.collect(upTo: 1 << 20)
        return Response(status: Int(response.status.code), headers: response.headers, body: responseBody)
    }

    /// A request that got no HTTP answer: timeouts and dropped connections are worth a retry, a
    /// refused TLS handshake (an untrusted server, a rejected client certificate) is not.
    static func transportOutcome(_ error: any Error, prefix: String) -> PushOutcome {
        if let error = error as? HTTPClientError {
            let timeouts: [HTTPClientError] = [.deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout,
                                               .tlsHandshakeTimeout, .getConnectionFromPoolTimeout]
            if timeouts.contains(error) { return .retry(code: "\(prefix)_timeout", afterSeconds: nil) }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return .failed(code: "\(prefix)_TLS")
        }
        return .retry(code: "\(prefix)_connection", afterSeconds: nil)
    }

    /// Retry-After in seconds, given as seconds or as an HTTP date.
    private func retryAfter(_ headers: HTTPHeaders) -> Int? {
        guard let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, Int(date.timeIntervalSince(now()).rounded(.up)))
    }

    private static func jsonObject(_ body: ByteBuffer) -> [String: Any]? {
        guard body.readableBytes > 0 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
    }

    private static func trimmed(_ base: String) -> String {
        base.hasSuffix("/") ? String(base.dropLast()) : base
    }
}

private struct APNsProviderToken {
    var token: String
    var issuedAt: Date
}
