import AsyncHTTPClient
import Foundation
import IMServer
import NIOCore
import NIOHTTP1
import NIOPosix

/// Callbacks over async-http-client: a pool of keep-alive connections per app server (HTTP/1.1,
/// or HTTP/2 where the server offers it), no redirects followed (a callback goes only to the URL
/// the app configured), answers read up to 64 KB.
public final class HTTPCallbackTransport: CallbackTransport {
    private let client: HTTPClient
    private let ownLoops: MultiThreadedEventLoopGroup?

    /// `eventLoopGroup` nil: an event loop thread of its own (the server's background I/O).
    /// `connectionsPerHost`: the pool's bound per app server.
    public init(eventLoopGroup: (any EventLoopGroup)? = nil, connectionsPerHost: Int = 64) {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.httpVersion = .automatic
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHost
        // A connection that cannot be made fails at once: the callback service owns the retries.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.decompression = .disabled
        let loops = eventLoopGroup == nil ? MultiThreadedEventLoopGroup(numberOfThreads: 1) : nil
        ownLoops = loops
        client = HTTPClient(eventLoopGroup: eventLoopGroup ?? loops!, configuration: configuration)
    }

    public func post(_ request: CallbackRequest, timeout: Duration) async throws -> CallbackResponse {
        var http = HTTPClientRequest(url: request.url)
        http.method = .POST
        http.headers.add(name: "Content-Type", value: request.contentType)
        http.headers.add(name: "User-Agent", value: "imserver-callbacks")
        for (name, value) in request.headers { http.headers.add(name: name, value: value) }
        http.body = .bytes(ByteBuffer(bytes: request.body))
        let response = try await client.execute(http, timeout: TimeAmount(timeout))
        let body = try await response.body.collect(upTo: 64 << 10)
        return CallbackResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
    }

    public func shutdown() async {
        try? await client.shutdown()
        try? await ownLoops?.shutdownGracefully()
    }
}
