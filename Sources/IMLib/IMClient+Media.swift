import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMWire

/// Permission the server gives over the connection to upload one file, or to download the app's
/// files for a while.
public struct MediaToken: Sendable, Equatable {
    public var token: String
    /// The upload's URL, or the prefix of the app's file URLs, on the connected server.
    public var url: String
    public var expiresAt: Int64
}

/// A file the server has kept: its URL goes into a media message's content.
public struct UploadedMedia: Sendable, Equatable {
    public var fileId: String
    public var url: String
    public var size: Int64
    public var mediaType: MediaType
    public var mimeType: String
    public var expiresAt: Int64
}

/// Media files: uploaded and downloaded over HTTP with tokens from the connection.
extension IMClient {
    /// Permission to upload one file: refused at once when the type or size is not allowed
    /// (34003 for a GIF over its limit, 34011 for another file too large, 34018 for an empty one).
    public func mediaUploadToken(type: MediaType, fileName: String, size: Int64, mimeType: String = "") async throws -> MediaToken {
        var request = Im_MediaUploadRequest()
        request.mediaType = type.rawValue
        request.fileName = fileName
        request.size = size
        request.mimeType = mimeType
        return Self.token(try await connected().request(.mediaUploadToken, request, timeout: options.requestTimeout).body(Im_MediaToken.self))
    }

    /// Permission to download the app's files for an hour.
    public func mediaDownloadToken() async throws -> MediaToken {
        Self.token(try await connected().request(.mediaDownloadToken, Im_MediaUploadRequest(), timeout: options.requestTimeout)
            .body(Im_MediaToken.self))
    }

    /// Uploads `data` as a file of this type to the connected server and returns where it is kept.
    public func uploadMedia(_ data: Data, type: MediaType, fileName: String, mimeType: String = "") async throws -> UploadedMedia {
        let token = try await mediaUploadToken(type: type, fileName: fileName, size: Int64(data.count), mimeType: mimeType)
        guard let base = connectedServerURL, let url = URL(string: base + token.url) else {
            throw IMError(.connectionUnavailable, "not connected: connect before uploading")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token.token)", forHTTPHeaderField: "Authorization")
        request.setValue(mimeType.isEmpty ? "application/octet-stream" : mimeType, forHTTPHeaderField: "Content-Type")
        let (body, _) = try await URLSession.shared.upload(for: request, from: data)
        let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        guard answer["code"] as? Int == 200, let fileId = answer["fileId"] as? String, let remote = answer["url"] as? String else {
            let code = answer["code"] as? Int ?? ErrorCode.mediaUploadFailed.rawValue
            throw IMError(ErrorCode(code), answer["errorMessage"] as? String ?? "the upload failed")
        }
        return UploadedMedia(fileId: fileId, url: remote, size: (answer["size"] as? NSNumber)?.int64Value ?? Int64(data.count), mediaType: type,
                             mimeType: answer["mimeType"] as? String ?? "", expiresAt: (answer["expiresAt"] as? NSNumber)?.int64Value ?? 0)
    }

    /// Downloads a file of this app's server (a media message's URL): 34020 once it has expired.
    public func downloadMedia(url: String) async throws -> Data {
        let token = try await mediaDownloadToken()
        guard let address = URL(string: url) else { throw IMError(.invalidParameter, "not a URL: \(url.prefix(200))") }
        var request = URLRequest(url: address)
        request.setValue("Bearer \(token.token)", forHTTPHeaderField: "Authorization")
        let (body, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
            throw IMError(ErrorCode(answer["code"] as? Int ?? ErrorCode.mediaUploadFailed.rawValue),
                          answer["errorMessage"] as? String ?? "the download failed")
        }
        return body
    }

    private static func token(_ wire: Im_MediaToken) -> MediaToken {
        MediaToken(token: wire.token, url: wire.url, expiresAt: wire.expiresAt)
    }
}
