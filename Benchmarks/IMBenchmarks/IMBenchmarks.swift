import Benchmark
import Foundation
import IMCore
import IMServer
import IMServerTesting
import IMStore
import IMWire
import NIOCore
import NIOEmbedded

/// Micro-benchmarks of the server's per-message paths, with their allocations counted: the frame a
/// client's send arrives in, decoded; the push a recipient gets, encoded; the content check; the
/// send path from the arriving frame to the committed log and the sender's reply; and the fan-out
/// of one push to recipients' connections. Names have no spaces: the tool writes threshold
/// files with spaces replaced but reads them with the name as given. `swift package benchmark thresholds check`
/// (scripts/benchmarks.sh, run by scripts/test.sh) fails when the allocations per operation grow
/// past the figures kept in Thresholds/; BENCHMARKS.md ("Micro-benchmarks") says how to read and update them.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.mallocCountTotal, .wallClock, .throughput],
        timeUnits: .nanoseconds,
        maxDuration: .seconds(2),
        maxIterations: 100_000,
        // Allocations are counted, not timed: the same code allocates the same, whatever else the
        // machine is doing. Time is shown but not checked (the box is shared).
        thresholds: [.mallocCountTotal: .init(relative: [.p90: 0], absolute: [.p90: 0])]
    )

    let content = Data(#"{"content":"a message of about a hundred bytes, as imbench sends them: 你好, with an emoji 😀","extra":"x"}"#.utf8)

    // A client's SendMessage request as it arrives: a Frame around the request, in a ByteBuffer.
    var request = Im_SendMessageRequest()
    request.conversationType = 1
    request.targetID = "user-00042"
    request.objectName = "RC:TxtMsg"
    request.content = content
    request.clientMessageID = "7f0c2a3e-1b2d-4c5e-9f80-123456789abc"
    let requestBytes = (try? FrameCodec.request(id: 17, op: .sendMessage, request)) ?? []
    let arriving = ByteBuffer(bytes: requestBytes)

    Benchmark("FrameDecode.SendMessageRequest") { benchmark in
        for _ in benchmark.scaledIterations {
            let frame = try FrameCodec.decode(arriving)
            blackHole(try frame.body(Im_SendMessageRequest.self))
        }
    }

    // A stored message on its way to a recipient.
    let stored = StoredMessage(
        seq: 123_456, appId: 1, conversationType: .private, conversationKey: "p:user-00041:user-00042", targetId: "user-00042",
        senderId: "user-00041", objectName: "RC:TxtMsg", content: content, uid: "CDQH-8RTK-0C25-0042", sentTime: 1_764_000_000_000,
        flags: [.isPersisted, .isCounted], clientMessageId: "7f0c2a3e-1b2d-4c5e-9f80-123456789abc")

    Benchmark("FrameEncode.MessagePush") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(OutboundFrame(stored.pushFrame()))
        }
    }

    Benchmark("ContentCheck.JSONSyntax") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(MessageContentRule.violation(of: content))
        }
    }

    // A one-to-one send from the frame it arrives in to the reply its sender gets, through the
    // server's own op table (`ServerCore.answer`, what the gateway runs per frame): the body
    // decoded, the message checked (target, content, rate, mute, blacklist), committed by the
    // message log to a SQLite store on disk and handed to delivery. One send at a time, so each
    // commit holds one message (under load the log commits many per transaction). Allocations are
    // counted on every thread: the log's writer and SQLite's as well as the caller's.
    let sendPath = SendPath(request: request)
    Benchmark("SendPath.ToTheLog",
              configuration: .init(metrics: [.mallocCountTotal, .wallClock, .throughput],
                                   maxDuration: .seconds(3), maxIterations: SendPath.sends,
                                   thresholds: [.mallocCountTotal: sendPath.allocationThreshold]),
              closure: { benchmark in
                  for _ in benchmark.scaledIterations {
                      blackHole(try await sendPath.send())
                  }
              },
              setup: { try await sendPath.start() },
              teardown: { await sendPath.stop() })

    // The check it replaced, for comparison (not used by the server).
    Benchmark("ContentCheck.JSONSerialization") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole((try? JSONSerialization.jsonObject(with: content)) is [String: Any])
        }
    }

    // One push fanned out to 100 recipients' connections (a group's online members): each is a
    // session with its queue on a channel of one event loop. Per iteration, the push reaches the
    // 100 queues and the loop writes each connection's frame once; divide by 100 for a recipient.
    let fanOut = FanOut(frame: OutboundFrame(stored.pushFrame()))
    Benchmark("FanOut.100Connections") { benchmark in
        try fanOut.prepare(connections: 100)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            fanOut.deliver()
        }
    }
}

