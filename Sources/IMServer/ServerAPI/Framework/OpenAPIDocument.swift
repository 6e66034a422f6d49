import Foundation
import IMStore

/// The OpenAPI 3.0 description of the Server API, generated from the endpoint declarations (the
/// same ones the dispatcher checks calls against). Served at `/openapi.json`; a copy is kept in
/// docs/openapi.json and a test keeps the two equal.
enum OpenAPIDocument {
    /// What any endpoint may answer besides success: HTTP status, with RongCloud's code.
    static let commonFailures: [Int: String] = [
        400: "bad parameter (1002) or parameter too long (1005)",
        401: "unknown App-Key or wrong signature (1004)",
        404: "unknown path (404)",
        408: "the request's body did not arrive within httpRequestTimeoutSeconds (1003); the connection is closed",
        413: "the request body is larger than 2 MB (1005)",
        429: "rate limit exceeded (1008)",
        500: "internal error, retry (1000)",
        503: "too many connections from the caller's address (1008, maxConnectionsPerAddress); the connection is closed",
    ]

    static func json(for endpoints: [APIEndpoint]) -> Data {
        var paths: [String: Any] = [:]
        for endpoint in endpoints {
            var properties: [String: Any] = [:]
            for param in endpoint.params {
                var schema: [String: Any]
                switch param.kind {
                case .string: schema = ["type": "string"]
                case .integer: schema = ["type": "integer", "format": "int64"]
                case .boolean: schema = ["type": "boolean"]
                case .list: schema = ["type": "array", "items": ["type": "string"]]
                case .json: schema = ["type": "string", "format": "json"]
                }
                schema["description"] = param.summary
                if let limit = param.limit { schema[param.kind == .list ? "maxItems" : "maxLength"] = limit }
                properties[param.name] = schema
            }
            var body: [String: Any] = ["type": "object", "properties": properties]
            let required = endpoint.params.filter(\.required).map(\.name)
            if !required.isEmpty { body["required"] = required }
            let mediaType = endpoint.body == .json ? "application/json" : "application/x-www-form-urlencoded"

            var responseProperties: [String: Any] = ["code": ["type": "integer", "enum": [200]]]
            for field in endpoint.response {
                var schema: [String: Any] = ["type": field.type, "description": field.summary]
                if let items = field.items { schema["items"] = ["type": items] }
                responseProperties[field.name] = schema
            }
            var responses: [String: Any] = [
                "200": ["description": "success", "content": ["application/json": ["schema": [
                    "type": "object", "required": ["code"], "properties": responseProperties,
                ]]]],
            ]
            for (status, description) in commonFailures.merging(endpoint.failures, uniquingKeysWith: { _, own in own }) {
                responses[String(status)] = ref(description)
            }
            paths[endpoint.path] = ["post": [
                "tags": [endpoint.tag],
                "summary": endpoint.summary,
                "operationId": endpoint.path.dropFirst().replacingOccurrences(of: ".json", with: "").replacingOccurrences(of: "/", with: "_"),
                "requestBody": ["required": true, "content": [mediaType: ["schema": body]]],
                "responses": responses,
            ]]
        }
        let document: [String: Any] = [
            "openapi": "3.0.3",
            "info": [
                "title": "imserver Server API",
                "version": "1.0",
                "description": "RongCloud-compatible Server API. Every call is POST with the headers App-Key, Nonce, Timestamp and Signature = hex SHA1(appSecret + Nonce + Timestamp) (RC- prefixed names also work). Bodies are form-urlencoded (lists as repeated keys or comma-joined values) unless JSON is shown. Every answer is a JSON object with an integer code: 200 on success, RongCloud's business code otherwise.",
            ],
            "servers": [["url": "http://127.0.0.1:8080"]],
            "security": [["AppKey": [], "Nonce": [], "Timestamp": [], "Signature": []]],
            "paths": paths,
            "components": [
                "securitySchemes": [
                    "AppKey": ["type": "apiKey", "in": "header", "name": "App-Key"],
                    "Nonce": ["type": "apiKey", "in": "header", "name": "Nonce"],
                    "Timestamp": ["type": "apiKey", "in": "header", "name": "Timestamp"],
                    "Signature": ["type": "apiKey", "in": "header", "name": "Signature"],
                ],
                "schemas": ["Error": [
                    "type": "object", "required": ["code", "errorMessage"],
                    "properties": [
                        "code": ["type": "integer", "description": "RongCloud business code"],
                        "errorMessage": ["type": "string", "description": "what went wrong and what to do"],
                    ],
                ]],
            ],
        ]
        var data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
        data.append(0x0A)
        return data
    }

    private static func ref(_ description: String) -> [String: Any] {
        ["description": description, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]]
    }
}
