import AsyncHTTPClient
import Foundation
import IMCore
import IMLib
import IMProcess
import NIOCore

extension Scenarios {
    struct MediaParameters: Sendable {
        /// The large file uploaded and downloaded, MB.
        var largeMB = 100
        /// Times each large transfer is repeated.
        var repeats = 3
        /// Uploads running at once, and each one's size.
        var concurrentUploads = 100
        var concurrentMB = 10
        /// 12-megapixel JPEGs uploaded one after the other as images.
        var photos = 30
        var photoWidth = 4000
        var photoHeight = 3000
        var quick = false
    }

    /// Media files: a large file up and down over loopback, many uploads at once (the server's
    /// memory must not grow with their sizes), and images reduced and thumbnailed. Bodies come from
    /// and go to memory on the generator's side, so the figures are the server's path (socket,
    /// disk, sync); tokens come over a real IMLib connection.
    static func media(_ p: MediaParameters, options: CommonOptions) async throws -> ScenarioResult {
        var result = ScenarioResult(scenario: "media")
        result.quick = p.quick
        let harness = try await Harness.start("media", options: options)
        var poolConfiguration = HTTPClient.Configuration()
        poolConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, p.concurrentUploads)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: poolConfiguration)
        let client = IMClient(appKey: options.appKey, serverURL: harness.target.baseURL, options: {
            var settings = IMClientOptions()
            settings.databaseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("imbench-media-client-\(UUID().uuidString.prefix(8))")
            return settings
        }())
        do {
            let token = try await harness.api.tokens(for: ["media-user"])[0]
            try await client.connect(token: token)
            let baseline = await harness.sampleServer()
            let mebibyte = ByteBuffer(bytes: (0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })

            // One large file, up and down.
            var uploadRates: [Double] = []
            var downloadRates: [Double] = []
            var largeURL = ""
            let largeStart = await harness.sampleServer()
            for _ in 0..<p.repeats {
                let started = ContinuousClock.now
                let uploaded = try await upload(http, client: client, type: .file, megabytes: p.largeMB, chunk: mebibyte)
                uploadRates.append(Double(p.largeMB) / (ContinuousClock.now - started).seconds)
                largeURL = uploaded
            }
            let downloadToken = try await client.mediaDownloadToken().token
            for _ in 0..<p.repeats {
                let started = ContinuousClock.now
                let bytes = try await download(http, url: largeURL, token: downloadToken)
                guard bytes == Int64(p.largeMB) * 1_048_576 else { throw BenchError("the download gave \(bytes) bytes of \(p.largeMB) MB") }
                downloadRates.append(Double(p.largeMB) / (ContinuousClock.now - started).seconds)
            }
            let largeEnd = await harness.sampleServer()

            // Many uploads at once: the server's RSS is sampled while they run.
            let before = await harness.sampleServer()
            let peak = ServerPeak()
            let serverPid = harness.target.pid
            let sampler = Task {
                while !Task.isCancelled {
                    if let rss = serverPid.flatMap(ProcessSample.read(pid:))?.rssKiB { await peak.see(rss) }
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            let concurrentStarted = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<p.concurrentUploads {
                    group.addTask { _ = try await upload(http, client: client, type: .file, megabytes: p.concurrentMB, chunk: mebibyte) }
                }
                try await group.waitForAll()
            }
            let concurrentSeconds = (ContinuousClock.now - concurrentStarted).seconds
            sampler.cancel()
            let after = await harness.sampleServer()

            // Photos: each upload is checked, reduced to 960 px and thumbnailed by the server.
            let photo = try await makePhoto(width: p.photoWidth, height: p.photoHeight)
            var photoLatency = LatencyHistogram()
            let toolsBefore = childrenCPUSeconds(harness.target.pid)
            let photosStart = await harness.sampleServer()
            for _ in 0..<p.photos {
                let started = monotonicNanos()
                let media = try await client.uploadMedia(photo, type: .image, fileName: "photo.jpg")
                photoLatency.record(nanos: monotonicNanos() - started)
                guard media.thumbnail != nil, media.width == 960 else { throw BenchError("the photo came back without its thumbnail or 960 px image") }
            }
            let photosEnd = await harness.sampleServer()
            let toolsAfter = childrenCPUSeconds(harness.target.pid)
            await client.disconnect()
            try await http.shutdown()
            await harness.finish()

            func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
            result.run = ["largeFileMB": "\(p.largeMB)", "repeats": "\(p.repeats)", "concurrentUploads": "\(p.concurrentUploads)",
                          "concurrentUploadMB": "\(p.concurrentMB)", "photos": "\(p.photos)",
                          "photoPixels": "\(p.photoWidth)x\(p.photoHeight)", "photoBytes": "\(photo.count)"]
                .merging(harness.layout) { a, _ in a }
            result.figures["uploadMBps"] = rounded(median(uploadRates), 1)
            result.figures["downloadMBps"] = rounded(median(downloadRates), 1)
            result.figures["uploadMBpsRuns"] = rounded(uploadRates.min() ?? 0, 1)
            if let start = largeStart.nodes.first ?? nil, let end = largeEnd.nodes.first ?? nil {
                let megabytes = Double(2 * p.repeats * p.largeMB)
                result.figures["serverCpuMsPerMB"] = rounded((end.cpuSeconds - start.cpuSeconds) * 1000 / megabytes, 3)
            }
            result.figures["concurrentSeconds"] = rounded(concurrentSeconds, 2)
            result.figures["concurrentMBps"] = rounded(Double(p.concurrentUploads * p.concurrentMB) / concurrentSeconds, 1)
            if let rss = before.nodes.first??.rssKiB {
                let top = max(await peak.value, after.nodes.first??.rssKiB ?? 0)
                result.figures["rssBeforeConcurrentMiB"] = rounded(Double(rss) / 1024, 1)
                result.figures["rssPeakConcurrentMiB"] = rounded(Double(top) / 1024, 1)
                result.figures["rssGrowthConcurrentMiB"] = rounded(Double(max(top, rss) - rss) / 1024, 1)
            }
            result.latencies["photoUpload"] = photoLatency.summary
            if let start = photosStart.nodes.first ?? nil, let end = photosEnd.nodes.first ?? nil {
                result.figures["serverCpuMsPerPhoto"] = rounded((end.cpuSeconds - start.cpuSeconds) * 1000 / Double(p.photos), 2)
            }
            if let before = toolsBefore, let after = toolsAfter {
                result.figures["toolsCpuMsPerPhoto"] = rounded((after - before) * 1000 / Double(p.photos), 1)
            }
            result.server = harness.serverFigures(baseline: baseline, windowStart: nil, windowEnd: after)
            result.notes.append("photoUpload: the whole upload of a \(p.photoWidth)x\(p.photoHeight) JPEG (\(photo.count / 1024) KiB): transfer, header check, reduction to 960 px, 240 px thumbnail, record.")
            result.notes.append("toolsCpuMsPerPhoto: CPU of the libvips child processes per photo (the server's reaped children).")
            check(&result)
            return result
        } catch {
            await client.disconnect()
            try? await http.shutdown()
            await harness.finish()
            throw error
        }
    }

    /// Uploads `megabytes` of `chunk` repeated as one file; returns its URL.
    private static func upload(_ http: HTTPClient, client: IMClient, type: MediaType, megabytes: Int, chunk: ByteBuffer) async throws -> String {
        let size = Int64(megabytes) * 1_048_576
        let token = try await client.mediaUploadToken(type: type, fileName: "bench.bin", size: size)
        guard let base = await client.connectedServerURL else { throw BenchError("the media client is not connected") }
        var request = HTTPClientRequest(url: base + token.url)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token.token)")
        request.body = .stream(RepeatedChunks(chunk: chunk, count: megabytes), length: .known(size))
        let response = try await http.execute(request, timeout: .minutes(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        let answer = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
        guard answer["code"] as? Int == 200, let url = answer["url"] as? String else { throw BenchError("an upload failed: \(answer)") }
        return url
    }

    /// Downloads `url`, counting its bytes.
    private static func download(_ http: HTTPClient, url: String, token: String) async throws -> Int64 {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let response = try await http.execute(request, timeout: .minutes(10))
        guard response.status == .ok else { throw BenchError("a download answered \(response.status)") }
        var bytes: Int64 = 0
        for try await buffer in response.body { bytes += Int64(buffer.readableBytes) }
        return bytes
    }

    /// A photo-like JPEG made by ffmpeg (a test pattern with noise).
    private static func makePhoto(width: Int, height: Int) async throws -> Data {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("imbench-photo-\(width)x\(height)-\(getpid()).jpg").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let ffmpeg else { throw BenchError("ffmpeg is not installed: run scripts/media-tools.sh") }
        let child = try ChildProcess(ffmpeg, ["-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height),noise=alls=12:allf=t",
                                              "-frames:v", "1", "-q:v", "3", path], standardOutput: .null, standardError: .inherit)
        guard await child.exit() == .exited(0) else { throw BenchError("ffmpeg could not make the photo") }
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// CPU seconds of a process's reaped children (cutime + cstime of /proc/<pid>/stat).
    private static func childrenCPUSeconds(_ pid: Int32?) -> Double? {
        guard let pid, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 15, let user = Double(fields[13]), let system = Double(fields[14]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// The highest RSS seen.
private actor ServerPeak {
    var value = 0
    func see(_ rss: Int) { value = max(value, rss) }
}

/// One buffer, `count` times: an upload body without a file behind it.
struct RepeatedChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let chunk: ByteBuffer
    let count: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let chunk: ByteBuffer
        var left: Int
        mutating func next() async -> ByteBuffer? {
            guard left > 0 else { return nil }
            left -= 1
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunk: chunk, left: count) }
}
