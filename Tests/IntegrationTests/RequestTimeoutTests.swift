import Foundation
import HTTPTypes
import IMCore
@testable import IMLib
@testable import IMServer
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

/// The request timeout on the event loop's own clock (an embedded loop the test advances): a body
/// earns time by arriving, a trickle does not.
@Suite("The time a request's body may take")
struct RequestTimeoutTests {
    static let owed = ConnectionLimits.requestBodyBytesPerSecondOwed

    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPRequestTimeoutHandler(timeout: .seconds(30)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        try channel.writeInbound(HTTPRequestPart.head(HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1", path: "/media/upload")))
        return channel
    }

    static func body(_ channel: EmbeddedChannel, bytes: Int) throws {
        try channel.writeInbound(HTTPRequestPart.body(ByteBuffer(repeating: 0x61, count: bytes)))
    }

    /// The 408 the handler wrote, if it wrote one.
    static func answer(_ channel: EmbeddedChannel) throws -> (status: Int, body: String)? {
        guard case .head(let head) = try channel.readOutbound(as: HTTPResponsePart.self) else { return nil }
        guard case .body(let body) = try channel.readOutbound(as: HTTPResponsePart.self) else { return nil }
        return (head.status.code, String(buffer: body))
    }

    @Test("a body that keeps arriving at the owed pace goes on past the timeout, and ends unanswered by the handler")
    func steadyBody() throws {
        let channel = try Self.channel()
        // 60 s of a 64 KiB/s upload: each second's bytes earn the second they took.
        for _ in 0..<60 {
            try Self.body(channel, bytes: Self.owed)
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        }
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(120))
        #expect(try Self.answer(channel) == nil)
        #expect(channel.isActive)
        // Everything was passed on to the route.
        var parts = 0
        while try channel.readInbound(as: HTTPRequestPart.self) != nil { parts += 1 }
        #expect(parts == 62)
    }

    @Test("a body that stalls is cut off once its earned time is spent: 408 with 1003, and the connection closed")
    func stalledBody() throws {
        let channel = try Self.channel()
        // 5 s of body earned: the request is due 35 s after its head.
        try Self.body(channel, bytes: 5 * Self.owed)
        channel.embeddedEventLoop.advanceTime(by: .seconds(34))
        #expect(try Self.answer(channel) == nil, "still within the 30 s and the 5 s earned")
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        let answer = try #require(try Self.answer(channel))
        #expect(answer.status == 408 && answer.body.contains(#""code":1003"#), "\(answer)")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "the connection is closed after the answer")
    }

    @Test("a body trickled a byte at a time earns nothing worth having: cut off at the timeout")
    func trickledBody() throws {
        let channel = try Self.channel()
        for _ in 0..<29 {
            try Self.body(channel, bytes: 1)
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        }
        #expect(try Self.answer(channel) == nil)
        // 29 bytes earned under half a millisecond.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1001))
        let answer = try #require(try Self.answer(channel))
        #expect(answer.status == 408)
    }

    @Test("IMLib's upload waits a minute plus the server's pace per 64 KiB; a size from outside the limits does not overflow")
    func clientUploadTimeout() {
        #expect(IMClient.transferTimeout(100 * 1_048_576) == .seconds(60 + 1_600))
        #expect(IMClient.transferTimeout(0) == .seconds(60))
        #expect(IMClient.transferTimeout(-5) == .seconds(60))
        // A size past any upload limit counts as 1 TiB: no overflow of the nanoseconds.
        #expect(IMClient.transferTimeout(.max) == .seconds(60 + (1 << 40) / Int64(Self.owed)))
        #expect(IMClient.transferTimeout(.max) == .seconds(60 + (1 << 40) / 65_536))
    }

    @Test("the next request on the connection starts from its own head: the earlier one's earned time does not carry over")
    func nextRequestStartsAfresh() throws {
        let channel = try Self.channel()
        try Self.body(channel, bytes: 100 * Self.owed)
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        try channel.writeInbound(HTTPRequestPart.head(HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1", path: "/user/getToken.json")))
        channel.embeddedEventLoop.advanceTime(by: .seconds(29))
        #expect(try Self.answer(channel) == nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(try Self.answer(channel)?.status == 408)
    }
}
