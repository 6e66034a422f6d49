import Foundation
import IMCore
import IMLib
import IMServerTesting
import Testing

/// `imchat` driven for real: a real server, imchat processes in tmux, keys in and screens out
/// (spec imkit-and-overview.md §4.3 flows S1, S2, S3, S5, S6, S9, S10, S11).
@Suite("imchat in a terminal", .serialized)
struct IMChatTerminalTests {
    static func withSetup(_ body: (TestServer, TmuxHarness) async throws -> Void) async throws {
        let tmux = try TmuxHarness()
        do {
            try await withTestServer(try await TestServer.start()) { server in try await body(server, tmux) }
        } catch {
            await tmux.stop()
            throw error
        }
        await tmux.stop()
    }

    /// A text from one user to another through the Server API (not held to a client's 5 per second).
    static func publish(_ server: TestServer, _ from: String, _ to: String, _ text: String) async throws {
        let (_, body) = try await server.api.post("/message/private/publish.json", form: [
            "fromUserId": from, "toUserId": to, "objectName": "RC:TxtMsg", "content": #"{"content":"\#(text)"}"#])
        #expect(body["code"] as? Int == 200, "\(body)")
    }

    static func start(_ tmux: TmuxHarness, _ server: TestServer, _ user: String, _ extra: [String] = []) async throws {
        try await tmux.start(user, server: server.baseURL, appKey: server.app.appKey, appSecret: server.app.appSecret, extra: extra)
        // A process started while seven other tests load both cores may take a while to draw.
        try await tmux.waitFor(user, contains: "[connected]", timeout: .seconds(60))
        // Its first offline sync is done: what the test sends next arrives live, as it would to a
        // user already online (a message committed during the sync comes with it, as offline).
        try await tmux.waitForEvent(user, "synced")
    }

    @Test("S2: three messages show (3) and the badge; a typing status and a command do not count; read elsewhere clears it; system rows fold into one")
    func listUnreadAndBadge() async throws {
        try await Self.withSetup { server, tmux in
            try await Self.start(tmux, server, "alice")
            let bob = try await server.connectedClient("bob")
            for text in ["one", "two", "three"] { try await Self.publish(server, "bob", "alice", text) }
            let screen = try await tmux.waitFor("alice", contains: "bob (3)")
            #expect(screen.contains("unread 3"))
            #expect(screen.contains("three"))
            // Neither a typing status nor a command counts: the next text makes (4), not (6).
            _ = try await bob.sendTypingStatus(.private, targetId: "alice", typingContentType: TextMessage.objectName)
            try await bob.sendMessage(.private, targetId: "alice", content: CommandMessage(name: "ping", data: "{}"))
            try await Self.publish(server, "bob", "alice", "four")
            let four = try await tmux.waitFor("alice", contains: "bob (4)")
            #expect(four.contains("unread 4"))
            // Read on alice's phone: the terminal's count clears (multi-device read sync).
            let phone = try await server.connectedClient("alice", platform: .iOS)
            let last = try #require(try await phone.getHistoryMessages(.private, targetId: "bob", count: 1).first)
            try await phone.syncConversationReadStatus(.private, targetId: "bob", time: last.sentTime)
            try await tmux.waitFor("alice", "unread 0") { $0.contains("unread 0") && !$0.contains("(4)") }
            // Two system senders: one folded "System" row with both counted.
            for from in ["news", "alerts"] {
                let (_, body) = try await server.api.post("/message/system/publish.json", form: [
                    "fromUserId": from, "toUserId": "alice", "objectName": "RC:TxtMsg", "content": #"{"content":"from \#(from)"}"#])
                #expect(body["code"] as? Int == 200, "\(body)")
            }
            let folded = try await tmux.waitFor("alice", contains: "System (2)")
            #expect(!folded.contains("news (1)") && !folded.contains("alerts (1)"), "system conversations are folded:\n\(folded)")
            // Deleted rows stay deleted after a restart (local database).
            try await tmux.press("alice", "Down")
            try await tmux.waitFor("alice", "the cursor on bob") { $0.contains("> bob") }
            try await tmux.press("alice", "d")
            try await tmux.waitFor("alice", contains: "deleted bob")
            try await tmux.press("alice", "C-c")
            try await Task.sleep(for: .milliseconds(300))
            try await tmux.tmux(["kill-session", "-t", "alice"])
            try await Self.start(tmux, server, "alice")
            let restarted = try await tmux.waitFor("alice", contains: "System (2)")
            #expect(!restarted.contains(" bob "), "bob's conversation stays deleted:\n\(restarted)")
        }
    }

    @Test("S1: connected, kicked by another desktop login, banned; the list shows from the local database with the server down")
    func connectionStates() async throws {
        try await Self.withSetup { server, tmux in
            try await Self.start(tmux, server, "alice")
            let bob = try await server.connectedClient("bob")
            try await bob.sendMessage(.private, targetId: "alice", content: TextMessage(content: "kept locally"))
            try await tmux.waitFor("alice", contains: "bob (1)")
            // Another desktop session of alice: the terminal (also desktop) is kicked.
            let other = try await server.connectedClient("alice", platform: .linux)
            try await tmux.waitFor("alice", contains: "[kicked: logged in elsewhere]")
            await other.disconnect()
            // Carol is banned while online.
            try await Self.start(tmux, server, "carol")
            let (_, body) = try await server.api.post("/user/block.json", form: ["userId": "carol", "minute": "10"])
            #expect(body["code"] as? Int == 200, "\(body)")
            try await tmux.waitFor("carol", contains: "[banned]")
            // Offline first: with no server to reach, alice's list is drawn from her local database.
            let token = try await server.token("alice")
            try await tmux.tmux(["kill-session", "-t", "alice"])
            // Port 9 (discard) has no listener: every connect is refused at once.
            try await tmux.start("alice", server: "http://127.0.0.1:9", appKey: server.app.appKey, token: token)
            let offline = try await tmux.waitFor("alice", contains: "bob (1)")
            #expect(offline.contains("kept locally"))
            // RongCloud's back-off, shown as it runs (0.25 s, 0.5 s, 1 s, 2 s, ...).
            try await tmux.waitFor("alice", contains: "[reconnecting in")
        }
    }

    @Test("S5: recall shows both notices; re-edit for 300 s on the kit's clock; no recall past 120 s")
    func recallAndReedit() async throws {
        try await Self.withSetup { server, tmux in
            try await Self.start(tmux, server, "alice", ["--test-clock"])
            try await Self.start(tmux, server, "bob")
            try await tmux.open("alice", "bob")
            try await tmux.enter("alice", "take this back")
            try await tmux.waitFor("bob", contains: "alice (1)")
            try await tmux.press("bob", "Enter")
            try await tmux.waitFor("bob", contains: "alice: take this back")
            try await tmux.enter("alice", "/recall")
            try await tmux.waitFor("alice", contains: "[recalled] You recalled a message  [re-edit]")
            let bobScreen = try await tmux.waitFor("bob", contains: "[recalled] alice recalled a message")
            #expect(!bobScreen.split(separator: "\n").contains("alice: take this back"), "the message is gone from bob's pane:\n\(bobScreen)")
            try await tmux.enter("alice", "/clock +299")
            try await tmux.waitFor("alice", contains: "clock +299s")
            try await tmux.waitFor("alice", contains: "[re-edit]")
            try await tmux.enter("alice", "/reedit")
            try await tmux.waitFor("alice", contains: "> take this back")
            for _ in 0..<15 { try await tmux.press("alice", "BSpace") }
            try await tmux.enter("alice", "/clock +2")
            try await tmux.waitFor("alice", "re-edit gone after 301 s") { $0.contains("You recalled a message") && !$0.contains("[re-edit]") }
            // A message 121 s old can no longer be recalled: the kit says so, nothing changes.
            try await tmux.enter("alice", "too late")
            try await tmux.waitFor("bob", contains: "alice: too late")
            try await tmux.enter("alice", "/clock +121")
            try await tmux.enter("alice", "/recall")
            try await tmux.waitFor("alice", contains: "[error 25101]")
            #expect(try await tmux.screen("bob").contains("alice: too late"))
        }
    }

    @Test("S10: at most one typing status per 6 s while typing; the peer shows typing… and it clears")
    func typingThrottle() async throws {
        try await Self.withSetup { server, tmux in
            try await Self.start(tmux, server, "alice", ["--test-clock"])
            try await Self.start(tmux, server, "bob", ["--test-clock"])
            for session in ["alice", "bob"] {
                try await tmux.press(session, "o")
                try await tmux.enter(session, session == "alice" ? "bob" : "alice")
            }
            try await tmux.waitFor("bob", contains: "« alice")
            for character in "twenty characters ok" { try await tmux.type("alice", String(character)) }
            try await tmux.waitFor("bob", contains: "[typing…]")
            try await tmux.waitFor("alice", contains: "> twenty characters ok")
            #expect(tmux.events("alice", "typing_sent").count == 1, "20 keys within 6 s send one typing status")
            // 7 s later on alice's clock, typing again sends a second one.
            for _ in 0..<20 { try await tmux.press("alice", "BSpace") }
            try await tmux.enter("alice", "/clock +7")
            try await tmux.waitFor("alice", contains: "clock +7s")
            try await tmux.type("alice", "more")
            try await tmux.waitFor("alice", contains: "> more")
            try await waitUntilCount { tmux.events("alice", "typing_sent").count == 2 }
            #expect(tmux.events("alice", "typing_sent").count == 2)
            // Bob's "typing…" ends 6 s after the last status, on bob's clock: once the second has
            // reached him (it may still be on its way when alice has logged it sent).
            try await waitUntilCount { tmux.events("bob", "typing_received").count >= 2 }
            #expect(tmux.events("bob", "typing_received").count == 2)
            try await tmux.enter("bob", "/clock +7")
            try await tmux.waitFor("bob", "typing cleared") { $0.contains("clock +7s") && !$0.contains("[typing…]") }
        }
    }

    private func waitUntilCount(_ condition: () -> Bool) async throws {
        for _ in 0..<100 where !condition() { try await Task.sleep(for: .milliseconds(100)) }
    }

    @Test("S11 and S3: 40 unread show the jump indicator, the jump lands on the first unread; reading higher up raises the new-message indicator; paging reaches the oldest")
    func indicatorsAndPaging() async throws {
        try await Self.withSetup { server, tmux in
            try await Self.start(tmux, server, "alice")
            for index in 1...40 { try await Self.publish(server, "bob", "alice", "m\(index)") }
            try await tmux.waitFor("alice", contains: "bob (40)")
            try await tmux.press("alice", "Enter")
            let opened = try await tmux.waitFor("alice", contains: "[40 unread ↑]")
            #expect(opened.contains("bob: m40"))
            try await tmux.enter("alice", "/jump")
            let jumped = try await tmux.waitFor("alice", "m1 at the top") { screen in
                let lines = screen.split(separator: "\n").map(String.init)
                return lines.count > 2 && lines[2] == "bob: m1"
            }
            #expect(!jumped.contains("unread ↑"))
            // Each key is seen handled on the screen before the next step: a message that came
            // before the scroll would be taken in at the bottom and raise no indicator.
            // (m40 is also in the notice line at the foot: the message's own row is the one read.)
            func showsM40(_ screen: String) -> Bool { screen.split(separator: "\n").contains("bob: m40") }
            try await tmux.press("alice", "End")
            try await tmux.waitFor("alice", "m40 at the bottom", showsM40)
            try await tmux.press("alice", "PageUp")
            try await tmux.waitFor("alice", "m40 scrolled out of view") { !showsM40($0) }
            try await Self.publish(server, "bob", "alice", "while reading above")
            try await tmux.waitFor("alice", contains: "[↓ 1 new]")
            try await tmux.press("alice", "End")
            try await tmux.waitFor("alice", "the indicator gone at the bottom") { $0.contains("bob: while reading above") && !$0.contains("new]") }
        }
    }

    @Test("S9: @ in a group opens the member picker; the mentioned member's row shows [@ you] and a notification")
    func mentionPicker() async throws {
        try await Self.withSetup { server, tmux in
            let (_, created) = try await server.api.post("/group/create.json", rawForm: "userId=alice&userId=bob&userId=carol&groupId=g1&groupName=g1")
            #expect(created["code"] as? Int == 200, "\(created)")
            try await Self.start(tmux, server, "alice")
            try await Self.start(tmux, server, "bob")
            try await tmux.open("bob", "g:g1", title: "g1")
            try await tmux.type("bob", "hi @")
            let picker = try await tmux.waitFor("bob", contains: "[@] @all")
            #expect(picker.contains("alice") && picker.contains("carol") && !picker.contains("[@] @all  bob"), "the picker lists the other members:\n\(picker)")
            try await tmux.type("bob", "ali")
            try await tmux.waitFor("bob", "the picker narrowed to alice") { $0.contains("[@] alice") && !$0.contains("carol") }
            try await tmux.press("bob", "Tab")
            try await tmux.waitFor("bob", contains: "> hi @alice ")
            try await tmux.type("bob", "look")
            try await tmux.press("bob", "Enter")
            try await tmux.waitFor("alice", contains: "[@ you]")
            try await tmux.waitFor("alice", contains: "[notice] bob (g1)")
            #expect(tmux.events("alice", "notification").first?["cType"] == "GRP")
        }
    }

    @Test("S6: private read receipts when the type is enabled: unread, then ✓ read once the peer opens the conversation")
    func readReceipts() async throws {
        try await Self.withSetup { server, tmux in
            let receipts = ["--set", "enabledReadReceiptConversationTypes=private"]
            try await Self.start(tmux, server, "alice", receipts)
            try await Self.start(tmux, server, "bob", receipts)
            try await tmux.press("alice", "o")
            try await tmux.enter("alice", "bob")
            try await tmux.enter("alice", "did you read this")
            try await tmux.waitFor("alice", contains: "me: did you read this  [unread]")
            try await tmux.waitFor("bob", contains: "alice (1)")
            try await tmux.press("bob", "Enter")
            try await tmux.waitFor("bob", contains: "alice: did you read this")
            try await tmux.waitFor("alice", contains: "me: did you read this  [✓ read]")
        }
    }
}