/// Sessions on embedded channels (a real pipeline with the session's write handler, no socket).
final class FanOut: @unchecked Sendable {
    let frame: OutboundFrame
    let loop = EmbeddedEventLoop()
    var channels: [EmbeddedChannel] = []
    var sessions: [ClientSession] = []

    init(frame: OutboundFrame) {
        self.frame = frame
    }

    func prepare(connections: Int) throws {
        guard sessions.isEmpty else { return }
        for index in 0..<connections {
            let channel = EmbeddedChannel(loop: loop)
            try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            let outbound = try SessionOutbound.attached(to: channel, maxQueuedBytes: 1 << 20)
            let session = ClientSession(id: "s\(index)", appId: 1, userId: "user-\(index)", platform: .linux, deviceId: "d\(index)",
                                        now: 0, outbound: outbound, maxHeldBytes: 1 << 20)
            session.syncProgressed(watermark: 0, complete: true)
            channels.append(channel)
            sessions.append(session)
        }
    }

    func deliver() {
        for session in sessions { session.deliver(seq: 0, frame: frame) }
        loop.run()
        for channel in channels {
            while let written = try? channel.readOutbound(as: ByteBuffer.self) { blackHole(written) }
        }
    }
}

/// A server in this process (a fresh SQLite store in a temporary directory, the whole service group
/// running as `imserver` runs it) and one signed-in session of its app, whose sends are answered
/// through `ServerCore.answer`. Each send is a new message: its own client message id, as IMLib
/// gives every message (the same id again would be answered as a duplicate, a different path).
final class SendPath: @unchecked Sendable {
    /// The most sends one run makes (the frames are built before it starts).
    static let sends = 10_000
    let frames: [ByteBuffer]
    var next = 0
    var server: TestServer?
    var session: ClientSession?
    /// The session's channel: a thread-safe test channel, since setup, sends and teardown run on
    /// whatever threads the tool and Swift's executor pick.
    var channel: NIOAsyncTestingChannel?

    /// The allocations are counted across the whole process, the server's timers with them, so a
    /// send's count may differ from the last by one or two; more than three above the threshold
    /// fails the check.
    let allocationThreshold = BenchmarkThresholds(absolute: [.p90: 3])

    init(request: Im_SendMessageRequest) {
        // More than the run's sends: `start` checks one, and the tool warms up first.
        frames = (0..<Self.sends + 16).map { index in
            var request = request
            request.clientMessageID = "bench-\(index)-" + request.clientMessageID
            return ByteBuffer(bytes: (try? FrameCodec.request(id: 17, op: .sendMessage, request)) ?? [])
        }
    }

    func start() async throws {
        // A fresh store: the ids are new to it.
        next = 0
        let server = try await TestServer.start { config in
            // One session sends as fast as the server answers: no per-client rate in the way.
            config.session.clientSendsPerSecond = 1_000_000
        }
        let channel = NIOAsyncTestingChannel()
        try await channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        let outbound = try await channel.eventLoop.submit {
            try SessionOutbound.attached(to: channel, maxQueuedBytes: 1 << 20)
        }.get()
        session = ClientSession(id: "bench-sender", appId: server.app.id, userId: "user-00041", platform: .linux, deviceId: "d41",
                                now: server.core.clock.nowMilliseconds(), outbound: outbound, maxHeldBytes: 1 << 20)
        self.channel = channel
        self.server = server
        // The reply must be a success: a benchmark of a refusal would measure the wrong path.
        let reply = try await send()
        let frame = try FrameCodec.decode(reply)
        if let error = frame.error { throw error }
        guard try frame.body(Im_SendMessageReply.self).seq > 0 else {
            throw IMError(.serverUnavailable, "the benchmark's send was answered without a seq: it was not stored")
        }
    }

    func send() async throws -> [UInt8] {
        guard let server, let session, next < frames.count else {
            throw IMError(.serverUnavailable, "the benchmark ran more sends than it prepared (\(frames.count))")
        }
        let frame = try FrameCodec.decode(frames[next])
        next += 1
        return await server.core.answer(frame, from: session) ?? []
    }

    func stop() async {
        await server?.stop()
        _ = try? await channel?.finish()
        server = nil
        next = 0
        session = nil
        channel = nil
    }
}
