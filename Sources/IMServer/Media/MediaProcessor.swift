#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import IMCore
import IMProcess
import Logging

/// What the server learned and made from an upload: the facts a media message's content carries
/// (RongCloud's wire format: image `content` a Base64 JPG thumbnail, GIF width and height, short
/// video first frame and duration, voice duration), and the large image to keep instead of the
/// original.
struct ProcessedMedia: Sendable, Equatable {
    var width: Int?
    var height: Int?
    /// Seconds, rounded (at least 1) for voice and short video.
    var duration: Int?
    /// A JPG, longer side at most 240 px, at most 10 KB.
    var thumbnail: Data?
    /// A file to keep in place of the upload (a JPG whose longer side is at most 960 px), with its
    /// MIME type.
    var replacement: String?
}

/// The command-line tools the server reads and thumbnails media with: libvips's `vips` and
/// `vipsheader`, ffmpeg's `ffprobe` and `ffmpeg` (Debian's libvips-tools and ffmpeg; installed by
/// scripts/media-tools.sh).
struct MediaTools: Sendable {
    var vips: String
    var vipsheader: String
    var ffprobe: String
    var ffmpeg: String
    /// util-linux's prlimit, to cap a tool's memory and CPU time (nil where there is none).
    var prlimit: String?

    /// The tools in `directory`, or on PATH when it is empty; nil when one is missing.
    static func find(in directory: String) -> MediaTools? {
        let folders = directory.isEmpty
            ? (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
            : [directory]
        func locate(_ name: String, in folders: [String]) -> String? {
            folders.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        guard let vips = locate("vips", in: folders), let header = locate("vipsheader", in: folders),
              let probe = locate("ffprobe", in: folders), let ffmpeg = locate("ffmpeg", in: folders) else { return nil }
        return MediaTools(vips: vips, vipsheader: header, ffprobe: probe, ffmpeg: ffmpeg,
                          prlimit: locate("prlimit", in: ["/usr/bin", "/bin"]))
    }
}

/// Reads, checks and thumbnails uploads with libvips and ffmpeg, each run in a child process with
/// a time limit, a memory cap and no environment of the server's: a hostile file (a truncated
/// JPEG, a decompression bomb, a video that is not one) costs at most that child and is refused
/// with 34019 (34002 for a short video over its length); the server itself never decodes media.
///
/// Why the server and not the SDK: every client then gets the same thumbnails and checks (IMLib on
/// Linux has no image library, and a file is checked where it is served to everyone), and the
/// tools run isolated. The cost is that an image travels whole before it is reduced to 960 px; an
/// app that wants to save that upload makes its own thumbnail and large image and uploads with the
/// custom-upload hook (docs/MEDIA.md).
final class MediaProcessor: Sendable {
    let tools: MediaTools?
    /// Where the tools write what they make: under the media directory, so a made file is renamed
    /// into place.
    let workDirectory: String
    private let slots: ProcessSlots
    private let logger: Logger

    /// The most pixels an image may have (width × height): a decompression bomb is refused from
    /// its header, before any pixel is decoded.
    static let maxPixels = 100_000_000
    /// A thumbnail's longer side, and the largest it may be (RongCloud's wire format).
    static let thumbnailSide = 240
    static let thumbnailBytes = 10 * 1024
    /// The large image's longer side, unless the original is sent.
    static let largeSide = 960
    /// Limits of one tool run.
    static let runSeconds = 30
    static let memoryBytes = 4 << 30
    /// The most a tool may write (a reduced image or a frame is far less).
    static let outputBytes = 256 << 20

    /// `workDirectory` is this node's own (nodes of a cluster share the media directory).
    init(tools: MediaTools?, workDirectory: String, logger: Logger) {
        self.tools = tools
        self.workDirectory = workDirectory
        self.slots = ProcessSlots(count: max(1, ProcessInfo.processInfo.activeProcessorCount))
        self.logger = logger
        // Leftovers of a run this node did not finish (it stopped meanwhile).
        try? FileManager.default.removeItem(atPath: workDirectory)
        try? FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        if tools != nil && tools?.prlimit == nil {
            logger.warning("media tools run without memory and time caps: util-linux's prlimit was not found")
        }
    }

    /// The limits an app sets on what it takes.
    struct Limits: Sendable {
        var maxSightSeconds: Int
        var maxVoiceSeconds: Int
    }

    /// Checks the file at `path` as a `type` and makes what its message needs. `original`: keep an
    /// image as it was sent (RongCloud's `full`); otherwise an image larger than 960 px is replaced
    /// by a JPG reduced to that.
    func process(path: String, type: MediaType, original: Bool, limits: Limits) async throws -> ProcessedMedia {
        switch type {
        case .file:
            return ProcessedMedia()
        case .gif:
            // The logical screen size is in the header; without the tools it is all we know.
            guard let tools else { return Self.gifSize(path: path) }
            let (width, height) = try await imageSize(path, tools: tools, what: "GIF")
            return ProcessedMedia(width: width, height: height)
        case .image:
            guard let tools else { return ProcessedMedia() }
            return try await image(path, original: original, tools: tools)
        case .sight:
            guard let tools else { return ProcessedMedia() }
            return try await sight(path, limit: limits.maxSightSeconds, tools: tools)
        case .voice:
            guard let tools else { return ProcessedMedia() }
            return try await voice(path, limit: limits.maxVoiceSeconds, tools: tools)
        }
    }

    // MARK: images

    private func image(_ path: String, original: Bool, tools: MediaTools) async throws -> ProcessedMedia {
        var (width, height) = try await imageSize(path, tools: tools, what: "image")
        var replacement: String?
        var source = path
        do {
            // Not the original: reduced to 960 px (never enlarged) and re-encoded, which also
            // drops the camera's metadata (a photo's EXIF location).
            if !original {
                let large = workFile("jpg")
                replacement = large
                try await run(tools.vips, ["thumbnail", path, "\(large)[Q=85,strip,background=255]", "\(Self.largeSide)", "--height", "\(Self.largeSide)",
                                           "--size", "down", "--fail-on", "truncated"], refusal: "the image could not be read")
                // The header of the JPG just made: no tool run for it.
                guard let size = JPEGSize.of(file: large) else { throw IMError(.mediaFormatUnsupported, "the reduced image could not be read") }
                (width, height) = size
                source = large
            }
            let thumbnail = try await thumbnail(of: source, tools: tools)
            return ProcessedMedia(width: width, height: height, thumbnail: thumbnail, replacement: replacement)
        } catch {
            if let replacement { try? FileManager.default.removeItem(atPath: replacement) }
            throw error
        }
    }

    /// A JPG of at most 240 px and 10 KB: the quality is lowered until it fits. Only the first try
    /// reads the picture itself; later ones re-encode that first 240 px JPG, not the full image again.
    private func thumbnail(of path: String, tools: MediaTools) async throws -> Data {
        let file = workFile("jpg"), first = workFile("jpg")
        defer {
            try? FileManager.default.removeItem(atPath: file)
            try? FileManager.default.removeItem(atPath: first)
        }
        var smallest: Data?
        for (attempt, quality) in [75, 55, 35, 20].enumerated() {
            let source = attempt == 0 ? path : first
            try await run(tools.vips, ["thumbnail", source, "\(file)[Q=\(quality),strip,optimize_coding,background=255]", "\(Self.thumbnailSide)",
                                       "--height", "\(Self.thumbnailSide)", "--size", "down", "--fail-on", "truncated"],
                          refusal: "the image could not be read")
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            if data.count <= Self.thumbnailBytes { return data }
            if attempt == 0 { try FileManager.default.copyItem(atPath: file, toPath: first) }
            if data.count < smallest?.count ?? .max { smallest = data }
        }
        throw IMError(.mediaFormatUnsupported, "no thumbnail of this image fits in \(Self.thumbnailBytes / 1024) KB (\(smallest?.count ?? 0) bytes at the lowest quality)")
    }

    /// The width and height in the file's header, refused past `maxPixels`.
    private func imageSize(_ path: String, tools: MediaTools, what: String) async throws -> (Int, Int) {
        let output = try await run(tools.vipsheader, [path], refusal: "the \(what) could not be read")
        // "<path>: 4000x3000 uchar, 3 bands, srgb, jpegload" (the path counted in bytes)
        let line = String(decoding: output.utf8.dropFirst(path.utf8.count + 2), as: UTF8.self)
        let size = line.prefix { $0 != " " }.split(separator: "x")
        guard size.count == 2, let width = Int(size[0]), let height = Int(size[1]), width > 0, height > 0 else {
            throw IMError(.mediaFormatUnsupported, "the \(what)'s size could not be read")
        }
        guard width * height <= Self.maxPixels else {
            throw IMError(.mediaFormatUnsupported,
                          "the \(what) is \(width)×\(height) pixels; at most \(Self.maxPixels / 1_000_000) megapixels are taken")
        }
        return (width, height)
    }

    /// Without the tools: a GIF's logical screen size from its first bytes.
    static func gifSize(path: String) -> ProcessedMedia {
        guard let handle = FileHandle(forReadingAtPath: path) else { return ProcessedMedia() }
        defer { try? handle.close() }
        let head = [UInt8](handle.readData(ofLength: 10))
        guard head.count == 10 else { return ProcessedMedia() }
        return ProcessedMedia(width: Int(head[6]) | Int(head[7]) << 8, height: Int(head[8]) | Int(head[9]) << 8)
    }

    // MARK: audio and video

    private struct Probe: Decodable {
        struct Stream: Decodable {
            var codec_type: String?
            var codec_name: String?
            var width: Int?
            var height: Int?
        }
        struct Format: Decodable {
            var format_name: String?
            var duration: String?
        }
        var streams: [Stream]?
        var format: Format?

        var seconds: Double? { format?.duration.flatMap(Double.init) }
    }

    /// Input options that keep ffmpeg to the local file and the formats a type takes: a playlist or
    /// manifest posing as audio never makes the server fetch a URL.
    static func inputOptions(_ type: MediaType) -> [String] {
        ["-protocol_whitelist", "file"] + (type == .sight ? ["-f", "mov"] : ["-format_whitelist", "mp3,aac,amr,ogg,wav,mov"])
    }

    private func probe(_ path: String, type: MediaType, tools: MediaTools, what: String) async throws -> Probe {
        let output = try await run(tools.ffprobe, ["-v", "error"] + Self.inputOptions(type)
                                   + ["-show_entries", "format=duration,format_name:stream=codec_type,codec_name,width,height", "-of", "json", path],
                                   refusal: "the \(what) could not be read")
        guard let probe = try? JSONDecoder().decode(Probe.self, from: Data(output.utf8)) else {
            throw IMError(.mediaFormatUnsupported, "the \(what) could not be read")
        }
        return probe
    }

    private func sight(_ path: String, limit: Int, tools: MediaTools) async throws -> ProcessedMedia {
        let probe = try await probe(path, type: .sight, tools: tools, what: "short video")
        let streams = probe.streams ?? []
        guard probe.format?.format_name?.contains("mp4") == true,
              let video = streams.first(where: { $0.codec_type == "video" }), video.codec_name == "h264",
              streams.allSatisfy({ $0.codec_type != "audio" || $0.codec_name == "aac" }) else {
            let found = streams.compactMap { stream in stream.codec_name.map { "\(stream.codec_type ?? "?") \($0)" } }.joined(separator: ", ")
            throw IMError(.mediaFormatUnsupported, "a short video is an MP4 of H.264 video and AAC audio; this one has \(found.isEmpty ? "no streams" : found)")
        }
        guard let seconds = probe.seconds, seconds > 0 else { throw IMError(.mediaFormatUnsupported, "the short video's length could not be read") }
        guard seconds <= Double(limit) + 0.5 else {
            throw IMError(.sightTooLong, "the short video lasts \(Int(seconds.rounded())) s; this app takes at most \(limit) s")
        }
        let frame = workFile("jpg")
        defer { try? FileManager.default.removeItem(atPath: frame) }
        try await run(tools.ffmpeg, ["-v", "error", "-nostdin", "-threads", "1"] + Self.inputOptions(.sight)
                      + ["-i", path, "-frames:v", "1", "-f", "image2", "-c:v", "mjpeg", "-q:v", "3", "-y", frame],
                      refusal: "the short video's first frame could not be read")
        let thumbnail = try await thumbnail(of: frame, tools: tools)
        return ProcessedMedia(width: video.width, height: video.height, duration: max(1, Int(seconds.rounded())), thumbnail: thumbnail)
    }

    private func voice(_ path: String, limit: Int, tools: MediaTools) async throws -> ProcessedMedia {
        let probe = try await probe(path, type: .voice, tools: tools, what: "voice clip")
        guard probe.streams?.contains(where: { $0.codec_type == "audio" }) == true, let seconds = probe.seconds, seconds > 0 else {
            throw IMError(.mediaFormatUnsupported, "the voice clip has no audio that could be read")
        }
        guard seconds <= Double(limit) + 0.5 else {
            throw IMError(.mediaFormatUnsupported, "the voice clip lasts \(Int(seconds.rounded())) s; a voice message is at most \(limit) s")
        }
        return ProcessedMedia(duration: max(1, Int(seconds.rounded())))
    }

    // MARK: running the tools

    private func workFile(_ suffix: String) -> String {
        "\(workDirectory)/\(UUID().uuidString).\(suffix)"
    }

    /// The last lines a tool wrote to standard error (at most 4 KB read).
    private static func tail(of path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        let end = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: end > 4096 ? end - 4096 : 0)
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Runs a tool within the limits and returns its standard output; a tool that fails, is killed
    /// or runs out of time means the file is refused with `refusal`.
    @discardableResult
    private func run(_ tool: String, _ arguments: [String], refusal: String) async throws -> String {
        try await slots.run {
            let output = workFile("out"), errors = workFile("err")
            defer {
                try? FileManager.default.removeItem(atPath: output)
                try? FileManager.default.removeItem(atPath: errors)
            }
            let (executable, argv) = tools?.prlimit.map {
                ($0, ["--as=\(Self.memoryBytes)", "--cpu=\(Self.runSeconds)", "--fsize=\(Self.outputBytes)", "--", tool] + arguments)
            } ?? (tool, arguments)
            // Few malloc arenas: the address-space cap is for the picture, not for threads' arenas.
            let environment = ["PATH": "/usr/bin:/bin", "VIPS_BLOCK_UNTRUSTED": "1", "LC_ALL": "C", "MALLOC_ARENA_MAX": "2"]
            // Another node's start never removes this node's folder, but an operator might.
            try? FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
            let child: ChildProcess
            do {
                child = try ChildProcess(executable, argv, environment: environment, directory: workDirectory,
                                         standardInput: .null, standardOutput: .file(output), standardError: .file(errors))
            } catch {
                logger.error("a media tool could not be started", metadata: ["tool": "\(tool)", "error": "\(error)"])
                throw IMError(.apiInternalError, "the server could not check the file: try again later")
            }
            let timer = Task {
                try? await Task.sleep(for: .seconds(Self.runSeconds))
                if !Task.isCancelled { child.signal(SIGKILL) }
            }
            let end = await child.exit()
            timer.cancel()
            guard end == .exited(0) else {
                let said = Self.tail(of: errors)
                logger.info("a media file was refused", metadata: [
                    "tool": "\((tool as NSString).lastPathComponent)", "end": "\(end)",
                    "said": "\(said.split(separator: "\n").suffix(3).joined(separator: " | ").prefix(300))",
                ])
                throw IMError(.mediaFormatUnsupported, "\(refusal): it is damaged or not what its type says")
            }
            return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
    }
}

/// At most `count` tool runs at once (one per core): a burst of uploads waits its turn instead of
/// starting a process each.
private actor ProcessSlots {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { free = count }

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if free > 0 {
            free -= 1
        } else {
            await withCheckedContinuation { waiting.append($0) }
        }
        defer {
            if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
