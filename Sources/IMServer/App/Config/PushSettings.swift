import Foundation
import IMPush
import IMCore

extension ServerConfig {
    /// Push notifications: whether this server sends them and where the providers are. The app's
    /// credentials (APNs key or certificate, FCM service account, webhook secret) are per app,
    /// set through the Server API (`/push/settings/set.json`) or `imserver app push`.
    public struct PushSettings: SettingsArea {
        public static let title = "Push"
        public static let summary = "Push notifications to offline devices through APNs, FCM and webhooks (docs/PUSH.md): the providers' addresses, timeouts and retries."

        @Setting(key: "pushEnabled",
                 doc: "Decide and send push notifications. Off: no pushes are made, and the device token and push profile calls answer 1009.")
        public var enabled = true

        @Setting(key: "pushApnsURL", allowed: Self.https,
                 doc: "APNs production endpoint (HTTP/2). Tests and relays point it elsewhere.")
        public var apnsProductionURL = "https://api.push.apple.com"

        @Setting(key: "pushApnsSandboxURL", allowed: Self.https,
                 doc: "APNs development (sandbox) endpoint, for device tokens registered with the sandbox environment.")
        public var apnsSandboxURL = "https://api.sandbox.push.apple.com"

        @Setting(key: "pushFcmURL", allowed: Self.https,
                 doc: "FCM HTTP v1 endpoint (the OAuth2 token endpoint comes from each service account's token_uri).")
        public var fcmURL = "https://fcm.googleapis.com"

        @Setting(key: "pushTrustRootsFile",
                 doc: "PEM file of extra certificate authorities trusted for the providers' and webhooks' TLS (beside the system's), e.g. a relay's private CA. Empty: the system's only.")
        public var trustRootsFile = ""

        @Setting(key: "pushRequestTimeoutSeconds", allowed: .range(1...120),
                 doc: "How long one request to a provider may take before it is retried.")
        public var requestTimeoutSeconds = 10

        @Setting(key: "pushApnsConnections", allowed: .range(1...16),
                 doc: "HTTP/2 connections to an APNs endpoint per app certificate (or per endpoint for token authentication), at most. APNs allows 1,000 pushes in flight on a connection; a large batch is spread over these.")
        public var apnsConnections = 4

        @Setting(key: "pushMaxAttempts", allowed: .range(1...20),
                 doc: "Attempts of a push the provider answered with 429, 5xx or a timeout before it is given up (backoff from 1 s doubling to 5 min, or the provider's Retry-After).")
        public var maxAttempts = 6

        @Setting(key: "pushRecordRetentionDays", allowed: .range(1...90),
                 doc: "How long push records (each decision and the provider's answer, for /push/records/query.json) are kept.")
        public var recordRetentionDays = 7

        static let https = Allowed<String>("an http:// or https:// URL") { $0.hasPrefix("https://") || $0.hasPrefix("http://") }

        public init() {}
    }
}

extension PushEndpoints {
    /// The providers' addresses the `push` settings give, with the extra trust roots read from
    /// `pushTrustRootsFile`.
    public init(_ settings: ServerConfig.PushSettings) throws {
        var roots: String?
        if !settings.trustRootsFile.isEmpty {
            do {
                roots = try String(contentsOfFile: settings.trustRootsFile, encoding: .utf8)
            } catch {
                throw IMError(.invalidParameter, "pushTrustRootsFile \(settings.trustRootsFile) cannot be read: \(error.localizedDescription)")
            }
        }
        self.init(apnsProduction: settings.apnsProductionURL, apnsSandbox: settings.apnsSandboxURL, fcm: settings.fcmURL,
                  extraTrustRootsPEM: roots, requestTimeoutSeconds: settings.requestTimeoutSeconds,
                  apnsConnections: settings.apnsConnections)
    }
}
