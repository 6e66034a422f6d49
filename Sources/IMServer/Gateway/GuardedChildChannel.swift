import HummingbirdCore
import Logging
import NIOCore
import IMStore

/// Hummingbird's HTTP/1 + WebSocket child channel with `ConnectionGuardHandler` in front.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value

    let inner: Inner
    let addresses: AddressConnections
    let shutdown: ServerShutdown
    let firstRequestTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuardHandler(addresses: addresses, shutdown: shutdown, firstRequestTimeout: firstRequestTimeout))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension Channel {
    /// Tells the connection's guard that the gateway has taken the connection over.
    func markWebSocketSession() {
        eventLoop.execute {
            try? self.pipeline.syncOperations.handler(type: ConnectionGuardHandler.self).enteredWebSocket()
        }
    }
}
