import Foundation
import IMCore
import IMKit
import IMLib
import IMServerTesting
import Testing

/// Real-time location sharing (spec imkit-and-overview.md §3.14.17): the state machine, the
/// banner rules, the notices and the session's time rules, between two kits on a real server.
@Suite("IMKit location sharing")
struct LocationSharingTests {
    static func status(_ recorder: EventRecorder<LocationShareEvent>, _ status: LocationShareStatus) async -> Bool {
        await recorder.first(timeout: .seconds(60)) { $0 == .statusChanged(status) } != nil
    }

    @Test("IDLE → OUTGOING → CONNECTED with INCOMING for the peer; banners, join and quit notices for 0.5 s, positions, the end card from the last one out")
    func stateMachineAndBanner() async throws {
        // Minutes of sharing happen here within a second of real time: more than the 5 messages a
        // second the server takes from one client by default (the screen's read sync counts too).
        try await withTestServer(try await TestServer.start { $0.session.clientSendsPerSecond = 50 }) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let alice = try await IMKitModelTests.kit(server, "alice", clock: clock)
            let bob = try await IMKitModelTests.kit(server, "bob", clock: clock)
            let aliceChat = alice.conversation(.private, targetId: "bob")
            let bobChat = bob.conversation(.private, targetId: "alice")
            try await aliceChat.open()
            try await bobChat.open()
            let aliceSession = try alice.locationShare(targetId: "bob")
            let bobSession = try bob.locationShare(targetId: "alice")
            #expect(try alice.locationShare(targetId: "bob") === aliceSession, "one session per conversation")
            #expect(await aliceSession.status == .idle)
            #expect(await aliceSession.banner() == nil)
            let aliceEvents = EventRecorder(await aliceSession.events())
            let bobEvents = EventRecorder(await bobSession.events())

            // Alice starts: she is OUTGOING, Bob INCOMING with Alice's name (her id: no provider).
            try await aliceChat.shareLocation()
            #expect(await aliceSession.status == .outgoing)
            #expect(await aliceSession.banner() == "You are sharing your location")
            #expect(await Self.status(bobEvents, .incoming))
            #expect(await bobSession.banner() == "alice is sharing location")
            #expect(await bobSession.participants.map(\.userId) == ["alice"])
            // Both screens show the start card.
            #expect(await aliceChat.screen().items.last?.text == "[Location sharing started]")
            let bobScreens = EventRecorder(await bobChat.screens())
            if await bobChat.screen().items.last?.text != "[Location sharing started]" {
                #expect(await bobScreens.first(timeout: .seconds(60)) { $0.items.last?.text == "[Location sharing started]" } != nil)
            }

            // Bob joins through the same action: both CONNECTED, two participants.
            try await bobChat.shareLocation()
            #expect(await bobSession.status == .connected)
            #expect(bobEvents.items.contains(.statusChanged(.connected)), "the joiner is told of its own change")
            #expect(await Self.status(aliceEvents, .connected))
            #expect(await bobSession.banner() == "You joined location sharing", "the notice first")
            #expect(await aliceEvents.first(timeout: .seconds(60)) { $0 == .joined(userId: "bob") } != nil)
            #expect(await aliceSession.banner() == "bob joined location sharing")
            clock.advance(milliseconds: LocationShareSession.noticeMilliseconds)
            #expect(await aliceSession.banner() == "2 people are sharing location", "the status 0.5 s later")
            #expect(await bobSession.banner() == "2 people are sharing location")
            #expect(await aliceSession.participants.map(\.userId) == ["alice", "bob"], "this user first")

            // A position reaches the peer; a bad one is refused and sends nothing.
            try await aliceSession.updateLocation(latitude: 31.2304, longitude: 121.4737)
            #expect(await bobEvents.first(timeout: .seconds(60)) { $0 == .location(userId: "alice", latitude: 31.2304, longitude: 121.4737) } != nil)
            let seen = try #require(await bobSession.participants.first { $0.userId == "alice" })
            #expect(seen.latitude == 31.2304 && seen.longitude == 121.4737 && seen.locatedAt == clock.nowMilliseconds())
            #expect(await failureCode { try await aliceSession.updateLocation(latitude: 91, longitude: 0) } == 33003)
            #expect(await aliceSession.participants.first?.latitude == 31.2304)

            // The position is repeated every locationUpdateInterval (10 s) while sharing.
            let before = bobEvents.items.filter { $0 == .location(userId: "alice", latitude: 31.2304, longitude: 121.4737) }.count
            clock.advance(milliseconds: 10_000)
            let repeated = await bobEvents.wait(timeout: .seconds(60)) { events in
                events.filter { $0 == .location(userId: "alice", latitude: 31.2304, longitude: 121.4737) }.count > before
            }
            #expect(repeated.filter { $0 == .location(userId: "alice", latitude: 31.2304, longitude: 121.4737) }.count == before + 1)
            // One repeat per interval: nothing more within the next 9.999 s.
            clock.advance(milliseconds: 9_999)
            let quiet = await bobEvents.first(timeout: .milliseconds(500)) { _ in false }
            #expect(quiet == nil)
            #expect(bobEvents.items.filter { $0 == .location(userId: "alice", latitude: 31.2304, longitude: 121.4737) }.count == before + 1)

            // Alice quits: Bob is told, his banner shows the notice, then that he shares alone.
            try await aliceChat.stopSharingLocation()
            #expect(await aliceSession.status == .incoming)
            #expect(await Self.status(bobEvents, .outgoing))
            #expect(await bobEvents.first(timeout: .seconds(60)) { $0 == .quit(userId: "alice") } != nil)
            #expect(await bobSession.banner() == "alice quit location sharing")
            #expect(await aliceSession.banner() == "You quit location sharing")
            clock.advance(milliseconds: LocationShareSession.noticeMilliseconds)
            #expect(await bobSession.banner() == "You are sharing your location")
            #expect(await aliceSession.banner() == "bob is sharing location")
            #expect(await aliceChat.screen().items.last?.text == "[Location sharing started]", "no end card while Bob shares")

            // Bob, the last one, quits: no banner on either side and the end card on both.
            try await bobChat.stopSharingLocation()
            #expect(await bobSession.status == .idle)
            #expect(await Self.status(aliceEvents, .idle))
            let changes = bobEvents.items.filter { $0 == .bannerChanged }.count
            clock.advance(milliseconds: LocationShareSession.noticeMilliseconds)
            // The end of the notice is an event, so a screen redraws without the banner.
            let ended = await bobEvents.wait(timeout: .seconds(60)) { $0.filter { $0 == .bannerChanged }.count > changes }
            #expect(ended.filter { $0 == .bannerChanged }.count == changes + 1)
            #expect(await aliceSession.banner() == nil)
            #expect(await bobSession.banner() == nil)
            #expect(await bobChat.screen().items.last?.text == "[Location sharing ended]")
            let aliceScreens = EventRecorder(await aliceChat.screens())
            if await aliceChat.screen().items.last?.text != "[Location sharing ended]" {
                #expect(await aliceScreens.first(timeout: .seconds(60)) { $0.items.last?.text == "[Location sharing ended]" } != nil)
            }
            let list = await bob.conversationList().load()
            #expect(list.rows.first { $0.targetId == "alice" }?.digest == "[Location sharing ended]")
        }
    }

    @Test("a peer not heard from for the idle timeout (35 s) has left; a start caught up offline after it is not incoming")
    func idleTimeout() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let alice = try await IMKitModelTests.kit(server, "alice", clock: clock)
            let bob = try await IMKitModelTests.kit(server, "bob", clock: clock)
            let bobSession = try bob.locationShare(targetId: "alice")
            let bobEvents = EventRecorder(await bobSession.events())
            try await alice.locationShare(targetId: "bob").updateLocation(latitude: 1, longitude: 2)
            try await alice.conversation(.private, targetId: "bob").shareLocation()
            #expect(await Self.status(bobEvents, .incoming))
            // Bob has Alice's last sign (her first position) before the clock moves.
            #expect(await bobEvents.first(timeout: .seconds(60)) { $0 == .location(userId: "alice", latitude: 1, longitude: 2) } != nil)
            // Alice's device goes away without quitting: no repeat reaches Bob.
            await alice.client.disconnect()
            clock.advance(milliseconds: 34_999)
            #expect(await bobEvents.first(timeout: .milliseconds(500)) { $0 == .quit(userId: "alice") } == nil,
                    "still there just before the timeout")
            #expect(await bobSession.status == .incoming)
            clock.advance(milliseconds: 1)
            #expect(await Self.status(bobEvents, .idle))
            #expect(bobEvents.items.contains(.quit(userId: "alice")))

            // Carol starts while Dave is offline; Dave connects 36 s later: the start is stale.
            let carol = try await IMKitModelTests.kit(server, "carol", clock: clock)
            let carolChat = carol.conversation(.private, targetId: "dave")
            try await carolChat.shareLocation()
            // A text after the start: once Dave's kit has passed it, it has passed the start.
            let text = try #require(try await carolChat.send(text: "where are you?"))
            clock.set(milliseconds: Int64(Date().timeIntervalSince1970 * 1000) + 36_000)
            let daveClient = server.client { $0.clock = clock }
            let dave = IMKit(client: daveClient, dataDirectory: server.dataDir.appendingPathComponent("kit-dave"), clock: clock)
            let passed = EventRecorder(dave.suppressedNotifications())
            try await dave.connect(token: try await server.token("dave"))
            let offline = await passed.wait(timeout: .seconds(60)) { $0.filter { $0.1 == .offline }.count >= 2 }
            #expect(offline.filter { $0.1 == .offline }.count == 2, "the start and the text, caught up offline")
            let daveChat = dave.conversation(.private, targetId: "carol")
            try await daveChat.open()
            #expect(await daveChat.screen().items.suffix(2).map(\.text) == ["[Location sharing started]", "where are you?"], "the card is history")
            #expect(text.messageId > 0)
            #expect(await (try dave.locationShare(targetId: "carol")).status == .idle)
        }
    }

    @Test("start failure marks the start message failed and returns to IDLE; group conversations have no location sharing (33003)")
    func startFailureAndScope() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let alice = try await IMKitModelTests.kit(server, "alice", clock: clock)
            let chat = alice.conversation(.private, targetId: "bob")
            try await chat.open()
            let session = try alice.locationShare(targetId: "bob")
            let events = EventRecorder(await session.events())
            await alice.client.disconnect()
            await #expect(throws: SendMessageError.self) { try await chat.shareLocation() }
            #expect(await session.status == .idle)
            let failed = try #require(await events.first(timeout: .seconds(60)) {
                if case .startFailed = $0 { return true } else { return false }
            })
            guard case .startFailed(let messageId, let code) = failed else { return }
            #expect(code == 30002)
            let item = try #require(await chat.screen().items.first { $0.message.messageId == messageId })
            #expect(item.text == "[Location sharing started]" && item.status == "failed")
            #expect(events.items.prefix(3) == [.statusChanged(.outgoing), .statusChanged(.idle), .startFailed(messageId: messageId, code: 30002)])

            #expect(await failureCode { _ = try alice.locationShare(.group, targetId: "team") } == 33003)
            #expect(await failureCode { _ = try await alice.conversation(.group, targetId: "team").shareLocation() } == 33003)
            #expect(await failureCode { _ = try alice.locationShare(targetId: "alice") } == 33003)
            #expect(await failureCode { try await session.join() } == 33003, "nothing to join")
        }
    }

    @Test("signing the kit in as another user starts from new sessions; an update interval not shorter than the idle timeout is refused")
    func anotherUserAndLimits() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let clock = ManualClock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            let kit = try await IMKitModelTests.kit(server, "alice", clock: clock)
            let aliceSession = try kit.locationShare(targetId: "bob")
            try await kit.conversation(.private, targetId: "bob").shareLocation()
            #expect(await aliceSession.status == .outgoing)
            await kit.disconnect()
            #expect(await aliceSession.status == .idle, "disconnecting ends this user's sharing")
            try await kit.connect(token: try await server.token("carol"))
            let carolSession = try kit.locationShare(targetId: "bob")
            #expect(carolSession !== aliceSession)
            #expect(await carolSession.status == .idle)
            #expect(await carolSession.participants.isEmpty)
        }
        var config = KitConfig()
        #expect(throws: IMError.self) { try config.set("locationUpdateInterval", to: "35") }
        #expect(throws: IMError.self) { try config.set("locationIdleTimeout", to: "10") }
        try config.set("locationIdleTimeout", to: "60")
        try config.set("locationUpdateInterval", to: "30")
        #expect(config.locationUpdateInterval == 30 && config.locationIdleTimeout == 60)
    }

    @Test("banner rules: OUTGOING, one participant by name, N people, none removes it; in both languages")
    func bannerRules() {
        let en = KitStrings(.english)
        let zh = KitStrings(.simplifiedChinese)
        #expect(LocationShareSession.bannerText(status: .idle, participantCount: 0, name: "", strings: en) == nil)
        #expect(LocationShareSession.bannerText(status: .outgoing, participantCount: 1, name: "me", strings: en) == "You are sharing your location")
        #expect(LocationShareSession.bannerText(status: .incoming, participantCount: 1, name: "Alice", strings: en) == "Alice is sharing location")
        #expect(LocationShareSession.bannerText(status: .connected, participantCount: 2, name: "me", strings: en) == "2 people are sharing location")
        #expect(LocationShareSession.bannerText(status: .connected, participantCount: 2, name: "me", strings: zh) == "2人正在共享地理位置")
        #expect(LocationShareSession.bannerText(status: .incoming, participantCount: 0, name: "", strings: en) == nil)
    }
}
