import Foundation
import IMCore
import IMServer
import IMStoreSQLite
import Logging
import Testing

@Suite("Server configuration and the development app")
struct ServerConfigTests {
    @Test("IMSERVER_* variables override the file's values, and bad values say what is allowed")
    func environment() throws {
        var config = ServerConfig()
        try config.apply(environment: ["IMSERVER_PORT": "9090", "IMSERVER_APP_KEY": "envkey",
                                       "IMSERVER_APP_SECRET": "envsecret", "IMSERVER_OFFLINE_RETENTION_DAYS": "3"])
        #expect(config.port == 9090 && config.appKey == "envkey" && config.appSecret == "envsecret")
        #expect(config.offlineRetentionDays == 3)
        try config.validate()

        #expect(throws: IMError.self) { try config.apply(environment: ["IMSERVER_PORT": "eighty"]) }
        config.offlineRetentionDays = 8
        do {
            try config.validate()
            Issue.record("8 retention days were accepted")
        } catch let error as IMError {
            #expect(error.code == .invalidParameter)
            #expect(error.message.contains("1...7"))
        }

        var sweep = ServerConfig()
        try sweep.apply(environment: ["IMSERVER_CHATROOM_SWEEP_STEP": "250"])
        #expect(sweep.chatroomSweepStep == 250)
        try sweep.validate()
        let fromFile = try JSONDecoder().decode(ServerConfig.self, from: Data(#"{"chatroomSweepStep": 40}"#.utf8))
        #expect(fromFile.chatroomSweepStep == 40 && ServerConfig().chatroomSweepStep == 1_000)
        sweep.chatroomSweepStep = 0
        do {
            try sweep.validate()
            Issue.record("a sweep step of 0 was accepted")
        } catch let error as IMError {
            #expect(error.code == .invalidParameter && error.message.contains("chatroomSweepStep must be 1...100000"))
        }
    }

    @Test("the generated development app is kept across restarts; fixed credentials replace its secret")
    func developmentAppPersists() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        func start(_ configure: (inout ServerConfig) -> Void = { _ in }) async throws -> AppRecord {
            var config = ServerConfig()
            config.dataDir = dir.path
            configure(&config)
            let core = ServerCore(config: config, store: try SQLiteStore(directory: dir.path), logger: Logger(label: "test"))
            return try await core.prepare()
        }
        let first = try await start()
        let second = try await start()
        #expect(first.appKey == second.appKey && first.appSecret == second.appSecret)
        let fixed = try await start { $0.appKey = first.appKey; $0.appSecret = "newsecret" }
        #expect(fixed.appKey == first.appKey && fixed.appSecret == "newsecret")
        #expect(try await start().appSecret == "newsecret")
    }
}
