import Foundation
import IMCore
import IMStore
import Logging
import ServiceLifecycle
import Synchronization

/// Each app's figures per day, kept in the store (`StatisticsStore`): messages by conversation
/// type, active users (those who connected), and the most connections open at once on a node.
/// Counted in memory as things happen and written every minute (and at shutdown), so a message
/// costs an addition under a lock; a crash loses at most the last minute's counts. A day is the
/// app's natural day (`dayTimeZone`); counts are given the day of the minute they are written in.
public final class ServerStatistics: Sendable {
    private struct Pending {
        var counts: [CountKey: Int64] = [:]
        /// Users who connected, by app and the app's day of their connect.
        var active: [AppDay: Set<String>] = [:]
    }

    private struct AppDay: Hashable {
        let appId: Int64
        let day: String
    }

    private struct CountKey: Hashable {
        let appId: Int64
        let type: ConversationType
    }

    /// Users written as active, by app and day: each app's current day only.
    private struct Remembered {
        var days: [Int64: (day: String, users: Set<String>)] = [:]
        var count: Int { days.values.reduce(0) { $0 + $1.users.count } }
    }

    /// Users already written as active today, so a reconnect writes nothing; past this many the
    /// memory is dropped (a user written twice counts once all the same).
    static let rememberedUsers = 200_000

    private let store: any StatisticsStore
    private let apps: AppRegistry
    private let registry: SessionRegistry
    private let clock: any WallClock
    private let logger: Logger
    private let pending = Mutex(Pending())
    private let remembered = Mutex(Remembered())
    /// Each app's current day and when it begins and ends, so a connect does not work out the
    /// calendar date again (a tenth of a connect's own work in a storm).
    private let currentDays = Mutex<[Int64: (zone: String?, start: Int64, end: Int64, day: String)]>([:])

    init(store: any StatisticsStore, apps: AppRegistry, registry: SessionRegistry, clock: any WallClock, logger: Logger) {
        self.store = store
        self.apps = apps
        self.registry = registry
        self.clock = clock
        self.logger = logger
    }

    /// Messages of one batch of the log, or a chatroom message.
    func count(_ messages: some Sequence<StoredMessage>) {
        pending.withLock { pending in
            for message in messages {
                pending.counts[CountKey(appId: message.appId, type: message.conversationType), default: 0] += 1
            }
        }
    }

    /// A user connected.
    func active(appId: Int64, userId: String) {
        let day = currentDay(appId: appId, now: clock.nowMilliseconds())
        let written = remembered.withLock { remembered in
            guard let entry = remembered.days[appId], entry.day == day else { return false }
            return entry.users.contains(userId)
        }
        guard !written else { return }
        pending.withLock { _ = $0.active[AppDay(appId: appId, day: day), default: []].insert(userId) }
    }

    /// The app's natural day at `now`, `YYYY-MM-DD` (as `MessagingSettings.day(of:)`).
    func currentDay(appId: Int64, now: Int64) -> String {
        let messaging = apps.settings(appId: appId).messaging
        if let known = currentDays.withLock({ $0[appId] }), known.zone == messaging.dayTimeZone, known.start <= now, now < known.end {
            return known.day
        }
        let calendar = messaging.dayCalendar
        let start = calendar.startOfDay(for: Date(timeIntervalSince1970: Double(now) / 1000))
        let end = calendar.date(byAdding: .day, value: 1, to: start) ?? start
        let day = messaging.day(of: now)
        currentDays.withLock {
            $0[appId] = (messaging.dayTimeZone, Int64((start.timeIntervalSince1970 * 1000).rounded()),
                         Int64((end.timeIntervalSince1970 * 1000).rounded()), day)
        }
        return day
    }

    /// Writes what was counted since the last call; what cannot be written is kept for the next.
    public func flush() async throws {
        let now = clock.nowMilliseconds()
        let taken = pending.withLock { pending in
            defer { pending = Pending() }
            return pending
        }
        let peaks = registry.takePeaks()
        var days: [Int64: String] = [:]
        func day(_ appId: Int64) -> String {
            if let day = days[appId] { return day }
            let day = apps.settings(appId: appId).messaging.day(of: now)
            days[appId] = day
            return day
        }
        let counts = taken.counts.map { key, value in
            DailyFigure(appId: key.appId, day: day(key.appId), name: DailyFigure.messages(key.type), value: value)
        }
        let peakFigures = peaks.map { appId, peak in
            DailyFigure(appId: appId, day: day(appId), name: DailyFigure.peakConnections, value: Int64(peak))
        }
        // One order for every node, so that two nodes writing the same rows never wait for each other.
        let order = { (a: DailyFigure, b: DailyFigure) in (a.appId, a.day, a.name) < (b.appId, b.day, b.name) }
        do {
            try await store.addDailyFigures(counts: counts.sorted(by: order), peaks: peakFigures.sorted(by: order))
        } catch {
            pending.withLock { pending in
                for (key, value) in taken.counts { pending.counts[key, default: 0] += value }
                for (key, users) in taken.active { pending.active[key, default: []].formUnion(users) }
            }
            registry.restorePeaks(peaks)
            throw error
        }
        var failure: (any Error)?
        for (key, users) in taken.active.sorted(by: { ($0.key.appId, $0.key.day) < ($1.key.appId, $1.key.day) }) {
            do {
                try await store.recordActiveUsers(appId: key.appId, day: key.day, userIds: users.sorted())
            } catch {
                // Kept for the next flush; the other apps' users are still written.
                pending.withLock { $0.active[key, default: []].formUnion(users) }
                failure = error
                continue
            }
            remembered.withLock { remembered in
                if remembered.count + users.count > Self.rememberedUsers { remembered = Remembered() }
                var entry = remembered.days[key.appId] ?? (key.day, [])
                if entry.day != key.day {
                    // A new day: yesterday's users count again. (A flush can still carry users of
                    // the day before, written above; they are not remembered.)
                    guard key.day > entry.day else { return }
                    entry = (key.day, [])
                }
                entry.users.formUnion(users)
                remembered.days[key.appId] = entry
            }
        }
        if let failure { throw failure }
    }

    /// The app's figures of the last `days` days (today included), oldest first.
    public func daily(appId: Int64, days: Int) async throws -> [DailyStatistics] {
        let now = clock.nowMilliseconds()
        let messaging = apps.settings(appId: appId).messaging
        let first = messaging.day(of: now - Int64(days - 1) * 86_400_000)
        return try await store.dailyStatistics(appId: appId, fromDay: first, toDay: messaging.day(of: now))
    }
}

/// Writes the statistics every minute, and once more at shutdown; once an hour it forgets who was
/// active two days ago (the counts stay).
struct StatisticsRecorder: Service {
    let core: ServerCore

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var minutes = 0
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(60))
                await flush()
                minutes += 1
                if minutes % 60 == 1 { await pruneActiveUsers() }
            }
        }
        await flush()
    }

    private func pruneActiveUsers() async {
        let twoDaysAgo = core.apps.defaults.messaging.day(of: core.clock.nowMilliseconds() - 2 * 86_400_000)
        do {
            try await core.store.pruneActiveUsers(beforeDay: twoDaysAgo)
        } catch {
            core.logger.warning("old active-user rows could not be pruned; the next hour tries again", metadata: ["error": "\(error)"])
        }
    }

    private func flush() async {
        do {
            try await core.statistics.flush()
        } catch {
            core.logger.warning("statistics could not be written; they are kept for the next try", metadata: ["error": "\(error)"])
        }
    }
}
