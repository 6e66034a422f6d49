import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// More of imchat driven for real (spec imkit-and-overview.md §4.3): the context menu and
/// multi-select (S4), forward and combined forward (S7), quote (S8), local notifications (S12), the
/// user-info provider and its cache (S13), real-time location sharing (S14), the system conversation
/// (S15) and multi-device (S16).
/// A real server, imchat processes in tmux, keys in and screens out.
@Suite("imchat flows in a terminal", .serialized)
struct IMChatFlowTests {
    typealias Terminal = IMChatTerminalTests

    /// Lines of the screen, for asserting what follows what.
    static func lines(_ screen: String) -> [String] { screen.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }

    /// Whether a line equal to `first` is directly followed by one equal to `second`.
    static func adjacent(_ screen: String, _ first: String, _ second: String) -> Bool {
        let all = lines(screen)
        return zip(all, all.dropFirst()).contains { $0.0 == first && $0.1 == second }
    }

    static func line(_ screen: String, containing text: String) -> String? {
        lines(screen).first { $0.contains(text) }
    }

    /// Waits for a line starting with `text`: a message in the pane, not a toast quoting it.
    @discardableResult
    static func waitForLine(_ tmux: TmuxHarness, _ session: String, _ text: String,
                            sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        try await tmux.waitFor(session, "a line \"\(text)…\"", sourceLocation: sourceLocation) { screen in
            lines(screen).contains { $0.hasPrefix(text) }
        }
    }

    @Test("S4: the menu differs by type and age (no quote on a voice message, no recall past 120 s); multi-select marks messages, forwards them one by one and deletes them here only")
    func menuAndMultiSelect() async throws {
        try await Terminal.withSetup { server, tmux in
            try await Terminal.start(tmux, server, "alice", ["--test-clock"])
            try await Terminal.start(tmux, server, "bob")
            try await Terminal.start(tmux, server, "carol")
            let (_, voice) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "bob", "toUserId": "alice", "objectName": "RC:HQVCMsg",
                "content": #"{"remoteUrl":"http://127.0.0.1:9/v.aac","duration":3}"#])
            #expect(voice["code"] as? Int == 200, "\(voice)")
            try await tmux.waitFor("alice", contains: "bob (1)")
            try await tmux.press("alice", "Enter")
            try await tmux.waitFor("alice", contains: "bob: [Voice] 3\"")
            try await tmux.enter("alice", "mine")
            try await tmux.waitFor("alice", contains: "me: mine")
            try await tmux.enter("alice", "second")
            try await tmux.waitFor("alice", contains: "me: second")
            try await tmux.waitFor("bob", contains: "alice (2)")
            try await tmux.enter("alice", "/menu 1")
            try await tmux.waitFor("alice", contains: "[menu] copy delete recall quote forward select")
            // Someone else's voice message: no copy, no recall, no quote.
            try await tmux.enter("alice", "/menu 3")
            try await tmux.waitFor("alice", contains: "[menu] delete forward select")
            // 121 s after they were sent, on alice's clock, her texts can no longer be recalled. Her
            // test clock stood still since imchat started; the server stamped the texts later, so
            // the clock first catches up with the real time.
            try await tmux.enter("alice", "/clock now")
            try await tmux.waitFor("alice", contains: "clock now")
            try await tmux.enter("alice", "/clock +121")
            try await tmux.waitFor("alice", contains: "clock +121s")
            try await tmux.enter("alice", "/menu 1")
            try await tmux.waitFor("alice", contains: "[menu] copy delete quote forward select")
            try await tmux.enter("alice", "/menu 3")
            try await tmux.waitFor("alice", contains: "[menu] delete forward select")

            // Multi-select: the cursor starts on the newest message; Space marks, ↑ moves.
            try await tmux.enter("alice", "/select")
            try await tmux.waitFor("alice", "the selection toolbar") { $0.contains("[select] 0 selected") && $0.contains("▸[ ] me: second") }
            try await tmux.press("alice", "Space")
            try await tmux.waitFor("alice", contains: "▸[x] me: second")
            // The cursor message's menu (m): 121 s old, no recall.
            try await tmux.press("alice", "m")
            try await tmux.waitFor("alice", contains: "[menu] copy delete quote forward select")
            try await tmux.press("alice", "Up")
            try await tmux.waitFor("alice", contains: "▸[ ] me: mine")
            try await tmux.press("alice", "Space")
            let marked = try await tmux.waitFor("alice", contains: "[select] 2 selected")
            #expect(marked.contains(" [ ] bob: [Voice] 3\""), "the voice message is not marked:\n\(marked)")
            try await tmux.press("alice", "f")
            try await tmux.waitFor("alice", contains: "forward to:")
            try await tmux.enter("alice", "carol")
            try await tmux.waitFor("alice", contains: "forwarded 2 to carol")
            try await tmux.waitFor("alice", "the selection over") { $0.contains("> ▏") && !$0.contains("[select]") }
            // Carol gets two copies, in order.
            try await tmux.waitFor("carol", contains: "alice (2)")
            try await tmux.press("carol", "Enter")
            let copies = try await Self.waitForLine(tmux, "carol", "alice: second")
            #expect(Self.adjacent(copies, "alice: mine", "alice: second"), "two copies in order:\n\(copies)")

            // Delete from the selection: gone here, still on bob's side.
            try await tmux.enter("alice", "/select")
            try await tmux.waitFor("alice", contains: "▸[ ] me: second")
            try await tmux.press("alice", "Space")
            try await tmux.waitFor("alice", contains: "[select] 1 selected")
            try await tmux.press("alice", "d")
            try await tmux.waitFor("alice", contains: "deleted 1 on this device")
            // The screen may show the message gone a frame before the selection is over: wait for both.
            try await tmux.waitFor("alice", "second gone and the selection over") {
                !$0.contains("me: second") && $0.contains("me: mine") && !$0.contains("[select]")
            }
            try await tmux.press("bob", "Enter")
            try await Self.waitForLine(tmux, "bob", "alice: second")
        }
    }

