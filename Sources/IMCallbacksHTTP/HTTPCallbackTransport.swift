import AsyncHTTPClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import IMServer
import NIOCore
import NIOHTTP1
import NIOPosix

/// Callbacks over async-http-client: pools of keep-alive connections per app server (HTTP/1.1,
/// or HTTP/2 where the server offers it), no redirects followed (a callback goes only to the URL
/// the app configured), answers read up to 64 KB. Two clients, each on an event loop thread of its
/// own: the message callback, which a message waits for, at normal priority; routing, status and
/// chatroom callbacks from the outbox at `backgroundThreadNice`, so that on a busy machine the
/// gateway and the message callback get the cores first.
public final class HTTPCallbackTransport: CallbackTransport {
    private let waitedFor: HTTPClient
    private let background: HTTPClient
    private let loops: [MultiThreadedEventLoopGroup]

    /// `connectionsPerHost`: each pool's bound per app server.
    public init(connectionsPerHost: Int = 256, backgroundThreadNice: Int32 = 0) {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.httpVersion = .automatic
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHost
        // A connection that cannot be made fails at once: the callback service owns the retries.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.decompression = .disabled
        let urgent = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let slow = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        if backgroundThreadNice != 0 {
            _ = try? slow.next().submit {
                #if canImport(Glibc)
                // On Linux a nice value is per thread: PRIO_PROCESS with 0 is the calling thread.
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, backgroundThreadNice)
                #endif
            }.wait()
        }
        loops = [urgent, slow]
        waitedFor = HTTPClient(eventLoopGroup: urgent, configuration: configuration)
        background = HTTPClient(eventLoopGroup: slow, configuration: configuration)
    }

    public func post(_ request: CallbackRequest, timeout: Duration) async throws -> CallbackResponse {
        var http = HTTPClientRequest(url: request.url)
        http.method = .POST
        http.headers.add(name: "Content-Type", value: request.contentType)
        http.headers.add(name: "User-Agent", value: "imserver-callbacks")
        for (name, value) in request.headers { http.headers.add(name: name, value: value) }
        http.body = .bytes(ByteBuffer(bytes: request.body))
        let client = request.waitedFor ? waitedFor : background
        let response = try await client.execute(http, timeout: TimeAmount(timeout))
        let body = try await response.body.collect(upTo: 64 << 10)
        return CallbackResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
    }

    public func shutdown() async {
        try? await waitedFor.shutdown()
        try? await background.shutdown()
        for group in loops { try? await group.shutdownGracefully() }
    }
}
