import Foundation

/// The rule every message content meets, whoever sends it (a client, the Server API, a chatroom
/// entry or an ultra group modification): a JSON object of at most 128 KB.
public enum MessageContentRule {
    public enum Violation: Sendable, Equatable {
        case tooLarge(bytes: Int)
        case notAnObject
    }

    /// What is wrong with the content, or nil when it meets the rule.
    public static func violation(of content: Data) -> Violation? {
        guard content.count <= MessageLimits.maxContentBytes else { return .tooLarge(bytes: content.count) }
        guard JSONSyntax.isObject(content) else { return .notAnObject }
        return nil
    }

    /// The words for a violation, naming the field as the caller knows it.
    public static func message(_ violation: Violation, field: String = "message content") -> String {
        switch violation {
        case .tooLarge(let bytes):
            "\(field) is \(bytes) bytes; the limit is 128 KB (\(MessageLimits.maxContentBytes) bytes): send large data as a media file"
        case .notAnObject:
            "\(field) must be a JSON object, e.g. {\"content\":\"hello\"} for RC:TxtMsg"
        }
    }
}
