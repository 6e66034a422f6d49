import ArgumentParser
import Foundation
import IMCore
import IMLib

/// A small command-line client over IMLib, for trying a server by hand: `listen` prints what a
/// user receives, `send` sends one text message.
@main
struct IMLibDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imlib-demo",
        abstract: "Try imserver from a terminal with the IMLib client SDK.",
        subcommands: [Listen.self, Send.self])
}

struct ClientOptions: ParsableArguments {
    @Option(help: "Server base URL; a cluster's nodes as several, comma-separated, tried in order.") var server = "http://127.0.0.1:8080"
    @Option(help: "App key (imserver prints it at start).") var appKey: String
    @Option(help: "Token from /user/getToken.json.") var token: String
    @Option(help: "Platform to connect as: ios, android, web, linux, macos, windows.") var platform = "linux"
    @Option(help: "Seconds to keep trying to connect; 0 keeps trying until connected.") var timeLimit = 10

    /// The client, not yet connected: subscribe to its events first, so nothing is missed.
    func makeClient() throws -> IMClient {
        guard let chosen = Self.platforms[platform.lowercased()] else {
            throw ValidationError("unknown platform '\(platform)': use one of \(Self.platforms.keys.sorted().joined(separator: ", "))")
        }
        var options = IMClientOptions()
        options.platform = chosen
        options.databaseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("imlib-demo")
        let urls = server.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !urls.isEmpty else { throw ValidationError("--server needs at least one URL") }
        return IMClient(appKey: appKey, serverURLs: urls, options: options)
    }

    func connect(_ client: IMClient) async throws {
        // Timed from the start of connecting (status 10), after the local database opened.
        let statuses = client.connectionStatusUpdates()
        let connecting = Task {
            for await status in statuses where status != .unconnected { return ContinuousClock.now }
            return ContinuousClock.now
        }
        do {
            let userId = try await client.connect(token: token, timeLimit: timeLimit)
            connecting.cancel()
            say("connected as \(userId)")
        } catch let error as IMError {
            let seconds = (ContinuousClock.now - (await connecting.value)) / .milliseconds(1) / 1000
            throw ValidationError("connect failed after \(String(format: "%.3f", seconds)) s: \(error)")
        }
    }

    static let platforms: [String: Platform] = [
        "ios": .iOS, "android": .android, "web": .web, "linux": .linux, "macos": .macOS, "windows": .windows,
    ]
}

struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Connect and print every message received (Ctrl-C to stop).")
    @OptionGroup var client: ClientOptions

    func run() async throws {
        let connected = try client.makeClient()
        let statuses = connected.connectionStatusUpdates()
        let messages = connected.receivedMessages()
        Task { for await status in statuses { say("status: \(status)") } }
        try await client.connect(connected)
        for await event in messages {
            let text = event.message.content(as: TextMessage.self)?.content ?? String(decoding: event.message.contentData, as: UTF8.self)
            say("\(event.offline ? "[offline] " : "")\(event.message.senderUserId): \(text)")
        }
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Connect, send one text message, and disconnect.")
    @OptionGroup var client: ClientOptions
    @Option(help: "The receiving user id.") var to: String
    @Argument(help: "The text to send.") var text: String

    func run() async throws {
        let connected = try client.makeClient()
        try await client.connect(connected)
        do {
            let message = try await connected.sendMessage(.private, targetId: to, content: TextMessage(content: text))
            say("sent \(message.messageUId) at \(message.sentTime)")
        } catch let error as SendMessageError {
            say("send failed: \(error.error)")
        }
        await connected.disconnect()
    }
}

/// Prints a line unbuffered, so output piped to a file or another program appears at once.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
