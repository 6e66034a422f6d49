import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `ChatroomStore`: moderation settings by (kind, room, item), and the room history: pages
    /// both ways with `count`, `minSentTime` and `maxBytes`, reads by uid, recall and retention.
    public func chatroomStore() async throws {
        let area = "ChatroomStore"

        func settings(_ f: Fixture, app: Int64? = nil) async throws -> [String] {
            try await f.store.chatroomSettings(appId: app ?? f.appId).map { "\($0.appId) \($0.kind.rawValue) \($0.roomId) \($0.item) \($0.until)" }.sorted()
        }

        await check(area, "settings: put adds or updates one row per (kind, room, item); delete removes the named items of one kind and room") { f in
            let a = f.appId
            #expect(try await f.store.chatroomSettings(appId: a).isEmpty)
            try await f.store.putChatroomSettings([
                ChatroomSettingRecord(appId: a, kind: .block, roomId: "r1", item: "alice", until: f.now + 100),
                ChatroomSettingRecord(appId: a, kind: .gag, roomId: "r1", item: "alice", until: f.now + 200),
                ChatroomSettingRecord(appId: a, kind: .block, roomId: "r2", item: "alice", until: f.now + 300),
                ChatroomSettingRecord(appId: a, kind: .roomMute, roomId: "r1", item: ""),
                ChatroomSettingRecord(appId: a, kind: .keepAlive, roomId: "", item: "r1"),
                ChatroomSettingRecord(appId: a, kind: .lowPriority, roomId: "", item: "RC:TxtMsg"),
            ])
            #expect(try await settings(f) == [
                "\(a) block r1 alice \(f.now + 100)", "\(a) block r2 alice \(f.now + 300)", "\(a) gag r1 alice \(f.now + 200)",
                "\(a) keepAlive  r1 \(Int64.max)", "\(a) lowPriority  RC:TxtMsg \(Int64.max)", "\(a) roomMute r1  \(Int64.max)",
            ])
            try await f.store.putChatroomSettings([ChatroomSettingRecord(appId: a, kind: .block, roomId: "r1", item: "alice", until: f.now + 999)])
            #expect(try await settings(f).filter { $0.hasPrefix("\(a) block r1") } == ["\(a) block r1 alice \(f.now + 999)"], "updated, not added")
            try await f.store.deleteChatroomSettings(appId: a, kind: .block, roomId: "r1", items: ["alice", "nobody"])
            #expect(try await settings(f) == [
                "\(a) block r2 alice \(f.now + 300)", "\(a) gag r1 alice \(f.now + 200)",
                "\(a) keepAlive  r1 \(Int64.max)", "\(a) lowPriority  RC:TxtMsg \(Int64.max)", "\(a) roomMute r1  \(Int64.max)",
            ], "only that kind in that room")
            try await f.store.deleteChatroomSettings(appId: a, kind: .keepAlive, roomId: "", items: ["r1"])
            try await f.store.putChatroomSettings([])
            try await f.store.deleteChatroomSettings(appId: a, kind: .gag, roomId: "r1", items: [])
            #expect(try await settings(f).count == 4)
        }

        await check(area, "history: newest first before recordTime, oldest first after it, count and minSentTime, one room only") { f in
            let t = f.now
            var c: [StoredMessage] = []
            for i in 1...5 { c.append(f.chatroomMessage(from: "u\(i)", room: "r1", at: t + Int64(10 * i))) }
            try await f.store.appendChatroomHistory(Array(c.prefix(3)))
            try await f.store.appendChatroomHistory([f.chatroomMessage(from: "x", room: "r2", at: t + 25)] + c.suffix(2))
            func page(_ recordTime: Int64, _ count: Int, ascending: Bool, minSentTime: Int64 = .min) async throws -> [StoredMessage] {
                try await f.store.chatroomHistory(appId: f.appId, roomId: "r1", recordTime: recordTime, count: count, ascending: ascending,
                                                  minSentTime: minSentTime, maxBytes: .max)
            }
            #expect(try await page(0, 10, ascending: false) == c.reversed(), "recordTime 0 descending: from the newest, as appended")
            #expect(try await page(t + 40, 2, ascending: false) == [c[2], c[1]], "strictly before, count")
            #expect(try await page(t + 20, 10, ascending: true) == [c[2], c[3], c[4]], "strictly after")
            #expect(try await page(0, 2, ascending: true) == [c[0], c[1]])
            #expect(try await page(0, 10, ascending: false, minSentTime: t + 30) == [c[4], c[3], c[2]], "older than minSentTime left out")
            #expect(try await f.store.chatroomHistory(appId: f.appId, roomId: "r3", recordTime: 0, count: 10, ascending: false,
                                                      minSentTime: .min, maxBytes: .max).isEmpty)
        }

        await check(area, "history: maxBytes cuts a page after at least one message") { f in
            var c: [StoredMessage] = []
            for i in 1...3 { c.append(f.chatroomMessage(from: "u", room: "r1", at: f.now + Int64(i), padding: 3000)) }
            try await f.store.appendChatroomHistory(c)
            func page(_ maxBytes: Int) async throws -> [StoredMessage] {
                try await f.store.chatroomHistory(appId: f.appId, roomId: "r1", recordTime: 0, count: 10, ascending: false,
                                                  minSentTime: .min, maxBytes: maxBytes)
            }
            #expect(try await page(c[2].wireSize + c[1].wireSize) == [c[2], c[1]])
            #expect(try await page(c[2].wireSize + c[1].wireSize - 1) == [c[2]])
            #expect(try await page(1) == [c[2]], "at least one message")
        }

        await check(area, "chatroomMessage reads one message by uid; replaceChatroomMessage recalls it in place") { f in
            let c = [f.chatroomMessage(from: "alice", room: "r1", at: f.now + 1), f.chatroomMessage(from: "bob", room: "r1", at: f.now + 2)]
            try await f.store.appendChatroomHistory(c)
            #expect(try await f.store.chatroomMessage(appId: f.appId, uid: c[0].uid) == c[0])
            #expect(try await f.store.chatroomMessage(appId: f.appId, uid: "NOPE-NOPE-NOPE-NOPE") == nil)
            let recall = Data(#"{"operatorId":"alice"}"#.utf8)
            try await f.store.replaceChatroomMessage(appId: f.appId, uid: c[0].uid, objectName: "RC:RcNtf", content: recall)
            var expected = c[0]
            expected.objectName = "RC:RcNtf"
            expected.content = recall
            expected.flags = .isPersisted
            #expect(try await f.store.chatroomMessage(appId: f.appId, uid: c[0].uid) == expected, "shown, not counted, same time and uid")
            #expect(try await f.store.chatroomHistory(appId: f.appId, roomId: "r1", recordTime: 0, count: 10, ascending: true,
                                                      minSentTime: .min, maxBytes: .max) == [expected, c[1]])
            #expect(try await f.store.message(appId: f.appId, uid: c[1].uid) == nil, "room history is not the message log")
        }

        await check(area, "pruneChatroomHistory deletes one app's messages sent before a time") { f in
            // Times from 1970, so that pruning cannot touch what other checks keep in a shared database.
            let other = try await f.otherApp()
            let old = f.chatroomMessage(from: "u", room: "r1", at: 1_000)
            let kept = f.chatroomMessage(from: "u", room: "r1", at: 2_000)
            let newer = f.chatroomMessage(from: "u", room: "r1", at: 3_000)
            let otherOld = f.chatroomMessage(from: "u", room: "r1", at: 1_500, app: other)
            try await f.store.appendChatroomHistory([old, kept, newer, otherOld])
            try await f.store.pruneChatroomHistory(appId: f.appId, before: 2_000)
            #expect(try await f.store.chatroomHistory(appId: f.appId, roomId: "r1", recordTime: 0, count: 10, ascending: true,
                                                      minSentTime: .min, maxBytes: .max) == [kept, newer], "`before` itself is kept")
            #expect(try await f.store.chatroomMessage(appId: f.appId, uid: old.uid) == nil)
            #expect(try await f.store.chatroomMessage(appId: other, uid: otherOld.uid) == otherOld, "another app keeps its own retention")
        }
    }
}
