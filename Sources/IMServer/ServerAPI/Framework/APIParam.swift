import Foundation
import IMCore
import IMStore

/// One parameter of a Server API endpoint. The dispatcher checks presence, type, list size and
/// length from this declaration before the handler runs, and the OpenAPI document is generated
/// from it, so the two cannot drift apart.
struct APIParam: Sendable {
    enum Kind: String, Sendable {
        /// Text.
        case string
        /// A whole number.
        case integer
        /// true/false, True/False or 1/0.
        case boolean
        /// Repeated keys or one comma-joined value.
        case list
        /// JSON text (an object or an array).
        case json
    }

    var name: String
    var kind: Kind
    var required: Bool
    var summary: String
    /// Most entries of a list, or most characters (`TextLength.characters`) of a string; a string
    /// without one has `defaultMaxCharacters`.
    var limit: Int?
    /// A rule every value (every entry of a list) must follow.
    var format: Format?
    /// The code a string longer than `limit` gets (1005 unless the endpoint's own code is RongCloud's).
    var tooLong: ErrorCode = .apiParameterTooLong
    /// Most characters of one entry of a list (`defaultMaxCharacters` when nil).
    var entryLength: Int?
    /// The values a whole number may take (besides the bound every number has,
    /// `APIParameters.maxIntegerMagnitude`).
    var range: ClosedRange<Int64>?

    /// What a string or list entry must look like.
    enum Format: Sendable {
        /// A user, group, chatroom or ultra group id: 1 to 64 bytes of letters, digits and + = - _ |.
        case id
    }

    /// A user, group, chatroom or ultra group id (1002 when it is not one).
    static func id(_ name: String, required: Bool = false, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .string, required: required, summary: summary, limit: UserID.maxBytes, format: .id)
    }
    /// A list of ids (1002 when an entry is not one).
    static func ids(_ name: String, required: Bool = false, max: Int? = nil, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .list, required: required, summary: summary, limit: max, format: .id)
    }

    static func string(_ name: String, required: Bool = false, maxLength: Int? = nil, tooLong: ErrorCode = .apiParameterTooLong,
                       _ summary: String) -> APIParam {
        APIParam(name: name, kind: .string, required: required, summary: summary, limit: maxLength, tooLong: tooLong)
    }
    static func integer(_ name: String, required: Bool = false, in range: ClosedRange<Int64>? = nil, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .integer, required: required, summary: summary, range: range)
    }
    /// A time in milliseconds since 1970 (0 to the end of the year 9999).
    static func time(_ name: String, required: Bool = false, _ summary: String) -> APIParam {
        integer(name, required: required, in: 0...APIParameters.maxIntegerMagnitude, summary)
    }
    static func boolean(_ name: String, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .boolean, required: false, summary: summary)
    }
    static func list(_ name: String, required: Bool = false, max: Int? = nil, entryLength: Int? = nil, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .list, required: required, summary: summary, limit: max, entryLength: entryLength)
    }
    static func json(_ name: String, required: Bool = false, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .json, required: required, summary: summary)
    }
}

extension APIParam {
    /// Characters a string parameter (or one entry of a list) may have when its declaration names
    /// no limit: ids, names, URLs and words all fit. Contents and JSON declare their own, and
    /// the request body (`ServerAPI.maxBodyBytes`) bounds everything.
    static let defaultMaxCharacters = 1024

    /// Checks the parameter in a call, with 1002 (missing, wrong type) or 1005 (too long). Every
    /// value of a repeated key is checked, not only the first.
    func check(_ parameters: APIParameters) throws {
        if kind == .list {
            let list = parameters.list(name)
            if required && list.isEmpty { throw APIError.badParameter("\(name) is required: \(summary)") }
            if let limit, list.count > limit {
                throw APIError(.apiParameterTooLong, .badRequest, "\(name) lists more than \(limit) entries; split the call")
            }
            if format == .id, let bad = list.first(where: { !UserID.isValid($0) }) {
                throw APIError.badParameter("\(name) entry \(TextLength.quoted(bad)) is not a valid id: use \(UserID.rule)")
            }
            let most = entryLength ?? Self.defaultMaxCharacters
            for entry in list where TextLength.characters(entry) > most {
                throw APIError(.apiParameterTooLong, .badRequest, "an entry of \(name) is longer than \(most) characters")
            }
            return
        }
        let present = parameters.string(name) != nil
        if required && !present {
            throw APIError.badParameter("\(name) is required: \(summary)")
        }
        if format == .id, let bad = (parameters.values[name] ?? []).first(where: { !$0.isEmpty && !UserID.isValid($0) }) {
            throw APIError.badParameter("\(name) \(TextLength.quoted(bad)) is not a valid id: use \(UserID.rule)")
        }
        if kind == .string || kind == .integer || kind == .boolean {
            let most = kind == .string ? (limit ?? Self.defaultMaxCharacters) : Self.defaultMaxCharacters
            for value in parameters.values[name] ?? [] where TextLength.characters(value) > most {
                throw APIError(kind == .string ? tooLong : .apiParameterTooLong, .badRequest, "\(name) is longer than \(most) characters")
            }
        }
        guard present else { return }
        switch kind {
        case .string:
            break
        case .integer:
            if let value = try parameters.int(name), let range, !range.contains(value) {
                throw APIError.badParameter("\(name) must be between \(range.lowerBound) and \(range.upperBound), got \(value)")
            }
        case .boolean:
            _ = try parameters.bool(name)
        case .list:
            break
        case .json:
            guard let text = parameters.string(name), let data = text.data(using: .utf8),
                  (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil else {
                throw APIError.badParameter("\(name) must be JSON text")
            }
        }
    }
}
