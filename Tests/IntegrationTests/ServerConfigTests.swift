import Foundation
import IMCore
import IMProcess
import IMServer
import IMStore
import IMStoreSQLite
import Logging
import IMServerTesting
import Testing

@Suite("Server configuration and the development app")
struct ServerConfigTests {
    static let table = ServerConfig.table

    // MARK: Sources

    @Test("defaults < config file < IMSERVER_* environment < flags")
    func precedence() throws {
        let file = try Self.file(#"{"port": 1000, "heartbeatIntervalSeconds": 40, "maxGroupMembers": 50, "chatroomHistoryEnabled": true}"#)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let config = try ServerConfig.resolve(
            file: file,
            environment: ["IMSERVER_PORT": "2000", "IMSERVER_HEARTBEAT_INTERVAL_SECONDS": "50", "IMSERVER_LOG_LEVEL": "debug"],
            arguments: ["--port", "3000", "--log-level=warning", "--chatroom-history-enabled", "false", "--user-whitelist-mode"])
        #expect(config.network.port == 3000)                    // file, environment and flag: the flag
        #expect(config.session.heartbeatIntervalSeconds == 50)  // file and environment: the environment
        #expect(config.groups.maxMembers == 50)                 // file only
        #expect(config.logging.level == "warning")              // environment and flag: the flag
        #expect(config.chatrooms.historyEnabled == false)       // file and flag: the flag
        #expect(config.moderation.userWhitelistMode)            // a switch's flag alone: true
        #expect(config.messaging.syncPageSize == ServerConfig().messaging.syncPageSize)

        #expect(try ServerConfig.resolve() == ServerConfig())
        var applied = config
        try applied.apply(environment: ["IMSERVER_PORT": "4000"])
        #expect(applied.network.port == 4000 && applied.groups.maxMembers == 50 && applied.logging.level == "warning")
        #expect(try ServerConfig.load(file: file).network.port == 1000)
        let decoded = try JSONDecoder().decode(ServerConfig.self, from: Data(#"{"chatroomSweepStep": 40}"#.utf8))
        #expect(decoded.chatrooms.sweepStep == 40 && ServerConfig().chatrooms.sweepStep == 1_000)
    }

    @Test("every declared setting is reachable by its file key, its environment variable and its flag")
    func everySettingFromEverySource() throws {
        let defaults = ServerConfig().values
        for setting in Self.table.settings {
            let sample = try #require(Self.sample(for: setting), "no allowed value other than the default for \(setting.key)")
            let file = try Self.file(String(decoding: try JSONValue.object([setting.key: sample.json]).data(), as: UTF8.self))
            defer { try? FileManager.default.removeItem(atPath: file) }
            let sources: [(String, () throws -> ServerConfig)] = [
                ("file key \(setting.key)", { try ServerConfig.resolve(file: file) }),
                ("environment variable \(setting.environmentVariable)", { try ServerConfig.resolve(environment: [setting.environmentVariable: sample.text]) }),
                ("flag \(setting.flag) <value>", { try ServerConfig.resolve(arguments: [setting.flag, sample.text]) }),
                ("flag \(setting.flag)=<value>", { try ServerConfig.resolve(arguments: ["\(setting.flag)=\(sample.text)"]) }),
            ]
            for (source, resolve) in sources {
                let values = try resolve().values
                #expect(values[setting.key]?.settingText == sample.text, "\(source) did not set \(setting.key) to \(sample.text)")
                for (key, value) in values where key != setting.key {
                    #expect(value.settingText == defaults[key]?.settingText, "\(source) changed \(key) too")
                }
            }
        }
    }

    @Test("an out-of-range or mistyped value is refused, naming where it was given and what is allowed")
    func validationNamesSourceAndAllowed() throws {
        for setting in Self.table.settings {
            for bad in Self.invalid(for: setting) {
                let file = try Self.file(String(decoding: try JSONValue.object([setting.key: bad.json]).data(), as: UTF8.self))
                defer { try? FileManager.default.removeItem(atPath: file) }
                let sources: [(String, () throws -> ServerConfig)] = [
                    ("\(setting.key) in config file \(file)", { try ServerConfig.resolve(file: file) }),
                    ("environment variable \(setting.environmentVariable)", { try ServerConfig.resolve(environment: [setting.environmentVariable: bad.text]) }),
                    ("flag \(setting.flag)", { try ServerConfig.resolve(arguments: ["\(setting.flag)=\(bad.text)"]) }),
                ]
                for (source, resolve) in sources {
                    do {
                        _ = try resolve()
                        Issue.record("\(source) = \(bad.text) was accepted")
                    } catch let error as IMError {
                        #expect(error.code == .invalidParameter)
                        #expect(error.message.hasPrefix("\(source) must be \(setting.allowedText), got "), "\(error.message)")
                    }
                }
            }
        }
        // Not a number at all, and several problems at once: each is said.
        do {
            _ = try ServerConfig.resolve(environment: ["IMSERVER_PORT": "eighty"], arguments: ["--sync-page-size", "0"])
            Issue.record("a port of 'eighty' was accepted")
        } catch let error as IMError {
            #expect(error.message == """
                environment variable IMSERVER_PORT must be 0...65535 (0 = any free port), got 'eighty'
                flag --sync-page-size must be 1...1000, got '0'
                """)
        }
    }

    @Test("values set in code are checked by validate(), with the same words")
    func validateInCode() throws {
        let outOfRange: [(String, (inout ServerConfig) -> Void)] = [
            ("heartbeatIntervalSeconds must be 1...3600", { $0.session.heartbeatIntervalSeconds = Int.max }),
            ("heartbeatIntervalSeconds must be 1...3600", { $0.session.heartbeatIntervalSeconds = 2_147_484 }),
            ("handshakeTimeoutSeconds must be 1...300", { $0.session.handshakeTimeoutSeconds = Int.max }),
            ("handshakeTimeoutSeconds must be 1...300", { $0.session.handshakeTimeoutSeconds = 0 }),
            ("offlineRetentionDays must be 1...7", { $0.messaging.offlineRetentionDays = 8 }),
            ("apiTimestampWindowSeconds must be 0...31536000", { $0.serverAPI.timestampWindowSeconds = Int.max }),
            ("recallWindowSeconds must be 0...31536000", { $0.messaging.recallWindowSeconds = Int.max }),
            ("chatroomHistoryRetentionDays must be 1...36500", { $0.chatrooms.historyRetentionDays = 106_751_991_168 }),
            ("ultraGroupHistoryRetentionDays must be 1...36500", { $0.ultraGroups.historyRetentionDays = Int.max }),
            ("maxQueuedBytesPerConnection must be 8388608...1073741824", { $0.network.maxQueuedBytesPerConnection = 1024 }),
            ("maxConnectionsPerAddress must be 0...1000000", { $0.network.maxConnectionsPerAddress = -1 }),
            ("httpIdleTimeoutSeconds must be 1...3600", { $0.network.httpIdleTimeoutSeconds = 0 }),
            ("httpRequestTimeoutSeconds must be 1...3600", { $0.network.httpRequestTimeoutSeconds = Int.max }),
            ("closeTimeoutSeconds must be 0...300", { $0.network.closeTimeoutSeconds = -1 }),
            ("chatroomJoinsPerSecond must be 1...1000", { $0.chatrooms.joinsPerSecond = 0 }),
            ("chatroomMaxRooms must be 0 or more", { $0.chatrooms.maxRooms = -1 }),
            ("chatroomSweepStep must be 1...100000", { $0.chatrooms.sweepStep = 0 }),
            ("apiCallsPerSecond must be 0 or more", { $0.serverAPI.callsPerSecond = -1 }),
            ("appKey must be 1 to 64 bytes", { $0.developmentApp.key = String(repeating: "k", count: 65) }),
            ("logLevel must be one of trace, debug, info", { $0.logging.level = "loud" }),
            ("publicURL must be an http:// or https:// URL", { $0.serverAPI.publicURL = "im.example.com" }),
        ]
        for (message, change) in outOfRange {
            var config = ServerConfig()
            change(&config)
            do {
                try config.validate()
                Issue.record("\(message): the value was accepted")
            } catch let error as IMError {
                #expect(error.code == .invalidParameter && error.message.hasPrefix(message), "\(error.message)")
            }
        }
        try ServerConfig().validate()
        var config = ServerConfig()
        config.network.maxConnectionsPerAddress = 0
        config.developmentApp.key = "fixedkey"
        config.serverAPI.publicURL = "https://im.example.com"
        try config.validate()
    }

    @Test("an obsolete setting is an error in the file, the environment and the flags, saying what replaced it")
    func obsoleteSettings() throws {
        let file = try Self.file(#"{"maxQueuedFramesPerConnection": 64}"#)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let cases: [(() throws -> ServerConfig, String)] = [
            ({ try ServerConfig.resolve(file: file) },
             "maxQueuedFramesPerConnection in config file \(file) is no longer a setting: use maxQueuedBytesPerConnection"),
            ({ try JSONDecoder().decode(ServerConfig.self, from: Data(#"{"maxQueuedFramesPerConnection": 64}"#.utf8)) },
             "maxQueuedFramesPerConnection in config file is no longer a setting: use maxQueuedBytesPerConnection"),
            ({ try ServerConfig.resolve(environment: ["IMSERVER_MAX_QUEUED_FRAMES_PER_CONNECTION": "64"]) },
             "environment variable IMSERVER_MAX_QUEUED_FRAMES_PER_CONNECTION is no longer a setting: use IMSERVER_MAX_QUEUED_BYTES_PER_CONNECTION"),
            ({ try ServerConfig.resolve(arguments: ["--max-queued-frames-per-connection", "64"]) },
             "flag --max-queued-frames-per-connection is no longer a setting: use --max-queued-bytes-per-connection"),
        ]
        for (resolve, message) in cases {
            let error = #expect(throws: IMError.self) { _ = try resolve() }
            #expect(error?.code == .invalidParameter && error?.message.hasPrefix(message) == true, "\(error?.message ?? "")")
        }
    }

    @Test("unknown flags and file keys, flags without a value and stray arguments are errors; other IMSERVER_* variables are left alone")
    func unknownSettings() throws {
        let file = try Self.file(#"{"prot": 9090}"#)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let cases: [(() throws -> ServerConfig, String)] = [
            ({ try ServerConfig.resolve(arguments: ["--prot", "9090"]) },
             "unknown flag --prot; did you mean --port?; imserver --help lists every setting's flag"),
            ({ try ServerConfig.resolve(arguments: ["--no-such-setting=1"]) },
             "unknown flag --no-such-setting; imserver --help lists every setting's flag"),
            ({ try ServerConfig.resolve(file: file) },
             "prot in config file \(file) is not a setting; did you mean port?; docs/CONFIGURATION.md lists the keys"),
            ({ try ServerConfig.resolve(arguments: ["--port"]) }, "flag --port needs a value: 0...65535 (0 = any free port)"),
            ({ try ServerConfig.resolve(arguments: ["--port", "--host", "::"]) }, "flag --port needs a value: 0...65535 (0 = any free port)"),
            ({ try ServerConfig.resolve(arguments: ["9090"]) },
             "unexpected argument '9090': settings are given as flags, e.g. --port 8080 (imserver --help lists them)"),
        ]
        for (resolve, message) in cases {
            let error = #expect(throws: IMError.self) { _ = try resolve() }
            #expect(error?.message == message)
        }
        #expect(try ServerConfig.resolve(environment: ["IMSERVER_TEST_PYTHON": "/usr/bin/python3", "IMSERVER_FUZZ_ITERATIONS": "5"]) == ServerConfig())
    }

    // MARK: The declarations

    @Test("today's file keys and IMSERVER_* names are kept, and every setting has its own key, variable and flag")
    func names() throws {
        let keys = Self.table.settings.map(\.key)
        let variables = Self.table.settings.map(\.environmentVariable)
        let flags = Self.table.settings.map(\.flag)
        #expect(Set(keys).count == keys.count && Set(variables).count == variables.count && Set(flags).count == flags.count)
        // The keys config files were written with, and the variables that existed, before settings had areas.
        let fileKeys = [
            "host", "port", "dataDir", "appKey", "appSecret", "offlineRetentionDays", "systemOfflineRetentionDays", "compensationDays", "dayTimeZone", "onlineBroadcastEnabled", "onlineBroadcastsPerMinute", "cloudHistoryEnabled", "cloudHistoryRetentionDays", "retentionSweepMinutes", "logFormat", "metricsEnabled", "adminKey", "heartbeatIntervalSeconds",
            "clientSendsPerSecond", "syncPageSize", "handshakeTimeoutSeconds", "maxQueuedBytesPerConnection", "maxConnectionsPerAddress",
            "httpIdleTimeoutSeconds", "httpRequestTimeoutSeconds", "closeTimeoutSeconds", "shutdownTimeoutSeconds", "chatroomJoinsPerSecond", "chatroomMaxRooms",
            "apiTimestampWindowSeconds", "logLevel", "userWhitelistMode", "maxGroupMembers", "maxSensitiveWords", "apiCallsPerSecond",
            "privatePublishPerMinute", "systemPublishPerSecond", "publicURL", "groupPreJoinHistory", "recallWindowSeconds",
            "groupPublishPerSecond", "chatroomMultipleRooms", "chatroomIdleDestroyMinutes", "chatroomHistoryEnabled",
            "chatroomHistoryRetentionDays", "chatroomEntriesEnabled", "chatroomMaxMembers", "chatroomSweepStep", "chatroomPublishPerSecond",
            "ultraGroupHistoryRetentionDays", "ultraGroupPreJoinHistory", "ultraGroupPublishPerSecond", "database",
            "nodeId", "clusterNodeTimeoutSeconds", "pushEnabled", "pushApnsURL", "pushApnsSandboxURL", "pushFcmURL", "pushTrustRootsFile",
            "pushRequestTimeoutSeconds", "pushApnsConnections", "pushMaxAttempts", "pushRecordRetentionDays",
            "callbacksEnabled", "callbackRequestTimeoutSeconds", "callbackRetentionHours", "callbackMaxBacklog",
            "multiDeviceSyncEnabled", "consoleEnabled", "consolePassword", "consoleSessionMinutes", "consoleLoginAttempts",
            "mediaDir", "mediaRetentionDays", "sightRetentionDays", "mediaMaxFileMB", "mediaMaxGifMB", "mediaMaxImageMB",
            "mediaMaxSightSeconds", "mediaMaxVoiceSeconds", "mediaToolsDir",
        ]
        #expect(Set(keys) == Set(fileKeys))
        let existingVariables = [
            "IMSERVER_HOST", "IMSERVER_PORT", "IMSERVER_DATA_DIR", "IMSERVER_APP_KEY", "IMSERVER_APP_SECRET",
            "IMSERVER_OFFLINE_RETENTION_DAYS", "IMSERVER_SYSTEM_OFFLINE_RETENTION_DAYS", "IMSERVER_HEARTBEAT_INTERVAL_SECONDS",
            "IMSERVER_CLIENT_SENDS_PER_SECOND", "IMSERVER_LOG_LEVEL", "IMSERVER_USER_WHITELIST_MODE", "IMSERVER_MAX_GROUP_MEMBERS",
            "IMSERVER_GROUP_PRE_JOIN_HISTORY", "IMSERVER_RECALL_WINDOW_SECONDS", "IMSERVER_API_CALLS_PER_SECOND",
            "IMSERVER_GROUP_PUBLISH_PER_SECOND", "IMSERVER_CHATROOM_PUBLISH_PER_SECOND", "IMSERVER_PUBLIC_URL",
            "IMSERVER_CHATROOM_MULTIPLE_ROOMS", "IMSERVER_CHATROOM_IDLE_DESTROY_MINUTES", "IMSERVER_CHATROOM_HISTORY_ENABLED",
            "IMSERVER_CHATROOM_HISTORY_RETENTION_DAYS", "IMSERVER_CHATROOM_ENTRIES_ENABLED", "IMSERVER_CHATROOM_MAX_MEMBERS",
            "IMSERVER_CHATROOM_SWEEP_STEP", "IMSERVER_ULTRA_GROUP_HISTORY_RETENTION_DAYS", "IMSERVER_ULTRA_GROUP_PRE_JOIN_HISTORY",
            "IMSERVER_ULTRA_GROUP_PUBLISH_PER_SECOND", "IMSERVER_HANDSHAKE_TIMEOUT_SECONDS", "IMSERVER_MAX_QUEUED_BYTES_PER_CONNECTION",
            "IMSERVER_MAX_CONNECTIONS_PER_ADDRESS", "IMSERVER_HTTP_IDLE_TIMEOUT_SECONDS", "IMSERVER_HTTP_REQUEST_TIMEOUT_SECONDS",
            "IMSERVER_CLOSE_TIMEOUT_SECONDS", "IMSERVER_CHATROOM_JOINS_PER_SECOND", "IMSERVER_CHATROOM_MAX_ROOMS",
            "IMSERVER_API_TIMESTAMP_WINDOW_SECONDS",
        ]
        #expect(Set(existingVariables).isSubset(of: Set(variables)))
        for setting in Self.table.settings {
            #expect(setting.flag.hasPrefix("--") && setting.flag == setting.flag.lowercased() && !setting.flag.contains("_"))
            #expect(!setting.doc.isEmpty && !setting.allowedText.isEmpty)
        }
        #expect(SettingNames.environmentVariable(forKey: "publicURL") == "IMSERVER_PUBLIC_URL")
        // The PostgreSQL URL: --database, and a variable that says it holds a URL.
        #expect(Self.table.setting(key: "database")?.flag == "--database")
        #expect(Self.table.setting(key: "database")?.environmentVariable == "IMSERVER_DATABASE_URL")
        #expect(try ServerConfig.resolve(environment: ["IMSERVER_DATABASE_URL": "postgres://im@db:5432/im"]).storage.database
                == "postgres://im@db:5432/im")
        #expect(ServerConfig().storage.database.isEmpty, "the embedded database unless one is given")
        #expect(SettingNames.flag(forKey: "httpIdleTimeoutSeconds") == "--http-idle-timeout-seconds")
        #expect(Self.table.areas.map(\.name) == ["network", "session", "messaging", "groups", "chatrooms", "ultraGroups", "serverAPI",
                                                 "moderation", "developmentApp", "storage", "cluster", "push", "callbacks", "logging", "console", "media"])
        #expect(Self.table.setting(key: "nodeId")?.flag == "--node-id")
        #expect(Self.table.setting(key: "nodeId")?.environmentVariable == "IMSERVER_NODE_ID")
    }

    @Test("docs/CONFIGURATION.md's settings table is the one the declarations generate")
    func documentedTable() throws {
        let path = Self.packageRoot.appendingPathComponent("docs/CONFIGURATION.md").path
        let document = try String(contentsOfFile: path, encoding: .utf8)
        let generated = try Self.table.updating(document: document)
        if generated != document {
            let written = document.split(separator: "\n", omittingEmptySubsequences: false)
            let wanted = generated.split(separator: "\n", omittingEmptySubsequences: false)
            let line = zip(written, wanted).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(written.count, wanted.count)
            Issue.record("""
                docs/CONFIGURATION.md's settings table differs from the @Setting declarations from line \(line + 1) on \
                (the declarations give: \(line < wanted.count ? wanted[line] : "nothing")). Regenerate it with
                swift run imserver config-doc --update docs/CONFIGURATION.md
                """)
        }
    }

    @Test("the README's resource-limits table names settings that exist, with their defaults")
    func readmeLimits() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Resource limits").dropFirst().first?.components(separatedBy: "\n## ").first)
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| what ") }
        let header = try #require(section.split(separator: "\n").first { $0.hasPrefix("| what ") })
        #expect(header == "| what | limit (default) | setting | over it |", "the README's limits table changed its columns: change this test too")
        var checked = 0
        for row in rows {
            let cells = row.replacingOccurrences(of: "\\|", with: "¦").split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5 else { continue }
            let limit = cells[2], settingCell = cells[3]
            let named = settingCell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            for key in named {
                guard let setting = Self.table.setting(key: key) else {
                    Issue.record("the README's limits table names \(key), which is not a setting")
                    continue
                }
                // A cell that starts with the settings is their limit: each default must be the one shown.
                guard settingCell.hasPrefix("`") else { continue }
                let forms = Self.defaultForms(setting)
                #expect(forms.contains { Self.containsNumber($0, in: limit) },
                        "the README gives \(key)'s default as '\(limit)'; its declaration says \(setting.defaultText): change one of them")
                checked += 1
            }
        }
        #expect(checked >= 12)
    }

    @Test("imserver --help lists every setting with its flag, default and variable; bad flags stop it with the reason")
    func commandLine() async throws {
        let help = try await Self.run(["--help"])
        #expect(help.status == 0)
        for setting in Self.table.settings {
            #expect(help.output.contains(setting.flag), "imserver --help does not list \(setting.flag)")
            #expect(help.output.contains("env \(setting.environmentVariable)"), "imserver --help does not give \(setting.environmentVariable)")
            let shown = setting.defaultText.isEmpty ? "unset" : setting.defaultText
            #expect(help.output.contains("default \(shown);"), "imserver --help does not give \(setting.key)'s default")
            let firstWords = setting.doc.split(separator: " ").prefix(4).joined(separator: " ")
            #expect(help.output.contains(firstWords), "imserver --help does not give \(setting.key)'s documentation")
        }
        // Flags that would start a harmless server, should the bad flag be missed.
        let safe = ["--host", "127.0.0.1", "--port", "0", "--data-dir", FileManager.default.temporaryDirectory.appendingPathComponent("imserver-cli-\(UUID().uuidString)").path]
        let unknown = try await Self.run(["serve", "--prot", "9090"] + safe)
        #expect(unknown.status != 0 && unknown.output.contains("unknown flag --prot; did you mean --port?"), "\(unknown.output)")
        let outOfRange = try await Self.run(["--offline-retention-days", "9"] + safe)
        #expect(outOfRange.status != 0 && outOfRange.output.contains("flag --offline-retention-days must be 1...7, got '9'"), "\(outOfRange.output)")
        let table = try await Self.run(["config-doc"])
        #expect(table.status == 0 && table.output.contains(Self.table.markdown()))
    }

    @Test("a --database that is not a URL, or names a PostgreSQL that cannot be reached, stops every command with the reason")
    func unreachableDatabase() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-cli-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let safe = ["--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir]
        let notURL = try await Self.run(["serve", "--database", "mysql://im@127.0.0.1/im"] + safe)
        #expect(notURL.status != 0 && notURL.output.contains("flag --database must be empty (the embedded database in dataDir), or a postgres:// or postgresql:// URL, got 'mysql://im@127.0.0.1/im'"),
                "\(notURL.output)")
        let malformed = try await Self.run(["serve", "--database", "postgres://127.0.0.1:5432/im"] + safe)
        #expect(malformed.status != 0 && malformed.output.contains("names no user: write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"),
                "\(malformed.output)")
        // Nothing listens on port 1 of 127.0.0.1.
        let refused = "cannot reach PostgreSQL at 127.0.0.1:1 (connection refused): is the server running, and is the port in --database right?"
        for command in [["serve"], ["app", "create"], ["app", "list"]] {
            let started = ContinuousClock.now
            let result = try await Self.run(command + ["--database", "postgres://im:secret@127.0.0.1:1/im"] + (command == ["serve"] ? safe : ["--data-dir", dataDir]))
            #expect(result.status != 0 && result.output.contains(refused), "\(command): \(result.output)")
            #expect(!result.output.contains("secret"), "the password is never printed")
            // The command's own run, spawn to exit, stays short: a refusal is not retried until
            // some deadline. The time this test then waited to be scheduled (on a busy run, many
            // seconds) is not the command's.
            #expect(result.lifetime < .seconds(15), "\(command) ran for \(result.lifetime); this test saw it end after \(ContinuousClock.now - started)")
        }
        #expect(!FileManager.default.fileExists(atPath: dataDir), "no embedded database was made instead")
        let migrate = try await Self.run(["migrate", "--from", dataDir, "--to", "postgres://im@127.0.0.1:1/im"])
        #expect(migrate.status != 0 && migrate.output.contains("no embedded database at \(dataDir)/imserver.sqlite"), "\(migrate.output)")
    }

    // MARK: The development app

    @Test("the generated development app is kept across restarts; fixed credentials replace its secret")
    func developmentAppPersists() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        func start(_ configure: (inout ServerConfig) -> Void = { _ in }) async throws -> AppRecord {
            var config = ServerConfig()
            config.storage.dataDir = dir.path
            configure(&config)
            let core = ServerCore(config: config, store: try SQLiteStore(directory: dir.path), logger: Logger(label: "test"))
            return try await core.prepare()
        }
        let first = try await start()
        let second = try await start()
        #expect(first.appKey == second.appKey && first.appSecret == second.appSecret)
        let fixed = try await start { $0.developmentApp.key = first.appKey; $0.developmentApp.secret = "newsecret" }
        #expect(fixed.appKey == first.appKey && fixed.appSecret == "newsecret")
        #expect(try await start().appSecret == "newsecret")
    }

    // MARK: Helpers

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A temporary JSON file holding `text`.
    static func file(_ text: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-config-\(UUID().uuidString).json")
        try Data(text.utf8).write(to: url)
        return url.path
    }

    /// An allowed value other than the default, as text and as JSON.
    static func sample(for setting: any AnySettingDeclaration) -> (text: String, json: JSONValue)? {
        switch setting {
        case let setting as SettingDeclaration<Int>:
            let d = setting.defaultValue
            return [d + 1, d - 1, d * 2, 1, 0].first { $0 != d && setting.allowed.contains($0) }.map { ("\($0)", .number(Double($0))) }
        case let setting as SettingDeclaration<Bool>:
            return ((!setting.defaultValue).settingText, .bool(!setting.defaultValue))
        case let setting as SettingDeclaration<String>:
            return ["debug", "json", "/tmp/imserver-sample", "127.0.0.1", "postgres://imserver@127.0.0.1:5432/imserver", "https://push.example.com"].first { $0 != setting.defaultValue && setting.allowed.contains($0) }.map { ($0, .string($0)) }
        case let setting as SettingDeclaration<String?>:
            return ["https://im.example.com", "sample-value", "Asia/Shanghai"].first { $0 != setting.defaultValue && setting.allowed.contains($0) }.map { ($0, .string($0)) }
        default:
            return nil
        }
    }

    /// Values the setting refuses, as text and as JSON (of the right JSON type, or of a wrong one).
    static func invalid(for setting: any AnySettingDeclaration) -> [(text: String, json: JSONValue)] {
        switch setting {
        case let setting as SettingDeclaration<Int>:
            return [-1, Int.max, 0].filter { !setting.allowed.contains($0) }.prefix(1).map { ("\($0)", .number(Double($0))) }
                + [("1.5", .number(1.5)), ("twelve", .string("12"))]
        case is SettingDeclaration<Bool>:
            return [("maybe", .string("true"))]
        case let setting as SettingDeclaration<String>:
            return (setting.allowed.contains("") ? [] : [("", .number(1))]) + (setting.allowed.contains("loud") ? [] : [("loud", .string("loud"))])
        case let setting as SettingDeclaration<String?>:
            return [String(repeating: "k", count: 65), "ftp://im.example.com"].filter { !setting.allowed.contains($0) }.prefix(1).map { ($0, .string($0)) }
        default:
            return []
        }
    }

    /// How a default may be written in prose: as it is, with thousands separated, or in MB.
    static func defaultForms(_ setting: any AnySettingDeclaration) -> [String] {
        guard let number = Int(setting.defaultText) else { return [setting.defaultText] }
        var grouped = String(number)
        for index in stride(from: grouped.count - 3, to: number < 0 ? 1 : 0, by: -3) {
            grouped.insert(",", at: grouped.index(grouped.startIndex, offsetBy: index))
        }
        var forms = ["\(number)", grouped]
        if number >= 1 << 20, number % (1 << 20) == 0 { forms.append("\(number >> 20) MB") }
        if number == 0, setting.allowedText.contains("0 = no limit") { forms.append("no limit") }
        return forms
    }

    /// `form` appears in `text` as a whole number (not inside a longer one).
    static func containsNumber(_ form: String, in text: String) -> Bool {
        let pattern = "(^|[^0-9.,])" + NSRegularExpression.escapedPattern(for: form) + "($|[^0-9,])"
        return text.range(of: pattern, options: .regularExpression) != nil
    }

    /// Runs the built imserver with `arguments` and no IMSERVER_* variables; its output and status.
    /// A test waits for it without holding a thread of Swift's cooperative pool: several of these
    /// at once would otherwise stop every other test's servers and clients for their duration.
    static func run(_ arguments: [String]) async throws -> (output: String, status: Int32, lifetime: Duration) {
        let process = try ChildProcess(ChildServer.binaryURL().path, arguments,
                                       environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("IMSERVER_") },
                                       standardOutput: .pipe, standardError: .standardOutput)
        // A server that started after all is stopped, and the test fails on its output.
        let watchdog = DispatchWorkItem { process.terminate() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
        defer { watchdog.cancel() }
        let output = await ChildProcess.readToEnd(process.standardOutput!)
        let status = await process.exit().status
        return (String(decoding: output, as: UTF8.self), status, process.lifetime ?? .zero)
    }
}
