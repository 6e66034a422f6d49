import Foundation

/// Which callback to the app's server a record is.
public enum CallbackKind: Int, Sendable, Codable, CaseIterable {
    /// Full message routing (全量消息路由): one message, form-encoded.
    case routing = 1
    /// Online status (在线状态订阅): a device's online, offline or logout transition, JSON.
    case status = 2
    /// Chatroom status sync (聊天室状态同步): created, destroyed, joined, left, JSON.
    case chatroomStatus = 3
    /// Chatroom attribute sync (聊天室属性同步): a KV set, delete or clear, JSON.
    case chatroomAttribute = 4
    /// The result of a user's deactivation or reactivation (用户注销/激活结果), form-encoded.
    case deactivation = 5
}

/// One callback the server has taken on: the outbox row the sender works from, kept until the
/// app's server answers 200 (then deleted) or it is given up.
public struct CallbackRecord: Sendable, Equatable {
    /// Assigned by the store in the order records are taken on.
    public var id: Int64
    public var appId: Int64
    public var kind: CallbackKind
    /// Records with the same order key are sent one after another, in id order (a conversation,
    /// a user, a chatroom); records with different keys go concurrently.
    public var orderKey: String
    /// Unique per app and kind: a record taken on twice (a message routed again after a crash,
    /// by two nodes) is stored once. The receiver sees it as the callback's id.
    public var dedupKey: String
    /// The request body, as sent.
    public var body: Data
    public var attempts: Int
    /// When the record may be sent (a retry's backoff, or a sender's lease).
    public var nextAttemptAt: Int64
    public var createdAt: Int64
    /// The last failure, for the operator ("" before the first attempt).
    public var lastError: String

    public init(id: Int64 = 0, appId: Int64, kind: CallbackKind, orderKey: String, dedupKey: String, body: Data,
                attempts: Int = 0, nextAttemptAt: Int64, createdAt: Int64, lastError: String = "") {
        self.id = id
        self.appId = appId
        self.kind = kind
        self.orderKey = orderKey
        self.dedupKey = dedupKey
        self.body = body
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.lastError = lastError
    }
}

/// A failed attempt: when to try again, and why it failed.
public struct CallbackRetry: Sendable, Equatable {
    public var id: Int64
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var error: String

    public init(id: Int64, attempts: Int, nextAttemptAt: Int64, error: String) {
        self.id = id
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.error = error
    }
}

/// Callbacks to the app's server: each app's callback settings, and the outbox of callbacks taken
/// on and not yet answered.
public protocol CallbackStore: Sendable {
    /// The app's callback settings, as the server encodes them (nil: never set).
    func callbackSettings(appId: Int64) async throws -> Data?
    func setCallbackSettings(appId: Int64, settings: Data) async throws

    /// Takes records on in one durable transaction (a record whose (app, kind, dedupKey) is already
    /// there is kept as it is), with, when given, how far `node` has taken on routing from the
    /// message log (`cursor`: the seq of the last message looked at).
    func enqueueCallbacks(_ records: [CallbackRecord], node: String, cursor: UInt64?) async throws
    /// The seq up to which `node` has taken on message routing, nil if it never recorded one.
    func callbackCursor(node: String) async throws -> UInt64?
    /// The apps with records in the outbox, and how many each has.
    func callbackBacklog() async throws -> [Int64: Int]
    /// The app's oldest records (by id), due or not: the sender sends the first of each order key
    /// once it is due.
    func pendingCallbacks(appId: Int64, limit: Int) async throws -> [CallbackRecord]
    /// Takes these records for sending: each still there and due at `now` gets `leaseUntil` as its
    /// next attempt time, atomically; returns the ids taken. Of several nodes that read the same
    /// records one takes each; a record whose sender dies is due again when the lease ends.
    func claimCallbacks(ids: [Int64], now: Int64, leaseUntil: Int64) async throws -> [Int64]
    /// Removes records: answered, or given up.
    func deleteCallbacks(ids: [Int64]) async throws
    /// Records failed attempts.
    func retryCallbacks(_ retries: [CallbackRetry]) async throws
    /// Sets when these records may next be sent (a lease given back unused).
    func rescheduleCallbacks(ids: [Int64], nextAttemptAt: Int64) async throws
    /// Deletes the app's oldest records past the first `keeping` (a backlog past its bound);
    /// returns how many.
    func trimCallbacks(appId: Int64, keeping: Int) async throws -> Int
    /// Deletes the records taken on before `before` (given up after the retry window); returns
    /// how many, by app.
    func expireCallbacks(createdBefore before: Int64) async throws -> [Int64: Int]
}
