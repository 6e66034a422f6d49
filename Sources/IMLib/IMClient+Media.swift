import AsyncHTTPClient
import Foundation
import IMCore
import IMWire
import NIOCore
import NIOHTTP1
import Synchronization
import _NIOFileSystem

/// Permission the server gives over the connection to upload one file, or to download the app's
/// files for a while.
public struct MediaToken: Sendable, Equatable {
    public var token: String
    /// The upload's URL, or the prefix of the app's file URLs, on the connected server.
    public var url: String
    public var expiresAt: Int64
}

/// What `sendMediaMessage` reports before it returns: RongCloud's attached and progress callbacks.
/// (Success is the returned message; an error is the thrown `SendMessageError`; a cancel is the
/// thrown `MediaSendCanceled`.)
public enum MediaSendEvent: Sendable {
    /// The message is stored on this device with status `sending`, before its file is uploaded.
    case attached(Message)
    /// Upload progress, 0 to 100, rising; 100 once the server has kept the file.
    case progress(Int, Message)
}

/// A media send canceled (`cancelSendMediaMessage`, or the caller's task canceled) before the
/// message was sent: nothing reached the server's conversation, and the local message has status
/// `canceled` (RongCloud's cancel callback).
public struct MediaSendCanceled: Error, Sendable, CustomStringConvertible {
    public let message: Message
    public var description: String { "the media send of local message \(message.messageId) was canceled" }
}

/// The custom-upload hook's job (RongCloud's `uploadPrepare` with `RCUploadImageStatusListener`):
/// the app uploads the file to its own storage, reports progress, and returns the file's URL;
/// IMLib then sends the message with that URL.
public struct MediaUploadJob: Sendable {
    /// The message as stored, with status `sending`.
    public let message: Message
    /// The file to upload.
    public let localPath: String
    /// Reports progress, 0 to 100.
    public let progress: @Sendable (Int) -> Void
}

/// Media downloads' progress and ends, for every download of this client (those the app asked for
/// and automatic ones, such as small GIFs on receipt).
public enum MediaDownloadEvent: Sendable, Equatable {
    /// 0 to 100, rising.
    case progress(messageId: Int64, percent: Int)
    /// The file is at `path` under the SDK's media folder, recorded with the message.
    case completed(messageId: Int64, path: String)
    case failed(messageId: Int64, code: ErrorCode)
    case canceled(messageId: Int64)
}

/// A media upload or download that can be canceled by its message's id.
final class MediaTransfer: Sendable {
    private let state = Mutex<(canceled: Bool, actions: [@Sendable () -> Void])>((false, []))

    func cancel() {
        let actions = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.canceled else { return [] }
            state.canceled = true
            defer { state.actions = [] }
            return state.actions
        }
        for action in actions { action() }
    }

    var isCanceled: Bool { state.withLock { $0.canceled } }

    /// Runs `action` on cancel (at once if already canceled).
    func onCancel(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.canceled { return true }
            state.actions.append(action)
            return false
        }
        if now { action() }
    }
}

/// Media files: uploaded and downloaded over HTTP with tokens from the connection; media messages
/// sent with their file, and downloaded into the SDK's media folder.
extension IMClient {
    // MARK: tokens

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

    private static func token(_ wire: Im_MediaToken) -> MediaToken {
        MediaToken(token: wire.token, url: wire.url, expiresAt: wire.expiresAt)
    }

    // MARK: upload

    /// Uploads `data` as a file of this type to the connected server and returns where it is kept
    /// and what the server found (thumbnail, size, duration). `original`: keep an image as sent
    /// instead of reduced to 960 px.
    public func uploadMedia(_ data: Data, type: MediaType, fileName: String, mimeType: String = "", original: Bool = false) async throws -> UploadedMedia {
        let token = try await mediaUploadToken(type: type, fileName: fileName, size: Int64(data.count), mimeType: mimeType)
        return try await Self.post(.bytes(ByteBuffer(bytes: data)), to: try uploadURL(token, original: original),
                                   token: token, type: type, mimeType: mimeType, size: Int64(data.count))
    }

