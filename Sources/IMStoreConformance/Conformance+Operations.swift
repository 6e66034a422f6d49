import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// Per-app settings, daily statistics and the console's accounts and sessions.
    public func operationsStore() async throws {
        let area = "Operations"

        await check(area, "updateAppSettings sets and resets keys in one change, keeps the others, and loadApps returns them") { f in
            let key = "app-\(UUID().uuidString)"
            _ = try await f.store.upsertApp(appKey: key, appSecret: "s", name: "A", now: f.now)
            let first = try #require(try await f.store.updateAppSettings(appKey: key, set: ["cloudHistoryEnabled": .bool(false), "offlineRetentionDays": .number(3)], reset: []))
            #expect(first.settings == ["cloudHistoryEnabled": .bool(false), "offlineRetentionDays": .number(3)])
            let second = try #require(try await f.store.updateAppSettings(appKey: key, set: ["dayTimeZone": .string("UTC"), "groupPreJoinHistory": .null],
                                                                          reset: ["offlineRetentionDays", "absent"]))
            #expect(second.settings == ["cloudHistoryEnabled": .bool(false), "dayTimeZone": .string("UTC")], "a null value is removed, not kept")
            #expect(try await f.store.loadApps().first { $0.appKey == key }?.settings == second.settings)
            #expect(try await f.store.upsertApp(appKey: key, appSecret: "s2", name: "A", now: f.now).settings == second.settings, "a new secret keeps them")
            #expect(try await f.store.updateAppSettings(appKey: "no-such-app", set: ["x": .bool(true)], reset: []) == nil)
            #expect(try await f.store.loadApps().first { $0.id == f.appId }?.settings == [:], "another app has none")
        }

        await check(area, "two setting changes at once both apply") { f in
            let key = "app-\(UUID().uuidString)"
            _ = try await f.store.upsertApp(appKey: key, appSecret: "s", name: "A", now: f.now)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 {
                    group.addTask { _ = try await f.store.updateAppSettings(appKey: key, set: ["k\(index)": .number(Double(index))], reset: []) }
                }
                try await group.waitForAll()
            }
            #expect(try await f.store.loadApps().first { $0.appKey == key }?.settings.count == 8)
        }

        await check(area, "daily figures: counts add up, peaks keep the highest, active users count once each, apps apart") { f in
            let other = try await f.otherApp()
            try await f.store.addDailyFigures(counts: [DailyFigure(appId: f.appId, day: "2030-01-01", name: "messages.1", value: 3)],
                                              peaks: [DailyFigure(appId: f.appId, day: "2030-01-01", name: "peakConnections", value: 5)])
            try await f.store.addDailyFigures(counts: [DailyFigure(appId: f.appId, day: "2030-01-01", name: "messages.1", value: 2),
                                                       DailyFigure(appId: f.appId, day: "2030-01-02", name: "messages.3", value: 1),
                                                       DailyFigure(appId: other, day: "2030-01-01", name: "messages.1", value: 7)],
                                              peaks: [DailyFigure(appId: f.appId, day: "2030-01-01", name: "peakConnections", value: 4)])
            try await f.store.recordActiveUsers(appId: f.appId, day: "2030-01-01", userIds: ["ann", "bob"])
            try await f.store.recordActiveUsers(appId: f.appId, day: "2030-01-01", userIds: ["bob", "carol"])
            try await f.store.recordActiveUsers(appId: other, day: "2030-01-01", userIds: ["ann"])
            let days = try await f.store.dailyStatistics(appId: f.appId, fromDay: "2030-01-01", toDay: "2030-01-31")
            #expect(days == [
                DailyStatistics(day: "2030-01-01", figures: ["messages.1": 5, "peakConnections": 5, "activeUsers": 3]),
                DailyStatistics(day: "2030-01-02", figures: ["messages.3": 1]),
            ])
            #expect(try await f.store.dailyStatistics(appId: f.appId, fromDay: "2030-01-02", toDay: "2030-01-02").map(\.day) == ["2030-01-02"])
            #expect(try await f.store.dailyStatistics(appId: other, fromDay: "2030-01-01", toDay: "2030-01-31")
                    == [DailyStatistics(day: "2030-01-01", figures: ["messages.1": 7, "activeUsers": 1])])
        }

        await check(area, "pruneActiveUsers forgets who was active before a day; the counts stay") { f in
            try await f.store.recordActiveUsers(appId: f.appId, day: "2001-01-01", userIds: ["ann"])
            try await f.store.recordActiveUsers(appId: f.appId, day: "2001-01-03", userIds: ["ann"])
            try await f.store.pruneActiveUsers(beforeDay: "2001-01-02")
            try await f.store.recordActiveUsers(appId: f.appId, day: "2001-01-01", userIds: ["ann"])
            try await f.store.recordActiveUsers(appId: f.appId, day: "2001-01-03", userIds: ["ann"])
            let days = try await f.store.dailyStatistics(appId: f.appId, fromDay: "2001-01-01", toDay: "2001-01-03")
            #expect(days.map { $0.figures["activeUsers"] } == [2, 1], "ann counted again only on the pruned day")
        }

        await check(area, "media files: a record by app and id, the expired ones oldest first across apps, deleted by id; another app's id reads nothing") { f in
            let other = try await f.otherApp()
            let id = "file-\(UUID().uuidString)"
            let file = MediaFileRecord(appId: f.appId, fileId: id, userId: "ann", mediaType: "image", name: "a.jpg", mimeType: "image/jpeg",
                                       size: 1234, createdAt: f.now, expiresAt: 1_000)
            let later = MediaFileRecord(appId: other, fileId: id + "-b", userId: "bob", mediaType: "sight", name: "c.mp4", mimeType: "video/mp4",
                                        size: 99, createdAt: f.now, expiresAt: 2_000)
            try await f.store.insertMediaFile(file)
            try await f.store.insertMediaFile(later)
            #expect(try await f.store.mediaFile(appId: f.appId, fileId: id) == file)
            #expect(try await f.store.mediaFile(appId: other, fileId: id) == nil, "ids are per app")
            // Expiry times of 1970, which no other check writes.
            let expired = try await f.store.expiredMediaFiles(before: 1_500, limit: 10).filter { $0.fileId.hasPrefix(id) }
            #expect(expired == [file])
            #expect(try await f.store.expiredMediaFiles(before: 2_000, limit: 10).filter { $0.fileId.hasPrefix(id) } == [file, later])
            try await f.store.deleteMediaFiles(appId: f.appId, fileIds: [id, later.fileId])
            #expect(try await f.store.mediaFile(appId: f.appId, fileId: id) == nil)
            #expect(try await f.store.mediaFile(appId: other, fileId: later.fileId) == later, "another app's file is not deleted by this app's call")
        }

        await check(area, "console: a password hash per operator, sessions by token hash that expire and end") { f in
            let name = "operator-\(UUID().uuidString)"
            #expect(try await f.store.operatorPasswordHash(name: name) == nil)
            try await f.store.setOperatorPassword(name: name, hash: "h1", now: f.now)
            try await f.store.setOperatorPassword(name: name, hash: "h2", now: f.now)
            #expect(try await f.store.operatorPasswordHash(name: name) == "h2")
            let a = "a-\(UUID().uuidString)", b = "b-\(UUID().uuidString)", c = "c-\(UUID().uuidString)"
            try await f.store.createConsoleSession(tokenHash: a, operatorName: name, createdAt: f.now, expiresAt: f.now + 1000)
            try await f.store.createConsoleSession(tokenHash: b, operatorName: name, createdAt: f.now, expiresAt: f.now + 5000)
            try await f.store.createConsoleSession(tokenHash: c, operatorName: "other-\(name)", createdAt: f.now, expiresAt: f.now + 5000)
            #expect(try await f.store.consoleSession(tokenHash: a, now: f.now) == name)
            #expect(try await f.store.consoleSession(tokenHash: a, now: f.now + 1000) == nil, "expired")
            try await f.store.deleteConsoleSession(tokenHash: b)
            #expect(try await f.store.consoleSession(tokenHash: b, now: f.now) == nil)
            try await f.store.createConsoleSession(tokenHash: b, operatorName: name, createdAt: f.now, expiresAt: f.now + 5000)
            try await f.store.deleteConsoleSessions(operatorName: name, expiredBefore: f.now)
            #expect(try await f.store.consoleSession(tokenHash: b, now: f.now) == nil, "every session of the operator")
            #expect(try await f.store.consoleSession(tokenHash: c, now: f.now) == "other-\(name)", "another operator's stays")
            try await f.store.deleteConsoleSessions(operatorName: nil, expiredBefore: f.now + 5000)
            #expect(try await f.store.consoleSession(tokenHash: c, now: f.now) == nil, "expired ones go")
        }
    }
}
