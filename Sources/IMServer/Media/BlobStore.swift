import Foundation
import NIOCore
import _NIOFileSystem

/// Where media files' bytes are kept, apart from their records. The default keeps them as files
/// under a directory; nodes of a cluster share one (a network file system mounted on each).
public protocol BlobStore: Sendable {
    /// Writes the bytes of `contents` as the blob `id` of the app; durable (synced) before it
    /// returns. Fails with `BlobTooLarge` past `limit` bytes, leaving nothing behind.
    func write<Contents: AsyncSequence>(appId: Int64, id: String, contents: Contents, limit: Int64) async throws -> Int64
        where Contents.Element == ByteBuffer
    /// The path a blob can be read from, nil when there is none.
    func path(appId: Int64, id: String) async -> String?
    func delete(appId: Int64, id: String) async throws
    /// Every blob of the app (a deleted app).
    func deleteAll(appId: Int64) async throws
}

public struct BlobTooLarge: Error {}

/// Blobs as files: `<directory>/<appId>/<first two characters of the id>/<id>`. A write goes to a
/// temporary file that is synced and renamed into place, so a blob is there whole or not at all.
public struct FileSystemBlobStore: BlobStore {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    private func location(appId: Int64, id: String) -> (folder: String, file: String) {
        let folder = "\(directory)/\(appId)/\(id.prefix(2))"
        return (folder, "\(folder)/\(id)")
    }

    public func write<Contents: AsyncSequence>(appId: Int64, id: String, contents: Contents, limit: Int64) async throws -> Int64
        where Contents.Element == ByteBuffer {
        let (folder, file) = location(appId: appId, id: id)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let temporary = file + ".part"
        var written: Int64 = 0
        do {
            try await FileSystem.shared.withFileHandle(forWritingAt: FilePath(temporary), options: .newFile(replaceExisting: true)) { handle in
                try await handle.withBufferedWriter { writer in
                    for try await buffer in contents {
                        written += Int64(buffer.readableBytes)
                        guard written <= limit else { throw BlobTooLarge() }
                        _ = try await writer.write(contentsOf: buffer)
                    }
                }
                try await handle.synchronize()
            }
            try await FileSystem.shared.moveItem(at: FilePath(temporary), to: FilePath(file))
        } catch {
            _ = try? await FileSystem.shared.removeItem(at: FilePath(temporary))
            throw error
        }
        return written
    }

    public func path(appId: Int64, id: String) async -> String? {
        let file = location(appId: appId, id: id).file
        return FileManager.default.fileExists(atPath: file) ? file : nil
    }

    public func delete(appId: Int64, id: String) async throws {
        _ = try await FileSystem.shared.removeItem(at: FilePath(location(appId: appId, id: id).file))
    }

    public func deleteAll(appId: Int64) async throws {
        _ = try await FileSystem.shared.removeItem(at: FilePath("\(directory)/\(appId)"), strategy: .platformDefault, recursively: true)
    }
}
