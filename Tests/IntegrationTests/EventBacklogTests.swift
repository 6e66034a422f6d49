import Testing
@testable import IMServer

/// The backlog the push decider reads its events through (`EventBacklog`): everything it is given
/// comes out once, in order, as much as has gathered at a time, and no more than its limit is held.
@Suite("Event backlog")
struct EventBacklogTests {
    static func event(_ number: Int) -> ServerEvent {
        .sessionOnline(SessionPresence(appId: 1, userId: "u\(number)", sessionId: "s\(number)", platform: "iOS", deviceId: ""))
    }

    /// A finished stream of events 1 through `count`.
    static func stream(_ count: Int) -> AsyncStream<ServerEvent> {
        let (stream, input) = AsyncStream.makeStream(of: ServerEvent.self)
        for number in 1...count { input.yield(event(number)) }
        input.finish()
        return stream
    }

    static func numbers(_ events: [ServerEvent]) -> [Int] {
        events.compactMap { event in
            guard case .sessionOnline(let presence) = event else { return nil }
            return Int(presence.userId.dropFirst())
        }
    }

    @Test("events gathered while nobody takes come out together, in order; the stream's end comes after the last")
    func gathersInOrder() async {
        let backlog = EventBacklog(limit: 100)
        await backlog.fill(from: Self.stream(5))
        let taken = await backlog.take()
        #expect(Self.numbers(taken ?? []) == [1, 2, 3, 4, 5])
        let end = await backlog.take()
        #expect(end == nil, "the stream ended and every event was taken")
    }

    @Test("past its limit the backlog holds no more: the reader waits until the taker makes room, and nothing is lost")
    func limitHolds() async {
        let backlog = EventBacklog(limit: 3)
        let reader = Task { await backlog.fill(from: Self.stream(20)) }
        var seen: [Int] = []
        while let taken = await backlog.take() {
            #expect(taken.count <= 3, "a take gave \(taken.count) events, past the limit of 3")
            seen += Self.numbers(taken)
        }
        await reader.value
        #expect(seen == Array(1...20))
    }
}
