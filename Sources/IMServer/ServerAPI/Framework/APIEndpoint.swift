import Foundation
import Hummingbird
import IMCore
import IMStore

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
    /// Failures this endpoint answers with an HTTP status of its own, besides those every endpoint
    /// may answer (`OpenAPIDocument.commonFailures`): status code and description.
    var failures: [Int: String] = [:]
    var handler: Handler
}
