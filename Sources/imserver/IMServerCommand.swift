import ArgumentParser
import Foundation
import IMCallbacksHTTP
import IMCore
import IMClusterPostgres
import IMPush
import IMPushProviders
import IMServer
import IMStore
import IMStoreMigration
import IMStorePostgres
import IMStoreSQLite
import Logging

@main
struct IMServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imserver",
        abstract: "A self-hostable instant-messaging server, wire-compatible with RongCloud's Server API.",
        discussion: ServerConfig.table.help(),
        subcommands: [Serve.self, App.self, Migrate.self, ConfigDoc.self],
        defaultSubcommand: Serve.self)
}

/// Where the settings come from: the defaults, then the config file, then `IMSERVER_*`
/// environment variables, then the settings' flags, which this takes from the arguments the
/// command itself does not know (every setting's flag is read off its declaration).
struct ConfigOptions: ParsableArguments {
    @Option(help: "JSON config file: one object whose keys are the settings' file keys (e.g. {\"dataDir\": \"/var/lib/imserver\"}).")
    var config: String?

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings, as flags: --port 8080, --port=8080 (imserver --help lists them).", valueName: "setting-flags"))
    var settings: [String] = []

    /// Defaults, then the config file, then IMSERVER_* environment variables, then flags.
    func resolve() throws -> ServerConfig {
        do {
            return try ServerConfig.resolve(file: config, environment: ProcessInfo.processInfo.environment, arguments: settings)
        } catch let error as IMError {
            throw ValidationError(error.message)
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server (the default).",
        discussion: ServerConfig.table.help())

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let config = try options.resolve()

        var logger = config.logging.format == "json"
            ? Logger(label: "imserver", factory: { JSONLogHandler(label: $0) }) : Logger(label: "imserver")
        logger.logLevel = Logger.Level(rawValue: config.logging.level) ?? .info
        let opened = try await OpenedStore(config, logger: logger)
        let store = opened.store
        // Every server on PostgreSQL is a node of the cluster of the servers on that database.
        let cluster = try opened.clusterTransport(config, logger: logger)
        // One transport for every app: its HTTP/2 connections to APNs and FCM are shared.
        // Its event loop thread runs at a lower priority: pushes take the cores delivery leaves.
        let pushTransport = config.push.enabled
            ? try ProviderPushTransport(endpoints: PushEndpoints(config.push), backgroundThreadNice: 10) : nil
        // Callbacks to the apps' servers: the message callback on an event loop thread of its own,
        // the outbox's callbacks on another at the push transport's lower priority.
        let callbackTransport = config.callbacks.enabled ? HTTPCallbackTransport(backgroundThreadNice: 10) : nil
        let core = ServerCore(config: config, store: store, logger: logger, cluster: cluster, pushTransport: pushTransport,
                              callbackTransport: callbackTransport)
        let app = try await core.prepare()
        let consolePassword = config.console.enabled ? try await core.console.prepare() : nil
        if config.serverAPI.timestampWindowSeconds == 0 {
            logger.notice("Server API signatures are accepted at any age (apiTimestampWindowSeconds is 0, as RongCloud's SDKs expect): a captured request can be replayed. Set apiTimestampWindowSeconds (e.g. 300) if every caller's clock is right.")
        }
        let host = config.network.host
        // Runs until SIGTERM or SIGINT, then shuts down gracefully (IMServerApp.serviceGroup) and exits 0.
        try await IMServerApp(core: core).run(closeStore: { try opened.startClosing() }) { port in
            let banner = """
                imserver listening on http://\(host):\(port)  (WebSocket: ws://\(host):\(port)/ws)
                database: \(opened.description)\(cluster.map { "  (cluster node \($0.nodeId))" } ?? "")
                app key: \(app.appKey)
                app secret: \(app.appSecret)
                \(config.console.enabled ? "console: http://\(host):\(port)/console (operator admin)" : "console: off")
                \(consolePassword.map { "console password: \($0)  (shown once: keep it, or change it in the console)\n" } ?? "")
                """
            // Written unbuffered: scripts and tests read the address from this line.
            FileHandle.standardOutput.write(Data(banner.utf8))
        }
        await opened.finishClosing()
        logger.notice("imserver stopped")
    }
}

/// The store the settings choose: the PostgreSQL database of `database` when it is set, else the
/// embedded database in `dataDir`. Either failing to open is an `IMError` saying what to fix,
/// which ends the command with a non-zero status.
struct OpenedStore: Sendable, CustomStringConvertible {
    private enum Kind {
        case sqlite(SQLiteStore)
        case postgres(PostgresStore)
    }

