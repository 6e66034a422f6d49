import Foundation
import IMCore
import IMStore
import Logging

/// The sender: each app's outbox, in order per key, to the URL the app has configured now.
extension CallbackService {
    func sendLoop(executor: (any TaskExecutor)?) async {
        var expiredAt: Int64 = 0
        // Whether the outbox was empty at the last look: then only new rows make work.
        var empty = false
        while !Task.isCancelled {
            empty = false
            do {
                let now = clock.nowMilliseconds()
                if now - expiredAt >= 60_000 {
                    expiredAt = now
                    try await expire(now: now)
                }
                let backlog = try await store.callbackBacklog()
                empty = backlog.isEmpty
                // A round runs to its end even when the server stops (its requests are bounded by
                // their timeout): rows it claimed are answered, retried or given back, never left
                // leased for another node to wait out.
                await Task(executorPreference: executor) {
                    await withTaskGroup(of: Void.self) { group in
                        for (appId, count) in backlog {
                            group.addTask { await self.sendRound(appId: appId, backlog: count) }
                        }
                    }
                }.value
            } catch is CancellationError {
                break   // the server is stopping
            } catch {
                logger.error("callbacks: the outbox could not be read", metadata: ["error": "\(error)"])
            }
            await wake.wait(milliseconds: empty ? options.idleMilliseconds : options.pollMilliseconds)
        }
    }

    /// Gives up the rows older than the retention window, and says so.
    private func expire(now: Int64) async throws {
        let expired = try await store.expireCallbacks(createdBefore: now - options.retentionMilliseconds)
        for (appId, count) in expired {
            tally(appId: appId) { $0.dropped += count }
            logger.error("callbacks: given up after the retry window: the app's server did not take them",
                         metadata: ["app": "\(appId)", "callbacks": "\(count)", "hours": "\(options.retentionMilliseconds / 3_600_000)"])
        }
    }

    /// One round of an app: its oldest rows; the first rows of each key that are due, sent.
    private func sendRound(appId: Int64, backlog: Int) async {
        let now = clock.nowMilliseconds()
        if let pause = pauses.withLock({ $0[appId] }), pause.until > now { return }
        do {
            if backlog > options.maxBacklogPerApp {
                let trimmed = try await store.trimCallbacks(appId: appId, keeping: options.maxBacklogPerApp)
                tally(appId: appId) { $0.dropped += trimmed }
                logger.error("callbacks: the app's backlog passed its bound; the oldest were given up",
                             metadata: ["app": "\(appId)", "given up": "\(trimmed)", "bound": "\(options.maxBacklogPerApp)"])
            }
            let settings = try await self.settings(appId: appId)
            guard let app = apps.app(id: appId) else {
                // The app is gone: nothing can be signed for it any more.
                let rows = try await store.pendingCallbacks(appId: appId, limit: options.pageSize)
                try await store.deleteCallbacks(ids: rows.map(\.id))
                return
            }
            let rows = try await store.pendingCallbacks(appId: appId, limit: options.pageSize)
            // Rows of a callback the app turned off are given up.
            let off = rows.filter { settings.url(for: $0.kind) == nil }
            if !off.isEmpty {
                try await store.deleteCallbacks(ids: off.map(\.id))
                tally(appId: appId) { $0.dropped += off.count }
                logger.warning("callbacks: given up because the app turned the callback off",
                               metadata: ["app": "\(appId)", "callbacks": "\(off.count)"])
            }
            // Each key's run of rows from its first, if the first is due.
            var runs: [String: [CallbackRecord]] = [:]
            var order: [String] = []
            var blocked: Set<String> = []
            for row in rows where settings.url(for: row.kind) != nil && !blocked.contains(row.orderKey) {
                if runs[row.orderKey] == nil {
                    guard row.nextAttemptAt <= now else {
                        blocked.insert(row.orderKey)
                        continue
                    }
                    order.append(row.orderKey)
                }
                runs[row.orderKey, default: []].append(row)
            }
            guard !order.isEmpty else { return }
            let claimed = Set(try await store.claimCallbacks(ids: order.flatMap { runs[$0]! }.map(\.id), now: now,
                                                             leaseUntil: now + options.leaseMilliseconds))
            // A key whose first row another node took is that node's; of the others, the rows up to
            // the first another node took.
            var work: [[CallbackRecord]] = []
            var unused: [Int64] = []
            for key in order {
                let run = runs[key]!
                let taken = run.prefix { claimed.contains($0.id) }
                if !taken.isEmpty { work.append(Array(taken)) }
                unused += run.dropFirst(taken.count).map(\.id).filter { claimed.contains($0) }
            }
            let outcome = await send(work, app: app, settings: settings)
            try await store.deleteCallbacks(ids: outcome.delivered)
            try await store.retryCallbacks(outcome.retries)
            try await store.rescheduleCallbacks(ids: unused + outcome.unsent, nextAttemptAt: now)
            tally(appId: appId) {
                $0.delivered += outcome.delivered.count
                $0.failedAttempts += outcome.retries.count
            }
            adjustPause(appId: appId, delivered: outcome.delivered.count, failed: outcome.retries.count, now: now)
            // More is waiting: the next round at once.
            if !outcome.delivered.isEmpty, rows.count == options.pageSize || !outcome.unsent.isEmpty { wake.signal() }
        } catch {
            logger.error("callbacks: a round of the app's callbacks failed", metadata: ["app": "\(appId)", "error": "\(error)"])
        }
    }

