import Foundation
import IMCore
import IMStore
import IMWire
import Logging
import NIOCore

/// Media files: tokens a signed-in client asks for over its connection, uploads streamed to the
/// `BlobStore` with the limits of their type, downloads for the app's users, and the sweep that
/// deletes files past their retention.
///
/// A token has the connect token's form (`TokenService.sign`): its claims (app key, user, purpose,
/// media type, size, expiry) signed with HMAC-SHA256 under the app's secret, so a token names its
/// app and cannot be made or stretched by a client, and a new app secret ends every earlier token.
public final class MediaService: Sendable {
    struct Claims: Codable {
        /// App key.
        var a: String
        /// User id.
        var u: String
        /// "up" (one upload) or "down" (the app's files).
        var p: String
        /// Media type of an upload.
        var t: String?
        /// Bytes an upload may carry.
        var s: Int64?
        /// File name of an upload.
        var n: String?
        /// MIME type the client gave.
        var m: String?
        /// Expiry, ms.
        var e: Int64
    }

    let store: any MediaStore
    let blobs: any BlobStore
    let processor: MediaProcessor
    let apps: AppRegistry
    let clock: any WallClock
    let logger: Logger

    init(store: any MediaStore, blobs: any BlobStore, processor: MediaProcessor, apps: AppRegistry, clock: any WallClock, logger: Logger) {
        self.store = store
        self.blobs = blobs
        self.processor = processor
        self.apps = apps
        self.clock = clock
        self.logger = logger
    }

    // MARK: tokens

    /// MEDIA_UPLOAD_TOKEN: permission to upload one file of this type and size, checked now. Its
    /// URL is a path on the server the client is connected to.
    func uploadToken(_ request: Im_MediaUploadRequest, for session: ClientSession) throws -> Im_MediaToken {
        guard let app = apps.app(id: session.appId) else { throw IMError(.appBlockedOrDeleted, "this app no longer exists") }
        guard let type = MediaType(rawValue: request.mediaType) else {
            throw IMError(.mediaFormatUnsupported, "media type '\(request.mediaType.prefix(32))' is not one of image, gif, voice, file, sight")
        }
        guard request.size > 0 else { throw IMError(.mediaFileMissing, "the file is empty: there is nothing to upload") }
        let limit = apps.settings(appId: session.appId).media.maxBytes(type)
        if request.size > limit {
            throw IMError(type == .gif ? .gifTooLarge : .mediaUploadFailed,
                          "the \(type.rawValue) is \(request.size) bytes; this app takes at most \(limit) (\(limit / 1_048_576) MB)")
        }
        guard TextLength.bytes(request.fileName) <= MediaLimits.maxFileNameBytes, !request.fileName.contains("/") else {
            throw IMError(.invalidParameter, "the file name must be at most \(MediaLimits.maxFileNameBytes) bytes, without '/'")
        }
        let expires = clock.nowMilliseconds() + Int64(MediaLimits.uploadTokenSeconds) * 1000
        var token = Im_MediaToken()
        token.token = TokenService.sign(Claims(a: app.appKey, u: session.userId, p: "up", t: type.rawValue, s: request.size,
                                      n: request.fileName.isEmpty ? type.rawValue : request.fileName,
                                      m: request.mimeType.isEmpty ? nil : String(request.mimeType.prefix(100)), e: expires),
                                        secret: app.appSecret)
        token.url = "/media/upload"
        token.expiresAt = expires
        return token
    }

    /// MEDIA_DOWNLOAD_TOKEN: permission to read the app's files for an hour.
    func downloadToken(for session: ClientSession) throws -> Im_MediaToken {
        guard let app = apps.app(id: session.appId) else { throw IMError(.appBlockedOrDeleted, "this app no longer exists") }
        let expires = clock.nowMilliseconds() + Int64(MediaLimits.downloadTokenSeconds) * 1000
        var token = Im_MediaToken()
        token.token = TokenService.sign(Claims(a: app.appKey, u: session.userId, p: "down", e: expires), secret: app.appSecret)
        token.url = "/media/\(app.appKey)/"
        token.expiresAt = expires
        return token
    }

    /// The claims of a token for `purpose`, or 1004 (unknown app, bad signature, expired).
    func verify(_ token: String, purpose: String) async throws -> (AppRecord, Claims) {
        guard let unverified = TokenService.Unverified<Claims>(token), case let claims = unverified.claims, claims.p == purpose,
              let app = await apps.find(key: claims.a) else {
            throw IMError(.apiSignatureFailed, "missing or malformed media token: ask the connection for one (MEDIA_\(purpose == "up" ? "UPLOAD" : "DOWNLOAD")_TOKEN)")
        }
        guard unverified.isSigned(secret: app.appSecret) else {
            throw IMError(.apiSignatureFailed, "the media token's signature does not match: ask the connection for a new one")
        }
        guard claims.e > clock.nowMilliseconds() else {
            throw IMError(.apiSignatureFailed, "the media token has expired: ask the connection for a new one")
        }
        guard !app.banned else { throw IMError(.appBlockedOrDeleted, "app \(app.appKey) is banned by the server's operator") }
        return (app, claims)
    }

    // MARK: upload and download

