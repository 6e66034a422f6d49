import Foundation
import IMCore
import IMServer
import IMStore
import IMStoreSQLite
import Logging
import IMServerTesting
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

    @Test("settings that feed time arithmetic are bounded, so no value can overflow it; resource limits say what is allowed")
    func boundedSettings() throws {
        let tooLarge: [(String, (inout ServerConfig) -> Void)] = [
            ("heartbeatIntervalSeconds", { $0.heartbeatIntervalSeconds = Int.max }),
            ("heartbeatIntervalSeconds", { $0.heartbeatIntervalSeconds = 2_147_484 }),
            ("handshakeTimeoutSeconds", { $0.handshakeTimeoutSeconds = Int.max }),
            ("handshakeTimeoutSeconds", { $0.handshakeTimeoutSeconds = 0 }),
            ("apiTimestampWindowSeconds", { $0.apiTimestampWindowSeconds = Int.max }),
            ("recallWindowSeconds", { $0.recallWindowSeconds = Int.max }),
            ("chatroomHistoryRetentionDays", { $0.chatroomHistoryRetentionDays = 106_751_991_168 }),
            ("ultraGroupHistoryRetentionDays", { $0.ultraGroupHistoryRetentionDays = Int.max }),
            ("maxQueuedBytesPerConnection", { $0.maxQueuedBytesPerConnection = 1024 }),
            ("maxConnectionsPerAddress", { $0.maxConnectionsPerAddress = -1 }),
            ("httpIdleTimeoutSeconds", { $0.httpIdleTimeoutSeconds = 0 }),
            ("httpRequestTimeoutSeconds", { $0.httpRequestTimeoutSeconds = Int.max }),
            ("closeTimeoutSeconds", { $0.closeTimeoutSeconds = -1 }),
            ("chatroomJoinsPerSecond", { $0.chatroomJoinsPerSecond = 0 }),
            ("chatroomMaxRooms", { $0.chatroomMaxRooms = -1 }),
        ]
        for (name, change) in tooLarge {
            var config = ServerConfig()
            change(&config)
            do {
                try config.validate()
                Issue.record("\(name) out of range was accepted")
            } catch let error as IMError {
                #expect(error.message.contains(name), "\(error.message)")
            }
        }
        var config = ServerConfig()
        try config.apply(environment: ["IMSERVER_MAX_CONNECTIONS_PER_ADDRESS": "0", "IMSERVER_CHATROOM_MAX_ROOMS": "10",
                                       "IMSERVER_HTTP_IDLE_TIMEOUT_SECONDS": "5", "IMSERVER_MAX_QUEUED_BYTES_PER_CONNECTION": "16777216"])
        #expect(config.maxConnectionsPerAddress == 0 && config.chatroomMaxRooms == 10 && config.httpIdleTimeoutSeconds == 5)
        #expect(config.maxQueuedBytesPerConnection == 16_777_216)
        try config.validate()
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
