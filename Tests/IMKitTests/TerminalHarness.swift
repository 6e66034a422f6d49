import Foundation
import IMProcess
import Testing

/// A private tmux server (its own socket) with imchat sessions of a fixed size: keys go in with
/// `send-keys`, the screen comes back with `capture-pane` (spec imkit-and-overview.md §4.4).
final class TmuxHarness: Sendable {
    let socket = "imchat-test-\(UUID().uuidString.prefix(8))"
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("imchat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    static var imchat: String {
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        while folder.path != "/" && !FileManager.default.fileExists(atPath: folder.appendingPathComponent("imchat").path) {
            folder = folder.deletingLastPathComponent()
        }
        return folder.appendingPathComponent("imchat").path
    }

    @discardableResult
    func tmux(_ arguments: [String]) async throws -> String {
        let output = directory.appendingPathComponent("tmux-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = try ChildProcess("/usr/bin/tmux", ["-L", socket] + arguments, standardOutput: .file(output.path), standardError: .null)
        _ = await process.exit()
        return String(decoding: (try? Data(contentsOf: output)) ?? Data(), as: UTF8.self)
    }

    /// Starts imchat as `user` in a session of its own (120×40), named `session` (default: the user,
    /// so a second device of one user takes another name); the session's data directory and event
    /// log (`<session>.log`) are its own.
    func start(_ user: String, session: String? = nil, server: String, appKey: String, appSecret: String? = nil, token: String? = nil,
               extra: [String] = []) async throws {
        let name = session ?? user
        var arguments = [Self.imchat, "--server", server, "--app-key", appKey, "--data-dir", directory.appendingPathComponent(name).path,
                         "--event-log", log(name).path]
        if let token { arguments += ["--token", token] } else { arguments += ["--app-secret", appSecret ?? "", "--user", user] }
        arguments += extra
        let command = arguments.map { "'\($0)'" }.joined(separator: " ") + " 2>>'\(directory.appendingPathComponent("\(name).err").path)'"
        try await tmux(["new-session", "-d", "-s", name, "-x", "120", "-y", "40", command])
    }

    /// Ends a session's imchat (Ctrl-C, then the session).
    func quit(_ session: String) async throws {
        try await press(session, "C-c")
        try await Task.sleep(for: .milliseconds(300))
        try await tmux(["kill-session", "-t", session])
    }

    func log(_ user: String) -> URL { directory.appendingPathComponent("\(user).log") }

    /// The events of the user's log with this name.
    func events(_ user: String, _ name: String) -> [[String: String]] {
        let text = String(decoding: (try? Data(contentsOf: log(user))) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: String]
        }.filter { $0["event"] == name }
    }

    func type(_ session: String, _ text: String) async throws {
        try await tmux(["send-keys", "-t", session, "-l", text])
    }

    func press(_ session: String, _ keys: String...) async throws {
        try await tmux(["send-keys", "-t", session] + keys)
    }

    /// Opens a conversation from the list (`o`, the target as imchat takes it) and waits for its
    /// screen titled `title` (the target by default).
    func open(_ session: String, _ target: String, title: String? = nil) async throws {
        try await press(session, "o")
        try await enter(session, target)
        try await waitFor(session, contains: "« \(title ?? target)")
    }

    /// Types a line and presses Enter.
    func enter(_ session: String, _ text: String) async throws {
        try await type(session, text)
        try await press(session, "Enter")
    }

    func screen(_ session: String) async throws -> String {
        try await tmux(["capture-pane", "-p", "-t", session])
    }

    /// Waits until the session's screen satisfies `condition` (polled every 100 ms) and returns it;
    /// records an issue with the screen when it does not within `timeout`.
    @discardableResult
    func waitFor(_ session: String, _ what: String, timeout: Duration = .seconds(30),
                 sourceLocation: SourceLocation = #_sourceLocation, _ condition: (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        var last = ""
        while ContinuousClock.now < deadline {
            last = try await screen(session)
            if condition(last) { return last }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(session)'s screen never showed \(what):\n\(last)", sourceLocation: sourceLocation)
        return last
    }

    /// Waits until the session's event log holds `count` events named `name`; records an issue
    /// when it does not within `timeout`.
    func waitForEvent(_ session: String, _ name: String, count: Int = 1, timeout: Duration = .seconds(30),
                      sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if events(session, name).count >= count { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(session)'s event log never held \(count) \"\(name)\" event(s)", sourceLocation: sourceLocation)
    }

    @discardableResult
    func waitFor(_ session: String, contains text: String, timeout: Duration = .seconds(30),
                 sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        try await waitFor(session, "\"\(text)\"", timeout: timeout, sourceLocation: sourceLocation) { $0.contains(text) }
    }

    func stop() async {
        _ = try? await tmux(["kill-server"])
        try? FileManager.default.removeItem(at: directory)
    }
}
