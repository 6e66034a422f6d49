import Foundation
import IMCore
import IMProcess
import Synchronization

/// The PostgreSQL server the tests of this process use: `IMSERVER_TEST_POSTGRES_URL` (scripts/test.sh
/// starts one with scripts/postgres.sh), or, without it, one started here with scripts/postgres.sh
/// the first time it is asked for and stopped when the process exits. Tests that need PostgreSQL
/// run either way: a test skipped for want of a server would count as passed.
public enum TestPostgresServer {
    /// The server's URL, `postgres://USER@127.0.0.1:PORT/imserver`.
    public static func url() throws -> String {
        try state.withLock { state in
            if let url = state.url { return url }
            let url: String
            if let given = ProcessInfo.processInfo.environment["IMSERVER_TEST_POSTGRES_URL"], !given.isEmpty {
                url = given
            } else {
                url = try start(&state)
            }
            state.url = url
            return url
        }
    }

    private struct State {
        var url: String?
        /// The server this process started: the script and its directory.
        var own: (script: String, directory: String)?
    }

    private static let state = Mutex(State())

    private static func start(_ state: inout State) throws -> String {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/postgres.sh").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-tests-postgres-\(getpid())").path
        let output = try run(script, ["start", directory])
        state.own = (script, directory)
        atexit(stopOwnServer)
        guard let url = output.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres") else {
            throw IMError(.databaseError, "scripts/postgres.sh start printed no URL: \(output)")
        }
        return url
    }

    /// Stops the server this process started (an `atexit` handler: no context).
    static func stopOwn() {
        guard let (script, directory) = state.withLock({ $0.own }) else { return }
        _ = try? run(script, ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a program and returns what it printed; throws when it fails.
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = try ChildProcess(program, arguments, standardOutput: .pipe)
        let output = ChildProcess.readAll(process.standardOutput!)
        let ended = process.waitUntilExit()
        guard ended == .exited(0) else {
            throw IMError(.databaseError, "\(program) \(arguments.joined(separator: " ")) ended with \(ended)")
        }
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

private func stopOwnServer() {
    TestPostgresServer.stopOwn()
}
