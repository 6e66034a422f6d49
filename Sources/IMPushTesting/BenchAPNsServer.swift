import Crypto
import Foundation
import IMPushProviders
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Synchronization

/// The push benchmark's APNs: HTTP/2 over TLS (ALPN h2, the test CA's certificate) on 127.0.0.1,
/// `POST /3/device/<token>`, each request authenticated by its provider token (an ES256 JWT with a
/// known `kid` and the team as `iss`, verified once and then recognised by its bytes), its topic
/// checked against the bundle id, and answered 200 with its `apns-id`; requests are counted, not
/// kept.
///
/// It reads and writes HTTP/2 frames itself (with `HTTP2Wire`, as the server's APNs client does)
/// rather than through NIOHTTP2Handler, and `TestAPNsServer`'s per-request bookkeeping is left
/// out: it shares the box with the server it measures, and at ten thousand pushes a second
/// `TestAPNsServer` took half a core of it. `TestAPNsServer` is the one the tests check the
/// client's HTTP/2 against.
public final class BenchAPNsServer: Sendable {
    public let port: Int
    public var baseURL: String { "https://127.0.0.1:\(port)" }
    private let channel: any Channel
    private let counts: Counts

    final class Counts: Sendable {
        let taken = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let connections = Atomic<Int>(0)
        /// Provider tokens verified so far: their text and whether they passed.
        let verified = Mutex<[String: Bool]>([:])
    }

