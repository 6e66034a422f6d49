import Crypto
import Foundation
import IMPush
import IMPushProviders
import IMServerTesting
import NIOCore
import Synchronization

/// A clock the test moves by hand; the transport and the servers read it.
final class TestClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date = Date()) { current = Mutex(Date(timeIntervalSince1970: start.timeIntervalSince1970.rounded(.down))) }

    var date: Date { current.withLock { $0 } }
    var seconds: Int { Int(date.timeIntervalSince1970) }
    var now: @Sendable () -> Date { { [self] in date } }

    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// Runs `body` with a transport and shuts it down however `body` ends.
func withTransport<T>(_ endpoints: PushEndpoints, now: @escaping @Sendable () -> Date = { Date() },
                      eventLoopGroup: (any EventLoopGroup)? = nil,
                      _ body: (ProviderPushTransport) async throws -> T) async throws -> T {
    let transport = try ProviderPushTransport(endpoints: endpoints, now: now, eventLoopGroup: eventLoopGroup)
    do {
        let result = try await body(transport)
        await transport.shutdown()
        return result
    } catch {
        await transport.shutdown()
        throw error
    }
}

/// Lowercase hex.
func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// A 64-character hex device token, different for each `n`.
func deviceToken(_ n: Int) -> String { hex(SHA256.hash(data: Data("device-\(n)".utf8))) }

/// RongCloud's `rc` object for a private text message.
let sampleRC = ["cType": "PR", "fId": "2121", "oName": "RC:TxtMsg", "tId": "3232", "rId": "3243", "id": "5FSClm2gQ9V9BZ-kUZn58B"]

/// Sends until delivered, at most `tries` times: a warm-up before a short-timeout test, whose
/// first connection (TLS, trust roots, a token exchange) may outlast that timeout on a busy machine.
func warmUp(_ transport: ProviderPushTransport, _ notification: PushNotification, to target: PushTarget,
            credentials: PushCredentials, tries: Int = 5) async -> PushOutcome {
    var outcome = await transport.send(notification, to: target, credentials: credentials)
    for _ in 1..<tries {
        guard case .retry = outcome else { break }
        outcome = await transport.send(notification, to: target, credentials: credentials)
    }
    return outcome
}
