import Foundation
import IMCore
import Testing

@Suite("IMCore: conversation state rules")
struct ConversationStateCoreTests {
    @Test("quiet hours: HH:MM:SS and 0 < spanMins < 1440")
    func quietHoursValidation() throws {
        try QuietHours(startTime: "00:00:00", spanMinutes: 1439).validate()
        try QuietHours(startTime: "23:59:59", spanMinutes: 1).validate()
        for (start, span) in [("00:00:00", 0), ("00:00:00", 1440), ("24:00:00", 60), ("7:00:00", 60), ("07:00", 60), ("07:00:60", 60)] {
            #expect(throws: IMError.self, "\(start) for \(span)") { try QuietHours(startTime: start, spanMinutes: span).validate() }
        }
        #expect(throws: IMError.self) { try QuietHours(startTime: "01:00:00", spanMinutes: 30, level: .default).validate() }
        #expect(throws: IMError.self) { try QuietHours(startTime: "01:00:00", spanMinutes: 30, timeZone: "Mars/Olympus").validate() }
    }

    @Test("quiet hours cover their window in their time zone, also across midnight")
    func quietHoursWindow() {
        // 2024-01-01T00:00:00Z
        let midnightUTC: Int64 = 1_704_067_200_000
        let night = QuietHours(startTime: "22:00:00", spanMinutes: 480)
        #expect(night.covers(milliseconds: midnightUTC))
        #expect(night.covers(milliseconds: midnightUTC - 2 * 3_600_000))
        #expect(!night.covers(milliseconds: midnightUTC - 2 * 3_600_000 - 1000))
        #expect(night.covers(milliseconds: midnightUTC + 8 * 3_600_000 - 3_600_000 * 2 - 1000))
        #expect(!night.covers(milliseconds: midnightUTC + 6 * 3_600_000))
        // 22:00 in Shanghai (UTC+8) is 14:00 UTC.
        let shanghai = QuietHours(startTime: "22:00:00", spanMinutes: 60, timeZone: "Asia/Shanghai")
        #expect(shanghai.covers(milliseconds: midnightUTC + 14 * 3_600_000 + 60_000))
        #expect(!shanghai.covers(milliseconds: midnightUTC + 22 * 3_600_000 + 60_000))
        let allDay = QuietHours(startTime: "00:00:00", spanMinutes: 1439)
        #expect(allDay.covers(milliseconds: midnightUTC + 23 * 3_600_000 + 58 * 60_000))
        #expect(!allDay.covers(milliseconds: midnightUTC + 23 * 3_600_000 + 59 * 60_000 + 1000))
    }

    @Test("notification levels: 1 and above is do-not-disturb; mentions get through as the level says")
    func levels() {
        #expect(PushNotificationLevel.allCases.filter(\.isDoNotDisturb) == [.mention, .mentionUsers, .mentionAll, .blocked])
        #expect(PushNotificationLevel.mention.allowsPush(mentionsUser: false, mentionsEveryone: true))
        #expect(!PushNotificationLevel.mentionUsers.allowsPush(mentionsUser: false, mentionsEveryone: true))
        #expect(!PushNotificationLevel.mentionAll.allowsPush(mentionsUser: true, mentionsEveryone: false))
        #expect(!PushNotificationLevel.blocked.allowsPush(mentionsUser: true, mentionsEveryone: true))
        #expect(PushNotificationLevel.default.allowsPush(mentionsUser: false, mentionsEveryone: false))
    }

    @Test("tag rules: ids of 1-10 characters, names of 1-15, 1-1000 private, group or system conversations")
    func tagRules() throws {
        try ConversationStateRules.checkTagId("abcdefghij")
        #expect(throws: IMError.self) { try ConversationStateRules.checkTagId("abcdefghijk") }
        try ConversationStateRules.checkTagName("fifteen chars!!")
        #expect(throws: IMError.self) { try ConversationStateRules.checkTagName("sixteen chars!!!") }
        let thousand = (0..<1000).map { ConversationIdentifier(.group, targetId: "g\($0)") }
        try ConversationStateRules.checkTaggedConversations(thousand)
        let tooMany = #expect(throws: IMError.self) { try ConversationStateRules.checkTaggedConversations(thousand + thousand.prefix(1)) }
        #expect(tooMany?.code == .tagConversationsExceeded)
        let chatroom = #expect(throws: IMError.self) {
            try ConversationStateRules.checkTaggedConversations([ConversationIdentifier(.chatroom, targetId: "room")])
        }
        #expect(chatroom?.code == .tagUnsupportedConversationType)
    }
}
