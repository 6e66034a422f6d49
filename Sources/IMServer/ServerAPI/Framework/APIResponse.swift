import Foundation
import Hummingbird
import IMWire
import IMStore

/// JSON envelope responses: `{"code":200,...}` on success, `{"code":N,"errorMessage":...}` on error.
enum APIResponse {
    static func success(_ fields: [String: any Sendable] = [:]) -> Response {
        var body: [String: Any] = fields
        body["code"] = 200
        return json(body, status: .ok)
    }

    static func failure(_ error: APIError) -> Response {
        json(["code": error.code.rawValue, "errorMessage": FrameCodec.truncated(error.message, maxBytes: FrameCodec.maxErrorMessageBytes)],
             status: error.status)
    }

    static func json(_ object: [String: Any], status: HTTPResponse.Status) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
