import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// The console in a real browser: headless Chromium from Debian's packages (scripts/chromium.sh),
/// driven by selenium (python/console_browser.py). Screenshots of every page are kept in
/// .build/test-output/console for a person to look at.
@Suite("Console in Chromium")
struct ConsoleBrowserTests {
    static let password = "browser test password"

    /// The WebDriver: IMSERVER_TEST_CHROMEDRIVER, or Debian's.
    static func chromedriver() throws -> String {
        let path = ProcessInfo.processInfo.environment["IMSERVER_TEST_CHROMEDRIVER"] ?? "/usr/bin/chromedriver"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw IMError(.invalidParameter, "no chromedriver at \(path): run scripts/test.sh (or scripts/chromium.sh) first")
        }
        return path
    }

    @Test("sign in after a wrong password, create an app, change a setting, find a user and block her while her client is connected (it is disconnected), read a conversation and recall a message, view statistics, sign out")
    func operatorSession() async throws {
        let server = try await TestServer.start { config in
            config.console.password = Self.password
            config.messaging.dayTimeZone = "UTC"
        }
        try await withTestServer(server) { server in
            let ann = server.client()
            let annStatuses = EventRecorder(ann.connectionStatusUpdates())
            try await ann.connect(token: try await server.token("ann"))
            _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "hello from ann"))
            let bob = try await server.connectedClient("bob")
            let (profiled, profileAnswer) = try await server.api.post("/user/profile/set.json", form: ["userId": "ann", "userProfile": #"{"name":"Ann Lee"}"#])
            #expect(profiled == 200, "\(profileAnswer)")
            _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "hello from bob"))

            let root = PythonSDKTests.scripts.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let shots = root.appendingPathComponent(".build/test-output/console").path
            let (status, output) = try await PythonSDKTests.run([
                PythonSDKTests.scripts.appendingPathComponent("console_browser.py").path, server.baseURL, Self.password,
                try Self.chromedriver(), shots,
            ])
            #expect(status == 0)
            let done = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "output: \(output)")
            print("console screenshots: \(shots)")

            // What the browser did, seen on the server.
            let created = try #require(done["createdAppKey"] as? String)
            #expect(server.core.apps.app(key: created)?.name == "made in the browser")
            #expect(done["appKey"] as? String == server.app.appKey)
            #expect(server.core.apps.settings(appId: server.app.id).messaging.cloudHistoryRetentionDays == 30)
            #expect(await annStatuses.first { $0 == .disconnectException } != nil, "ann's client was disconnected by the block")
            #expect(await failureCode { try await server.client().connect(token: try await server.token("ann")) } == ErrorCode.userBlocked.rawValue)
            #expect(done["sessionsBeforeBlock"] as? Int == 1 && done["sessionsAfterBlock"] as? Int == 0)
            #expect(done["historyRows"] as? Int == 2)
            let recalled = try #require(done["recalledUID"] as? String)
            let (_, page) = try await server.api.post("/v3/message/private/query.json", json: [
                "userId": "bob", "targetId": "ann", "startTime": 0, "endTime": 4_000_000_000_000, "pageSize": 10])
            let stored = (page["data"] as? [[String: Any]])?.first { $0["messageUID"] as? String == recalled }
            #expect(stored?["objectName"] as? String == "RC:RcNtf", "recalled through the console: \(page)")
            let today = try #require(done["statisticsToday"] as? [String: Any])
            // The two texts and the recall's command message: every message stored counts.
            #expect(today["messages"] as? Int == 3 && today["activeUsers"] as? Int == 2, "\(today)")
            #expect(done["signedOut"] as? Bool == true)
            for name in ["01-login", "03-overview", "05-settings", "08-history", "09-statistics", "10-phone-overview"] {
                #expect(FileManager.default.fileExists(atPath: shots + "/\(name).png"), "screenshot \(name)")
            }
            await bob.disconnect()
        }
    }
}
