import Foundation
import IMCore
import IMPushTesting
import IMServer
import NIOPosix

/// The app's server for the callback scenarios: plain HTTP/1.1 on 127.0.0.1 (IMPushTesting's
/// `TestHTTPServer` on an event loop of its own, keep-alive) that takes full message routing at
/// `/routing` and answers the message callback at `/review` with `{"pass":1}` (deliver
/// unchanged). It checks RongCloud's
/// signature on every call, keeps the msgUID of every routed message (to tell a loss or a duplicate)
/// and the routing lag: the receipt time minus the message's msgTimestamp (the server's commit time).
/// With an answer delay it plays a slow app server: every answer leaves that long after its request.
final class CallbackTarget: Sendable {
    struct Tally: Sendable {
        var routed = Set<String>()
        var routingCalls = 0
        var duplicates = 0
        var reviewed = Set<String>()
        var reviewCalls = 0
        var badSignatures = 0
        var malformed = 0
        var routingLag = LatencyHistogram()
    }

    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)" }
    private let group: MultiThreadedEventLoopGroup
    private let server: TestHTTPServer
    private let state: Locked<Tally>

    static func start(appKey: String, appSecret: String, answerDelayMilliseconds: Int64 = 0) async throws -> CallbackTarget {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = Locked(Tally())
        let server = try await TestHTTPServer(tls: nil, eventLoopGroup: group) { request in
            let body = take(request, appKey: appKey, appSecret: appSecret, state: state)
            let answer = TestHTTPAnswer.respond(status: 200, headers: [("content-type", body.isEmpty ? "text/plain" : "application/json")],
                                                body: Data(body.utf8))
            return answerDelayMilliseconds > 0 ? .later(milliseconds: answerDelayMilliseconds, answer) : answer
        }
        return CallbackTarget(port: server.port, group: group, server: server, state: state)
    }

    private init(port: Int, group: MultiThreadedEventLoopGroup, server: TestHTTPServer, state: Locked<Tally>) {
        self.port = port
        self.group = group
        self.server = server
        self.state = state
    }

    var tally: Tally { state.withLock { $0 } }
    var routedCount: Int { state.withLock { $0.routed.count } }
    var reviewedCount: Int { state.withLock { $0.reviewed.count } }

    func stop() async {
        await server.stop()
        try? await group.shutdownGracefully()
    }

    /// Records a call and returns the body of its answer.
    private static func take(_ request: TestHTTPRequest, appKey: String, appSecret: String, state: Locked<Tally>) -> String {
        let parts = request.path.split(separator: "?", maxSplits: 1)
        let path = parts.first.map(String.init) ?? ""
        let query = parts.count > 1 ? fields(parts[1]) : [:]
        let timestamp = String(query["timestamp"] ?? "")
        let signed = !timestamp.isEmpty && query["appKey"].map(String.init) == appKey && query["signTimestamp"].map(String.init) == timestamp
            && query["signature"].map(String.init) == APISignature.sign(secret: appSecret, nonce: String(query["nonce"] ?? ""), timestamp: timestamp)
        let form = fields(Substring(String(decoding: request.body, as: UTF8.self)))
        let receivedAt = Int64(Date().timeIntervalSince1970 * 1000)
        return state.withLock { tally in
            if !signed { tally.badSignatures += 1 }
            switch path {
            case "/routing":
                tally.routingCalls += 1
                guard let uid = form["msgUID"].map(String.init), !uid.isEmpty, let sentAt = form["msgTimestamp"].flatMap({ Int64($0) }) else {
                    tally.malformed += 1
                    return ""
                }
                if !tally.routed.insert(uid).inserted { tally.duplicates += 1 }
                tally.routingLag.record(nanos: UInt64(max(0, receivedAt - sentAt)) * 1_000_000)
                return ""
            case "/review":
                tally.reviewCalls += 1
                if let id = form["messageId"], !id.isEmpty { tally.reviewed.insert(String(id)) } else { tally.malformed += 1 }
                return #"{"pass":1}"#
            default:
                tally.malformed += 1
                return ""
            }
        }
    }

    /// The fields of a query or form body, as sent: the fields read here (ids, timestamps, the
    /// signature's) carry no escapes, and the message's content is not decoded.
    private static func fields(_ text: Substring) -> [String: Substring] {
        var fields: [String: Substring] = [:]
        for pair in text.split(separator: "&") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            fields[String(pair[..<equals])] = pair[pair.index(after: equals)...]
        }
        return fields
    }
}