    @Test("S7: three messages combined to carol show as one card whose HTML holds the three texts; one-by-one forward sends copies; a forwarded copy loses its @ mention")
    func forwardAndCombine() async throws {
        try await Terminal.withSetup { server, tmux in
            for (group, members) in [("g1", ["alice", "bob", "carol"]), ("g2", ["alice", "carol"])] {
                let form = members.map { "userId=\($0)" }.joined(separator: "&") + "&groupId=\(group)&groupName=\(group)"
                let (_, created) = try await server.api.post("/group/create.json", rawForm: form)
                #expect(created["code"] as? Int == 200, "\(created)")
            }
            try await Terminal.start(tmux, server, "alice")
            try await Terminal.start(tmux, server, "carol")
            try await tmux.open("alice", "bob")
            for text in ["first line", "second line", "third line"] {
                try await tmux.enter("alice", text)
                try await tmux.waitFor("alice", contains: "me: \(text)")
            }
            // Off by default.
            try await tmux.enter("alice", "/combine carol 3")
            try await tmux.waitFor("alice", contains: "combined forward is off")
            try await tmux.enter("alice", "/set enableSendCombineMessage true")
            try await tmux.waitFor("alice", contains: "enableSendCombineMessage = true")
            try await tmux.enter("alice", "/combine carol 3")
            try await tmux.waitFor("alice", contains: "forwarded 1 to carol")
            try await tmux.waitFor("carol", "one combined message") { $0.contains("alice (1)") && $0.contains("[Chat history]") }
            try await tmux.press("carol", "Enter")
            let card = try await Self.waitForLine(tmux, "carol", "alice: [Chat history]")
            let cardLine = try #require(Self.lines(card).first { $0.hasPrefix("alice: [Chat history]") })
            #expect(cardLine.contains("first line") && cardLine.contains("third line"), "the card shows the first lines:\n\(card)")
            #expect(!Self.lines(card).contains { $0.hasPrefix("alice: first line") }, "one card, not three messages:\n\(card)")
            // Opened, the card shows the messages it holds, read back from its page.
            try await tmux.enter("carol", "/open")
            let opened = try await tmux.waitFor("carol", contains: "(Esc: back)")
            for text in ["first line", "second line", "third line"] {
                #expect(Self.lines(opened).contains("alice: \(text)"), "the opened card lists \(text):\n\(opened)")
            }
            try await tmux.press("carol", "Escape")
            try await Self.waitForLine(tmux, "carol", "alice: [Chat history]")
            // The page itself, fetched over HTTP with the app's download token (as a browser given it would).
            try await tmux.enter("carol", "/url")
            try await tmux.waitFor("carol", contains: "[url] http")
            let urlText = try #require(tmux.events("carol", "url").last?["url"])
            let address = try #require(URL(string: urlText))
            let (_, refused) = try await URLSession.shared.data(from: address)
            #expect((refused as? HTTPURLResponse)?.statusCode == 401, "the server's files need a download token")
            let carolPhone = try await server.connectedClient("carol", platform: .iOS)
            var request = URLRequest(url: address)
            request.setValue("Bearer \(try await carolPhone.mediaDownloadToken().token)", forHTTPHeaderField: "Authorization")
            let (data, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let html = String(decoding: data, as: UTF8.self)
            #expect(html.contains("<html"), "an HTML page:\n\(html.prefix(500))")
            for text in ["first line", "second line", "third line"] { #expect(html.contains(text), "the page has \(text):\n\(html.prefix(2000))") }

            // One by one: copies, each its own message.
            try await tmux.enter("alice", "/forward carol 2")
            try await tmux.waitFor("alice", contains: "forwarded 2 to carol")
            let copies = try await tmux.waitFor("carol", "two copies") { Self.lines($0).filter { $0 == "alice: third line" }.count == 1 && Self.lines($0).contains("alice: second line") }
            #expect(Self.adjacent(copies, "alice: second line", "alice: third line"), "two copies after the card:\n\(copies)")

            // A message mentioning carol, forwarded to another group: the copy mentions nobody.
            try await tmux.press("carol", "Escape")
            let bob = try await server.connectedClient("bob")
            try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(
                content: "hi @carol", mentionedInfo: MentionedInfo(type: .users, userIdList: ["carol"])))
            try await tmux.waitFor("carol", "g1's row mentions carol") { Self.line($0, containing: "g1 (1)")?.contains("[@ you]") == true }
            try await tmux.enter("alice", "/back")
            try await tmux.press("alice", "o")
            try await tmux.enter("alice", "g:g1")
            try await Self.waitForLine(tmux, "alice", "bob: hi @carol")
            try await tmux.enter("alice", "/forward g:g2 1")
            try await tmux.waitFor("alice", contains: "forwarded 1 to g2")
            let list = try await tmux.waitFor("carol", contains: "g2 (1)")
            let g2 = try #require(Self.line(list, containing: "g2 (1)"))
            #expect(g2.contains("hi @carol") && !g2.contains("[@ you]"), "the forwarded copy carries no mention:\n\(list)")
        }
    }

    @Test("S8: a quote shows the quoted block above the reply; a quote can be quoted; once the original is recalled its quotes say so, also after a restart")
    func quoteReply() async throws {
        try await Terminal.withSetup { server, tmux in
            try await Terminal.start(tmux, server, "alice")
            try await Terminal.start(tmux, server, "bob")
            for (session, peer) in [("alice", "bob"), ("bob", "alice")] {
                try await tmux.open(session, peer)
            }
            try await tmux.enter("bob", "the original")
            try await tmux.waitFor("alice", contains: "bob: the original")
            try await tmux.enter("alice", "/quote 1")
            try await tmux.waitFor("alice", contains: "[quoting] bob: the original")
            try await tmux.enter("alice", "the reply")
            let bobSees = try await tmux.waitFor("bob", contains: "alice: the reply")
            #expect(Self.adjacent(bobSees, "  > bob: the original", "alice: the reply"), "the quote block above the reply:\n\(bobSees)")
            let aliceSees = try await tmux.waitFor("alice", contains: "me: the reply")
            #expect(Self.adjacent(aliceSees, "  > bob: the original", "me: the reply"))
            #expect(!aliceSees.contains("[quoting]"), "the preview goes once sent:\n\(aliceSees)")

            // Quoting the quote.
            try await tmux.enter("bob", "/quote 1")
            try await tmux.waitFor("bob", contains: "[quoting] alice: the reply")
            try await tmux.enter("bob", "a reply to the reply")
            let nested = try await tmux.waitFor("alice", contains: "bob: a reply to the reply")
            #expect(Self.adjacent(nested, "  > alice: the reply", "bob: a reply to the reply"), "a quote of a quote:\n\(nested)")

            // Bob recalls the original: the quotes of it no longer show its text, on both sides.
            try await tmux.enter("bob", "/recall 2")
            let recalled = try await tmux.waitFor("alice", contains: "[recalled] bob recalled a message")
            let rule = "  > bob: The quoted message was recalled"
            let ruled = try await tmux.waitFor("alice", contains: rule)
            #expect(!ruled.contains("the original"), "the recalled text is gone everywhere:\n\(ruled)\n\(recalled)")
            #expect(Self.adjacent(ruled, rule, "me: the reply"))
            try await tmux.waitFor("bob", contains: rule)
            // The rule holds when the screen is loaded again from the local database.
            try await tmux.quit("alice")
            try await Terminal.start(tmux, server, "alice")
            try await tmux.press("alice", "o")
            try await tmux.enter("alice", "bob")
            let reopened = try await tmux.waitFor("alice", contains: "me: the reply")
            #expect(reopened.contains(rule) && !reopened.contains("the original"), "after a restart:\n\(reopened)")
        }
    }

    /// Presses `r` on the list until the screen satisfies `condition` (state synced from another device).
    static func reloadUntil(_ tmux: TmuxHarness, _ session: String, _ what: String, _ condition: @escaping (String) -> Bool) async throws {
        for _ in 0..<60 {
            if condition(try await tmux.screen(session)) { return }
            try await tmux.press(session, "r")
            try await Task.sleep(for: .seconds(1))
        }
        try await tmux.waitFor(session, what, timeout: .seconds(1), condition)
    }

    @Test("S12: a message in another conversation raises a toast with the sender and the digest; none under do-not-disturb set on another device, none for a silent message")
    func localNotifications() async throws {
        try await Terminal.withSetup { server, tmux in
            try await Terminal.start(tmux, server, "alice")
            try await tmux.open("alice", "carol")
            try await Terminal.publish(server, "bob", "alice", "hello from y")
            try await tmux.waitFor("alice", contains: "[notice] bob: hello from y")
            let first = try #require(tmux.events("alice", "notification").first)
            #expect(first["fId"] == "bob" && first["cType"] == "PR" && first["tId"] == "bob" && first["oName"] == "RC:TxtMsg", "\(first)")
            // Nothing for the open conversation.
            try await Terminal.publish(server, "carol", "alice", "in the open one")
            try await tmux.waitFor("alice", contains: "carol: in the open one")

            // Do-not-disturb on bob's conversation, set on alice's phone: it reaches the terminal.
            let phone = try await server.connectedClient("alice", platform: .iOS)
            try await phone.setConversationNotificationLevel(.private, targetId: "bob", level: .blocked)
            try await tmux.press("alice", "Escape")
            try await Self.reloadUntil(tmux, "alice", "bob's row marked [dnd]") { Self.line($0, containing: " bob ")?.contains("[dnd]") == true }
            try await tmux.open("alice", "carol")
            try await Terminal.publish(server, "bob", "alice", "quiet please")
            // A later message from someone else is the fence: notifications are decided in order.
            try await Terminal.publish(server, "dave", "alice", "fence one")
            try await tmux.waitFor("alice", contains: "[notice] dave: fence one")
            #expect(tmux.events("alice", "notification").filter { $0["fId"] == "bob" }.count == 1, "none under do-not-disturb")
            #expect(tmux.events("alice", "notification").filter { $0["fId"] == "carol" }.isEmpty, "none for the open conversation")

            // A silent message (the Server API's disablePush: the message's disableNotification).
            let (_, silent) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "dave", "toUserId": "alice", "objectName": "RC:TxtMsg", "content": #"{"content":"silent one"}"#, "disablePush": "1"])
            #expect(silent["code"] as? Int == 200, "\(silent)")
            try await Terminal.publish(server, "eve", "alice", "fence two")
            try await tmux.waitFor("alice", contains: "[notice] eve: fence two")
            #expect(tmux.events("alice", "notification").filter { $0["fId"] == "dave" }.count == 1, "none for the silent message")
            // Both arrived and count: only the toast was held back.
            try await tmux.press("alice", "Escape")
            let list = try await tmux.waitFor("alice", "bob (2) and dave (2)") { $0.contains("bob (2)") && $0.contains("dave (2)") }
            #expect(list.contains("silent one"))
        }
    }

    @Test("S13: names come from the app server's URL; refresh changes the cache, not the screen, until it loads again; clear asks again; a restart asks again unless the cache persists")
    func userInfoProvider() async throws {
        let stub = try UserInfoStub()
        defer { stub.stop() }
        stub.set("alice", name: "Alice")
        try await Terminal.withSetup { server, tmux in
            let provider = ["--user-info-url", stub.urlTemplate]
            try await Terminal.publish(server, "alice", "bob", "hi bob")
            try await Terminal.start(tmux, server, "bob", provider)
            try await tmux.waitFor("bob", contains: "Alice (1)")
            #expect(stub.hits("alice") == 1)
            try await tmux.press("bob", "Enter")
            try await tmux.waitFor("bob", "alice's name on the screen") { $0.contains("« Alice") && $0.contains("Alice: hi bob") }
            stub.set("alice", name: "Alice2")
            try await tmux.enter("bob", "/refresh alice")
            let deferred = try await tmux.waitFor("bob", contains: "refreshed alice: Alice2")
            #expect(stub.hits("alice") == 2)
            #expect(deferred.contains("« Alice\n") && deferred.contains("Alice: hi bob") && !deferred.contains("Alice2: hi bob"),
                    "the open screen keeps the name it loaded:\n\(deferred)")
            try await tmux.press("bob", "Escape")
            try await tmux.waitFor("bob", contains: "Alice2")
            try await tmux.press("bob", "Enter")
            try await tmux.waitFor("bob", "the new name after re-entering") { $0.contains("« Alice2") && $0.contains("Alice2: hi bob") }
            #expect(stub.hits("alice") == 2, "re-entering reads the cache")
            // Clear: the next load asks the provider again.
            try await tmux.enter("bob", "/clearusers")
            try await tmux.waitFor("bob", contains: "user cache cleared")
            try await tmux.press("bob", "Escape")
            try await tmux.waitFor("bob", contains: "Alice2")
            try await Self.waitUntil { stub.hits("alice") == 3 }
            #expect(stub.hits("alice") == 3, "the list's reload asks the provider again")

            // Restart without persistence: asked again.
            try await tmux.quit("bob")
            try await Terminal.start(tmux, server, "bob", provider)
            try await tmux.waitFor("bob", contains: "Alice2")
            #expect(stub.hits("alice") == 4, "a memory-only cache is empty after a restart")
            // With persistence: the first run fills the kit's database, the next one reads it.
            let persistent = provider + ["--set", "enablePersistentUserInfoCache=true"]
            try await tmux.quit("bob")
            try await Terminal.start(tmux, server, "bob", persistent)
            try await tmux.waitFor("bob", contains: "Alice2")
            #expect(stub.hits("alice") == 5)
            try await tmux.quit("bob")
            try await Terminal.start(tmux, server, "bob", persistent)
            try await tmux.waitFor("bob", contains: "Alice2")
            #expect(stub.hits("alice") == 5, "the persisted cache answers: the provider is not asked")
        }
    }

