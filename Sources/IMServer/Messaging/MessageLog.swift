import Foundation
import IMCore
import IMStore
import Synchronization

/// The single writer of this process's message log, with group commit.
///
/// Senders append and wait; the writer takes everything queued, assigns each message its
/// `messageUId` and a `sentTime` strictly increasing inside its conversation, commits them in one
/// durable transaction, answers the senders and hands the batch to delivery, in commit order: on
/// one node the answers do not wait for the fan-out, and what could overtake it waits on
/// `fanOut` (`FanOutOrder`). In a cluster every node has its own writer; the store orders their
/// commits (seq in commit order, and a sentTime not after the conversation's newest moved 1 ms
/// past it), and the batch is on the cluster bus before its senders are answered.
///
/// Committing and delivering overlap: the writer commits batch N+1 while batch N is delivered
/// (and goes out on the cluster bus); one task hands batches on and answers their senders, in
/// commit order.
/// While one transaction is being written the next batch gathers, so one fsync covers many messages
/// under load and a lone message waits for no timer.
///
/// The writer is `runWriter`, which `MessageLogService` runs: appends wait until it runs. When it
/// is told to stop (`stopWriting`), it refuses new appends, commits everything appended before, and
/// answers those senders; then it returns.
public actor MessageLog {
    private let store: any MessageStore & MessageLifecycleStore & UltraGroupStore
    private let clock: any WallClock
    private let uids = MessageUIDGenerator()
    private let maxBatch: Int
    private let committed: @Sendable ([CommittedMessage]) async -> Void
    private let handedOn: (@Sendable () async -> Void)?
    /// Orders what follows a committed batch behind its fan-out.
    nonisolated let fanOut: FanOutOrder
    /// Counts the messages on their way (appended, fan-out not queued yet) for background work to
    /// step aside for.
    nonisolated let deliveryFirst: DeliveryFirst
    /// A committed batch waiting to be delivered and answered.
    private typealias Committed = (number: UInt64, messages: [CommittedMessage], replies: [CheckedContinuation<CommitOutcome, any Error>])
    /// Committed batches, in commit order, for the task that delivers them and answers their senders.
    private let committedBatches: AsyncStream<Committed>
    private let handOn: AsyncStream<Committed>.Continuation

    private typealias Pending = (message: StoredMessage, origin: Origin, reply: CheckedContinuation<CommitOutcome, any Error>)
    /// Appends in order; those before `queueHead` were taken by the writer already.
    private var queue: [Pending] = []
    private var queueHead = 0
    /// False once the writer has been told to stop and took the last appends.
    private var accepting = true
    /// Wakes the writer when something is queued; finished to stop it.
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation
    /// `stopWriting` was called: what is written from then on is counted in `drained`.
    private let stopRequested = Mutex(false)
    private let metrics: ServerMetrics?
    /// Messages written since `stopWriting`: committed and answered, or refused by the store (their
    /// senders were told).
    private var drained = (committed: 0, failed: 0)
    /// Latest sentTime per conversation of each app; bounded, refilled from what the store stored.
    private var lastSentTime: [AppConversation: Int64] = [:]
    private static let lastSentTimeCacheLimit = 100_000

    /// - Parameters:
    ///   - committed: called with each committed batch, in commit order (delivery hangs here), once
    ///     its senders are answered; in a cluster before. Batches are handed on one at a time, so
    ///     deliveries keep commit order; the writer goes on committing meanwhile.
    ///   - fanOut: told of each batch committed and delivered, for what must follow a delivery to
    ///     wait on.
    ///   - deliveryFirst: told of each message appended, of each one whose fan-out is queued, and of
    ///     each one whose commit failed.
    ///   - handedOn: when given (a cluster), returns once what `committed` published so far has left
    ///     this process (the cluster bus); a batch's senders are answered only after it returns.
    public init(store: any MessageStore & MessageLifecycleStore & UltraGroupStore, clock: any WallClock, maxBatch: Int = 512,
                metrics: ServerMetrics? = nil, fanOut: FanOutOrder = FanOutOrder(), deliveryFirst: DeliveryFirst = DeliveryFirst(),
                committed: @escaping @Sendable ([CommittedMessage]) async -> Void,
                handedOn: (@Sendable () async -> Void)? = nil) {
        self.metrics = metrics
        self.fanOut = fanOut
        self.deliveryFirst = deliveryFirst
        self.store = store
        self.clock = clock
        self.maxBatch = maxBatch
        self.committed = committed
        self.handedOn = handedOn
        (wakeUps, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        (committedBatches, handOn) = AsyncStream.makeStream()
    }

    /// Stores the message durably and returns it with its seq, uid and sentTime; for a resend of an
    /// already stored client message id, returns the first message. Once the writer has stopped,
    /// refuses with 31003: nothing is stored.
    /// - Parameter origin: the id of the session that sent it (it is not echoed back there).
    public func append(_ message: StoredMessage, origin: Origin) async throws -> CommitOutcome {
        guard accepting else {
            throw IMError(.serverUnavailable, "the server is shutting down: the message was not stored; send it again once reconnected")
        }
        return try await withCheckedThrowingContinuation { reply in
            queue.append((message, origin, reply))
            deliveryFirst.appended(1)
            wakeUp.yield()
        }
    }

    /// The writer: commits what is appended, batch after batch, until `stopWriting`; then commits
    /// and answers everything appended before the stop and refuses later appends. Returns how many
    /// messages it wrote after `stopWriting`: committed and answered, and refused by the store
    /// (their senders got the error). Run once (by `MessageLogService`).
    func runWriter() async -> (committed: Int, failed: Int) {
        // Delivers batches and answers their senders in commit order; ends after the last one.
        let answering = Task { [committedBatches, committed, handedOn, fanOut, deliveryFirst] in
            // One node: a batch's senders are answered once it is committed, and its fan-out (a
            // push queued for every recipient session, thousands for a large group) follows without
            // them waiting for it. The next batch is answered only after it, so deliveries keep
            // commit order; `fanOut` holds back whatever else could overtake it. A cluster: the
            // batch is on the bus before its senders are answered.
            let answerFirst = handedOn == nil
            for await batch in committedBatches {
                if answerFirst { Self.answer(batch) }
                await FanOutOrder.$delivering.withValue(true) { await committed(batch.messages) }
                await handedOn?()
                fanOut.delivered(batch.number)
                deliveryFirst.fannedOut(batch.messages.count)
                if !answerFirst { Self.answer(batch) }
            }
        }
        for await _ in wakeUps {
            await writeQueued()
        }
        // Stopped (or cancelled): no more appends, then what is queued is written.
        accepting = false
        await writeQueued()
        handOn.finish()
        await answering.value
        return drained
    }

    private static func answer(_ batch: Committed) {
        for (reply, message) in zip(batch.replies, batch.messages) { reply.resume(returning: message.outcome) }
    }

    /// Tells the writer to stop once it has written everything appended so far.
    nonisolated func stopWriting() {
        stopRequested.withLock { $0 = true }
        wakeUp.finish()
    }

    /// Appends waiting for the writer.
    var queuedCount: Int { queue.count - queueHead }

    /// A stored message by uid (read from the store; the log's order is not involved).
    nonisolated func storedMessage(appId: Int64, uid: String) async throws -> StoredMessage? {
        try await store.message(appId: appId, uid: uid)
    }

    nonisolated func replaceStoredMessage(appId: Int64, uid: String, objectName: String, content: Data) async throws {
        try await store.replaceMessage(appId: appId, uid: uid, objectName: objectName, content: content)
    }

    /// Replaces a message's content and stamps it as changed (so that ultra group devices away
    /// find it in their next channel summary).
    nonisolated func markModified(appId: Int64, uid: String, content: Data, mentions: MentionedInfo? = nil, at time: Int64) async throws {
        try await store.modifyMessage(appId: appId, uid: uid, content: content, mentions: mentions, modifiedTime: time)
    }

    nonisolated func deleteStoredMessage(appId: Int64, uid: String) async throws {
        try await store.deleteMessage(appId: appId, uid: uid)
    }

    /// Commits everything queued.
    private func writeQueued() async {
        while queueHead < queue.count {
            // The oldest maxBatch appends, those that came during the last commit included, taken
            // by moving the head: a backlog is not shifted down the array once per batch. The
            // taken part is dropped once it is all of the array or more than half of it.
            let end = min(queueHead + maxBatch, queue.count)
            let batch = Array(queue[queueHead..<end])
            queueHead = end
            if queueHead == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueHead = 0
            } else if queueHead > queue.count / 2 {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            await commitBatch(batch)
        }
    }

    /// Commits one batch and hands it on (or fails its senders).
    private func commitBatch(_ batch: [Pending]) async {
        let draining = stopRequested.withLock { $0 }
        do {
            var messages: [StoredMessage] = []
            messages.reserveCapacity(batch.count)
            for entry in batch {
                messages.append(stamp(entry.message))
            }
            let started = ContinuousClock.now
            let outcomes = try await store.commit(messages)
            metrics?.committed(batch: messages.count, took: ContinuousClock.now - started)
            // The store may have moved a sentTime past one another node committed meanwhile
            // (a cluster): the next stamp starts from what was stored.
            for case .stored(let stored) in outcomes {
                let key = AppConversation(appId: stored.appId, key: stored.conversationKey)
                if stored.sentTime > lastSentTime[key] ?? Int64.min { lastSentTime[key] = stored.sentTime }
            }
            handOn.yield((fanOut.committing(), zip(batch, outcomes).map { CommittedMessage(outcome: $1, origin: $0.origin) }, batch.map(\.reply)))
            if draining { drained.committed += batch.count }
        } catch {
            // Nothing of this batch is stored; forget cached times that may be ahead of the store.
            lastSentTime = [:]
            if draining { drained.failed += batch.count }
            deliveryFirst.finished(batch.count)
            for entry in batch { entry.reply.resume(throwing: error) }
        }
    }

    /// Assigns uid (unless it has one) and sentTime: the clock's time, or 1 ms after the conversation's last stamped
    /// time when that is not before it (a burst inside one millisecond). A conversation not in the
    /// cache is not looked up: the store moves a sentTime that is not after its conversation's
    /// newest past it (a port rule both stores pass), and what it stored refills the cache.
    private func stamp(_ message: StoredMessage) -> StoredMessage {
        var message = message
        let key = AppConversation(appId: message.appId, key: message.conversationKey)
        let now = clock.nowMilliseconds()
        message.sentTime = max(now, (lastSentTime[key] ?? Int64.min) &+ 1)
        // A uid given already (the message callback told the app's server this one) is kept.
        if message.uid.isEmpty { message.uid = uids.next(milliseconds: now) }
        if lastSentTime.count >= Self.lastSentTimeCacheLimit { lastSentTime.removeAll(keepingCapacity: true) }
        lastSentTime[key] = message.sentTime
        return message
    }
}

/// A message the log has committed, and the session it came from.
public struct CommittedMessage: Sendable {
    public var outcome: CommitOutcome
    public var origin: Origin
}
