import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization
import X509

/// One request a local test server got.
public struct TestHTTPRequest: Sendable {
    public var method: String
    /// The path with its query, as sent.
    public var path: String
    /// Header names in lowercase; a repeated header keeps its last value.
    public var headers: [String: String]
    public var body: Data
    /// "HTTP/2" or "HTTP/1.1".
    public var httpVersion: String
    /// Which TCP connection it came on, numbered from 1 in accept order.
    public var connectionId: Int
    /// The client certificate's subject (RFC 4514), when the client presented one.
    public var clientCertificateSubject: String?
    /// The client certificate subject's UID (Apple's push certificates carry the bundle id there).
    public var clientCertificateUID: String?

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// What a local test server does with a request.
public enum TestHTTPAnswer: Sendable {
    case respond(status: Int, headers: [(String, String)] = [], body: Data = Data())
    /// Never answer: the client's timeout is what ends the request.
    case hang
    /// Answer after a while (a slow server), from the connection's event loop.
    indirect case later(milliseconds: Int64, TestHTTPAnswer)
    /// HTTP/2: a GOAWAY (NO_ERROR) first, naming this request's stream the last one processed, or
    /// the one before it (`processed` false: this request is given up unanswered, as RFC 9113 §6.8
    /// allows); then `then`. Over HTTP/1.1 just `then`.
    indirect case goAway(processed: Bool, then: TestHTTPAnswer)

    /// Carries the answer out on `eventLoop` (the connection's, where the request was read):
    /// nothing for `.hang`, `write` after the delay for `.later`, `write` now for `.respond`.
    func carryOut(on eventLoop: any EventLoop, _ write: @escaping (_ status: Int, _ headers: [(String, String)], _ body: Data) -> Void) {
        switch self {
        case .hang:
            return
        case .later(let milliseconds, let then):
            eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) { then.carryOut(on: eventLoop, write) }
        case .goAway(_, let then):
            then.carryOut(on: eventLoop, write)
        case .respond(let status, let headers, let body):
            write(status, headers, body)
        }
    }

    public static func json(_ status: Int, _ object: Any, headers: [(String, String)] = []) -> TestHTTPAnswer {
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return .respond(status: status, headers: [("content-type", "application/json")] + headers, body: body)
    }
}

/// An HTTP server on 127.0.0.1 for the push providers' tests: TLS with ALPN (HTTP/2, or
/// HTTP/1.1 for clients that ask for it), or plain HTTP/1.1. Each request is answered on its
/// connection's event loop by `respond`, which must not block.
public final class TestHTTPServer: Sendable {
    public let port: Int
    /// `https://127.0.0.1:<port>` with TLS, `http://…` without.
    public let baseURL: String
    private let channel: any Channel
    private let connections: Locked<Connections>

    private struct Connections {
        var accepted = 0
        var open: [Int: any Channel] = [:]
    }

