import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The HTTP/2 side of `TestHTTPServer`: requests read from the connection's frames, without a
/// child channel per stream (a channel, a pipeline and an HTTP/1 codec per request): in the push
/// benchmark the local APNs cost the box 39 µs per push with them, 26 µs without. A request is a
/// dictionary entry until its last frame, and the answer one or two frames. Windows are given back
/// as NIOHTTP2Handler reports them falling (`NIOHTTP2WindowUpdatedEvent`), which counts every byte
/// that used them up, padding and frames it dropped included. Confined to its connection's event
/// loop.
final class TestHTTP2FrameHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var method = ""
        var path = ""
        var headers: [String: String] = [:]
        var body = ByteBuffer()
    }

    private let connection: ConnectionInfo
    private let respond: @Sendable (TestHTTPRequest) -> TestHTTPAnswer
    private var streams: [HTTP2StreamID: Stream] = [:]
    /// The connection's receive window, opened wide at the start (HTTP/2 begins every connection
    /// at 65,535 bytes whatever the settings say) and topped up at half: a client with a thousand
    /// requests in flight is never held back by it, and answers come in the order the requests
    /// did. Without a multiplexer nothing but this handler gives windows back.
    static let connectionWindow = 16 << 20
    /// A stream's receive window (the initial window `TestHTTPServer` announces), topped up at half.
    static let streamWindow = 1 << 20
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
            guard streams[id] != nil else { return }
            // Appended in place: a copy of the stream would copy its body so far for every frame.
            if case .byteBuffer(var bytes) = payload.data { streams[id]?.body.writeBuffer(&bytes) }
            if payload.endStream { finish(id, context: context) }
        case .rstStream:
            streams[id] = nil
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let window as NIOHTTP2WindowUpdatedEvent:
            guard let size = window.inboundWindowSize else { break }
            let target = window.streamID == .rootStream ? Self.connectionWindow : Self.streamWindow
            // A stream's window matters only while its request is still arriving.
            guard size < target / 2, window.streamID == .rootStream || streams[window.streamID] != nil else { break }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: window.streamID, payload: .windowUpdate(windowSizeIncrement: target - size))),
                          promise: nil)
            scheduleFlush(context)
        case let closed as StreamClosedEvent:
            // Ended by a reset, an error or GOAWAY, either side: its request will not finish.
            streams[closed.streamID] = nil
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func finish(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        let request = connection.request(method: stream.method, path: stream.path, headers: stream.headers, body: stream.body,
                                         version: "HTTP/2")
        var answer = respond(request)
        if case .goAway(let processed, let then) = answer {
            let last = processed ? id : (Int(id) > 2 ? HTTP2StreamID(Int(id) - 2) : .rootStream)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil))),
                          promise: nil)
            scheduleFlush(context)
            answer = then
        }
        answer.carryOut(on: context.eventLoop) { status, headers, body in
            self.write(status: status, headers: headers, body: body, on: id, context: context)
        }
    }

    /// The answer as HEADERS, and DATA when it has a body. (To a stream the client has reset
    /// meanwhile the write fails as an outbound stream error: `errorCaught`.)
    private func write(status: Int, headers extraHeaders: [(String, String)], body: Data, on id: HTTP2StreamID,
                       context: ChannelHandlerContext) {
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

    /// One flush at the end of the event loop tick for every answer written in it.
    private func scheduleFlush(_ context: ChannelHandlerContext) {
        guard !flushPending else { return }
        flushPending = true
        context.eventLoop.assumeIsolated().execute {
            self.flushPending = false
            context.flush()
        }
    }

    /// NIOHTTP2Handler has already acted on a protocol error (reset the stream, or sent GOAWAY and
    /// closed the connection); the streams it ended are dropped when their `StreamClosedEvent`
    /// arrives. An answer written to a stream the client reset fails as an outbound stream error.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            streams[streamError.streamID] = nil
            return
        }
        context.fireErrorCaught(error)
    }
}