    /// Polls a condition the screen cannot show (a counter of the stub's) for up to 30 s.
    static func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<300 where !condition() { try await Task.sleep(for: .milliseconds(100)) }
    }

    @Test("S14: the location action offers a static location or sharing; A starts (OUTGOING, B INCOMING), B joins (2 participants), A's typed position and B's file position reach the other's table, A quits (B's toast and banner), B quits (no banner, end card on both)")
    func realTimeLocationSharing() async throws {
        try await Terminal.withSetup { server, tmux in
            // Bob's device reads its position from a file (the fake provider).
            let positionFile = server.dataDir.appendingPathComponent("bob-position.txt")
            try "22.5431,114.0579\n".write(to: positionFile, atomically: true, encoding: .utf8)
            try await Terminal.start(tmux, server, "alice")
            try await Terminal.start(tmux, server, "bob", ["--location-file", positionFile.path])
            try await tmux.open("alice", "bob")
            try await tmux.open("bob", "alice")

            // The location action: send a location, or share it in real time.
            try await tmux.enter("alice", "/location")
            try await tmux.waitFor("alice", contains: "[location] /location LAT,LNG NAME sends a location · /share shares it in real time")
            try await tmux.enter("alice", "/location 31.23,121.47 People's Square")
            try await tmux.waitFor("alice", contains: "me: [Location] 31.23,121.47 People's Square")
            try await tmux.waitFor("bob", contains: "alice: [Location] 31.23,121.47 People's Square")

            // A starts: A OUTGOING with its banner; B INCOMING with A's name and the start card.
            try await tmux.enter("alice", "/share")
            let started = try await tmux.waitFor("alice", contains: "[sharing] outgoing  participants = 1")
            #expect(started.contains("[location] You are sharing your location"), "\(started)")
            let incoming = try await tmux.waitFor("bob", contains: "[location] alice is sharing location")
            #expect(incoming.contains("alice: [Location sharing started]"), "\(incoming)")

            // B joins: both connected with two participants; B's position comes from its file.
            try await tmux.enter("bob", "/share")
            try await tmux.waitFor("bob", contains: "[sharing] connected  participants = 2")
            try await tmux.waitFor("alice", contains: "[sharing] connected  participants = 2")
            try await tmux.waitFor("alice", contains: "[location] 2 people are sharing location")
            try await tmux.waitFor("bob", contains: "[location] 2 people are sharing location")
            try await tmux.waitFor("alice", "bob's row with the file's position") { screen in
                Self.line(screen, containing: "bob ")?.contains("22.54310") == true && Self.line(screen, containing: "bob ")?.contains("114.05790") == true
            }

            // A types a position: B's table shows it.
            try await tmux.enter("alice", "/here 31.2304,121.4737")
            try await tmux.waitFor("bob", "alice's row with the typed position") { screen in
                let row = Self.line(screen, containing: "alice ")
                return row?.contains("31.23040") == true && row?.contains("121.47370") == true
            }
            try await tmux.enter("alice", "/here 95,10")
            try await tmux.waitFor("alice", contains: "[error 33003]")

            // A quits: B is told and shares alone.
            try await tmux.enter("alice", "/unshare")
            try await tmux.waitFor("bob", contains: "[toast] alice quit location sharing")
            try await tmux.waitFor("bob", contains: "[location] You are sharing your location")
            try await tmux.waitFor("bob", contains: "[sharing] outgoing  participants = 1")
            try await tmux.waitFor("alice", contains: "[location] bob is sharing location")

            // B quits, the last one: no banner anywhere, the end card on both sides.
            try await tmux.enter("bob", "/unshare")
            try await tmux.waitFor("bob", "the end card and no banner") { screen in
                screen.contains("me: [Location sharing ended]") && !Self.lines(screen).contains { $0.hasPrefix("[location] ") && $0.contains("sharing") }
            }
            try await tmux.waitFor("alice", "the end card and no banner") { screen in
                screen.contains("bob: [Location sharing ended]") && !Self.lines(screen).contains { $0.hasPrefix("[location] ") && $0.contains("sharing") }
            }
            let states = tmux.events("alice", "location").map { $0["status"] ?? "" }
            #expect(states.contains("outgoing") && states.contains("connected") && states.contains("incoming") && states.last == "idle", "\(states)")
        }
    }

    @Test("S15: single, tag and broadcast system messages land in the read-only system conversation; the non-persisted broadcast only raises a notification")
    func systemConversation() async throws {
        try await Terminal.withSetup { server, tmux in
            let (_, tagged) = try await server.api.post("/user/tag/set.json", json: ["userId": "alice", "tags": ["vip"]])
            #expect(tagged["code"] as? Int == 200, "\(tagged)")
            try await Terminal.start(tmux, server, "alice")
            let (_, single) = try await server.api.post("/message/system/publish.json", form: [
                "fromUserId": "news", "toUserId": "alice", "objectName": "RC:TxtMsg", "content": #"{"content":"single notice"}"#])
            #expect(single["code"] as? Int == 200, "\(single)")
            try await tmux.waitFor("alice", contains: "[notice] news: single notice")
            let (_, tag) = try await server.api.post("/push.json", json: [
                "fromuserid": "news", "audience": ["tag": ["vip"]],
                "message": ["objectName": "RC:TxtMsg", "content": ["content": "tag notice"]]])
            #expect(tag["code"] as? Int == 200, "\(tag)")
            try await tmux.waitFor("alice", contains: "[notice] news: tag notice")
            let (_, broadcast) = try await server.api.post("/message/broadcast.json", form: [
                "fromUserId": "news", "objectName": "RC:TxtMsg", "content": #"{"content":"broadcast notice"}"#])
            #expect(broadcast["code"] as? Int == 200, "\(broadcast)")
            try await tmux.waitFor("alice", contains: "[notice] news: broadcast notice")
            // Not persisted (RongCloud's 不落地通知): online users see it as a notification only.
            let (_, fleeting) = try await server.api.post("/message/online/broadcast.json", form: [
                "fromUserId": "news", "objectName": "RC:TxtMsg", "content": #"{"content":"fleeting notice"}"#, "isPersisted": "0"])
            #expect(fleeting["code"] as? Int == 200, "\(fleeting)")
            try await tmux.waitFor("alice", contains: "[notice] news: fleeting notice")
            #expect(tmux.events("alice", "notification").allSatisfy { $0["cType"] == "SYS" && $0["tId"] == "news" })

            // The folded System row, then news' conversation: three messages, no input.
            try await tmux.waitFor("alice", contains: "System (3)")
            try await tmux.press("alice", "Enter")
            try await tmux.waitFor("alice", contains: "news (3)")
            try await tmux.press("alice", "Enter")
            let history = try await tmux.waitFor("alice", contains: "news: broadcast notice")
            #expect(history.contains("news: single notice") && history.contains("news: tag notice"), "\(history)")
            #expect(!Self.lines(history).contains { $0.hasPrefix("news: fleeting") }, "never in history:\n\(history)")
            #expect(history.contains("(read-only)") && !history.contains("> ▏"), "no input:\n\(history)")
            // Text goes nowhere; commands still work.
            try await tmux.type("alice", "x")
            try await tmux.type("alice", "/search")
            try await tmux.waitFor("alice", contains: "(read-only) /search▏")
            try await tmux.enter("alice", " notice")
            let found = try await tmux.waitFor("alice", contains: "found 3:")
            let result = try #require(Self.line(found, containing: "found 3:"))
            #expect(!result.contains("fleeting") && found.contains("(read-only)"), "\(found)")
        }
    }

    @Test("S16: with multi-device on, a desktop and two Web sessions of alice stay online; a send on one shows as sent on the others; reading on one clears the others")
    func multiDevice() async throws {
        try await Terminal.withSetup { server, tmux in
            try await Terminal.start(tmux, server, "alice")
            for session in ["alice-web", "alice-web2"] {
                try await tmux.start("alice", session: session, server: server.baseURL, appKey: server.app.appKey,
                                     appSecret: server.app.appSecret, extra: ["--platform", "web"])
                try await tmux.waitFor(session, contains: "[connected]")
            }
            try await Terminal.publish(server, "bob", "alice", "one")
            try await Terminal.publish(server, "bob", "alice", "two")
            for session in ["alice", "alice-web", "alice-web2"] { try await tmux.waitFor(session, contains: "bob (2)") }
            // Read on one Web tab: the others clear.
            try await tmux.press("alice-web", "Enter")
            try await tmux.waitFor("alice-web", contains: "bob: two")
            for session in ["alice", "alice-web2"] {
                try await tmux.waitFor(session, "unread 0") { $0.contains("unread 0") && !$0.contains("bob (2)") }
            }
            // Sent on one, shown as sent on the others.
            try await tmux.enter("alice-web", "sent from the web")
            try await tmux.waitFor("alice-web", contains: "me: sent from the web")
            try await tmux.waitFor("alice-web2", contains: "sent from the web")
            try await tmux.press("alice", "Enter")
            let mirrored = try await tmux.waitFor("alice", contains: "me: sent from the web")
            #expect(mirrored.contains("bob: two"))
            for session in ["alice", "alice-web", "alice-web2"] {
                let screen = try await tmux.screen(session)
                #expect(screen.contains("[connected]") && !screen.contains("[kicked"), "\(session) stays online:\n\(screen)")
            }
        }
    }

    @Test("S16: with multi-device off, a second Web session kicks the first; the desktop session (another class) stays")
    func multiDeviceOff() async throws {
        let tmux = try TmuxHarness()
        do {
            try await withTestServer(try await TestServer.start { $0.messaging.multiDeviceSyncEnabled = false }) { server in
                try await Terminal.start(tmux, server, "alice")
                for session in ["alice-web", "alice-web2"] {
                    try await tmux.start("alice", session: session, server: server.baseURL, appKey: server.app.appKey,
                                         appSecret: server.app.appSecret, extra: ["--platform", "web"])
                    try await tmux.waitFor(session, contains: "[connected]")
                }
                try await tmux.waitFor("alice-web", contains: "[kicked: logged in elsewhere]")
                // The desktop session is another class: a message still reaches it live.
                try await Terminal.publish(server, "bob", "alice", "still here")
                try await tmux.waitFor("alice", contains: "bob (1)")
                let desktop = try await tmux.screen("alice")
                #expect(desktop.contains("[connected]") && !desktop.contains("[kicked"), "\(desktop)")
                #expect(try await tmux.screen("alice-web2").contains("[connected]"))
            }
        } catch {
            await tmux.stop()
            throw error
        }
        await tmux.stop()
    }
}
