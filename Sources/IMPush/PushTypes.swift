import Foundation

// The push providers' side of push notifications: what one notification says, where it goes,
// the app's credentials for each provider, and what the provider answered. The server decides
// who gets a push and with what text (IMServer/Push); this target only talks to APNs, FCM and
// webhooks.

/// APNs' two environments: a development build's device token works only with the sandbox.
public enum PushEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    case production
    case sandbox
}

/// Where one push goes: a device's token at its provider.
public enum PushTarget: Sendable, Hashable, Codable {
    /// An APNs device token (hex); `voip` for a PushKit token (topic `<bundle>.voip`, push type voip).
    case apns(token: String, environment: PushEnvironment, voip: Bool)
    /// An FCM registration token.
    case fcm(token: String)
    /// An HTTPS (or, for tests and relays on the same host, HTTP) URL the app's relay listens on.
    case webhook(url: String)
}

/// What one notification says, provider-neutral. Built per recipient device by the server's
/// push decision (spec/system-push-ultra.md §2.3-2.7).
public struct PushNotification: Sendable, Hashable, Codable {
    /// The idempotency key: the same notification sent twice (a retry after a crash) carries the
    /// same id. APNs gets it as `apns-id` (a UUID derived from it), webhooks as a header.
    public var id: String
    /// Nil: no title (`disablePushTitle`, iOS only).
    public var title: String?
    public var body: String
    /// The app icon's badge; nil leaves it alone.
    public var badge: Int?
    /// `aps.sound`: "default" unless the app set one for the message type.
    public var sound: String?
    /// APNs `thread-id`.
    public var threadId: String?
    /// APNs `apns-collapse-id` (at most 64 bytes; checked before it gets here).
    public var collapseId: String?
    /// `passive`, `active`, `time-sensitive` or `critical`; nil: APNs' default (active).
    public var interruptionLevel: String?
    /// The `rc` object of RongCloud's payload: cType, fId, oName, tId, rId, id, and
    /// rc-dlt-identifier (a recall) or bId (an ultra group channel) where they apply.
    public var rc: [String: String]
    /// `appData`: the message's pushData; omitted when nil.
    public var appData: String?
    /// FCM extras from the message's androidConfig.
    public var fcmCollapseKey: String?
    public var fcmChannelId: String?
    public var fcmImageURL: String?
    /// Seconds the provider may keep trying to reach the device (APNs `apns-expiration`, FCM `ttl`); nil: the provider's default.
    public var timeToLiveSeconds: Int?

    public init(id: String, title: String? = nil, body: String, badge: Int? = nil, sound: String? = "default",
                threadId: String? = nil, collapseId: String? = nil, interruptionLevel: String? = nil,
                rc: [String: String] = [:], appData: String? = nil, fcmCollapseKey: String? = nil,
                fcmChannelId: String? = nil, fcmImageURL: String? = nil, timeToLiveSeconds: Int? = nil) {
        self.id = id
        self.title = title
        self.body = body
        self.badge = badge
        self.sound = sound
        self.threadId = threadId
        self.collapseId = collapseId
        self.interruptionLevel = interruptionLevel
        self.rc = rc
        self.appData = appData
        self.fcmCollapseKey = fcmCollapseKey
        self.fcmChannelId = fcmChannelId
        self.fcmImageURL = fcmImageURL
        self.timeToLiveSeconds = timeToLiveSeconds
    }
}

/// An app's APNs credentials for one bundle id.
public struct APNsCredentials: Sendable, Hashable, Codable {
    public enum Authentication: Sendable, Hashable, Codable {
        /// A p8 signing key (PEM, "-----BEGIN PRIVATE KEY-----"), its Key ID and the Team ID.
        case token(p8: String, keyId: String, teamId: String)
        /// A p12 certificate bundle and its password.
        case certificate(p12: Data, password: String)
    }

    /// The app's bundle id: the `apns-topic` (with ".voip" for VoIP pushes). No wildcards.
    public var bundleId: String
    public var authentication: Authentication

    public init(bundleId: String, authentication: Authentication) {
        self.bundleId = bundleId
        self.authentication = authentication
    }
}

/// An app's FCM credentials: a Google service account (the JSON file the Firebase console gives).
public struct FCMCredentials: Sendable, Hashable, Codable {
    public var projectId: String
    public var clientEmail: String
    /// The RSA private key, PEM.
    public var privateKey: String
    /// Where the signed assertion is exchanged for an access token (the file's `token_uri`).
    public var tokenURI: String
    /// The key's id (the file's `private_key_id`): the assertion's `kid` when known.
    public var privateKeyId: String?

    public init(projectId: String, clientEmail: String, privateKey: String, tokenURI: String, privateKeyId: String? = nil) {
        self.projectId = projectId
        self.clientEmail = clientEmail
        self.privateKey = privateKey
        self.tokenURI = tokenURI
        self.privateKeyId = privateKeyId
    }
}

/// An app's webhook relay secret: every POST carries an HMAC-SHA256 of its body under it.
public struct WebhookCredentials: Sendable, Hashable, Codable {
    public var secret: String

    public init(secret: String) { self.secret = secret }
}

/// Everything one app has configured for push.
public struct PushCredentials: Sendable, Hashable, Codable {
    public var apns: APNsCredentials?
    public var fcm: FCMCredentials?
    public var webhook: WebhookCredentials?

