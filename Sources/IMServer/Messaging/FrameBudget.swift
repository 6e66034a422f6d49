import IMCore
import IMStore
import IMWire

/// The bytes a reply of many messages may take: every page, list and push that aggregates stored
/// data keeps to `MessageLimits.frameBudgetBytes` (1 MB), well inside the 4 MB frame IMLib accepts,
/// and always carries at least one message (one message alone fits in a frame: its content, push
/// fields and 300 extensions are bounded, see `wireSize`).
enum FrameBudget {
    static let bytes = MessageLimits.frameBudgetBytes

    /// The longest prefix of `messages` that fits `maxBytes` (at least one message), and whether
    /// it had to leave messages out.
    static func prefix(_ messages: [StoredMessage], maxBytes: Int = bytes) -> (messages: [StoredMessage], cut: Bool) {
        var used = 0
        for (index, message) in messages.enumerated() {
            used += message.wireSize
            if used > maxBytes && index > 0 { return (Array(messages[..<index]), true) }
        }
        return (messages, false)
    }
}