    /// Stores an upload: its bytes streamed to the blob store within the token's size, its type
    /// checked by its first bytes, then read by `MediaProcessor` (checked, measured, thumbnailed;
    /// an image not sent as `original` reduced to 960 px), then its record. Returns the record and
    /// what the processor found.
    func upload<Body: AsyncSequence>(token: String, body: Body, original: Bool) async throws -> (MediaFileRecord, ProcessedMedia)
        where Body.Element == ByteBuffer {
        let (app, claims) = try await verify(token, purpose: "up")
        guard let type = claims.t.flatMap(MediaType.init(rawValue:)), let allowed = claims.s else {
            throw IMError(.apiSignatureFailed, "not an upload token")
        }
        // 24 of 36 characters: 124 bits, not to be guessed.
        let fileId = AppRegistry.randomCredential(length: 24)
        let sniffer = MediaSniffer()
        let counted = SniffingSequence(base: body, sniffer: sniffer)
        let size: Int64
        do {
            size = try await blobs.write(appId: app.id, id: fileId, contents: counted, limit: allowed)
        } catch is BlobTooLarge {
            throw IMError(type == .gif ? .gifTooLarge : .mediaUploadFailed,
                          "the upload is larger than the \(allowed) bytes its token was asked for: ask for a token with the file's size")
        }
        guard size > 0 else {
            try? await blobs.delete(appId: app.id, id: fileId)
            throw IMError(.mediaFileMissing, "the upload carried no bytes")
        }
        guard var mime = sniffer.mimeType(for: type) else {
            try? await blobs.delete(appId: app.id, id: fileId)
            throw IMError(.mediaFormatUnsupported, "the file's content is not a \(type.rawValue) this server takes (\(MediaSniffer.accepted(type)))")
        }
        let settings = apps.settings(appId: app.id).media
        var processed = ProcessedMedia()
        var stored = size
        do {
            guard let path = await blobs.path(appId: app.id, id: fileId) else { throw IMError(.apiInternalError, "the upload was not kept: try again") }
            processed = try await processor.process(path: path, type: type, original: original,
                                                    limits: .init(maxSightSeconds: settings.maxSightSeconds, maxVoiceSeconds: settings.maxVoiceSeconds))
            if let replacement = processed.replacement {
                stored = try await blobs.replace(appId: app.id, id: fileId, withFile: replacement)
                mime = "image/jpeg"
                processed.replacement = nil
            }
        } catch {
            if let replacement = processed.replacement { try? FileManager.default.removeItem(atPath: replacement) }
            try? await blobs.delete(appId: app.id, id: fileId)
            throw error
        }
        let now = clock.nowMilliseconds()
        let days = settings.retention(type)
        let record = MediaFileRecord(appId: app.id, fileId: fileId, userId: claims.u, mediaType: type.rawValue, name: claims.n ?? type.rawValue,
                                     mimeType: type == .file ? (claims.m ?? mime) : mime, size: stored, createdAt: now,
                                     expiresAt: now + Int64(days) * 86_400_000)
        do {
            try await store.insertMediaFile(record)
        } catch {
            try? await blobs.delete(appId: app.id, id: fileId)
            throw error
        }
        logger.debug("media uploaded", metadata: ["appKey": "\(app.appKey)", "fileId": "\(fileId)", "size": "\(stored)", "type": "\(type.rawValue)"])
        return (record, processed)
    }

    /// The record and path of one of the app's files, for a download token of that app: 1004 for
    /// another app's token, 34020 once expired, nil when there is no such file.
    func download(token: String, appKey: String, fileId: String) async throws -> (MediaFileRecord, String)? {
        let (app, _) = try await verify(token, purpose: "down")
        guard app.appKey == appKey else {
            throw IMError(.apiSignatureFailed, "this token is for another app's files")
        }
        guard let record = try await store.mediaFile(appId: app.id, fileId: fileId) else { return nil }
        guard record.expiresAt > clock.nowMilliseconds() else {
            throw IMError(.fileExpired, "the file has expired (kept \(apps.settings(appId: app.id).media.retention(MediaType(rawValue: record.mediaType) ?? .file)) days)")
        }
        guard let path = await blobs.path(appId: app.id, id: fileId) else { return nil }
        return (record, path)
    }

    // MARK: retention

    /// Deletes files past their retention, in batches; returns how many.
    @discardableResult
    public func sweep(now: Int64, batch: Int = 500) async throws -> Int {
        var deleted = 0
        while true {
            let expired = try await store.expiredMediaFiles(before: now, limit: batch)
            for file in expired {
                do {
                    try await blobs.delete(appId: file.appId, id: file.fileId)
                } catch {
                    logger.debug("an expired media file was already gone", metadata: ["fileId": "\(file.fileId)"])
                }
            }
            for (appId, files) in Dictionary(grouping: expired, by: \.appId) {
                try await store.deleteMediaFiles(appId: appId, fileIds: files.map(\.fileId))
            }
            deleted += expired.count
            guard expired.count == batch else { return deleted }
            await Task.yield()
        }
    }

}

/// The body of an upload, its first bytes kept for `MediaSniffer` as they pass.
struct SniffingSequence<Base: AsyncSequence>: AsyncSequence where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let sniffer: MediaSniffer

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let sniffer: MediaSniffer

        mutating func next() async throws -> ByteBuffer? {
            guard let buffer = try await base.next() else { return nil }
            sniffer.take(buffer)
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), sniffer: sniffer) }
}
