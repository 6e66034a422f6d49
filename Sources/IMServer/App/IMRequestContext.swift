import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import NIOCore
import IMStore

/// The router's request context: Hummingbird's WebSocket context, plus the connection's channel,
/// to which a session's `SessionOutbound` writes its frames directly on the channel's event loop.
struct IMRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