    /// Uploads the file at `path`, streamed from disk (never held in memory), reporting progress
    /// from 0 to 100. Canceling the calling task stops the upload.
    public func uploadMedia(file path: String, type: MediaType, fileName: String? = nil, mimeType: String = "", original: Bool = false,
                            progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> UploadedMedia {
        let size = try Self.fileSize(path)
        let name = fileName ?? URL(fileURLWithPath: path).lastPathComponent
        let token = try await mediaUploadToken(type: type, fileName: name, size: size, mimeType: mimeType)
        let url = try uploadURL(token, original: original)
        let reporter = ProgressReporter(total: size, report: progress)
        reporter.report(0)
        let media = try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(path)) { handle in
            let chunks = CountedChunks(base: handle.readChunks(chunkLength: .kibibytes(256)), reporter: reporter)
            return try await Self.post(.stream(chunks, length: .known(size)), to: url, token: token, type: type, mimeType: mimeType, size: size)
        }
        reporter.finish()
        return media
    }

    private func uploadURL(_ token: MediaToken, original: Bool) throws -> String {
        guard let base = connectedServerURL else { throw IMError(.connectionUnavailable, "not connected: connect before uploading") }
        return base + token.url + (original ? "?original=true" : "")
    }

    private static func post(_ body: HTTPClientRequest.Body, to url: String, token: MediaToken, type: MediaType, mimeType: String,
                             size: Int64) async throws -> UploadedMedia {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token.token)")
        request.headers.add(name: "Content-Type", value: mimeType.isEmpty ? "application/octet-stream" : mimeType)
        request.body = body
        let answer: [String: Any]
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: transferTimeout(size))
            let bytes = try await response.body.collect(upTo: 1 << 20)
            answer = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
        } catch let error as HTTPClientError where error == .cancelled {
            throw CancellationError()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw IMError(.mediaUploadFailed, "the upload failed: \(error)")
        }
        guard answer["code"] as? Int == 200, let fileId = answer["fileId"] as? String, let remote = answer["url"] as? String else {
            let code = answer["code"] as? Int ?? ErrorCode.mediaUploadFailed.rawValue
            throw IMError(ErrorCode(code), answer["errorMessage"] as? String ?? "the upload failed")
        }
        func number(_ key: String) -> Int64? { (answer[key] as? NSNumber)?.int64Value }
        return UploadedMedia(fileId: fileId, url: remote, size: number("size") ?? size, mediaType: type,
                             mimeType: answer["mimeType"] as? String ?? "", expiresAt: number("expiresAt") ?? 0,
                             width: number("width").map(Int.init), height: number("height").map(Int.init),
                             duration: number("duration").map(Int.init),
                             thumbnail: (answer["thumbnail"] as? String).flatMap { Data(base64Encoded: $0) })
    }

    /// An upload's time limit: a minute, and a second more for each 64 KiB of body, the pace a
    /// server's request timeout allows (`ConnectionLimits.requestBodyBytesPerSecondOwed`), so a slow
    /// but steady upload is not given up by the client while the server would still take it
    /// (with the server's default base of 30 s). A size past any upload limit (a sparse file's
    /// claimed terabytes) is counted as 1 TiB, so the nanoseconds stay within Int64.
    static func transferTimeout(_ size: Int64) -> TimeAmount {
        .seconds(60 + min(max(size, 0), 1 << 40) / Int64(ConnectionLimits.requestBodyBytesPerSecondOwed))
    }

    static func fileSize(_ path: String) throws -> Int64 {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              attributes[.type] as? FileAttributeType == .typeRegular, let size = (attributes[.size] as? NSNumber)?.int64Value else {
            throw IMError(.mediaFileMissing, "there is no file at \(path.suffix(200)): give the path of a file to send")
        }
        guard size > 0 else { throw IMError(.mediaFileMissing, "the file at \(path.suffix(200)) is empty: there is nothing to send") }
        return size
    }

    // MARK: sending media messages

    /// Sends a media message (RongCloud's `sendMediaMessage`): stores it (`.attached`), uploads
    /// the content's file (`.progress` 0 to 100) to the connected server, or through `uploader`
    /// to the app's own storage, fills in the content from the upload (URL, thumbnail, size,
    /// duration), and sends it. A content whose `mediaUrl` is already set is sent without an upload.
    ///
    /// - Throws: `IMError` 34018 before anything is stored when the content names no file, or an
    ///   empty one; `SendMessageError` (34003, 34011, 34019, 34002, 30002, ...) with the message as
    ///   stored, status `failed`, when the upload or the send fails; `MediaSendCanceled` when
    ///   `cancelSendMediaMessage` or the caller's task cancels it before it is sent.
    @discardableResult
    public func sendMediaMessage<Content: MediaMessageContent>(
        _ conversationType: ConversationType, targetId: String, channelId: String = "", content: Content,
        pushContent: String? = nil, pushData: String? = nil, pushConfig: MessagePushConfig? = nil,
        disableNotification: Bool = false, uploader: (@Sendable (MediaUploadJob) async throws -> String)? = nil,
        events: @escaping @Sendable (MediaSendEvent) -> Void = { _ in }
    ) async throws -> Message {
        var content = content
        let localPath = content.localPath
        if content.mediaUrl.isEmpty {
            guard let localPath else {
                throw IMError(.mediaFileMissing, "the content has neither a file (localPath) nor a URL: give the file to send")
            }
            _ = try Self.fileSize(localPath)
        }
        let store = try openStore()
        // Stored as it is until the upload ends: no URL yet, so nothing points at a file the
        // server does not have.
        var message = try await storeOutgoing(conversationType, targetId: targetId, channelId: channelId, directedUserIds: [], content: content,
                                        pushContent: pushContent, pushData: pushData, pushConfig: pushConfig,
                                        disableNotification: disableNotification, localMediaPath: localPath)
        events(.attached(message))
        guard content.mediaUrl.isEmpty, let localPath else { return try await transmit(message, store: store) }

        let transfer = MediaTransfer()
        // A message not kept locally (id 0) cannot be named to cancelSendMediaMessage; its caller's
        // task cancels it.
        let id = message.messageId
        if id != 0 { mediaUploads[id] = transfer }
        defer { if id != 0 { mediaUploads[id] = nil } }
        let snapshot = message
        let progress: @Sendable (Int) -> Void = { events(.progress($0, snapshot)) }
        let upload = Task { [self] () async throws -> Content in
            try Task.checkCancellation()
            var content = content
            if let uploader {
                // The app's figures pass through the same rule: 0 to 99 rising, 100 once done.
                let reporter = ProgressReporter(total: 100, report: progress)
                reporter.report(0)
                let url = try await uploader(MediaUploadJob(message: snapshot, localPath: localPath) { reporter.report(min(max($0, 0), 99)) })
                try Task.checkCancellation()
                content.mediaUrl = url
                reporter.finish()
            } else {
                let media = try await uploadMedia(file: localPath, type: Content.mediaType, fileName: content.mediaFileName,
                                                  mimeType: content.mediaMimeType, original: (content as? ImageMessage)?.full ?? false, progress: progress)
                content.uploaded(media)
            }
            return content
        }
        transfer.onCancel { upload.cancel() }
        do {
            content = try await withTaskCancellationHandler { try await upload.value } onCancel: { transfer.cancel() }
            // From here on the send cannot be canceled: a cancel that came meanwhile wins.
            if id != 0 { mediaUploads[id] = nil }
            if transfer.isCanceled { throw CancellationError() }
        } catch {
            if transfer.isCanceled || error is CancellationError {
                try? await store.setSentStatus(message.messageId, .canceled)
                message.sentStatus = .canceled
                throw MediaSendCanceled(message: message)
            }
            throw await sendFailed(message, error as? IMError ?? IMError(.mediaUploadFailed, "the upload failed: \(error)"), store: store)
        }
        do {
            message.contentData = try content.encode()
        } catch {
            throw await sendFailed(message, IMError(.invalidParameter, "the message content could not be encoded: \(error)"), store: store)
        }
        message.content = content
        do {
            try await store.updateContent(messageId: message.messageId, data: message.contentData)
        } catch {
            throw await sendFailed(message, IMError(.databaseError, "the uploaded message could not be stored: \(error)"), store: store)
        }
        return try await transmit(message, store: store)
    }

    /// Cancels a media send still uploading (RongCloud's `cancelSendMediaMessage`): its
    /// `sendMediaMessage` throws `MediaSendCanceled`. False when that message is not uploading.
    @discardableResult
    public func cancelSendMediaMessage(messageId: Int64) -> Bool {
        guard let transfer = mediaUploads[messageId] else { return false }
        transfer.cancel()
        return true
    }

    // MARK: downloading

    /// The folder of the files this user's media messages were downloaded to.
    public func mediaDirectory() throws -> URL {
        try openStore().directory.appendingPathComponent("media")
    }

    /// Downloads a media message's file into the SDK's media folder and records its path with the
    /// message (RongCloud's `downloadMediaMessage`); a file already downloaded is not fetched again,
    /// and a download canceled before its end resumes where it stopped. Progress and the end are
    /// also reported on `mediaDownloadEvents()`.
    ///
    /// - Throws: 33003 when the message is not a media message with a URL, 34020 when the file
    ///   has expired on the server, `CancellationError` when canceled.
    @discardableResult
    public func downloadMediaMessage(messageId: Int64, progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> String {
        let store = try openStore()
        guard let message = try await store.message(id: messageId), let content = message.content as? any MediaMessageContent,
              !content.mediaUrl.isEmpty else {
            throw IMError(.invalidParameter, "local message \(messageId) is not a media message with a file to download")
        }
        if let path = message.localMediaPath, FileManager.default.fileExists(atPath: path) { return path }
        if let running = mediaDownloads[messageId] { return try await running.value }
        let folder = try mediaDirectory().appendingPathComponent("\(message.conversationType.rawValue)_\(Self.safeName(message.targetId))")
        let name = "\(message.messageUId.isEmpty ? String(messageId) : Self.safeName(message.messageUId))_\(Self.safeName(content.mediaFileName))"
        let destination = folder.appendingPathComponent(name).path
        let events = mediaDownloadBroadcaster
        let task = Task { [self] () async throws -> String in
            do {
                try await download(url: content.mediaUrl, to: destination) { percent in
                    progress(percent)
                    events.yield(.progress(messageId: messageId, percent: percent))
                }
                try await store.setMediaPath(messageId: messageId, path: destination)
                events.yield(.completed(messageId: messageId, path: destination))
                return destination
            } catch {
                if Task.isCancelled || error is CancellationError {
                    events.yield(.canceled(messageId: messageId))
                    throw CancellationError()
                }
                events.yield(.failed(messageId: messageId, code: (error as? IMError)?.code ?? .mediaUploadFailed))
                throw error
            }
        }
        mediaDownloads[messageId] = task
        defer { mediaDownloads[messageId] = nil }
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }

    /// Cancels a running `downloadMediaMessage`; what arrived is kept, and the next download of the
    /// message resumes from there. False when that message is not downloading.
    @discardableResult
    public func cancelDownloadMediaMessage(messageId: Int64) -> Bool {
        guard let task = mediaDownloads[messageId] else { return false }
        task.cancel()
        return true
    }

    /// Media download events of this client (progress, completions, failures, cancels).
    public nonisolated func mediaDownloadEvents() -> AsyncStream<MediaDownloadEvent> {
        mediaDownloadBroadcaster.stream()
    }

    /// Downloads a media file (a media message's URL) into memory, at most 256 MB: 34020 once a
    /// file of the server has expired. For large files use `downloadMediaMessage` or
    /// `downloadMediaFile`.
    public func downloadMedia(url: String) async throws -> Data {
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(try await downloadRequest(url), timeout: .seconds(120))
        } catch let error as IMError {
            throw error
        } catch {
            throw IMError(.mediaUploadFailed, "the download failed: \(error)")
        }
        let body = try await response.body.collect(upTo: Self.inMemoryDownloadBytes)
        guard response.status == .ok else { throw Self.failure(status: response.status, body: Data(body.readableBytesView)) }
        return Data(body.readableBytesView)
    }

    /// Downloads a file of this app's server by URL to `path` (RongCloud's `downloadMediaFile`),
    /// streamed to disk with progress; resumes a `.part` file a canceled download left.
    public func downloadMediaFile(url: String, to path: String, progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        try await download(url: url, to: path, progress: progress)
    }

    /// Whether `url` is a file of one of this client's servers: only those get the app's download
    /// token (a URL on the app's own storage, or anywhere else, is fetched without it).
    func isServerFile(_ url: URL) -> Bool {
        serverURLs.contains { base in
            guard let server = URL(string: base) else { return false }
            return server.scheme == url.scheme && server.host == url.host && server.port == url.port
        } && url.path.hasPrefix("/media/\(appKey)/")
    }

    /// The most `downloadMedia` holds in memory.
    static let inMemoryDownloadBytes = 256 << 20

    /// A GET of `url` (http or https only), with the app's download token when it is one of this
    /// client's servers' files.
    private func downloadRequest(_ url: String) async throws -> HTTPClientRequest {
        guard let address = URL(string: url), ["http", "https"].contains(address.scheme?.lowercased() ?? "") else {
            throw IMError(.invalidParameter, "not an http or https URL: \(url.prefix(200))")
        }
        var request = HTTPClientRequest(url: url)
        if isServerFile(address) { request.headers.add(name: "Authorization", value: "Bearer \(try await freshDownloadToken())") }
        return request
    }

    /// The cached download token, or a new one once it is ten minutes old.
    private func freshDownloadToken() async throws -> String {
        if let cached = downloadToken, cached.until > .now { return cached.token }
        let token = try await mediaDownloadToken().token
        downloadToken = (token, .now + .seconds(600))
        return token
    }

    /// Streams `url` to `path` through `<path>.part`, continuing a part file with a Range request;
    /// the file appears at `path` only whole.
    func download(url: String, to path: String, progress: @escaping @Sendable (Int) -> Void) async throws {
        var request = try await downloadRequest(url)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let part = path + ".part"
        let already = (try? FileManager.default.attributesOfItem(atPath: part)[.size] as? NSNumber)?.int64Value ?? 0
        if already > 0 { request.headers.add(name: "Range", value: "bytes=\(already)-") }
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .hours(1))
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw IMError(.mediaUploadFailed, "the download failed: \(error)")
        }
        if response.status == .rangeNotSatisfiable && already > 0 {
            // The part is not a beginning of this file (or all of it, left before its rename):
            // start over.
            try? FileManager.default.removeItem(atPath: part)
            return try await download(url: url, to: path, progress: progress)
        }
        let resumed = response.status == .partialContent
        guard response.status == .ok || resumed else {
            throw Self.failure(status: response.status, body: Data(try await response.body.collect(upTo: 1 << 16).readableBytesView))
        }
        let start = resumed ? already : 0
        let length = response.headers.first(name: "Content-Length").flatMap(Int64.init) ?? 0
        let reporter = ProgressReporter(total: start + length, report: progress)
        reporter.advance(by: start)
        do {
            // Not created as a temporary file: what arrived stays if the download stops.
            let options = OpenOptions.Write(existingFile: resumed ? .open : .truncate, newFile: .init(transactionalCreation: false))
            try await FileSystem.shared.withFileHandle(forWritingAt: FilePath(part), options: options) { handle in
                var offset = start
                for try await buffer in response.body {
                    try Task.checkCancellation()
                    try await handle.write(contentsOf: buffer, toAbsoluteOffset: offset)
                    offset += Int64(buffer.readableBytes)
                    reporter.advance(by: Int64(buffer.readableBytes))
                }
            }
        } catch {
            if Task.isCancelled || error is CancellationError { throw CancellationError() }
            throw IMError(.mediaUploadFailed, "the download stopped: \(error)")
        }
        try await FileSystem.shared.replaceItem(at: FilePath(path), withItemAt: FilePath(part))
        reporter.finish()
    }

    private static func failure(status: HTTPResponseStatus, body: Data) -> IMError {
        let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        return IMError(ErrorCode(answer["code"] as? Int ?? ErrorCode.mediaUploadFailed.rawValue),
                       answer["errorMessage"] as? String ?? "the download failed with HTTP \(status.code)")
    }

    /// A name safe as one path component: no separators or NUL, at most 120 bytes of UTF-8.
    static func safeName(_ name: String) -> String {
        var cleaned = String.UnicodeScalarView()
        var bytes = 0
        for scalar in name.unicodeScalars {
            let safe: Unicode.Scalar = scalar == "/" || scalar == "\\" || scalar == "\0" ? "_" : scalar
            bytes += UTF8.width(safe)
            guard bytes <= 120 else { break }
            cleaned.append(safe)
        }
        let text = String(cleaned)
        return text.isEmpty || text.hasPrefix(".") ? "_" + text : text
    }

    /// Starts the automatic download of received GIFs under `autoDownloadGIFBytes`.
    func autoDownload(_ messages: [Message]) {
        let limit = options.autoDownloadGIFBytes
        guard limit > 0 else { return }
        for message in messages where message.direction == .receive && message.messageId != 0 {
            // Only files of this client's servers: a URL elsewhere would tell its host who got the message.
            guard let gif = message.content as? GIFMessage, gif.gifDataSize > 0, gif.gifDataSize < limit,
                  let url = URL(string: gif.remoteUrl), isServerFile(url) else { continue }
            Task { [self] in _ = try? await downloadMediaMessage(messageId: message.messageId) }
        }
    }
}

