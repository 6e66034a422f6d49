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
        var active: [Int64: Set<String>] = [:]
    }

    private struct CountKey: Hashable {
        let appId: Int64
        let type: ConversationType
    }

    private struct Remembered {
        var day = ""
        var users = Set<UserKey>()
    }

    private struct UserKey: Hashable {
        let appId: Int64
        let userId: String
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
        let key = UserKey(appId: appId, userId: userId)
        guard !remembered.withLock({ $0.users.contains(key) }) else { return }
        pending.withLock { _ = $0.active[appId, default: []].insert(userId) }
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
        do {
            try await store.addDailyFigures(counts: counts, peaks: peakFigures)
        } catch {
            pending.withLock { pending in
                for (key, value) in taken.counts { pending.counts[key, default: 0] += value }
            }
            registry.restorePeaks(peaks)
            throw error
        }
        for (appId, users) in taken.active {
            let today = day(appId)
            do {
                try await store.recordActiveUsers(appId: appId, day: today, userIds: users.sorted())
            } catch {
                pending.withLock { $0.active[appId, default: []].formUnion(users) }
                throw error
            }
            remembered.withLock { remembered in
                if remembered.day != today || remembered.users.count + users.count > Self.rememberedUsers {
                    remembered = Remembered(day: today, users: [])
                }
                for user in users { remembered.users.insert(UserKey(appId: appId, userId: user)) }
            }
        }
    }

    /// The app's figures of the last `days` days (today included), oldest first.
    public func daily(appId: Int64, days: Int) async throws -> [DailyStatistics] {
        let now = clock.nowMilliseconds()
        let messaging = apps.settings(appId: appId).messaging
        let first = messaging.day(of: now - Int64(days - 1) * 86_400_000)
        return try await store.dailyStatistics(appId: appId, fromDay: first, toDay: messaging.day(of: now))
    }
}

/// Writes the statistics every minute, and once more at shutdown.
struct StatisticsRecorder: Service {
    let core: ServerCore

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(60))
                await flush()
            }
        }
        await flush()
    }

    private func flush() async {
        do {
            try await core.statistics.flush()
        } catch {
            core.logger.warning("statistics could not be written; they are kept for the next try", metadata: ["error": "\(error)"])
        }
    }
}