    private let kind: Kind

    init(_ config: ServerConfig, logger: Logger) async throws {
        if config.storage.database.isEmpty {
            kind = .sqlite(try SQLiteStore(directory: config.storage.dataDir))
        } else {
            kind = .postgres(try await PostgresStore.connect(url: config.storage.database, logger: logger))
        }
    }

    var store: any IMStore {
        switch kind {
        case .sqlite(let store): return store
        case .postgres(let store): return store
        }
    }

    /// The cluster bus and presence of a server on PostgreSQL (nil on SQLite: a single server).
    func clusterTransport(_ config: ServerConfig, logger: Logger) throws -> PostgresClusterTransport? {
        guard case .postgres(let store) = kind else { return nil }
        let url = store.url
        let nodeId = config.cluster.nodeId ?? "node-" + AppRegistry.randomCredential(length: 8)
        return PostgresClusterTransport.make(host: url.host, port: url.port, username: url.user, password: url.password,
                                             database: url.database, nodeId: nodeId,
                                             clientTLS: PostgresConnector.clientTLS(url.sslMode),
                                             connectionTLS: try PostgresConnector.connectionTLS(url.sslMode),
                                             deadAfter: .seconds(config.cluster.nodeTimeoutSeconds), logger: logger)
    }

    /// What the banner shows: the SQLite file, or the PostgreSQL URL without its password.
    var description: String {
        switch kind {
        case .sqlite(let store): return store.path
        case .postgres(let store): return store.description
        }
    }

    /// Closes the store from the server's shutdown (which cannot wait): SQLite at once, the
    /// PostgreSQL pool begins closing and `finishClosing` waits for it.
    func startClosing() throws {
        switch kind {
        case .sqlite(let store): try store.close()
        case .postgres(let store): store.beginClosing()
        }
    }

    /// Waits until the store is closed (for commands that end without a server).
    func finishClosing() async {
        if case .postgres(let store) = kind { await store.close() }
    }

    /// Closes the store, for the commands that run without a server.
    func close() async throws {
        try startClosing()
        await finishClosing()
    }
}

struct App: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the apps hosted by this server.", subcommands: [Create.self, List.self, Push.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app (or set the secret of an existing key).")

        @OptionGroup var options: ConfigOptions
        @Option(help: "App name.") var name: String = "app"
        @Option(help: "App key (default: random).") var appKey: String?
        @Option(help: "App secret (default: random).") var appSecret: String?

        func run() async throws {
            let config = try options.resolve()
            let opened = try await OpenedStore(config, logger: Logger(label: "imserver"))
            let registry = AppRegistry(store: opened.store)
            do {
                let app = try await registry.upsert(
                    appKey: appKey ?? AppRegistry.randomCredential(length: 13),
                    appSecret: appSecret ?? AppRegistry.randomCredential(length: 16),
                    name: name, now: SystemClock().nowMilliseconds())
                print("app key: \(app.appKey)\napp secret: \(app.appSecret)")
            } catch {
                try? await opened.close()
                throw error
            }
            try await opened.close()
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps with their keys and secrets.")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let opened = try await OpenedStore(try options.resolve(), logger: Logger(label: "imserver"))
            do {
                for app in try await opened.store.loadApps() {
                    print("\(app.appKey)\t\(app.appSecret)\t\(app.name)")
                }
            } catch {
                try? await opened.close()
                throw error
            }
            try await opened.close()
        }
    }
}

