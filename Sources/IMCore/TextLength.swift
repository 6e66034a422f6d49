/// How the server measures text against its limits.
///
/// Every limit is in UTF-8 bytes, except where RongCloud's documents give a limit in characters
/// (字符): those count UTF-16 code units, which is what RongCloud's SDKs count (`NSString.length`,
/// Java's `String.length()`, JavaScript's `length`), so whatever RongCloud accepts is accepted
/// here. A UTF-16 code unit is at most 3 UTF-8 bytes, so a limit of N characters is also a limit
/// of 3N bytes. Swift's `String.count` (grapheme clusters) is never used for a limit: one cluster
/// ("a" followed by a million combining marks) can be megabytes.
public enum TextLength {
    /// Characters as RongCloud counts them: UTF-16 code units.
    @inlinable
    public static func characters(_ text: String) -> Int { text.utf16.count }

    /// UTF-8 bytes.
    @inlinable
    public static func bytes(_ text: String) -> Int { text.utf8.count }

    /// The most UTF-8 bytes a text of `characters` UTF-16 code units can take.
    public static func maxBytes(characters: Int) -> Int { characters * 3 }

    /// `text` shortened for an error message: at most `limit` characters, with an ellipsis when
    /// cut, so a reply never echoes megabytes of what the caller sent.
    public static func quoted(_ text: String, limit: Int = 64) -> String {
        let scalars = text.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: limit, limitedBy: scalars.endIndex), end != scalars.endIndex else {
            return "'\(text)'"
        }
        return "'\(String(scalars[scalars.startIndex..<end]))…'"
    }
}

/// Limits on the fields a message carries besides its content, and the check both the client
/// gateway and the Server API apply to them.
public enum MessageFieldLimits {
    /// Push text shown in a notification. RongCloud's documents give no figure; 1 KB holds far more
    /// than a notification shows (about 340 Chinese characters) and keeps an APNs payload (4 KB in
    /// all) within its limit.
    public static let maxPushContentBytes = 1024
    /// Push data handed to the app with a notification (`appData` on iOS, `pushData` on Android):
    /// at most the 4 KB of one APNs payload.
    public static let maxPushDataBytes = 4096
    /// The `extra` of a recall and of chatroom moderation notices (RongCloud gives no figure; the
    /// chatroom attribute notification's 2048 characters are used).
    public static let maxExtraCharacters = 2048

    /// Checks an object name: 1 to 32 characters ("长度不超过 32 个字符", spec/server-api.md §6.2).
    public static func isValidObjectName(_ name: String) -> Bool {
        !name.isEmpty && TextLength.characters(name) <= MessageLimits.maxObjectNameLength
    }

    /// The object name, push content and push data of a message; throws `code` (33003 from a
    /// client, 1005 from the Server API) naming the field that is too long.
    public static func check(objectName: String, pushContent: String, pushData: String, code: ErrorCode = .invalidParameter) throws {
        guard isValidObjectName(objectName) else {
            throw IMError(code, "objectName must be 1 to \(MessageLimits.maxObjectNameLength) characters, got \(TextLength.characters(objectName)): \(TextLength.quoted(objectName))")
        }
        guard TextLength.bytes(pushContent) <= maxPushContentBytes else {
            throw IMError(code, "pushContent is \(TextLength.bytes(pushContent)) bytes; at most \(maxPushContentBytes) are allowed")
        }
        guard TextLength.bytes(pushData) <= maxPushDataBytes else {
            throw IMError(code, "pushData is \(TextLength.bytes(pushData)) bytes; at most \(maxPushDataBytes) are allowed")
        }
    }
}
