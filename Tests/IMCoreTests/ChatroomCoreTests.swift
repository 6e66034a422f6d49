import IMCore
import Testing

@Suite("Chatroom rules")
struct ChatroomCoreTests {
    @Test("the join history count: -1 none, 0 the default 10, otherwise up to 50; below -1 is invalid")
    func joinHistoryCount() {
        #expect(chatroomJoinHistoryCount(-1) == 0)
        #expect(chatroomJoinHistoryCount(0) == 10)
        #expect(chatroomJoinHistoryCount(20) == 20)
        #expect(chatroomJoinHistoryCount(50) == 50)
        #expect(chatroomJoinHistoryCount(60) == 50)
        #expect(chatroomJoinHistoryCount(-2) == nil)
    }

    @Test("a window takes 20 high + 20 shared; low priority only the shared part; whitelisted always, using shared first")
    func intakeQuota() {
        var quota = ChatroomIntakeQuota()
        // Low priority alone: 20, then refused.
        #expect((0..<25).filter { _ in quota.admit(.low, now: 0) }.count == 20)
        // High priority still has its 20 reserved.
        #expect((0..<25).filter { _ in quota.admit(.high, now: 10) }.count == 20)
        let lateHigh = quota.admit(.high, now: 199), lateLow = quota.admit(.low, now: 199)
        #expect(!lateHigh && !lateLow)
        let lateWhitelisted = quota.admit(.whitelisted, now: 199)
        #expect(lateWhitelisted, "whitelisted messages are admitted past the quota")
        // A new window.
        let nextLow = quota.admit(.low, now: 200), nextHigh = quota.admit(.high, now: 200)
        #expect(nextLow && nextHigh)

        var mixed = ChatroomIntakeQuota()
        #expect((0..<40).filter { _ in mixed.admit(.high, now: 0) }.count == 40, "high priority may use the shared part too")
        let lowAfterHigh = mixed.admit(.low, now: 0)
        #expect(!lowAfterHigh)

        var whitelisted = ChatroomIntakeQuota()
        #expect((0..<20).allSatisfy { _ in whitelisted.admit(.whitelisted, now: 0) })
        #expect(whitelisted.sharedUsed == 20 && whitelisted.highUsed == 0, "whitelisted messages take the shared part first")
        let lowAfterWhitelisted = whitelisted.admit(.low, now: 0), highAfterWhitelisted = whitelisted.admit(.high, now: 0)
        #expect(!lowAfterWhitelisted, "so low priority has nothing left")
        #expect(highAfterWhitelisted)
    }

    @Test("attribute keys are 1-128 characters of letters, digits and + = - _; values at most 4096, extras at most 2048")
    func entryLimits() throws {
        #expect(ChatroomEntryLimits.isValidKey("a+b=c-d_E9"))
        #expect(ChatroomEntryLimits.isValidKey(String(repeating: "k", count: 128)))
        for bad in ["", "has space", "订单", "a@b", String(repeating: "k", count: 129)] {
            #expect(!ChatroomEntryLimits.isValidKey(bad), "\(bad)")
        }
        try ChatroomEntryLimits.check(key: "k", value: String(repeating: "v", count: 4096), extra: String(repeating: "e", count: 2048))
        #expect(throws: IMError.self) { try ChatroomEntryLimits.check(key: "k", value: String(repeating: "v", count: 4097)) }
        #expect(throws: IMError.self) { try ChatroomEntryLimits.check(key: "k", extra: String(repeating: "e", count: 2049)) }
    }

    @Test("RC:chrmKVNotiMsg carries type, key, value and extra")
    func notificationContent() throws {
        let message = ChatroomKVNotificationMessage(type: ChatroomKVNotificationMessage.setType, key: "k", value: "v", extra: "x")
        let decoded = try ChatroomKVNotificationMessage(data: try message.encode())
        #expect(decoded == message)
        #expect(ChatroomKVNotificationMessage.objectName == "RC:chrmKVNotiMsg")
    }
}
