import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// `SensitiveWordStore`: adding or replacing words, removing them, and the limit refused all
    /// or none.
    public func sensitiveWordStore() async throws {
        let area = "SensitiveWordStore"

        func words(_ f: Fixture) async throws -> [String: String?] {
            Dictionary(try await f.store.sensitiveWords(appId: f.appId).map { ($0.word, $0.replacement) }, uniquingKeysWith: { a, _ in a })
        }

        await check(area, "addSensitiveWords adds blocking and replaced words, or replaces them; removeSensitiveWords removes them") { f in
            #expect(try await f.store.sensitiveWords(appId: f.appId).isEmpty)
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "bad", replacement: nil),
                                                                        SensitiveWord(word: "rude", replacement: "***")], limit: 10, now: f.now)
            #expect(try await words(f) == ["bad": nil, "rude": "***"])
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "bad", replacement: "b*d")], limit: 10, now: f.now + 1)
            #expect(try await words(f) == ["bad": "b*d", "rude": "***"], "the same word again replaces it")
            #expect(try await f.store.sensitiveWords(appId: f.appId).count == 2)
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "rude", replacement: nil)], limit: 10, now: f.now + 2)
            #expect(try await words(f) == ["bad": "b*d", "rude": nil], "a replaced word can become a blocking one")
            try await f.store.removeSensitiveWords(appId: f.appId, words: ["rude", "missing"])
            #expect(try await words(f) == ["bad": "b*d"])
        }

        await check(area, "addSensitiveWords refuses with tooManySensitiveWords, adding nothing, a list past the limit") { f in
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "a", replacement: "x"),
                                                                        SensitiveWord(word: "b", replacement: nil)], limit: 3, now: f.now)
            await #expect(throws: StoreRefusal.tooManySensitiveWords(limit: 3)) {
                try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "a", replacement: "changed"),
                                                                            SensitiveWord(word: "c", replacement: nil),
                                                                            SensitiveWord(word: "d", replacement: nil)], limit: 3, now: f.now + 1)
            }
            #expect(try await words(f) == ["a": "x", "b": nil], "nothing of the refused call, the replacement included")
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "a", replacement: "y"),
                                                                        SensitiveWord(word: "c", replacement: nil)], limit: 3, now: f.now + 2)
            #expect(try await words(f) == ["a": "y", "b": nil, "c": nil], "exactly the limit; replacing a word adds none")
            try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "b", replacement: "z")], limit: 3, now: f.now + 3)
            #expect(try await words(f)["b"] == "z", "at the limit a word can still be replaced")
        }
    }
}