    /// Starts listening. `tls` nil: plain HTTP/1.1. `eventLoopGroup` nil: NIO's shared one.
    /// `initialWindowSize`: the HTTP/2 SETTINGS_INITIAL_WINDOW_SIZE it announces (how many body
    /// bytes a client may send on a stream before the server gives window back);
    /// `maxConcurrentStreams` its SETTINGS_MAX_CONCURRENT_STREAMS.
    public init(tls: TLSConfiguration?, eventLoopGroup: (any EventLoopGroup)? = nil, initialWindowSize: Int = 1 << 20,
                maxConcurrentStreams: Int = 1000,
                respond: @escaping @Sendable (TestHTTPRequest) -> TestHTTPAnswer) async throws {
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0) }
        let connections = Locked(Connections())
        self.connections = connections
        var h2 = NIOHTTP2Handler.ConnectionConfiguration()
        h2.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .initialWindowSize, value: initialWindowSize),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
        ]
        let connectionConfiguration = h2

        channel = try await ServerBootstrap(group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let id = connections.withLock { state in
                    state.accepted += 1
                    state.open[state.accepted] = channel
                    return state.accepted
                }
                channel.closeFuture.whenComplete { _ in _ = connections.withLock { $0.open.removeValue(forKey: id) } }
                let connection = ConnectionInfo(id: id, channel: channel)
                let http1: NIOChannelInitializer = { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(RequestHandler(connection: connection, version: "HTTP/1.1", respond: respond))
                    }
                }
                guard let sslContext else { return http1(channel) }
                let http2: NIOChannelInitializer = { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connectionConfiguration))
                        try channel.pipeline.syncOperations.addHandler(TestHTTP2FrameHandler(connection: connection, respond: respond))
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(h2ChannelConfigurator: http2, http1ChannelConfigurator: http1)
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        port = channel.localAddress?.port ?? 0
        baseURL = "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)"
    }

    /// TCP connections accepted so far.
    public var connectionsAccepted: Int { connections.withLock { $0.accepted } }

    /// Closes every open connection (the listener stays): a server restart or a dropped link as
    /// the client sees it.
    public func closeConnections() async {
        let open = connections.withLock { Array($0.open.values) }
        for connection in open { try? await connection.close() }
    }

    /// Closes the listener and every open connection.
    public func stop() async {
        let open = connections.withLock { Array($0.open.values) }
        for connection in open { connection.close(promise: nil) }
        try? await channel.close()
    }
}

/// What the request handlers of one connection share: its number, and its client certificate
/// (read once, from the connection's TLS handler).
final class ConnectionInfo: Sendable {
    let id: Int
    /// The accepted TCP connection (the parent of its HTTP/2 streams).
    private let connection: any Channel
    private let certificate = Mutex<(subject: String?, uid: String?)?>(nil)

    init(id: Int, channel: any Channel) {
        self.id = id
        self.connection = channel
    }

    /// Called on the connection's event loop (HTTP/2 streams share their connection's loop).
    /// A request that arrived on this connection, with its client certificate.
    func request(method: String, path: String, headers: [String: String], body: ByteBuffer, version: String) -> TestHTTPRequest {
        let certificate = clientCertificate()
        return TestHTTPRequest(method: method, path: path, headers: headers, body: Data(body.readableBytesView), httpVersion: version,
                               connectionId: id, clientCertificateSubject: certificate.subject, clientCertificateUID: certificate.uid)
    }

    private func clientCertificate() -> (subject: String?, uid: String?) {
        if let known = certificate.withLock({ $0 }) { return known }
        var found: (subject: String?, uid: String?) = (nil, nil)
        if let peer = try? connection.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate,
           let der = try? peer.toDERBytes(), let parsed = try? Certificate(derEncoded: der) {
            found.subject = parsed.subject.description
            for rdn in parsed.subject {
                for attribute in rdn where attribute.type == TestCertificateAuthority.userIdOID {
                    found.uid = String(attribute.value)
                }
            }
        }
        certificate.withLock { $0 = found }
        return found
    }
}

/// Gathers one HTTP/1.1 request and writes the answer (HTTP/2: `TestHTTP2FrameHandler`).
private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let connection: ConnectionInfo
    private let version: String
    private let respond: @Sendable (TestHTTPRequest) -> TestHTTPAnswer
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(connection: ConnectionInfo, version: String, respond: @escaping @Sendable (TestHTTPRequest) -> TestHTTPAnswer) {
        self.connection = connection
        self.version = version
        self.respond = respond
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
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let request = connection.request(method: head.method.rawValue, path: head.uri, headers: headers, body: body, version: version)
            respond(request).carryOut(on: context.eventLoop) { status, extraHeaders, responseBody in
                self.write(status: status, headers: extraHeaders, body: responseBody, to: head, context: context)
            }
        }
    }

    private func write(status: Int, headers extraHeaders: [(String, String)], body responseBody: Data, to head: HTTPRequestHead,
                       context: ChannelHandlerContext) {
        var responseHeaders = HTTPHeaders(extraHeaders)
        responseHeaders.replaceOrAdd(name: "content-length", value: String(responseBody.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status),
                                                             headers: responseHeaders))), promise: nil)
        if !responseBody.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: responseBody)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
