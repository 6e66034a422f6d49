import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// RongCloud's offline message compensation: a device that never synced (a new install) gets the
/// messages of the compensation window, natural days counted in `dayTimeZone` (today by default);
/// a device that synced before gets everything it missed within the offline retention.
@Suite("Offline message compensation on a new device")
struct CompensationTests {
    /// 2027-01-15 12:00 UTC: 20:00 in Shanghai, noon in UTC.
    static let start: Int64 = 1_800_014_400_000

    @Test("a new device gets the compensation window's natural days; a known device gets the whole retention", arguments: [
        // Six hours later it is 02:00 the next day in Shanghai but 18:00 the same day in UTC.
        ("Asia/Shanghai", 1, ["today"]),
        ("UTC", 1, ["yesterday", "today"]),
        ("Asia/Shanghai", 2, ["yesterday", "today"]),
    ])
    func window(timeZone: String, days: Int, newDeviceGets: [String]) async throws {
        let clock = ManualClock(milliseconds: Self.start)
        try await withTestServer(try await TestServer.start(clock: clock) { config in
            config.messaging.dayTimeZone = timeZone
            config.messaging.compensationDays = days
        }) { server in
            let alice = try await server.connectedClient("alice")
            let known = try await server.connectedClient("bob")   // synced once, before the messages
            await known.disconnect()
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "yesterday"))
            clock.advance(milliseconds: 6 * 3_600_000)
            _ = try await alice.sendMessage(.private, targetId: "bob", content: TextMessage(content: "today"))

            let (fresh, freshInbox) = try await server.syncedDevice("bob")
            #expect(freshInbox.items.map { $0.message.content(as: TextMessage.self)?.content } == newDeviceGets)
            // Compensation limits what a new device is handed, not the cloud history.
            let history = try await fresh.getRemoteHistoryMessages(.private, targetId: "alice", count: 10)
            #expect(history.messages.map { $0.content(as: TextMessage.self)?.content } == ["today", "yesterday"])
            await fresh.disconnect()

            let knownInbox = EventRecorder(known.receivedMessages())
            let synced = EventRecorder(known.offlineMessageSyncCompleted())
            try await known.connect(token: try await server.token("bob"))
            #expect(await synced.wait(for: 1).count == 1)
            // The inbox's stream is read by a task of its own: the sync's event can come first.
            #expect(await knownInbox.wait(for: 2).map { $0.message.content(as: TextMessage.self)?.content } == ["yesterday", "today"])
            await known.disconnect()
            await alice.disconnect()
        }
    }

    @Test("the compensation window's settings are checked: 1 to 7 days, a time zone the system knows")
    func settingsChecked() throws {
        #expect(throws: (any Error).self) { try ServerConfig.resolve(arguments: ["--compensation-days", "8"]) }
        #expect(throws: (any Error).self) { try ServerConfig.resolve(arguments: ["--day-time-zone", "Mars/Olympus"]) }
        let config = try ServerConfig.resolve(arguments: ["--day-time-zone", "Asia/Shanghai", "--compensation-days", "3"])
        // 2027-01-15 20:00 in Shanghai: the window starts at 2027-01-13 00:00 there (16:00 UTC the day before).
        #expect(config.messaging.compensationStart(now: Self.start) == 1_799_769_600_000)
    }
}