    /// An app whose server took nothing in a round of at least 10 failures is paused, 5 s doubling
    /// up to a minute (RongCloud pauses a minute on mass timeouts); a delivery ends the pause.
    private func adjustPause(appId: Int64, delivered: Int, failed: Int, now: Int64) {
        pauses.withLock { pauses in
            if delivered > 0 {
                pauses[appId] = nil
            } else if failed >= 10 {
                let length = min(60_000, max(5_000, (pauses[appId]?.length ?? 2_500) * 2))
                pauses[appId] = (now + length, length)
                logger.warning("callbacks: the app's server took none of a round's callbacks; pausing",
                               metadata: ["app": "\(appId)", "failed": "\(failed)", "seconds": "\(length / 1000)"])
            }
        }
    }

    struct RoundOutcome {
        var delivered: [Int64] = []
        var retries: [CallbackRetry] = []
        /// Rows behind a failure in their key: due again at once (their key waits for its first).
        var unsent: [Int64] = []
    }

    /// Sends the runs, each in order and up to `keysInFlight` at once.
    private func send(_ runs: [[CallbackRecord]], app: AppRecord, settings: CallbackAppSettings) async -> RoundOutcome {
        await withTaskGroup(of: RoundOutcome.self) { group in
            var next = 0
            var outcome = RoundOutcome()
            func start() {
                guard next < runs.count else { return }
                let run = runs[next]
                next += 1
                group.addTask { await self.send(run: run, app: app, settings: settings) }
            }
            for _ in 0..<min(options.keysInFlight, runs.count) { start() }
            for await result in group {
                outcome.delivered += result.delivered
                outcome.retries += result.retries
                outcome.unsent += result.unsent
                start()
            }
            return outcome
        }
    }

    private func send(run: [CallbackRecord], app: AppRecord, settings: CallbackAppSettings) async -> RoundOutcome {
        var outcome = RoundOutcome()
        for (index, record) in run.enumerated() {
            guard let url = settings.url(for: record.kind) else { continue }
            if let failure = await post(record, to: url, app: app) {
                let attempts = record.attempts + 1
                let delay = min(options.maxRetryDelayMilliseconds, options.retryDelayMilliseconds << min(attempts - 1, 20))
                outcome.retries.append(CallbackRetry(id: record.id, attempts: attempts, nextAttemptAt: clock.nowMilliseconds() + delay,
                                                     error: failure))
                outcome.unsent += run.dropFirst(index + 1).map(\.id)
                if attempts == 1 || attempts % 10 == 0 {
                    logger.warning("callbacks: the app's server did not take a callback; it is tried again",
                                   metadata: ["app": "\(app.id)", "kind": "\(record.kind)", "attempts": "\(attempts)", "error": "\(failure)"])
                }
                return outcome
            }
            outcome.delivered.append(record.id)
        }
        return outcome
    }

    /// Posts one record; nil when the app's server answered 200, else what went wrong.
    private func post(_ record: CallbackRecord, to url: String, app: AppRecord) async -> String? {
        let request = CallbackRequest(
            url: CallbackSignature.signedURL(url, appKey: app.appKey, appSecret: app.appSecret, now: clock.nowMilliseconds()),
            contentType: record.kind == .routing || record.kind == .deactivation ? "application/x-www-form-urlencoded" : "application/json",
            body: record.body, headers: [("X-Callback-Id", record.dedupKey)])
        do {
            let response = try await transport.post(request, timeout: .milliseconds(options.requestTimeoutMilliseconds))
            return response.status == 200 ? nil : "HTTP \(response.status)"
        } catch {
            return "\(error)"
        }
    }
}
