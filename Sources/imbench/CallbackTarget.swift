import Foundation
import IMCore
import IMPushTesting
import IMServer
import NIOCore
import NIOHTTP1
import NIOPosix

/// The app's server for the callback scenarios: a plain HTTP/1.1 server on 127.0.0.1 (SwiftNIO, one
/// event loop of its own, keep-alive) that takes full message routing at `/routing` and answers the
/// message callback at `/review` with `{"pass":1}` (deliver unchanged). It checks RongCloud's
/// signature on every call, keeps the msgUID of every routed message (to tell a loss or a duplicate)
/// and the routing lag: the receipt time minus the message's msgTimestamp (the server's commit time).
/// With an answer delay it plays a slow app server: every answer leaves that long after its request.
final class CallbackTarget: Sendable {
    struct Tally: Sendable {
        var routed = Set<String>()
        var routingCalls = 0
        var duplicates = 0
        var reviewed = Set<String>()
        var reviewCalls = 0
        var badSignatures = 0
        var malformed = 0
        var routingLag = LatencyHistogram()
    }

    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)" }
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let state: Locked<Tally>

    static func start(appKey: String, appSecret: String, answerDelay: TimeAmount = .zero) async throws -> CallbackTarget {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = Locked(Tally())
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(CallbackHTTPHandler(appKey: appKey, appSecret: appSecret, answerDelay: answerDelay, state: state))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw BenchError("the callback receiver has no port") }
        return CallbackTarget(port: port, group: group, channel: channel, state: state)
    }

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, state: Locked<Tally>) {
        self.port = port
        self.group = group
        self.channel = channel
        self.state = state
    }

    var tally: Tally { state.withLock { $0 } }
    var routedCount: Int { state.withLock { $0.routed.count } }
    var reviewedCount: Int { state.withLock { $0.reviewed.count } }

    func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// One connection of the callback receiver: a request's head and body, then its answer.
private final class CallbackHTTPHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let appKey: String
    private let appSecret: String
    private let answerDelay: TimeAmount
    private let state: Locked<CallbackTarget.Tally>
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(appKey: String, appSecret: String, answerDelay: TimeAmount, state: Locked<CallbackTarget.Tally>) {
        self.appKey = appKey
        self.answerDelay = answerDelay
        self.appSecret = appSecret
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            self.head = nil
            let answer = take(head)
            if answerDelay > .zero {
                context.eventLoop.assumeIsolated().scheduleTask(in: answerDelay) { self.respond(context: context, head: head, answer: answer) }
            } else {
                respond(context: context, head: head, answer: answer)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead, answer: String) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: answer.isEmpty ? "text/plain" : "application/json")
        headers.add(name: "Content-Length", value: String(answer.utf8.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))), promise: nil)
        if !answer.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: answer)))), promise: nil)
        }
        let keepAlive = head.isKeepAlive
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Records the call and returns the body of its answer.
    private func take(_ head: HTTPRequestHead) -> String {
        let parts = head.uri.split(separator: "?", maxSplits: 1)
        let path = parts.first.map(String.init) ?? ""
        let query = parts.count > 1 ? Self.fields(parts[1]) : [:]
        let timestamp = String(query["timestamp"] ?? "")
        let signed = !timestamp.isEmpty && query["appKey"].map(String.init) == appKey && query["signTimestamp"].map(String.init) == timestamp
            && query["signature"].map(String.init) == APISignature.sign(secret: appSecret, nonce: String(query["nonce"] ?? ""), timestamp: timestamp)
        let text = body.getString(at: body.readerIndex, length: body.readableBytes) ?? ""
        let form = Self.fields(Substring(text))
        let receivedAt = Int64(Date().timeIntervalSince1970 * 1000)
        return state.withLock { tally in
            if !signed { tally.badSignatures += 1 }
            switch path {
            case "/routing":
                tally.routingCalls += 1
                guard let uid = form["msgUID"].map(String.init), !uid.isEmpty, let sentAt = form["msgTimestamp"].flatMap({ Int64($0) }) else {
                    tally.malformed += 1
                    return ""
                }
                if !tally.routed.insert(uid).inserted { tally.duplicates += 1 }
                tally.routingLag.record(nanos: UInt64(max(0, receivedAt - sentAt)) * 1_000_000)
                return ""
            case "/review":
                tally.reviewCalls += 1
                if let id = form["messageId"], !id.isEmpty { tally.reviewed.insert(String(id)) } else { tally.malformed += 1 }
                return #"{"pass":1}"#
            default:
                tally.malformed += 1
                return ""
            }
        }
    }

    /// The fields of a query or form body, as sent: the fields read here (ids, timestamps, the
    /// signature's) carry no escapes, and the message's content is not decoded.
    private static func fields(_ text: Substring) -> [String: Substring] {
        var fields: [String: Substring] = [:]
        for pair in text.split(separator: "&") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            fields[String(pair[..<equals])] = pair[pair.index(after: equals)...]
        }
        return fields
    }
}
