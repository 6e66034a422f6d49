/// The limits and defaults of one-to-one messaging, each with the spec line it comes from.
public enum MessageLimits {
    /// 「消息大小超限，消息体最大 128 KB」 (spec/imlib-core.md Appendix A, 30016).
    public static let maxContentBytes = 128 * 1024
    /// 「1 秒钟最多只允许发送 5 条消息」 (spec/imlib-core.md §9.10, 20604).
    public static let clientSendsPerSecond = 5
    /// Offline messages are kept 7 days by default, configurable 1 to 7 (spec/imlib-core.md §8.0).
    public static let defaultOfflineRetentionDays = 7
    public static let offlineRetentionDayRange = 1...7
    /// Remote history pages hold 1 to 100 messages.
    public static let historyCountRange = 1...100
    /// Local history returns at most 20 messages per call (spec/imlib-core.md §9.7).
    public static let localHistoryMaxCount = 20
    /// An object name of a custom type is at most 32 characters (spec/server-api.md §6.2).
    public static let maxObjectNameLength = 32
}

/// User ids: at most 64 bytes of letters, digits and `+ = - _ |` (spec/server-api.md §6.1).
public enum UserID {
    public static let maxBytes = 64

    public static func isValid(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maxBytes else { return false }
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "+"), UInt8(ascii: "="), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "|"):
                continue
            default:
                return false
            }
        }
        return true
    }
}
