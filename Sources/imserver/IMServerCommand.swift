import ArgumentParser
import Foundation
import IMCore
import IMServer
import IMStore
import IMStoreSQLite
import Logging

@main
struct IMServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imserver",
        abstract: "A self-hostable instant-messaging server, wire-compatible with RongCloud's Server API.",
        subcommands: [Serve.self, App.self],
        defaultSubcommand: Serve.self)
}

/// Settings shared by every subcommand: where the config comes from.
struct ConfigOptions: ParsableArguments {
    @Option(help: "JSON config file; its keys are the long option names in camelCase (e.g. dataDir).")
    var config: String?

    @Option(help: "Directory of the embedded database (default ./data; env IMSERVER_DATA_DIR).")
    var dataDir: String?

    /// Defaults, then the config file, then IMSERVER_* environment variables.
    func base() throws -> ServerConfig {
        var settings = try config.map(ServerConfig.load(file:)) ?? ServerConfig()
        try settings.apply(environment: ProcessInfo.processInfo.environment)
        if let dataDir { settings.dataDir = dataDir }
        return settings
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server (the default). Settings: defaults < --config file < IMSERVER_* environment < flags.")

    @OptionGroup var options: ConfigOptions

    @Option(help: "Address to listen on (default 0.0.0.0; env IMSERVER_HOST).")
    var host: String?

    @Option(help: "Port for HTTP and WebSocket; 0 picks a free one (default 8080; env IMSERVER_PORT).")
    var port: Int?

    @Option(help: "Fix the development app's key (env IMSERVER_APP_KEY). Unset: generated once and kept.")
    var appKey: String?

    @Option(help: "Fix the development app's secret (env IMSERVER_APP_SECRET).")
    var appSecret: String?

    @Option(help: "Days offline messages wait for their recipient, 1-7 (default 7).")
    var offlineRetentionDays: Int?

    @Option(help: "Days offline system messages wait for their recipient, 1-7 (default 7; env IMSERVER_SYSTEM_OFFLINE_RETENTION_DAYS).")
    var systemOfflineRetentionDays: Int?

    @Option(help: "Client heartbeat interval in seconds; silent connections are dropped after 3 (default 30).")
    var heartbeatIntervalSeconds: Int?

    @Option(help: "Messages one client may send per second before 20604 (default 5).")
    var clientSendsPerSecond: Int?

    @Option(help: "Log level: trace, debug, info, notice, warning, error (default info).")
    var logLevel: String?

    @Option(help: "Seconds a graceful shutdown (SIGTERM, SIGINT) may take before what still runs is cancelled (default 25; env IMSERVER_SHUTDOWN_TIMEOUT_SECONDS).")
    var shutdownTimeoutSeconds: Int?

    func run() async throws {
        var config = try options.base()
        if let host { config.host = host }
        if let port { config.port = port }
        if let appKey { config.appKey = appKey }
        if let appSecret { config.appSecret = appSecret }
        if let offlineRetentionDays { config.offlineRetentionDays = offlineRetentionDays }
        if let systemOfflineRetentionDays { config.systemOfflineRetentionDays = systemOfflineRetentionDays }
        if let heartbeatIntervalSeconds { config.heartbeatIntervalSeconds = heartbeatIntervalSeconds }
        if let clientSendsPerSecond { config.clientSendsPerSecond = clientSendsPerSecond }
        if let logLevel { config.logLevel = logLevel }
        if let shutdownTimeoutSeconds { config.shutdownTimeoutSeconds = shutdownTimeoutSeconds }
        do {
            try config.validate()
        } catch let error as IMError {
            throw ValidationError(error.message)
        }

        var logger = Logger(label: "imserver")
        logger.logLevel = Logger.Level(rawValue: config.logLevel) ?? .info
        let store = try SQLiteStore(directory: config.dataDir)
        let core = ServerCore(config: config, store: store, logger: logger)
        let app = try await core.prepare()
        if config.apiTimestampWindowSeconds == 0 {
            logger.notice("Server API signatures are accepted at any age (apiTimestampWindowSeconds is 0, as RongCloud's SDKs expect): a captured request can be replayed. Set apiTimestampWindowSeconds (e.g. 300) if every caller's clock is right.")
        }
        let host = config.host
        // Runs until SIGTERM or SIGINT, then shuts down gracefully (IMServerApp.serviceGroup) and exits 0.
        try await IMServerApp(core: core).run(closeStore: { try store.close() }) { port in
            let banner = """
                imserver listening on http://\(host):\(port)  (WebSocket: ws://\(host):\(port)/ws)
                database: \(store.path)
                app key: \(app.appKey)
                app secret: \(app.appSecret)

                """
            // Written unbuffered: scripts and tests read the address from this line.
            FileHandle.standardOutput.write(Data(banner.utf8))
        }
        logger.notice("imserver stopped")
    }
}

struct App: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the apps hosted by this server.", subcommands: [Create.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app (or set the secret of an existing key).")

        @OptionGroup var options: ConfigOptions
        @Option(help: "App name.") var name: String = "app"
        @Option(help: "App key (default: random).") var appKey: String?
        @Option(help: "App secret (default: random).") var appSecret: String?

        func run() async throws {
            let config = try options.base()
            let store = try SQLiteStore(directory: config.dataDir)
            let registry = AppRegistry(store: store)
            let app = try await registry.upsert(
                appKey: appKey ?? AppRegistry.randomCredential(length: 13),
                appSecret: appSecret ?? AppRegistry.randomCredential(length: 16),
                name: name, now: SystemClock().nowMilliseconds())
            print("app key: \(app.appKey)\napp secret: \(app.appSecret)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps with their keys and secrets.")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let store = try SQLiteStore(directory: try options.base().dataDir)
            for app in try await store.loadApps() {
                print("\(app.appKey)\t\(app.appSecret)\t\(app.name)")
            }
        }
    }
}
