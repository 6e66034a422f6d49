import Foundation
import HTTPTypes
import HummingbirdCore
import IMCore
import IMStore
import NIOCore
import NIOHTTPTypes

/// Bounds the time a request may take to arrive: from its head to the end of its body, `timeout`
/// plus one second for every `bytesPerSecondOwed` bytes of body that arrived. A large upload on a
/// slow link goes on as long as it keeps that pace; a body trickled a byte at a time earns
/// microseconds and holds nothing for long. A request past its time is answered 408 (when no
/// response has started) and its connection closed, whatever route it was for. (Hummingbird's idle
/// timeout restarts on every body chunk, whatever its size; this one does not.)
final class HTTPRequestTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private let bytesPerSecondOwed: Int64
    private var deadline: Scheduled<Void>?
    /// When the request is due, moved later by the body that arrives; the timer, set for an
    /// earlier time, looks again when it fires rather than being set anew for every chunk.
    private var due = NIODeadline.distantFuture
    private var responded = false
    /// The request ran out of time: the rest of it is never read, so its handler never runs.
    private var expired = false

    init(timeout: TimeAmount, bytesPerSecondOwed: Int = ConnectionLimits.requestBodyBytesPerSecondOwed) {
        self.timeout = timeout
        self.bytesPerSecondOwed = Int64(max(bytesPerSecondOwed, 1))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !expired else { return }
        switch unwrapInboundIn(data) {
        case .head:
            responded = false
            deadline?.cancel()
            due = context.eventLoop.now + timeout
            wait(context, until: due)
        case .body(let chunk):
            due = due + .nanoseconds(Int64(chunk.readableBytes) * 1_000_000_000 / bytesPerSecondOwed)
        case .end:
            deadline?.cancel()
            deadline = nil
            due = .distantFuture
        }
        context.fireChannelRead(data)
    }

    private func wait(_ context: ChannelHandlerContext, until time: NIODeadline) {
        deadline = context.eventLoop.assumeIsolated().scheduleTask(deadline: time) { [self] in
            deadline = nil
            if context.eventLoop.now < due {
                wait(context, until: due)
            } else {
                expire(context)
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head = unwrapOutboundIn(data) { responded = true }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    private func expire(_ context: ChannelHandlerContext) {
        expired = true
        guard !responded else {
            context.close(promise: nil)
            return
        }
        responded = true
        let seconds = timeout.nanoseconds / 1_000_000_000
        let body = (try? JSONSerialization.data(withJSONObject: [
            "code": ErrorCode.apiNoPostData.rawValue,
            "errorMessage": "the request did not arrive in time (\(seconds) s after its head, and 1 s more for each \(bytesPerSecondOwed / 1024) KiB of body): send the whole body at a steady pace",
        ], options: [.sortedKeys])) ?? Data()
        let head = HTTPResponse(status: .requestTimeout, headerFields: [
            .contentType: "application/json; charset=utf-8", .connection: "close", .contentLength: "\(body.count)",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in closeAfterAnswer(context) }
    }
}
