import Foundation

/// One POST to an app's server.
public struct CallbackRequest: Sendable {
    /// The app's URL with the signature in its query.
    public var url: String
    public var contentType: String
    public var body: Data
    /// Headers besides the content type (the callback's id).
    public var headers: [(String, String)]
    /// A message waits for the answer (the message callback), as opposed to a callback sent in the
    /// background from the outbox: a transport may give it a path of its own.
    public var waitedFor: Bool

    public init(url: String, contentType: String, body: Data, headers: [(String, String)] = [], waitedFor: Bool = false) {
        self.url = url
        self.contentType = contentType
        self.body = body
        self.headers = headers
        self.waitedFor = waitedFor
    }
}

/// What the app's server answered.
public struct CallbackResponse: Sendable {
    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// How callbacks reach the app's servers: `IMPushProviders.HTTPCallbackTransport` (async-http-client
/// with a connection pool) in `imserver`. A request that cannot be made (refused, timed out, TLS)
/// throws.
public protocol CallbackTransport: Sendable {
    func post(_ request: CallbackRequest, timeout: Duration) async throws -> CallbackResponse
    /// Closes its connections; called once when the server stops.
    func shutdown() async
}

/// RongCloud's callback signature: `appKey`, `nonce`, `timestamp` (and `signTimestamp`, the name
/// older receivers read, with the same value) and `signature`, the hex SHA1 of app secret + nonce +
/// timestamp, added to the URL's query.
enum CallbackSignature {
    static func signedURL(_ url: String, appKey: String, appSecret: String, now: Int64) -> String {
        let nonce = String(UInt64.random(in: 100_000...999_999_999_999))
        let timestamp = String(now)
        let signature = APISignature.sign(secret: appSecret, nonce: nonce, timestamp: timestamp)
        let separator = url.contains("?") ? "&" : "?"
        return url + separator + "appKey=\(FormBody.encode(appKey))&nonce=\(nonce)&timestamp=\(timestamp)"
            + "&signTimestamp=\(timestamp)&signature=\(signature)"
    }
}
