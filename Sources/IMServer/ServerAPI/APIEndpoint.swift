import Foundation
import Hummingbird

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
    /// Most entries of a list, or most characters of a string.
    var limit: Int?

    static func string(_ name: String, required: Bool = false, maxLength: Int? = nil, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .string, required: required, summary: summary, limit: maxLength)
    }
    static func integer(_ name: String, required: Bool = false, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .integer, required: required, summary: summary)
    }
    static func boolean(_ name: String, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .boolean, required: false, summary: summary)
    }
    static func list(_ name: String, required: Bool = false, max: Int? = nil, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .list, required: required, summary: summary, limit: max)
    }
    static func json(_ name: String, required: Bool = false, _ summary: String) -> APIParam {
        APIParam(name: name, kind: .json, required: required, summary: summary)
    }
}

/// A field of a successful response, besides `code`. `type` is an OpenAPI type; `items` the
/// element type of an array ("string" or "object").
struct APIField: Sendable {
    var name: String
    var type: String
    var items: String?
    var summary: String

    init(_ name: String, _ type: String, items: String? = nil, _ summary: String) {
        self.name = name
        self.type = type
        self.items = items
        self.summary = summary
    }
}

/// A Server API endpoint: its path, documentation, parameters and handler.
struct APIEndpoint: Sendable {
    typealias Handler = @Sendable (APICall) async throws -> [String: any Sendable]

    enum Body: Sendable {
        case form
        case json
    }

    var path: String
    var tag: String
    var summary: String
    var body: Body = .form
    var params: [APIParam]
    var response: [APIField] = []
    var handler: Handler
}

/// One authenticated call: the app, its checked parameters, and where the server is reachable.
struct APICall: Sendable {
    let app: AppRecord
    let parameters: APIParameters
    /// `http://host:port` as the caller reached the server (for URLs in responses).
    let baseURL: String

    /// A required string (presence is checked by the dispatcher).
    func required(_ name: String) -> String { parameters.string(name) ?? "" }
    func string(_ name: String) -> String? { parameters.string(name) }
    func list(_ name: String) -> [String] { parameters.list(name) }
    func int(_ name: String) throws -> Int64? { try parameters.int(name) }
    func bool(_ name: String) throws -> Bool? { try parameters.bool(name) }
}

extension APIParam {
    /// Checks the parameter in a call, with 1002 (missing, wrong type) or 1005 (too long).
    func check(_ parameters: APIParameters) throws {
        let present = parameters.string(name) != nil
        if required && (kind == .list ? parameters.list(name).isEmpty : !present) {
            throw APIError.badParameter("\(name) is required: \(summary)")
        }
        guard present else { return }
        switch kind {
        case .string:
            if let limit, let value = parameters.string(name), value.count > limit {
                throw APIError(.apiParameterTooLong, .badRequest, "\(name) is longer than \(limit) characters")
            }
        case .integer:
            _ = try parameters.int(name)
        case .boolean:
            _ = try parameters.bool(name)
        case .list:
            if let limit, parameters.list(name).count > limit {
                throw APIError(.apiParameterTooLong, .badRequest, "\(name) lists more than \(limit) entries; split the call")
            }
        case .json:
            guard let text = parameters.string(name), let data = text.data(using: .utf8),
                  (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil else {
                throw APIError.badParameter("\(name) must be JSON text")
            }
        }
    }
}
