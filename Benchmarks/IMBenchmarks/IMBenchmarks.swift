import Benchmark
import Foundation
import IMCore
import IMServer
import IMStore
import IMWire
import NIOCore
import NIOEmbedded

/// Micro-benchmarks of the server's per-message paths, with their allocations counted: the frame a
/// client's send arrives in, decoded; the push a recipient gets, encoded; the content check; and the
/// fan-out of one push to recipients' connections. Names have no spaces: the tool writes threshold
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
