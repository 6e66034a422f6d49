import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The HTTP/2 side of `TestHTTPServer`: requests read from the connection's frames, without a
/// child channel per stream. A stream multiplexer made the local APNs cost the benchmark's box
/// about 39 µs per push (a channel, a pipeline and an HTTP/1 codec per request); here a request
/// is a dictionary entry until its last frame, and the answer two frames. Confined to its
/// connection's event loop.
final class TestHTTP2FrameHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var method = ""
        var path = ""
        var headers: [String: String] = [:]
        var body = ByteBuffer()
        /// DATA bytes taken on this stream since its window was last given back.
        var unacknowledged = 0
    }

    private let connection: ConnectionInfo
    private let respond: @Sendable (TestHTTPRequest) -> TestHTTPAnswer
    private var streams: [HTTP2StreamID: Stream] = [:]
    /// DATA bytes taken on the connection since its window was last given back (without a
    /// multiplexer nothing else gives it back).
    private var unacknowledged = 0
    /// The connection's receive window, opened wide at the start (HTTP/2 begins every connection
    /// at 65,535 bytes whatever the settings say): a client with a thousand requests in flight
    /// is never held back by it, and answers come in the order the requests did.
    static let connectionWindow = 16 << 20
    private var flushPending = false

    init(connection: ConnectionInfo, respond: @escaping @Sendable (TestHTTPRequest) -> TestHTTPAnswer) {
        self.connection = connection
        self.respond = respond
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let increment = Self.connectionWindow - 65_535
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
                              promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let payload):
            // A second HEADERS on a stream (trailers) adds nothing a test reads.
            if streams[id] == nil {
                var stream = Stream()
                for (name, value, _) in payload.headers {
                    switch name {
                    case ":method": stream.method = value
                    case ":path": stream.path = value
                    // As HTTP/1.1's Host (RFC 9113 §8.3.1), where tests read it.
                    case ":authority": stream.headers["host"] = value
                    case _ where name.hasPrefix(":"): break
                    default: stream.headers[name.lowercased()] = value
                    }
                }
                streams[id] = stream
            }
            if payload.endStream { finish(id, context: context) }
        case .data(let payload):
            let length = payload.data.readableBytes + (payload.paddingBytes ?? 0)
            unacknowledged += length
            if unacknowledged >= Self.connectionWindow / 4 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledged))),
                              promise: nil)
                unacknowledged = 0
                scheduleFlush(context)
            }
            guard var stream = streams[id] else { return }
            if case .byteBuffer(var bytes) = payload.data { stream.body.writeBuffer(&bytes) }
            stream.unacknowledged += length
            if !payload.endStream && stream.unacknowledged >= 32_768 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .windowUpdate(windowSizeIncrement: stream.unacknowledged))),
                              promise: nil)
                stream.unacknowledged = 0
                scheduleFlush(context)
            }
            streams[id] = stream
            if payload.endStream { finish(id, context: context) }
        case .rstStream:
            streams[id] = nil
        default:
            break
        }
    }

    private func finish(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        let certificate = connection.clientCertificate()
        let request = TestHTTPRequest(method: stream.method, path: stream.path, headers: stream.headers,
                                      body: Data(stream.body.readableBytesView), httpVersion: "HTTP/2", connectionId: connection.id,
                                      clientCertificateSubject: certificate.subject, clientCertificateUID: certificate.uid)
        answer(respond(request), on: id, context: context)
    }

    private func answer(_ answer: TestHTTPAnswer, on id: HTTP2StreamID, context: ChannelHandlerContext) {
        switch answer {
        case .hang:
            return
        case .later(let milliseconds, let then):
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                guard context.channel.isActive else { return }
                self.answer(then, on: id, context: context)
            }
        case .respond(let status, let extraHeaders, let body):
            var headers = HPACKHeaders()
            headers.add(name: ":status", value: String(status))
            for (name, value) in extraHeaders where name.lowercased() != "content-length" {
                headers.add(name: name.lowercased(), value: value)
            }
            headers.add(name: "content-length", value: String(body.count))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body.isEmpty)))),
                          promise: nil)
            if !body.isEmpty {
                let bytes = context.channel.allocator.buffer(bytes: body)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(bytes), endStream: true)))),
                              promise: nil)
            }
            scheduleFlush(context)
        }
    }

    /// One flush at the end of the event loop tick for every answer written in it.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        guard !flushPending else { return }
        flushPending = true
        context.eventLoop.assumeIsolated().execute {
            self.flushPending = false
            context.flush()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream's error (the client reset it, or broke its rules) ends that stream only.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            streams[streamError.streamID] = nil
            return
        }
        context.close(promise: nil)
    }
}
