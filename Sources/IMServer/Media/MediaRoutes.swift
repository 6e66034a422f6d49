import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import IMStore

/// Media files over HTTP (docs/MEDIA.md):
///
/// - `POST /media/upload` with `Authorization: Bearer <upload token>` and the file as the body:
///   streamed to disk (never held in memory), limited to the size the token was asked for, its
///   type checked by its first bytes, synced before the answer `{code: 200, fileId, url, size,
///   mediaType, mimeType, expiresAt}`. The `url` goes into the message's content.
/// - `GET /media/{appKey}/{fileId}` with a download token of that app (`Authorization: Bearer`, or
///   `?token=` where a header cannot be set): the file, with Range requests (206, 416), its type,
///   an ETag and private caching (a file never changes). Another app's token gets 401 (1004), an
///   expired file 410 (34020), no such file 404.
struct MediaRoutes: Sendable {
    typealias Context = IMRequestContext

    let core: ServerCore
    let fileIO = FileIO()

    func register(on router: Router<Context>) {
        router.post("/media/upload") { request, context in
            do {
                let original = ["1", "true"].contains(request.uri.queryParameters.get("original") ?? "")
                let (record, processed) = try await core.media.upload(token: Self.bearer(request) ?? "", body: request.body, original: original)
                let host = request.head.authority ?? "\(core.config.network.host):\(core.config.network.port)"
                let base = core.config.serverAPI.publicURL ?? "http://\(host)"
                guard let app = core.apps.app(id: record.appId) else { throw IMError(.appBlockedOrDeleted, "the app no longer exists") }
                var answer: [String: any Sendable] = [
                    "fileId": record.fileId, "url": "\(base)/media/\(app.appKey)/\(record.fileId)", "size": record.size,
                    "mediaType": record.mediaType, "mimeType": record.mimeType, "expiresAt": record.expiresAt,
                ]
                answer["width"] = processed.width
                answer["height"] = processed.height
                answer["duration"] = processed.duration
                answer["thumbnail"] = processed.thumbnail?.base64EncodedString()
                return APIResponse.success(answer)
            } catch {
                return Self.failure(error, core: core, path: "upload")
            }
        }
        router.get("/media/{appKey}/{fileId}") { request, context in
            do {
                let token = Self.bearer(request) ?? request.uri.queryParameters.get("token") ?? ""
                guard let (record, path) = try await core.media.download(token: token, appKey: context.parameters.get("appKey") ?? "",
                                                                         fileId: context.parameters.get("fileId") ?? "") else {
                    return APIResponse.failure(APIError(.apiNotFound, .notFound, "no such file"))
                }
                return try await respond(request, context: context, record: record, path: path)
            } catch {
                return Self.failure(error, core: core, path: "download")
            }
        }
    }

    private func respond(_ request: Request, context: Context, record: MediaFileRecord, path: String) async throws -> Response {
        var headers: HTTPFields = [
            .contentType: record.mimeType, .acceptRanges: "bytes", .eTag: "\"\(record.fileId)\"",
            .cacheControl: "private, max-age=\(max(0, (record.expiresAt - core.clock.nowMilliseconds()) / 1000)), immutable",
            // Users' files never run as pages of this server's origin (a combined forward's HTML,
            // an HTML file sent as a file message): not sniffed, sandboxed, and files are attachments.
            HTTPField.Name("X-Content-Type-Options")!: "nosniff", HTTPField.Name("Content-Security-Policy")!: "sandbox",
        ]
        if record.mediaType == MediaType.file.rawValue {
            let encoded = record.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "file"
            headers[.contentDisposition] = "attachment; filename*=UTF-8''\(encoded)"
        }
        if request.headers[.ifNoneMatch] == "\"\(record.fileId)\"" {
            return Response(status: .notModified, headers: headers)
        }
        let size = Int(record.size)
        if let range = request.headers[.range] {
            guard let bounds = Self.range(range, size: size) else {
                headers[.contentRange] = "bytes */\(size)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
            headers[.contentRange] = "bytes \(bounds.lowerBound)-\(bounds.upperBound)/\(size)"
            headers[.contentLength] = String(bounds.count)
            let body = try await fileIO.loadFile(path: path, range: bounds, context: context)
            return Response(status: .partialContent, headers: headers, body: body)
        }
        headers[.contentLength] = String(size)
        return Response(status: .ok, headers: headers, body: try await fileIO.loadFile(path: path, context: context))
    }

    /// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n`, within the file; nil when unsatisfiable.
    static func range(_ header: String, size: Int) -> ClosedRange<Int>? {
        guard header.hasPrefix("bytes="), size > 0 else { return nil }
        let spec = header.dropFirst(6)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces), last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let suffix = Int(last), suffix > 0 else { return nil }
            return max(0, size - suffix)...(size - 1)
        }
        guard let start = Int(first), start < size, start >= 0 else { return nil }
        let end = last.isEmpty ? size - 1 : min(Int(last) ?? -1, size - 1)
        guard end >= start else { return nil }
        return start...end
    }

    static func bearer(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return nil }
        return String(header.dropFirst(7))
    }

    static func failure(_ error: any Error, core: ServerCore, path: String) -> Response {
        guard let error = error as? IMError else {
            core.logger.error("media \(path) failed", metadata: ["error": "\(error)"])
            return APIResponse.failure(APIError(.mediaUploadFailed, .internalServerError, "the server could not keep or read the file: try again"))
        }
        let status: HTTPResponse.Status
        switch error.code {
        case .apiSignatureFailed: status = .unauthorized
        case .appBlockedOrDeleted: status = .forbidden
        case .apiInternalError: status = .internalServerError
        case .gifTooLarge, .mediaUploadFailed: status = .contentTooLarge
        case .mediaFormatUnsupported: status = .unsupportedMediaType
        case .fileExpired: status = .gone
        default: status = .badRequest
        }
        return APIResponse.failure(APIError(error.code, status, error.message))
    }
}
