import NIOCore
import IMStore

/// The first handler of a session's channel pipeline (next to the socket): writes the session's
/// ready WebSocket bytes and tells the session when the socket takes more. Everything else passes
/// through unchanged. Used on the channel's event loop only.
final class SessionWriteHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?
    /// The session's queue (which holds this handler in turn, until the channel drops the handler).
    var outbound: SessionOutbound?
    /// Whether the socket takes more, as the channel last said (false once the handler is removed).
    private(set) var isWritable = false

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        isWritable = context.channel.isWritable
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        isWritable = false
        outbound = nil
    }

    /// Writes frames and flushes once (a channel that is closed drops them).
    func write(_ frames: [ByteBuffer]) {
        guard let context else { return }
        for frame in frames { context.write(wrapOutboundOut(frame), promise: nil) }
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        isWritable = context.channel.isWritable
        if isWritable { outbound?.writePending() }
        context.fireChannelWritabilityChanged()
    }
}
