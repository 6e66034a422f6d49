import Hummingbird
import IMCore
import IMStore

/// A Server API failure: RongCloud's business code, HTTP status and a message saying what to do.
public struct APIError: Error, Sendable {
    public let code: ErrorCode
    public let status: HTTPResponse.Status
    public let message: String

    public init(_ code: ErrorCode, _ status: HTTPResponse.Status, _ message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    static func badParameter(_ message: String) -> APIError { APIError(.apiBadParameter, .badRequest, message) }
}
