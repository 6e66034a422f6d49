import IMCore
import NIOCore
import Synchronization

/// What a file is, from its first bytes (never from what the client says): the formats each
/// media type takes. A file message takes anything.
final class MediaSniffer: Sendable {
    private let head = Mutex<[UInt8]>([])
    static let headLength = 32

    /// Keeps the first bytes that pass.
    func take(_ buffer: ByteBuffer) {
        head.withLock { head in
            guard head.count < Self.headLength else { return }
            let wanted = min(Self.headLength - head.count, buffer.readableBytes)
            head += buffer.getBytes(at: buffer.readerIndex, length: wanted) ?? []
        }
    }

    /// The MIME type of the content when it is one `type` takes, nil otherwise.
    func mimeType(for type: MediaType) -> String? {
        let bytes = head.withLock { $0 }
        let detected = Self.detect(bytes)
        switch type {
        case .image: return ["image/jpeg", "image/png", "image/webp", "image/heic"].contains(detected ?? "") ? detected : nil
        case .gif: return detected == "image/gif" ? detected : nil
        case .voice: return ["audio/aac", "audio/mp4", "audio/amr", "audio/mpeg", "audio/ogg", "audio/wav"].contains(detected ?? "") ? detected : nil
        case .sight: return detected == "video/mp4" ? detected : nil
        case .file: return detected ?? "application/octet-stream"
        }
    }

    /// What each type takes, for the refusal's words.
    static func accepted(_ type: MediaType) -> String {
        switch type {
        case .image: "JPEG, PNG, WebP or HEIC"
        case .gif: "GIF"
        case .voice: "AAC, M4A, AMR, MP3, Ogg or WAV"
        case .sight: "MP4 (H.264 and AAC)"
        case .file: "any file"
        }
    }

    static func detect(_ b: [UInt8]) -> String? {
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + prefix.count && Array(b[offset..<offset + prefix.count]) == prefix
        }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "image/webp" }
        if starts(Array("RIFF".utf8)) && starts(Array("WAVE".utf8), at: 8) { return "audio/wav" }
        if starts(Array("BM".utf8)) && b.count >= 14 { return "image/bmp" }
        if starts(Array("ftyp".utf8), at: 4) {
            let brand = b.count >= 12 ? String(decoding: b[8..<12], as: UTF8.self) : ""
            if ["heic", "heix", "mif1", "msf1"].contains(brand) { return "image/heic" }
            if ["M4A ", "M4B "].contains(brand) { return "audio/mp4" }
            return "video/mp4"
        }
        if starts(Array("#!AMR".utf8)) { return "audio/amr" }
        if starts(Array("OggS".utf8)) { return "audio/ogg" }
        if starts(Array("ID3".utf8)) || (b.count >= 2 && b[0] == 0xFF && (b[1] & 0xE6) == 0xE2) { return "audio/mpeg" }
        if b.count >= 2 && b[0] == 0xFF && (b[1] & 0xF6) == 0xF0 { return "audio/aac" }
        if starts([0x25, 0x50, 0x44, 0x46]) { return "application/pdf" }
        if starts([0x50, 0x4B, 0x03, 0x04]) { return "application/zip" }
        return nil
    }
}