extension App {
    /// Sets an app's push credentials and switches in the store (a running server takes them within
    /// 5 seconds), as `/push/settings/set.json` does; prints the settings without key material.
    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set or show an app's push credentials (APNs, FCM, webhook) and switches.",
            discussion: "Credentials are checked before they are kept, and never printed: the output shows key ids, team, bundle id and fingerprints only.")

        @OptionGroup var options: ConfigOptions
        @Option(help: "The app's key.") var appKey: String
        @Option(help: ArgumentHelp("APNs bundle id (the apns-topic).", valueName: "id")) var bundleId: String?
        @Option(help: ArgumentHelp("APNs .p8 signing key file (token authentication; with --key-id and --team-id).", valueName: "file")) var apnsP8: String?
        @Option(help: "The p8 key's Key ID.") var keyId: String?
        @Option(help: "The Apple Developer Team ID.") var teamId: String?
        @Option(help: ArgumentHelp("APNs .p12 certificate file (certificate authentication; with --p12-password).", valueName: "file")) var apnsP12: String?
        @Option(help: "The p12's password.") var p12Password: String = ""
        @Option(help: ArgumentHelp("FCM service-account JSON file (Firebase console › Project settings › Service accounts).", valueName: "file")) var fcmServiceAccount: String?
        @Option(help: "Secret the webhook pushes are signed with (16 characters or more).") var webhookSecret: String?
        @Option(help: ArgumentHelp("Drop a provider's credentials: apns, fcm or webhook (repeatable).", valueName: "provider")) var remove: [String] = []
        @Option(help: ArgumentHelp("More settings as a JSON object, as /push/settings/set.json takes them (e.g. '{\"userSettingsEnabled\": true}').", valueName: "json")) var settings: String?

        func run() async throws {
            var change: [String: Any] = [:]
            if let settings {
                guard let object = try? JSONSerialization.jsonObject(with: Data(settings.utf8)) as? [String: Any] else {
                    throw ValidationError("--settings must be a JSON object, e.g. '{\"userSettingsEnabled\": true}'")
                }
                change = object
            }
            let read = { (path: String) throws -> Data in
                guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
                return data
            }
            if let apnsP8 {
                change["apns"] = ["bundleId": bundleId ?? "", "keyId": keyId ?? "", "teamId": teamId ?? "",
                                  "p8": String(decoding: try read(apnsP8), as: UTF8.self)]
            } else if let apnsP12 {
                change["apns"] = ["bundleId": bundleId ?? "", "p12": try read(apnsP12).base64EncodedString(), "password": p12Password]
            }
            if let fcmServiceAccount { change["fcm"] = ["serviceAccount": String(decoding: try read(fcmServiceAccount), as: UTF8.self)] }
            if let webhookSecret { change["webhook"] = ["secret": webhookSecret] }
            if !remove.isEmpty { change["remove"] = remove }

            let opened = try await OpenedStore(try options.resolve(), logger: Logger(label: "imserver"))
            do {
                guard let app = try await opened.store.loadApps().first(where: { $0.appKey == appKey }) else {
                    throw ValidationError("no app has the key \(appKey): imserver app list shows the apps")
                }
                var current = try await opened.store.pushSettings(appId: app.id)
                    .map { try JSONDecoder().decode(PushAppSettings.self, from: $0) } ?? PushAppSettings()
                if !change.isEmpty {
                    do {
                        try PushSettingsChange.apply(change, to: &current)
                    } catch let error as PushCredentialError {
                        throw ValidationError(error.message)
                    }
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = .sortedKeys
                    try await opened.store.setPushSettings(appId: app.id, settings: try encoder.encode(current))
                }
                let view = try JSONSerialization.data(withJSONObject: current.redactedView, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: view, as: UTF8.self))
            } catch {
                try? await opened.close()
                throw error
            }
            try await opened.close()
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a single-node installation's embedded database into an empty PostgreSQL database.",
        discussion: """
            Stop the server first. Every table is copied in one transaction (nothing is kept if it fails), \
            then the seq counters are set past the copied messages and reads. Afterwards run the server \
            with --database (or IMSERVER_DATABASE_URL) set to the same URL. docs/POSTGRES.md has the details.
            """)

    @Option(help: ArgumentHelp("The data directory of the installation (its dataDir).", valueName: "data-dir"))
    var from: String

    @Option(help: ArgumentHelp("The PostgreSQL database to copy into, empty: postgres://USER[:PASSWORD]@HOST[:PORT]/DB.", valueName: "url"))
    var to: String

    func run() async throws {
        var logger = Logger(label: "imserver")
        logger.logLevel = .warning
        let target = try PostgresURL(parsing: to)
        print("copying \(from) into \(target)")
        let copied = try await SQLiteToPostgres.copy(fromDataDirectory: from, to: to, logger: logger) { table in
            print("  \(table.table): \(table.rows) rows")
        }
        print("copied \(copied.reduce(0) { $0 + $1.rows }) rows in \(copied.count) tables; start the server with --database \(target)")
    }
}

struct ConfigDoc: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-doc",
        abstract: "Print the settings table of docs/CONFIGURATION.md, generated from the settings' declarations.")

    @Option(help: ArgumentHelp("Rewrite the generated table in this markdown file instead, in place.", valueName: "file"))
    var update: String?

    func run() throws {
        guard let update else {
            print(ServerConfig.table.markdown())
            return
        }
        let document = try String(contentsOfFile: update, encoding: .utf8)
        let updated = try ServerConfig.table.updating(document: document)
        if updated != document {
            try updated.write(toFile: update, atomically: true, encoding: .utf8)
            print("\(update): settings table updated")
        } else {
            print("\(update): settings table already up to date")
        }
    }
}
