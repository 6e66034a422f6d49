import Crypto
import Foundation
import NIOCore

/// The client side of the WebSocket opening handshake (RFC 6455 §4), the first handler of a
/// benchmark connection: sends `GET /ws` with the upgrade headers, checks the `101` answer and its
/// `Sec-WebSocket-Accept`, then tells the handler after it (`Opened`), which does the WebSocket framing
/// itself (`WebSocketFrameReader`), and removes itself. A connection that is refused is closed with an error.
final class WebSocketHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Fired down the pipeline when the connection speaks WebSocket.
    struct Opened {}

    struct Refused: Error, CustomStringConvertible {
        var description: String
    }

    private let host: String
    private let path: String
    private let key: String
    private var received: ByteBuffer?

    init(host: String, path: String) {
        self.host = host
        self.path = path
        var random = SystemRandomNumberGenerator()
        self.key = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString()
    }

    func channelActive(context: ChannelHandlerContext) {
        let request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if received == nil {
            received = bytes
        } else {
            received!.writeBuffer(&bytes)
        }
        guard var buffer = received, let end = buffer.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if (received?.readableBytes ?? 0) > 16_384 { fail(context, "the upgrade answer has no end") }
            return
        }
        let headerLength = end.upperBound - buffer.readerIndex
        let head = buffer.readString(length: headerLength) ?? ""
        let lines = head.split(separator: "\r\n")
        guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
            fail(context, "the server did not upgrade to WebSocket: \(lines.first ?? "")")
            return
        }
        let accept = lines.dropFirst().first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
            .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
        let expected = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        guard accept == expected else {
            fail(context, "wrong Sec-WebSocket-Accept in the upgrade answer")
            return
        }
        received = nil
        context.fireUserInboundEventTriggered(Opened())
        // Frames that came with the answer go on to the client.
        if buffer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func fail(_ context: ChannelHandlerContext, _ reason: String) {
        context.fireErrorCaught(Refused(description: reason))
        context.close(promise: nil)
    }

    typealias InboundOut = ByteBuffer
}
