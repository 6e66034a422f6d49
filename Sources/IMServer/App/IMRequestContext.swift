import Hummingbird
import HummingbirdCore
import NIOCore
import IMStore

/// The router's request context: Hummingbird's, plus the connection's channel (the console reads
/// the peer's address from it).
struct IMRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
