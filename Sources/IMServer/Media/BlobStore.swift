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
    /// Puts the local file at `path` (made by the server, e.g. a reduced image) in place of the
    /// blob `id`, durably, and returns its size. The file is moved, not copied, where it can be.
    func replace(appId: Int64, id: String, withFile path: String) async throws -> Int64
    /// The path a blob can be read from, nil when there is none.
    func path(appId: Int64, id: String) async -> String?
    func delete(appId: Int64, id: String) async throws
    /// Every blob of the app (a deleted app).
    func deleteAll(appId: Int64) async throws
}

public struct BlobTooLarge: Error {}

/// A blob store's file operation that failed, with the system's reason.
public struct BlobStoreError: Error, CustomStringConvertible {
    public let description: String
}

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

    public func replace(appId: Int64, id: String, withFile path: String) async throws -> Int64 {
        let file = location(appId: appId, id: id).file
        let size = try await FileSystem.shared.withFileHandle(forReadingAndWritingAt: FilePath(path), options: .modifyFile(createIfNecessary: false)) { handle in
            try await handle.synchronize()
            return try await handle.info().size
        }
        // Within one file system a rename replaces the blob at once; across two, a copy and a removal.
        if rename(path, file) != 0 {
            guard errno == EXDEV else { throw BlobStoreError(description: "rename \(path): \(String(cString: strerror(errno)))") }
            try await FileSystem.shared.replaceItem(at: FilePath(file), withItemAt: FilePath(path))
        }
        return size
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
