import Foundation
import IMCore
import IMStore
import Logging
import ServiceLifecycle

/// Deletes the messages no window serves any more, every `retentionSweepMinutes`: those older than
/// the longest of the offline retentions, the compensation window and (when it is on) the cloud
/// history retention, and ultra group messages older than their own history retention. Deletes
/// go in batches of `batch`, with a yield between them, so the message log's writer is never held
/// for long.
struct RetentionSweeper: Service {
    let core: ServerCore

    func run() async throws {
        let minutes = core.config.messaging.retentionSweepMinutes
        guard minutes > 0 else { return }
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(60 * minutes))
                do {
                    _ = try await core.sweepRetention(now: core.clock.nowMilliseconds())
                } catch {
                    core.logger.warning("the retention sweep stopped; the next one goes on", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

extension ServerCore {
    /// Messages deleted per store call.
    public static let retentionBatch = 500

    /// The oldest sent time a private, group or system message of the app is still served at `now`.
    func messageRetentionFloor(appId: Int64, now: Int64) -> Int64 {
        let messaging = apps.settings(appId: appId).messaging
        var days = max(messaging.offlineRetentionDays, messaging.systemOfflineRetentionDays, messaging.compensationDays)
        if messaging.cloudHistoryEnabled { days = max(days, messaging.cloudHistoryRetentionDays) }
        return now - Int64(days) * 86_400_000
    }

    /// One sweep over every app, each by its own settings; returns the messages deleted.
    @discardableResult
    public func sweepRetention(now: Int64) async throws -> Int {
        var deleted = 0
        for app in apps.all {
            let floor = messageRetentionFloor(appId: app.id, now: now)
            let ultraFloor = now - Int64(apps.settings(appId: app.id).ultraGroups.historyRetentionDays) * 86_400_000
            // Ultra group messages keep their own retention, shorter or longer than the others'.
            deleted += try await sweep(appId: app.id, conversationKey: nil, ultraGroups: false, before: floor)
            for key in try await store.ultraGroupConversationKeys(appId: app.id) {
                deleted += try await sweep(appId: app.id, conversationKey: key, ultraGroups: true, before: ultraFloor)
            }
        }
        // Media files past their type's retention (each file's expiry was set by its app's settings).
        let files = try await media.sweep(now: now)
        if deleted > 0 || files > 0 { logger.info("retention sweep", metadata: ["deleted": "\(deleted)", "files": "\(files)"]) }
        return deleted
    }

    private func sweep(appId: Int64, conversationKey: String?, ultraGroups: Bool, before: Int64) async throws -> Int {
        var total = 0
        while true {
            let count = try await store.deleteMessages(appId: appId, conversationKey: conversationKey, ultraGroups: ultraGroups,
                                                       sentBefore: before, limit: Self.retentionBatch)
            total += count
            guard count == Self.retentionBatch else { return total }
            await Task.yield()
        }
    }
}
