import Foundation

/// What one simulated client does. Every client connects (WebSocket, CONNECT, SYNC until done) and
/// pings at the heartbeat interval the server gives it; the role adds the load.
enum ClientRole: Codable, Sendable, Equatable {
    /// Holds the connection and pings.
    case idle
    /// Sends private messages to `peer` at the worker's per-client chat rate, and receives its peer's.
    case chat(peer: String)
    /// Pages backwards through the private conversation with `peer` at the per-client history rate.
    case history(peer: String)
    /// An online member of the group `group` (an ultra group's default channel when `ultra`):
    /// receives every member's messages there and, if `sender`, sends to it at the worker's
    /// per-client chat rate.
    case groupMember(group: String, sender: Bool, ultra: Bool)
    /// A member of the chatroom `room`: joins it (JOIN_CHATROOM, no history) once synced, receives
    /// its CHATROOM_MESSAGES and, if `publisher` (0..<publishers) is set, sends chatroom messages at
    /// the worker's per-client chat rate. Publisher p's n-th message is number n × publishers + p,
    /// written into its client message id, so every member can tell the messages apart.
    case chatroomMember(room: String, publisher: Int?, publishers: Int)
    /// Connects only when the load starts (connect-storm), then syncs and holds.
    case storm
    /// Before the load starts, sends `perTarget` messages to each target (offline messages for the
    /// storm clients), then holds.
    case mailer(targets: [String], perTarget: Int)
}

/// One simulated client.
struct ClientSpec: Codable, Sendable {
    var userId: String
    var token: String
    var role: ClientRole
    /// The port of the node this client connects to (a cluster); nil: the job's port.
    var port: Int?

    init(userId: String, token: String, role: ClientRole, port: Int? = nil) {
        self.userId = userId
        self.token = token
        self.role = role
        self.port = port
    }
}

/// Everything a worker needs: sent by the coordinator as the first line on the worker's stdin.
struct WorkerJob: Codable, Sendable {
    var workerIndex: Int
    var host: String
    var port: Int
    var appKey: String
    /// Local addresses the worker's connections are bound to, in turn (127.0.0.x), so that more than
    /// one address's ephemeral ports are available. Empty: the kernel chooses.
    var sourceAddresses: [String]
    /// Event-loop threads in this worker.
    var threads: Int
    /// Connections being opened at once (TCP + upgrade + CONNECT + SYNC).
    var connectConcurrency: Int
    var clients: [ClientSpec]
    /// Messages per second each chat client (and each group sender) sends.
    var chatRatePerClient: Double
    /// History queries per second each history client issues.
    var historyRatePerClient: Double
    /// Messages per history page.
    var historyCount: Int
    /// Bytes of the message content (a JSON object, RC:TxtMsg).
    var payloadBytes: Int
    /// Seconds a request may stay unanswered before it counts as a timeout.
    var requestTimeoutSeconds: Double
}

/// Coordinator → worker, one JSON object per line after the job.
enum WorkerCommand: Codable, Sendable {
    /// Start the load now; record what is sent inside [measureFrom, measureUntil) (monotonic ns).
    case start(measureFrom: UInt64, measureUntil: UInt64)
    /// Start a further load after a `stop`: statistics start again from nothing, and each chat
    /// client sends `chatRatePerClient` messages per second (the bus probe's next step).
    case restart(measureFrom: UInt64, measureUntil: UInt64, chatRatePerClient: Double)
    /// Stop the load, wait for the answers still due, and report.
    case stop
    /// Close every connection and exit.
    case exit
}

/// Worker → coordinator, one JSON object per line on the worker's stdout.
enum WorkerEvent: Codable, Sendable {
    /// Every non-storm client has connected and synced (or failed); mailers are done.
    case ready(connected: Int, failed: Int)
    /// Every storm client has synced or failed.
    case stormDone
    case result(WorkerStats)
    /// A fatal problem: the worker is exiting.
    case failed(String)
}

/// Line-delimited JSON on a pipe.
enum JSONLines {
    static func encode<T: Encodable>(_ value: T) -> Data {
        var data = (try? JSONEncoder().encode(value)) ?? Data("{}".utf8)
        data.append(UInt8(ascii: "\n"))
        return data
    }

    static func decode<T: Decodable>(_ type: T.Type, _ line: Substring) throws -> T {
        try JSONDecoder().decode(type, from: Data(line.utf8))
    }
}

/// Reads lines from a file descriptor on a thread of its own and hands them out as an async stream.
enum LineReader {
    static func lines(fileDescriptor: Int32) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .unbounded)
        let thread = Thread {
            var pending = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                pending.append(contentsOf: chunk[0..<count])
                var start = 0
                while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: pending[start..<newline], as: UTF8.self))
                    start = newline + 1
                }
                pending.removeFirst(start)
            }
            if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
            continuation.finish()
        }
        thread.stackSize = 1 << 20
        thread.start()
        return stream
    }
}