    public init(apns: APNsCredentials? = nil, fcm: FCMCredentials? = nil, webhook: WebhookCredentials? = nil) {
        self.apns = apns
        self.fcm = fcm
        self.webhook = webhook
    }
}

/// The providers' addresses: settings, so tests and relays can point them elsewhere.
public struct PushEndpoints: Sendable, Hashable {
    public var apnsProduction: String
    public var apnsSandbox: String
    /// FCM's base URL; the send path is `/v1/projects/{project}/messages:send`.
    public var fcm: String
    /// PEM certificates trusted besides the system's (a test CA, a relay's own CA); nil: none.
    public var extraTrustRootsPEM: String?
    /// Seconds one request may take before it counts as a timeout (retried).
    public var requestTimeoutSeconds: Int
    /// HTTP/2 connections to an APNs endpoint per TLS identity, at most (APNs allows 1,000 pushes
    /// in flight on each; a large batch is spread over them).
    public var apnsConnections: Int

    public static let apple = "https://api.push.apple.com"
    public static let appleSandbox = "https://api.sandbox.push.apple.com"
    public static let google = "https://fcm.googleapis.com"

    /// `requestTimeoutSeconds` within 1 s and an hour.
    public var requestTimeout: Duration { .seconds(min(max(1, requestTimeoutSeconds), 3_600)) }

    public init(apnsProduction: String = PushEndpoints.apple, apnsSandbox: String = PushEndpoints.appleSandbox,
                fcm: String = PushEndpoints.google, extraTrustRootsPEM: String? = nil, requestTimeoutSeconds: Int = 10,
                apnsConnections: Int = 4) {
        self.apnsConnections = apnsConnections
        self.apnsProduction = apnsProduction
        self.apnsSandbox = apnsSandbox
        self.fcm = fcm
        self.extraTrustRootsPEM = extraTrustRootsPEM
        self.requestTimeoutSeconds = requestTimeoutSeconds
    }
}

/// What became of one send.
public enum PushOutcome: Sendable, Hashable, Codable {
    /// The provider took it; its id for it (apns-id, FCM message name) when it gave one.
    case delivered(providerId: String?)
    /// The token is dead (APNs 410 Unregistered or 400 BadDeviceToken, FCM UNREGISTERED or an
    /// INVALID_ARGUMENT about the token): the device's token must be deleted. `code` is what the
    /// troubleshooting view shows (e.g. `APNS_A2_2400{"reason":"BadDeviceToken"}`, `Rong_DeviceToken_Invalid`).
    case invalidToken(code: String)
    /// Worth trying again: 429, 5xx, a timeout, a refused connection. `afterSeconds` when the
    /// provider said when (Retry-After).
    case retry(code: String, afterSeconds: Int?)
    /// Will not succeed as it is (bad credentials, a payload the provider refused): recorded, not retried.
    case failed(code: String)
}

/// One push of a batch: the notification, where it goes, and its app's credentials.
public struct PushSend: Sendable {
    /// The notification, without its `rc["rId"]` when `recipient` holds it: what is sent is `whole`.
    public var notification: PushNotification
    public var target: PushTarget
    public var credentials: PushCredentials
    /// Pushes of one batch with the same value have notifications that differ in nothing but
    /// `id`, `badge` and `rc["rId"]` (recipients of one message), so a transport may write what
    /// they share once. Nil: nothing is known.
    public var sharedPart: Int?
    /// This push's `rc["rId"]` when it is kept apart from `notification` (whose `rc` then lacks
    /// it), so that the pushes of one message share their `rc` rather than copy it each. Nil:
    /// `notification` is whole.
    public var recipient: String?

    public init(_ notification: PushNotification, to target: PushTarget, credentials: PushCredentials, sharedPart: Int? = nil,
                recipient: String? = nil) {
        self.notification = notification
        self.target = target
        self.credentials = credentials
        self.sharedPart = sharedPart
        self.recipient = recipient
    }

    /// The notification to send: `notification` with `recipient` as its `rc["rId"]`.
    public var whole: PushNotification { notification.with(recipient: recipient) }
}

extension PushNotification {
    /// This notification with `recipient` as its `rc["rId"]` (itself when nil).
    public func with(recipient: String?) -> PushNotification {
        guard let recipient else { return self }
        var whole = self
        whole.rc["rId"] = recipient
        return whole
    }
}

/// Talks to the providers. One instance per server: its HTTP/2 connections are shared by every app.
public protocol PushTransport: Sendable {
    /// Sends `notification` to `target` with the app's `credentials`. Never throws: every failure
    /// is an outcome. A target whose provider has no credentials gives `.failed`.
    func send(_ notification: PushNotification, to target: PushTarget, credentials: PushCredentials) async -> PushOutcome
    /// Sends every push of `batch` at once; the outcomes in the batch's order, each as `send`
    /// would give it for the push's `whole` notification. The default sends each concurrently.
    func send(batch: [PushSend]) async -> [PushOutcome]
    /// Closes the connections.
    func shutdown() async
}

extension PushTransport {
    public func send(batch: [PushSend]) async -> [PushOutcome] {
        await withTaskGroup(of: (Int, PushOutcome).self) { group in
            for (index, push) in batch.enumerated() {
                group.addTask { (index, await send(push.whole, to: push.target, credentials: push.credentials)) }
            }
            var outcomes = [PushOutcome](repeating: .failed(code: "NOT_SENT"), count: batch.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
    }
}