/// Reports a transfer's progress as whole percentages, each at most once and rising; 100 only
/// when `finish` says the transfer is done.
final class ProgressReporter: Sendable {
    private let total: Int64
    private let callback: @Sendable (Int) -> Void
    private let state = Mutex<(done: Int64, last: Int)>((0, -1))

    init(total: Int64, report: @escaping @Sendable (Int) -> Void) {
        self.total = total
        self.callback = report
    }

    func advance(by bytes: Int64) {
        let percent = state.withLock { state -> Int? in
            state.done += bytes
            let percent = total > 0 ? min(99, Int(state.done * 100 / total)) : 0
            guard percent > state.last else { return nil }
            state.last = percent
            return percent
        }
        if let percent { callback(percent) }
    }

    func report(_ percent: Int) {
        let fresh = state.withLock { state -> Bool in
            guard percent > state.last else { return false }
            state.last = percent
            return true
        }
        if fresh { callback(percent) }
    }

    func finish() { report(100) }
}

/// A file's chunks, counted into a progress reporter as the HTTP client takes them.
struct CountedChunks<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let reporter: ProgressReporter

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let reporter: ProgressReporter

        mutating func next() async throws -> ByteBuffer? {
            guard let chunk = try await base.next() else { return nil }
            reporter.advance(by: Int64(chunk.readableBytes))
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), reporter: reporter) }
}