    public init(bundleId: String, teamId: String, keys: [String: P256.Signing.PublicKey],
                authority: TestCertificateAuthority = .shared, eventLoopGroup: (any EventLoopGroup)? = nil) async throws {
        let context = try NIOSSLContext(configuration: authority.serverTLSConfiguration(protocols: ["h2"]))
        let counts = Counts()
        self.counts = counts
        let rawKeys = keys.mapValues(\.rawRepresentation)
        channel = try await ServerBootstrap(group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                counts.connections.wrappingAdd(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(
                        BenchAPNsConnection(counts: counts, bundleId: bundleId, teamId: teamId, keys: rawKeys))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        port = channel.localAddress?.port ?? 0
    }

    /// Pushes answered 200.
    public var requestCount: Int { counts.taken.load(ordering: .relaxed) }
    /// Requests refused (bad token, topic or path).
    public var refusedCount: Int { counts.refused.load(ordering: .relaxed) }
    public var connectionsAccepted: Int { counts.connections.load(ordering: .relaxed) }

    public func stop() async {
        try? await channel.close()
    }
}

/// One connection: the client's preface and SETTINGS, then requests as HEADERS (+ CONTINUATION)
/// and DATA, each answered with a HEADERS frame once its stream ends. Confined to its event loop.
private final class BenchAPNsConnection: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Never
    typealias OutboundOut = ByteBuffer

    private struct Request {
        var status: Int
        var apnsId: String
    }

    private let counts: BenchAPNsServer.Counts
    private let bundleId: String
    private let teamId: String
    private let keys: [String: Data]
    private var context: ChannelHandlerContext?
    private var inbound: ByteBuffer?
    private var outbound = ByteBuffer()
    private var flushPending = false
    private var prefaceSeen = false
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var partial: (stream: UInt32, block: ByteBuffer, endStream: Bool)?
    private var open: [UInt32: Request] = [:]
    private var unacknowledged = 0
    private var lastToken = ""
    private var lastTokenPassed = false

    /// The receive window the connection opens to at once and is topped up to.
    private static let window = 16 << 20
    /// HPACK for `:status 200` (static entry 8), and for others the name of entry 8 with a literal.
    private static func status(_ status: Int) -> [UInt8] {
        status == 200 ? [0x88] : [0x08, 0x03] + Array(String(status).utf8)
    }

    init(counts: BenchAPNsServer.Counts, bundleId: String, teamId: String, keys: [String: Data]) {
        self.counts = counts
        self.bundleId = bundleId
        self.teamId = teamId
        self.keys = keys
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        outbound = context.channel.allocator.buffer(capacity: 16_384)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var held = inbound {
            held.writeBuffer(&bytes)
            inbound = nil
            bytes = held
        }
        if !prefaceSeen {
            guard bytes.readableBytes >= HTTP2Wire.preface.count else { inbound = bytes; return }
            guard bytes.readBytes(length: HTTP2Wire.preface.count) == HTTP2Wire.preface else { return fail() }
            prefaceSeen = true
            write { buffer in
                HTTP2Wire.writeSettings(&buffer, [(.maxConcurrentStreams, 1000), (.initialWindowSize, 1 << 20)])
                HTTP2Wire.writeWindowUpdate(&buffer, stream: 0, increment: Self.window - HTTP2Wire.defaultWindow)
            }
        }
        while let header = HTTP2Wire.peekFrameHeader(bytes) {
            guard header.length <= HTTP2Wire.defaultMaxFrameSize else { return fail() }
            guard bytes.readableBytes >= HTTP2Wire.frameHeaderLength + header.length else { break }
            bytes.moveReaderIndex(forwardBy: HTTP2Wire.frameHeaderLength)
            var payload = bytes.readSlice(length: header.length)!
            guard frame(header, &payload) else { return fail() }
        }
        if bytes.readableBytes > 0 {
            bytes.discardReadBytes()
            inbound = bytes
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func fail() {
        context?.close(promise: nil)
    }

    /// Handles one frame; false on a protocol error (the connection is closed).
    private func frame(_ header: HTTP2Wire.FrameHeader, _ payload: inout ByteBuffer) -> Bool {
        if partial != nil && header.type != HTTP2Wire.FrameType.continuation.rawValue { return false }
        switch HTTP2Wire.FrameType(rawValue: header.type) {
        case .headers:
            var fragment = payload
            if header.flags & HTTP2Wire.Flag.padded != 0 {
                guard let padding = fragment.readInteger(as: UInt8.self), Int(padding) <= fragment.readableBytes else { return false }
                fragment = fragment.readSlice(length: fragment.readableBytes - Int(padding))!
            }
            if header.flags & HTTP2Wire.Flag.priority != 0 { fragment.moveReaderIndex(forwardBy: min(5, fragment.readableBytes)) }
            let endStream = header.flags & HTTP2Wire.Flag.endStream != 0
            if header.flags & HTTP2Wire.Flag.endHeaders != 0 { return request(&fragment, stream: header.stream, endStream: endStream) }
            partial = (header.stream, fragment, endStream)
        case .continuation:
            guard var pending = partial, pending.stream == header.stream else { return false }
            pending.block.writeBuffer(&payload)
            if header.flags & HTTP2Wire.Flag.endHeaders != 0 {
                partial = nil
                return request(&pending.block, stream: pending.stream, endStream: pending.endStream)
            }
            partial = pending
        case .data:
            unacknowledged += header.length
            if unacknowledged >= Self.window / 2 {
                let increment = unacknowledged
                unacknowledged = 0
                write { HTTP2Wire.writeWindowUpdate(&$0, stream: 0, increment: increment) }
            }
            if header.flags & HTTP2Wire.Flag.endStream != 0 { answer(header.stream) }
        case .settings:
            if header.flags & HTTP2Wire.Flag.ack == 0 {
                write { HTTP2Wire.writeFrameHeader(&$0, length: 0, type: .settings, flags: HTTP2Wire.Flag.ack, stream: 0) }
            }
        case .ping:
            if header.flags & HTTP2Wire.Flag.ack == 0 {
                write { buffer in
                    HTTP2Wire.writeFrameHeader(&buffer, length: payload.readableBytes, type: .ping, flags: HTTP2Wire.Flag.ack, stream: 0)
                    buffer.writeBuffer(&payload)
                }
            }
        case .rstStream:
            open[header.stream] = nil
        case .goAway, .pushPromise:
            return false
        case .windowUpdate, .priority, nil:
            break   // answers are HEADERS frames only, which no window holds back
        }
        return true
    }

    /// A request's header block: checked, and answered now when it ends the stream.
    private func request(_ block: inout ByteBuffer, stream: UInt32, endStream: Bool) -> Bool {
        guard let headers = try? decoder.decodeHeaders(from: &block) else { return false }
        var path = "", token = "", topic = "", apnsId = ""
        for (name, value, _) in headers {
            switch name {
            case ":path": path = value
            case "authorization": token = value
            case "apns-topic": topic = value
            case "apns-id": apnsId = value
            default: break
            }
        }
        let valid = path.hasPrefix("/3/device/") && topic == bundleId && verified(token)
        // 403 for a token APNs would not take, 400 for a wrong topic or path, as APNs answers them.
        open[stream] = Request(status: valid ? 200 : (topic == bundleId && path.hasPrefix("/3/device/") ? 403 : 400), apnsId: apnsId)
        if endStream { answer(stream) }
        return true
    }

    /// Whether the `authorization` value is a provider token of a known key and the team.
    private func verified(_ authorization: String) -> Bool {
        if authorization == lastToken { return lastTokenPassed }
        let passed = counts.verified.withLock { $0[authorization] } ?? {
            let passed = Self.verify(authorization, teamId: teamId, keys: keys)
            counts.verified.withLock { $0[authorization] = passed }
            return passed
        }()
        lastToken = authorization
        lastTokenPassed = passed
        return passed
    }

    private static func verify(_ authorization: String, teamId: String, keys: [String: Data]) -> Bool {
        guard authorization.hasPrefix("bearer "), let parts = JWTParts(String(authorization.dropFirst("bearer ".count))),
              parts.header["alg"] as? String == "ES256", let keyId = parts.header["kid"] as? String, let raw = keys[keyId],
              let key = try? P256.Signing.PublicKey(rawRepresentation: raw), parts.claims["iss"] as? String == teamId,
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature) else { return false }
        return key.isValidSignature(signature, for: parts.signingInput)
    }

    private func answer(_ stream: UInt32) {
        guard let request = open.removeValue(forKey: stream) else { return }
        if request.status == 200 {
            counts.taken.wrappingAdd(1, ordering: .relaxed)
        } else {
            counts.refused.wrappingAdd(1, ordering: .relaxed)
        }
        let status = Self.status(request.status)
        // An apns-id is 36 characters; one that would need a longer length prefix is left out.
        let id = request.apnsId.utf8.count < 127 ? request.apnsId : ""
        write { buffer in
            // :status, then apns-id as a literal without indexing (name spelled out).
            let length = status.count + (id.isEmpty ? 0 : 2 + "apns-id".utf8.count + 1 + id.utf8.count)
            HTTP2Wire.writeFrameHeader(&buffer, length: length, type: .headers,
                                       flags: HTTP2Wire.Flag.endHeaders | HTTP2Wire.Flag.endStream, stream: stream)
            buffer.writeBytes(status)
            guard !id.isEmpty else { return }
            buffer.writeInteger(UInt8(0))
            buffer.writeInteger(UInt8("apns-id".utf8.count))
            buffer.writeString("apns-id")
            buffer.writeInteger(UInt8(id.utf8.count))
            buffer.writeString(id)
        }
    }

    /// Writes into this tick's outbound buffer and flushes it at the tick's end.
    private func write(_ body: (inout ByteBuffer) -> Void) {
        body(&outbound)
        guard !flushPending, let context else { return }
        flushPending = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushPending = false
            guard let context = self.context, outbound.readableBytes > 0 else { return }
            let buffer = outbound
            outbound = context.channel.allocator.buffer(capacity: max(16_384, buffer.readableBytes))
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
    }
}
