import ArgumentParser
import Foundation
import IMCore
import IMKit
import IMLib

/// `imchat`: a full-screen terminal chat app over IMKit.
@main
struct IMChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imchat",
        abstract: "A terminal chat app over IMKit.",
        discussion: """
            Development login: --app-secret asks the server for the user's token (as the app's server would).
            Production shape: --token, a token from the app's server.
            Keys: ↑↓ move, Enter open, o open a conversation, d delete, / search, Esc back, PgUp/PgDn scroll,
            Ctrl-C quit. In a conversation /help lists the commands.
            """)

    @Option(help: "Server base URL; a cluster's nodes comma-separated.") var server = "http://127.0.0.1:8080"
    @Option(help: "App key.") var appKey: String
    @Option(help: "Token from the app's server (production shape).") var token: String?
    @Option(help: "App secret: imchat gets the token itself (development login).") var appSecret: String?
    @Option(help: "User id for the development login.") var user: String?
    @Option(help: "Platform to connect as: linux, macos, windows, web, ios, android.") var platform = "linux"
    @Option(help: "Where the local databases live.") var dataDir: String?
    @Option(help: "Seconds to keep trying to connect; 0 keeps trying.") var timeLimit = 0
    @Option(help: "Kit setting as flag=value; may repeat (e.g. enabledReadReceiptConversationTypes=private).") var set: [String] = []
    @Option(help: "Write events as JSON lines to this file.") var eventLog: String?
    @Option(help: ArgumentHelp("The app server's user info as a URL template, {id} the user id: GET answers JSON {\"name\", \"portrait\"} (or 404).",
                               valueName: "url")) var userInfoUrl: String?
    @Option(help: ArgumentHelp("A file whose last line is this device's position as LAT,LNG, read while sharing a location (Linux has no GPS; /here LAT,LNG types one).",
                               valueName: "path")) var locationFile: String?
    @Flag(help: "A clock that moves only with /clock +N (for testing time rules).") var testClock = false

    func run() async throws {
        let platforms: [String: Platform] = ["ios": .iOS, "android": .android, "web": .web, "linux": .linux, "macos": .macOS, "windows": .windows]
        guard let chosen = platforms[platform.lowercased()] else { throw ValidationError("unknown platform \(platform)") }
        let urls = server.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard let first = urls.first else { throw ValidationError("--server needs a URL") }
        var devAPI: DevServerAPI?
        let loginToken: String
        if let token {
            loginToken = token
        } else if let appSecret, let user {
            let api = DevServerAPI(baseURL: first, appKey: appKey, appSecret: appSecret)
            devAPI = api
            do { loginToken = try await api.token(for: user) } catch { throw ValidationError("development login failed: \(error)") }
        } else {
            throw ValidationError("give --token, or --app-secret with --user for the development login")
        }
        guard let claims = ConnectTokenClaims.unverified(loginToken) else { throw ValidationError("the token is malformed") }

        let manual = testClock ? ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000)) : nil
        let clock: any WallClock = manual ?? SystemClock()
        let base = dataDir.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/imchat")
        var options = IMClientOptions()
        options.platform = chosen
        options.databaseDirectory = base.appendingPathComponent("imlib")
        options.clock = clock
        var config = KitConfig()
        for assignment in set {
            let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--set takes flag=value, not \(assignment)") }
            do { try config.set(parts[0], to: parts[1]) } catch { throw ValidationError("\(error)") }
        }
        var providers = InfoProviders()
        if let devAPI {
            providers.user = { id in await devAPI.userName(id).map { UserInfo(userId: id, name: $0) } }
            providers.groupMembers = { id in await devAPI.groupMembers(id) }
        }
        if let userInfoUrl {
            guard userInfoUrl.contains("{id}"), URL(string: userInfoUrl.replacingOccurrences(of: "{id}", with: "x")) != nil else {
                throw ValidationError("--user-info-url needs a URL with {id}, e.g. http://127.0.0.1:8000/users/{id}")
            }
            let provider = UserInfoURLProvider(template: userInfoUrl)
            providers.user = { id in await provider.user(id) }
        }
        let client = IMClient(appKey: appKey, serverURLs: urls, options: options)
        let kit = IMKit(client: client, config: config, providers: providers, dataDirectory: base.appendingPathComponent("imkit"), clock: clock)
        if let locationFile {
            kit.setLocationProvider {
                guard let text = try? String(contentsOfFile: locationFile, encoding: .utf8),
                      let last = text.split(whereSeparator: \.isNewline).last(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else { return nil }
                return ChatApp.parseCoordinate(String(last))
            }
        }
        let terminal = Terminal()
        let log = EventLog(path: eventLog)
        let app = ChatApp(kit: kit, terminal: terminal, log: log, manualClock: manual, userId: claims.userId, fetchUser: providers.user)

        terminal.enterRawMode()
        defer { terminal.restore() }
        let started = ContinuousClock.now
        // The list is drawn from the local database as soon as it is open (dbOpened), before the
        // connection succeeds.
        let opened = AsyncStream<Void>.makeStream()
        let userId = claims.userId
        var newToken: (@Sendable () async throws -> String)?
        if let devAPI { newToken = { try await devAPI.token(for: userId) } }
        let refresh = newToken
        let limit = timeLimit
        let signal = opened.continuation
        // Each offline sync that completes (at every connect), for the event log: what arrives
        // after it comes live.
        let syncs = kit.client.offlineMessageSyncCompleted()
        Task { for await _ in syncs { log.write("synced", [:]) } }
        let connecting = Task {
            do {
                _ = try await kit.connect(token: loginToken, timeLimit: limit, newToken: refresh, dbOpened: { signal.yield(()) })
            } catch {
                log.write("connect_failed", ["error": "\(error)"])
                signal.yield(())
            }
        }
        for await _ in opened.stream { break }
        let rows = await app.start()
        // The list is on the screen, drawn from the local database.
        log.write("ready", ["ms": "\((ContinuousClock.now - started) / .milliseconds(1))", "rows": "\(rows)"])
        let resizes = terminal.resizes()
        Task { for await _ in resizes { await app.render() } }
        for await (key, readAt) in terminal.keys() {
            await app.handle(key)
            // Key-to-screen: from reading the key to its frame written to the terminal.
            log.write("key", ["us": "\((ContinuousClock.now - readAt) / .microseconds(1))"])
            if await app.finished { break }
        }
        connecting.cancel()
        await kit.disconnect()
    }
}
