import Foundation

/// A file the server has kept, and what it found in it: the URL goes into a media message's
/// content, with the thumbnail, size and duration the content carries.
public struct UploadedMedia: Sendable, Equatable {
    public var fileId: String
    public var url: String
    /// Bytes kept (a reduced image's, when the server reduced it).
    public var size: Int64
    public var mediaType: MediaType
    public var mimeType: String
    public var expiresAt: Int64
    public var width: Int?
    public var height: Int?
    /// Seconds, for voice and short video.
    public var duration: Int?
    /// A JPG, longer side at most 240 px and at most 10 KB: an image's thumbnail, a short video's
    /// first frame.
    public var thumbnail: Data?

    public init(fileId: String, url: String, size: Int64, mediaType: MediaType, mimeType: String, expiresAt: Int64,
                width: Int? = nil, height: Int? = nil, duration: Int? = nil, thumbnail: Data? = nil) {
        self.fileId = fileId
        self.url = url
        self.size = size
        self.mediaType = mediaType
        self.mimeType = mimeType
        self.expiresAt = expiresAt
        self.width = width
        self.height = height
        self.duration = duration
        self.thumbnail = thumbnail
    }
}

/// RongCloud's `RCMediaMessageContent`: a content whose file is uploaded before the message is
/// sent (`sendMediaMessage`) and downloaded by its receivers (`downloadMediaMessage`). The
/// built-in image, GIF, voice, file and short-video contents are ones; an app's own type conforms
/// to send a file with it (its object name must not start with `RC:`).
public protocol MediaMessageContent: MessageContent {
    /// Which of the server's limits and checks the file meets (a custom type's files are `.file`).
    static var mediaType: MediaType { get }
    /// The file on this device: what `sendMediaMessage` uploads. Never sent; a message keeps the
    /// path of its file on this device apart (`Message.localMediaPath`).
    var localPath: String? { get set }
    /// The uploaded file's URL; empty until uploaded.
    var mediaUrl: String { get set }
    /// The name the file is uploaded and downloaded under.
    var mediaFileName: String { get }
    /// The file's MIME type when the type alone does not say it; empty: the server finds it.
    var mediaMimeType: String { get }
    /// Takes what the server kept and found (URL, size, thumbnail, duration). The default sets
    /// `mediaUrl`.
    mutating func uploaded(_ media: UploadedMedia)
}

extension MediaMessageContent {
    public static var mediaType: MediaType { .file }
    /// The last component of `localPath`.
    public var localFileName: String? { localPath.map { URL(fileURLWithPath: $0).lastPathComponent } }
    public var mediaFileName: String { localFileName ?? Self.mediaType.rawValue }
    public var mediaMimeType: String { "" }
    public mutating func uploaded(_ media: UploadedMedia) { mediaUrl = media.url }
}

extension ImageMessage: MediaMessageContent {
    public static var mediaType: MediaType { .image }
    public var mediaUrl: String {
        get { imageUri }
        set { imageUri = newValue }
    }
    public mutating func uploaded(_ media: UploadedMedia) {
        imageUri = media.url
        // Base64 without line breaks, as RongCloud's thumbnails travel.
        if let thumbnail = media.thumbnail { thumbnailBase64 = thumbnail.base64EncodedString() }
    }
}

extension GIFMessage: MediaMessageContent {
    public static var mediaType: MediaType { .gif }
    public var mediaUrl: String {
        get { remoteUrl }
        set { remoteUrl = newValue }
    }
    public mutating func uploaded(_ media: UploadedMedia) {
        remoteUrl = media.url
        gifDataSize = media.size
        if let width = media.width, let height = media.height {
            self.width = width
            self.height = height
        }
    }
}

extension HQVoiceMessage: MediaMessageContent {
    public static var mediaType: MediaType { .voice }
    public var mediaUrl: String {
        get { remoteUrl }
        set { remoteUrl = newValue }
    }
    public mutating func uploaded(_ media: UploadedMedia) {
        remoteUrl = media.url
        if let duration = media.duration { self.duration = duration }
    }
}

extension FileMessage: MediaMessageContent {
    public static var mediaType: MediaType { .file }
    public var mediaUrl: String {
        get { fileUrl }
        set { fileUrl = newValue }
    }
    public var mediaFileName: String { name.isEmpty ? localFileName ?? "file" : name }
    public mutating func uploaded(_ media: UploadedMedia) {
        fileUrl = media.url
        size = media.size
    }
}

extension SightMessage: MediaMessageContent {
    public static var mediaType: MediaType { .sight }
    public var mediaUrl: String {
        get { sightUrl }
        set { sightUrl = newValue }
    }
    public var mediaFileName: String { name.isEmpty ? localFileName ?? "sight.mp4" : name }
    public mutating func uploaded(_ media: UploadedMedia) {
        sightUrl = media.url
        size = media.size
        if let duration = media.duration { self.duration = duration }
        if let thumbnail = media.thumbnail { thumbnailBase64 = thumbnail.base64EncodedString() }
    }
}

extension CombineMessage: MediaMessageContent {
    public static var mediaType: MediaType { .file }
    public var mediaUrl: String {
        get { remoteUrl }
        set { remoteUrl = newValue }
    }
    public var mediaFileName: String { "combine.html" }
    public var mediaMimeType: String { "text/html; charset=utf-8" }
}
