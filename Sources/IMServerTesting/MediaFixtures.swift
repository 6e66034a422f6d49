import Foundation
import IMProcess

/// Media files for tests and benchmarks, generated on first use with ffmpeg and libvips (the
/// tools scripts/media-tools.sh installs; the server uses the same ones) into a temporary folder:
/// real images, GIFs, videos and audio, small unless asked otherwise, and hostile ones.
public actor MediaFixtures {
    public static let shared = MediaFixtures()

    private let directory: URL
    /// Each fixture once, whoever asks first; tests asking for one being made wait for it.
    private var made: [String: Task<URL, any Error>] = [:]

    private init() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-media-fixtures-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    public struct MissingTool: Error, CustomStringConvertible {
        public let description: String
    }

    /// The path of a tool on PATH.
    static func tool(_ name: String) throws -> String {
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard let path = folders.map({ "\($0)/\(name)" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw MissingTool(description: "\(name) is not installed: run scripts/media-tools.sh")
        }
        return path
    }

    /// Makes `name` once with `tool arguments…` (the output path is `$OUT`), and returns its path.
    private func make(_ name: String, _ toolName: String, _ arguments: [String]) async throws -> URL {
        if let making = made[name] { return try await making.value }
        let file = directory.appendingPathComponent(name)
        let directory = directory
        let making = Task { () async throws -> URL in
            let tool = try Self.tool(toolName)
            let child = try ChildProcess(tool, arguments.map { $0.replacingOccurrences(of: "$OUT", with: file.path) },
                                         directory: directory.path, standardOutput: .null, standardError: .file(file.path + ".log"))
            let end = await child.exit()
            guard end == .exited(0), FileManager.default.fileExists(atPath: file.path) else {
                let log = (try? String(contentsOfFile: file.path + ".log", encoding: .utf8)) ?? ""
                throw MissingTool(description: "\(toolName) could not make \(name) (\(end)): \(log.suffix(500))")
            }
            return file
        }
        made[name] = making
        return try await making.value
    }

    private func ffmpeg(_ name: String, _ arguments: [String]) async throws -> URL {
        try await make(name, "ffmpeg", ["-v", "error", "-nostdin", "-y"] + arguments + ["$OUT"])
    }

    /// A photo-like JPEG (a test pattern with noise).
    public func jpeg(width: Int, height: Int) async throws -> URL {
        try await ffmpeg("photo-\(width)x\(height).jpg", ["-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height),noise=alls=12:allf=t",
                                                          "-frames:v", "1", "-q:v", "3"])
    }

    /// A PNG with an alpha channel.
    public func png(width: Int, height: Int) async throws -> URL {
        try await ffmpeg("picture-\(width)x\(height).png", ["-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height),format=rgba", "-frames:v", "1"])
    }

    /// An animated GIF of a second.
    public func gif(width: Int, height: Int) async throws -> URL {
        try await ffmpeg("anim-\(width)x\(height).gif", ["-f", "lavfi", "-i", "testsrc=size=\(width)x\(height):rate=5", "-t", "1"])
    }

    /// An MP4 with H.264 video (or `videoCodec`) and AAC audio.
    public func mp4(seconds: Int, width: Int = 320, height: Int = 240, videoCodec: String = "libx264") async throws -> URL {
        try await ffmpeg("clip-\(seconds)s-\(width)x\(height)-\(videoCodec).mp4", [
            "-f", "lavfi", "-i", "testsrc=duration=\(seconds):size=\(width)x\(height):rate=\(seconds > 10 ? 1 : 15)",
            "-f", "lavfi", "-i", "sine=duration=\(seconds)", "-c:v", videoCodec, "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
        ])
    }

    /// AAC audio in an M4A file.
    public func m4a(seconds: Int) async throws -> URL {
        try await ffmpeg("voice-\(seconds)s.m4a", ["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)", "-c:a", "aac", "-b:a", "32k"])
    }

    /// A JPEG cut short: its header is whole, its picture is not.
    public func truncatedJPEG() async throws -> URL {
        let file = directory.appendingPathComponent("truncated.jpg")
        if !FileManager.default.fileExists(atPath: file.path) {
            let whole = try Data(contentsOf: try await jpeg(width: 1600, height: 1200))
            try whole.prefix(whole.count / 3).write(to: file)
        }
        return file
    }

    /// A decompression bomb: a small PNG file of 12,000 × 12,000 black pixels (144 megapixels).
    public func bombPNG() async throws -> URL {
        let raw = directory.appendingPathComponent("bomb.v").path
        _ = try await make("bomb.v", "vips", ["black", "$OUT", "12000", "12000"])
        return try await make("bomb.png", "vips", ["copy", raw, "$OUT[compression=9]"])
    }

    /// A file of `megabytes` of varied bytes, for a file message.
    public func blob(megabytes: Int) throws -> URL {
        let file = directory.appendingPathComponent("blob-\(megabytes)mb.bin")
        if FileManager.default.fileExists(atPath: file.path) { return file }
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var chunk = Data(count: 1_048_576)
        for index in 0..<megabytes {
            chunk.withUnsafeMutableBytes { bytes in
                for offset in stride(from: 0, to: bytes.count, by: 8) {
                    bytes.storeBytes(of: UInt64(index &* 1_048_576 &+ offset) &* 0x9E37_79B9_7F4A_7C15, toByteOffset: offset, as: UInt64.self)
                }
            }
            try handle.write(contentsOf: chunk)
        }
        return file
    }
}
