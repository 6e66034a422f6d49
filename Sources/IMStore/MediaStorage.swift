import IMCore

/// A media file a client uploaded: what the server knows of it beside its bytes (kept by the
/// server's `BlobStore`).
public struct MediaFileRecord: Sendable, Equatable {
    public var appId: Int64
    /// Random, URL-safe; names the file in its download URL.
    public var fileId: String
    /// Who uploaded it.
    public var userId: String
    /// image, gif, voice, file or sight.
    public var mediaType: String
    public var name: String
    public var mimeType: String
    public var size: Int64
    public var createdAt: Int64
    /// When it is deleted (the retention of its type; 34020 afterwards).
    public var expiresAt: Int64

    public init(appId: Int64, fileId: String, userId: String, mediaType: String, name: String, mimeType: String, size: Int64,
                createdAt: Int64, expiresAt: Int64) {
        self.appId = appId
        self.fileId = fileId
        self.userId = userId
        self.mediaType = mediaType
        self.name = name
        self.mimeType = mimeType
        self.size = size
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// The media files' records.
public protocol MediaStore: Sendable {
    func insertMediaFile(_ file: MediaFileRecord) async throws
    func mediaFile(appId: Int64, fileId: String) async throws -> MediaFileRecord?
    /// Files of every app that expired before `now`, oldest first, at most `limit`.
    func expiredMediaFiles(before now: Int64, limit: Int) async throws -> [MediaFileRecord]
    func deleteMediaFiles(appId: Int64, fileIds: [String]) async throws
}
