import Foundation
import HTTPTypes
import HummingbirdCore
import IMCore
import IMStore
import NIOCore
import NIOHTTPTypes

/// Bounds the time a request may take to arrive: from its head to the end of its body, at most
/// `timeout`. A request past it is answered 408 (when no response has started) and its connection
/// closed, whatever route it was for, so a body trickled a byte at a time holds nothing for long.
/// (Hummingbird's idle timeout restarts on every body chunk; this one does not.)
final class HTTPRequestTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var responded = false
    /// The request ran out of time: the rest of it is never read, so its handler never runs.
    private var expired = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !expired else { return }
        switch unwrapInboundIn(data) {
        case .head:
            responded = false
            deadline?.cancel()
            let loop = context.eventLoop.assumeIsolated()
            let timeout = self.timeout
            deadline = loop.scheduleTask(in: timeout) { [self] in
                deadline = nil
                expire(context, after: timeout)
            }
        case .body:
            break
        case .end:
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head = unwrapOutboundIn(data) { responded = true }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    private func expire(_ context: ChannelHandlerContext, after timeout: TimeAmount) {
        expired = true
        guard !responded else {
            context.close(promise: nil)
            return
        }
        responded = true
        let seconds = timeout.nanoseconds / 1_000_000_000
        let body = (try? JSONSerialization.data(withJSONObject: [
            "code": ErrorCode.apiNoPostData.rawValue,
            "errorMessage": "the request did not arrive within \(seconds) s: send the whole body at once",
        ], options: [.sortedKeys])) ?? Data()
        let head = HTTPResponse(status: .requestTimeout, headerFields: [
            .contentType: "application/json; charset=utf-8", .connection: "close", .contentLength: "\(body.count)",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in closeAfterAnswer(context) }
    }
}
