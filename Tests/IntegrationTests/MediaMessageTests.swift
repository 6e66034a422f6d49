import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import IMStore
import Testing

/// An app's own media type: a document with a title, its file uploaded like a file message's.
struct SharedDocument: MediaMessageContent, Codable, Equatable {
    static let objectName = "app:Doc"
    static let persistentFlag = PersistentFlag.persistedAndCounted
    var title: String
    var url = ""
    var localPath: String?
    var mediaUrl: String {
        get { url }
        set { url = newValue }
    }
    enum CodingKeys: String, CodingKey { case title, url }
    var conversationDigest: String { "[文档] \(title)" }
}

/// Media messages end to end: IMLib uploads the file with progress, the server checks it and makes
/// the thumbnail, the receiver gets the content and downloads the file into its media folder.
@Suite("Media messages")
struct MediaMessageTests {
    /// Progress and attach events of one send, in order.
    final class SendEvents: Sendable {
        let attached = Locked<[Message]>([])
        let progress = Locked<[Int]>([])
        var handler: @Sendable (MediaSendEvent) -> Void {
            { [attached, progress] event in
                switch event {
                case .attached(let message): attached.withLock { $0.append(message) }
                case .progress(let percent, _): progress.withLock { $0.append(percent) }
                }
            }
        }
        /// Rising, from 0 to 100.
        var progressIsWhole: Bool {
            let values = progress.value
            return values.first == 0 && values.last == 100 && zip(values, values.dropFirst()).allSatisfy { $0 < $1 }
        }
    }

    static func thumbnailIsValid(_ base64: String, longerSide: Int, sourceRatio: Double) -> Bool {
        guard !base64.contains("\n"), !base64.contains("\r"), let data = Data(base64Encoded: base64), data.count <= 10 * 1024,
              let size = JPEGSize.of(data) else { return false }
        let ratio = Double(size.width) / Double(size.height)
        return max(size.width, size.height) == longerSide && abs(ratio - sourceRatio) < 0.02
    }

    @Test("an image: the server keeps it at 960 px and makes a JPG thumbnail of 240 px under 10 KB; progress rises to 100; bob downloads it into his media folder, and the path survives a restart")
    func image() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let photo = try await MediaFixtures.shared.jpeg(width: 2000, height: 1500)
            let events = SendEvents()
            let sent = try await ann.sendMediaMessage(.private, targetId: "bob", content: ImageMessage(localPath: photo.path), events: events.handler)
            #expect(sent.sentStatus == .sent && !sent.messageUId.isEmpty)
            #expect(events.attached.value.first?.sentStatus == .sending && events.attached.value.first?.messageId == sent.messageId)
            #expect(events.progressIsWhole, "progress \(events.progress.value)")
            let image = try #require(sent.content(as: ImageMessage.self))
            #expect(Self.thumbnailIsValid(image.thumbnailBase64, longerSide: 240, sourceRatio: 4.0 / 3), "thumbnail \(image.thumbnailBase64.prefix(40))")
            #expect(sent.localMediaPath == photo.path, "the sender keeps its file's path")
            #expect(try await ann.getMessage(messageId: sent.messageId)?.content(as: ImageMessage.self)?.imageUri == image.imageUri,
                    "the stored message has the URL")

            let received = try #require(await inbox.wait(for: 1).first?.message)
            let content = try #require(received.content(as: ImageMessage.self))
            #expect(content.imageUri == image.imageUri && content.thumbnailBase64 == image.thumbnailBase64)
            let downloads = Locked<[Int]>([])
            let path = try await bob.downloadMediaMessage(messageId: received.messageId) { percent in downloads.withLock { $0.append(percent) } }
            #expect(path.hasPrefix(try await bob.mediaDirectory().path))
            let large = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(JPEGSize.of(large).map { [$0.width, $0.height] } == [960, 720], "the large image is 960 px wide")
            #expect(downloads.value.last == 100 && zip(downloads.value, downloads.value.dropFirst()).allSatisfy { $0 < $1 })
            #expect(try await bob.downloadMediaMessage(messageId: received.messageId) == path, "downloaded once")
            #expect(try await bob.getMessage(messageId: received.messageId)?.localMediaPath == path)

            // The original when `full` is set: the bytes as sent.
            let full = try await ann.sendMediaMessage(.private, targetId: "bob", content: ImageMessage(localPath: photo.path, full: true))
            let original = try await bob.downloadMedia(url: try #require(full.content(as: ImageMessage.self)).imageUri)
            #expect(original == (try Data(contentsOf: photo)))

            // Another device of bob's, on the same database: the path is still recorded.
            let directory = try await bob.mediaDirectory().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            await bob.disconnect()
            let again = server.client { $0.databaseDirectory = directory }
            try await again.connect(token: try await server.token("bob"))
            #expect(try await again.getMessage(messageId: received.messageId)?.localMediaPath == path)
            await ann.disconnect(); await again.disconnect()
        }
    }

    @Test("a GIF carries its size and dimensions and is downloaded by itself on receipt; voice, file and short video carry duration, size, name and a first frame; an app's own media type uploads as a file")
    func everyType() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let downloads = EventRecorder(bob.mediaDownloadEvents())
            try await ann.registerMessageType(SharedDocument.self)
            try await bob.registerMessageType(SharedDocument.self)

            let gifFile = try await MediaFixtures.shared.gif(width: 200, height: 150)
            let gif = try #require(try await ann.sendMediaMessage(.private, targetId: "bob", content: GIFMessage(localPath: gifFile.path))
                .content(as: GIFMessage.self))
            let gifBytes = try Data(contentsOf: gifFile)
            #expect(gif.width == 200 && gif.height == 150 && gif.gifDataSize == Int64(gifBytes.count))
            let gifReceived = try #require(await inbox.wait(for: 1).first?.message)
            let completed = await downloads.first { if case .completed = $0 { true } else { false } }
            guard case .completed(let gifId, let gifPath)? = completed else { Issue.record("no automatic GIF download"); return }
            let gifDownloaded = try Data(contentsOf: URL(fileURLWithPath: gifPath))
            #expect(gifId == gifReceived.messageId && gifDownloaded == gifBytes)
            #expect(try await bob.getMessage(messageId: gifId)?.localMediaPath == gifPath)

            let voiceFile = try await MediaFixtures.shared.m4a(seconds: 3)
            let voice = try #require(try await ann.sendMediaMessage(.private, targetId: "bob", content: HQVoiceMessage(localPath: voiceFile.path))
                .content(as: HQVoiceMessage.self))
            #expect(voice.duration == 3 && !voice.remoteUrl.isEmpty)

            let notes = FileManager.default.temporaryDirectory.appendingPathComponent("notes-\(UUID().uuidString).txt")
            try Data("minutes of the meeting\n".utf8).write(to: notes)
            let file = try #require(try await ann.sendMediaMessage(.private, targetId: "bob", content: FileMessage(localPath: notes.path))
                .content(as: FileMessage.self))
            #expect(file.size == 23 && file.name == notes.lastPathComponent && file.type == "txt")

            let clipFile = try await MediaFixtures.shared.mp4(seconds: 4, width: 320, height: 240)
            let sight = try #require(try await ann.sendMediaMessage(.private, targetId: "bob", content: SightMessage(localPath: clipFile.path))
                .content(as: SightMessage.self))
            let clipSize = Int64(try Data(contentsOf: clipFile).count)
            #expect(sight.duration == 4 && sight.size == clipSize && sight.name == clipFile.lastPathComponent, "\(sight.duration) s, \(sight.size) of \(clipSize) bytes")
            #expect(Self.thumbnailIsValid(sight.thumbnailBase64, longerSide: 240, sourceRatio: 4.0 / 3), "first frame")

            let document = try await ann.sendMediaMessage(.private, targetId: "bob", content: SharedDocument(title: "Plan", localPath: notes.path))
            #expect(document.content(as: SharedDocument.self)?.url.contains("/media/\(server.app.appKey)/") == true)

            let received = await inbox.wait(for: 5).dropFirst().map(\.message)
            #expect(received.map(\.objectName) == ["RC:HQVCMsg", "RC:FileMsg", "RC:SightMsg", "app:Doc"])
            #expect(received.last?.content(as: SharedDocument.self)?.title == "Plan")
            let path = try await bob.downloadMediaMessage(messageId: try #require(received.last?.messageId))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("minutes of the meeting\n".utf8))
            // Read back from bob's database: only the GIF and the document downloaded have a path.
            var paths: [String: Bool] = [:]
            for message in received { paths[message.objectName] = try await bob.getMessage(messageId: message.messageId)?.localMediaPath != nil }
            #expect(paths == ["RC:HQVCMsg": false, "RC:FileMsg": false, "RC:SightMsg": false, "app:Doc": true], "only small GIFs download by themselves")
            #expect(downloads.items.filter { if case .completed = $0 { true } else { false } }.count == 2)
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("cancel during the upload: the message ends canceled, nothing reaches bob, the server keeps no part of the file")
    func cancel() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let big = try await MediaFixtures.shared.blob(megabytes: 60)
            let client = ann
            let started = Locked(false)
            var canceledMessage: Message?
            do {
                try await ann.sendMediaMessage(.private, targetId: "bob", content: FileMessage(localPath: big.path), events: { event in
                    guard case .progress(let percent, let message) = event, percent > 0, started.withLock({ let first = !$0; $0 = true; return first }) else { return }
                    Task { await client.cancelSendMediaMessage(messageId: message.messageId) }
                })
                Issue.record("the send was not canceled")
            } catch let canceled as MediaSendCanceled {
                canceledMessage = canceled.message
            }
            let message = try #require(canceledMessage)
            #expect(message.sentStatus == .canceled)
            #expect(try await ann.getMessage(messageId: message.messageId)?.sentStatus == .canceled)
            #expect(await ann.cancelSendMediaMessage(messageId: message.messageId) == false, "nothing left to cancel")
            // The next message is the first bob gets.
            try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "after the cancel"))
            #expect(await inbox.wait(for: 1).first?.message.content(as: TextMessage.self)?.content == "after the cancel")
            let media = server.dataDir.appendingPathComponent("media/\(server.app.id)")
            try await waitUntil("the aborted upload's part file is removed") {
                (FileManager.default.enumerator(atPath: media.path)?.allObjects as? [String] ?? []).allSatisfy { $0.count <= 2 }
            }
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("the custom-upload hook: the app uploads to its own storage with progress and IMLib sends its URL; a failing hook fails the send")
    func customUpload() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let photo = try await MediaFixtures.shared.jpeg(width: 320, height: 240)
            let events = SendEvents()
            var content = ImageMessage(localPath: photo.path)
            content.thumbnailBase64 = "dGh1bWI="
            let seen = Locked<[String]>([])
            let sent = try await ann.sendMediaMessage(.private, targetId: "bob", content: content, uploader: { job in
                seen.withLock { $0.append(job.localPath) }
                job.progress(0)
                job.progress(50)
                return "https://cdn.example.com/\(job.message.messageId).jpg"
            }, events: events.handler)
            #expect(seen.value == [photo.path] && events.progressIsWhole)
            let received = try #require(await inbox.wait(for: 1).first?.message.content(as: ImageMessage.self))
            #expect(received.imageUri == "https://cdn.example.com/\(sent.messageId).jpg" && received.thumbnailBase64 == "dGh1bWI=")

            struct StorageDown: Error {}
            do {
                try await ann.sendMediaMessage(.private, targetId: "bob", content: ImageMessage(localPath: photo.path), uploader: { _ in throw StorageDown() })
                Issue.record("a failing hook must fail the send")
            } catch let error as SendMessageError {
                #expect(error.code == .mediaUploadFailed && error.message.sentStatus == .failed)
            }
            #expect(await failureCode {
                try await ann.sendMediaMessage(.private, targetId: "bob", content: ImageMessage(localPath: "/nonexistent/cat.jpg"))
            } == 34018, "no file: refused before anything is stored")
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("a canceled download resumes where it stopped; the file is whole and recorded")
    func resumedDownload() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let big = try await MediaFixtures.shared.blob(megabytes: 40)
            try await ann.sendMediaMessage(.private, targetId: "bob", content: FileMessage(localPath: big.path))
            let received = try #require(await inbox.wait(for: 1).first?.message)
            let client = bob
            let canceled = Locked(false)
            do {
                try await bob.downloadMediaMessage(messageId: received.messageId) { percent in
                    guard percent >= 10, canceled.withLock({ let first = !$0; $0 = true; return first }) else { return }
                    Task { await client.cancelDownloadMediaMessage(messageId: received.messageId) }
                }
                Issue.record("the download was not canceled")
            } catch is CancellationError {}
            let folder = try await bob.mediaDirectory()
            let parts = (FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".part") }
            let part = try #require(parts.first.map { folder.appendingPathComponent($0).path }, "a part file is kept")
            let kept = try #require((try FileManager.default.attributesOfItem(atPath: part)[.size] as? NSNumber)?.int64Value)
            #expect(kept > 0 && kept < 40 * 1_048_576, "part of the file: \(kept)")
            #expect(try await bob.getMessage(messageId: received.messageId)?.localMediaPath == nil)
            let resumed = Locked<[Int]>([])
            let path = try await bob.downloadMediaMessage(messageId: received.messageId) { percent in resumed.withLock { $0.append(percent) } }
            #expect((resumed.value.first ?? 0) >= Int(kept * 100 / (40 * 1_048_576)) - 1, "it went on from the part: \(resumed.value.prefix(3))")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == (try Data(contentsOf: big)))
            #expect(!FileManager.default.fileExists(atPath: part))
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("hostile and wrong files are refused with 34019 (34002 for a long video), nothing is kept, and the server goes on")
    func hostileFiles() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let fixtures = MediaFixtures.shared
            func refusal(_ file: URL, _ type: MediaType) async throws -> (Int?, String) {
                do {
                    _ = try await ann.uploadMedia(try Data(contentsOf: file), type: type, fileName: file.lastPathComponent)
                    return (nil, "")
                } catch let error as IMError {
                    return (error.code.rawValue, error.message)
                }
            }
            let truncated = try await refusal(try await fixtures.truncatedJPEG(), .image)
            #expect(truncated.0 == 34019, "a truncated JPEG: \(truncated)")
            let bomb = try await refusal(try await fixtures.bombPNG(), .image)
            #expect(bomb.0 == 34019 && bomb.1.contains("megapixels"), "a decompression bomb: \(bomb)")
            let garbage = FileManager.default.temporaryDirectory.appendingPathComponent("garbage-\(UUID().uuidString).jpg")
            try MediaTests.jpeg(50_000).write(to: garbage)
            #expect(try await refusal(garbage, .image).0 == 34019, "a JPEG header followed by noise")
            let mpeg4 = try await refusal(try await fixtures.mp4(seconds: 2, videoCodec: "mpeg4"), .sight)
            #expect(mpeg4.0 == 34019 && mpeg4.1.contains("H.264"), "a short video that is not H.264: \(mpeg4)")
            let long = try await refusal(try await fixtures.mp4(seconds: 130, width: 64, height: 48), .sight)
            #expect(long.0 == 34002, "a short video over 2 minutes: \(long)")
            let speech = try await refusal(try await fixtures.m4a(seconds: 70), .voice)
            #expect(speech.0 == 34019 && speech.1.contains("60 s"), "a voice clip over 60 s: \(speech)")
            #expect(try await refusal(try await fixtures.jpeg(width: 64, height: 48), .gif).0 == 34019, "a JPEG sent as a GIF")
            // A playlist behind an ID3 tag: taken as MP3 by its first bytes, refused by ffprobe,
            // which may read only the file and audio formats.
            let playlist = FileManager.default.temporaryDirectory.appendingPathComponent("playlist-\(UUID().uuidString).mp3")
            try (Data([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0])
                 + Data("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nhttp://127.0.0.1:9/seg.mp3\n#EXT-X-ENDLIST\n".utf8)).write(to: playlist)
            #expect(try await refusal(playlist, .voice).0 == 34019, "a playlist posing as audio")
            let media = server.dataDir.appendingPathComponent("media/\(server.app.id)")
            let kept = (FileManager.default.enumerator(atPath: media.path)?.allObjects as? [String] ?? []).filter { $0.count > 3 }
            #expect(kept.isEmpty, "nothing kept: \(kept)")
            let work = server.dataDir.appendingPathComponent("media/.work/single")
            #expect((try? FileManager.default.contentsOfDirectory(atPath: work.path))?.isEmpty ?? true, "no work files left")
            // The server and the user go on.
            let photo = try await fixtures.jpeg(width: 320, height: 240)
            #expect(try await ann.uploadMedia(try Data(contentsOf: photo), type: .image, fileName: "ok.jpg").thumbnail != nil)
            await ann.disconnect()
        }
    }

    @Test("a PNG with transparency and a portrait photo get thumbnails in their proportions; the app's limits on video and voice length apply")
    func proportionsAndLimits() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.media.maxSightSeconds = 3
            config.media.maxVoiceSeconds = 2
        }) { server in
            let ann = try await server.connectedClient("ann")
            let fixtures = MediaFixtures.shared
            let png = try await ann.uploadMedia(try Data(contentsOf: try await fixtures.png(width: 1200, height: 900)), type: .image, fileName: "a.png")
            #expect(png.mimeType == "image/jpeg" && png.width == 960 && png.height == 720, "reduced to a JPG of 960 px: \(png)")
            #expect(Self.thumbnailIsValid(try #require(png.thumbnail).base64EncodedString(), longerSide: 240, sourceRatio: 4.0 / 3))
            let portrait = try await ann.uploadMedia(try Data(contentsOf: try await fixtures.jpeg(width: 600, height: 1200)), type: .image, fileName: "p.jpg")
            #expect(portrait.width == 480 && portrait.height == 960)
            #expect(Self.thumbnailIsValid(try #require(portrait.thumbnail).base64EncodedString(), longerSide: 240, sourceRatio: 0.5))
            let clip = try Data(contentsOf: try await fixtures.mp4(seconds: 4))
            #expect(await failureCode { _ = try await ann.uploadMedia(clip, type: .sight, fileName: "c.mp4") } == 34002, "this app takes 3 s")
            let voice = try Data(contentsOf: try await fixtures.m4a(seconds: 3))
            #expect(await failureCode { _ = try await ann.uploadMedia(voice, type: .voice, fileName: "v.m4a") } == 34019, "this app takes 2 s of voice")
            let short = try await ann.uploadMedia(try Data(contentsOf: try await fixtures.m4a(seconds: 1)), type: .voice, fileName: "s.m4a")
            #expect(short.duration == 1, "a voice within the limit is taken with its duration: \(short)")
            await ann.disconnect()
        }
    }
}

extension MediaMessageTests {
    @Test("combined forward: the messages go into an HTML file (escaped, readable back), carol gets RC:CombineMsg with the title, names and first lines; a mention is dropped; custom types are refused")
    func combinedForward() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let carol = try await server.connectedClient("carol")
            let carolInbox = EventRecorder(carol.receivedMessages())
            let bobInbox = EventRecorder(bob.receivedMessages())
            let annInbox = EventRecorder(ann.receivedMessages())
            let first = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "<script>alert(1)</script> call 13800138000 or 1234567"))
            // A combining mark before '<' or after '"' makes one character of the two: escaping
            // by character would let them through.
            let joined = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "\u{0D4E}<img src=x onerror=alert(2)\u{0D4E}> \"\u{0301}"))
            let photo = try await MediaFixtures.shared.jpeg(width: 320, height: 240)
            let picture = try await ann.sendMediaMessage(.private, targetId: "bob", content: ImageMessage(localPath: photo.path))
            _ = await bobInbox.wait(for: 3)
            try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "got it"))
            let reply = try #require(await annInbox.first { $0.message.senderUserId == "bob" }?.message)
            var mention = TextMessage(content: "@carol look")
            mention.mentionedInfo = MentionedInfo(type: .users, userIdList: ["carol"])
            let mentionData = try mention.encode()
            var mentioned = reply
            mentioned.contentData = mentionData
            mentioned.content = mention
            mentioned.sentTime = reply.sentTime + 1
            mentioned.messageUId = "local-mention"

            let sent = try await ann.sendCombinedMessage([picture, reply, first, mentioned, joined], to: .private, targetId: "carol",
                                                         names: ["ann": "Ann", "bob": "Bob"])
            let content = try #require(sent.content(as: CombineMessage.self))
            #expect(content.title == "Ann和Bob的聊天记录" && content.nameList == ["Ann", "Bob"])
            #expect(content.summaryList.count == 4 && content.summaryList[0] == "Ann：<script>alert(1)</script> call 13800138000 or 1234567"
                    && content.summaryList[2] == "Ann：[图片]" && content.summaryList[3] == "Bob：got it")

            let received = try #require(await carolInbox.wait(for: 1).first?.message)
            #expect(received.content(as: CombineMessage.self)?.remoteUrl == content.remoteUrl)
            let entries = try await carol.combinedMessages(of: received.messageId)
            #expect(entries.map(\.objectName) == ["RC:TxtMsg", "RC:TxtMsg", "RC:ImgMsg", "RC:TxtMsg", "RC:TxtMsg"])
            #expect(entries.map(\.senderName) == ["Ann", "Ann", "Ann", "Bob", "Bob"])
            #expect(entries.first?.content.contains("13800138000 or 1234567") == true)
            #expect(entries.last?.content.contains("mentionedInfo") == false, "a forwarded mention mentions no one")
            #expect(entries[1].content.contains("\u{0D4E}<img"), "read back as sent")
            let html = try String(contentsOfFile: try #require(try await carol.getMessage(messageId: received.messageId)?.localMediaPath), encoding: .utf8)
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !html.contains("<script>alert(1)"), "escaped")
            let page = try #require(html.components(separatedBy: "<script type=").first)
            #expect(!html.contains("<img src=x") && page.contains("\u{0D4E}&lt;img") && !page.contains("\"\u{0301}")
                    && page.contains("&quot;\u{0301}"), "escaped scalar by scalar")
            #expect(html.components(separatedBy: "<script").count == 2, "one script element, the data block")
            #expect(html.contains("data:image/jpeg;base64,"), "the image's thumbnail is shown")

            // Served as an attachment that cannot run as a page of the server.
            let token = try await carol.mediaDownloadToken().token
            let (_, _, headers) = try await MediaTests.get(content.remoteUrl, token: token)
            #expect(headers["Content-Type"]?.hasPrefix("text/html") == true && headers["Content-Security-Policy"] == "sandbox"
                    && headers["X-Content-Type-Options"] == "nosniff" && headers["Content-Disposition"]?.hasPrefix("attachment") == true)

            try await ann.registerMessageType(SharedDocument.self)
            let document = try await ann.sendMediaMessage(.private, targetId: "bob", content: SharedDocument(title: "x", url: "https://example.com/x"))
            #expect(await failureCode { try await ann.sendCombinedMessage([first, document], to: .private, targetId: "carol") } == 33003)
            #expect(await failureCode { try await ann.sendCombinedMessage([], to: .private, targetId: "carol") } == 33003)
            await ann.disconnect(); await bob.disconnect(); await carol.disconnect()
        }
    }
}

extension MediaMessageTests {
    @Test("the Server API publishes media contents by URL (a file kept here, an image on the app's own storage): delivered as sent, and the receiver downloads the file kept here")
    func publishedMedia() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let report = Data("quarterly figures\n".utf8)
            let kept = try await ann.uploadMedia(report, type: .file, fileName: "report.txt", mimeType: "text/plain")
            let file = #"{"name":"report.txt","size":"\#(report.count)","type":"txt","fileUrl":"\#(kept.url)"}"#
            let (_, published) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "ann", "toUserId": "bob", "objectName": "RC:FileMsg", "content": file])
            #expect(published["code"] as? Int == 200, "\(published)")
            let image = #"{"content":"dGh1bWI=","imageUri":"https://cdn.example.com/cat.jpg"}"#
            let (_, imagePublished) = try await server.api.post("/message/private/publish.json", form: [
                "fromUserId": "ann", "toUserId": "bob", "objectName": "RC:ImgMsg", "content": image])
            #expect(imagePublished["code"] as? Int == 200, "\(imagePublished)")
            let received = await inbox.wait(for: 2).map(\.message)
            let fileMessage = try #require(received.first { $0.objectName == "RC:FileMsg" })
            #expect(fileMessage.content(as: FileMessage.self)?.size == Int64(report.count), "a size given as a string, as the Server API documents it")
            let path = try await bob.downloadMediaMessage(messageId: fileMessage.messageId)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == report)
            #expect(received.first { $0.objectName == "RC:ImgMsg" }?.content(as: ImageMessage.self)?.imageUri == "https://cdn.example.com/cat.jpg")
            await ann.disconnect(); await bob.disconnect()
        }
    }
}

extension MediaMessageTests {
    /// The resident memory of a process, KiB.
    static func residentKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
    }

    @Test("a 100 MB file goes up and down through an imserver process whose memory grows by far less than the file (RSS sampled)")
    func largeFileBoundedMemory() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-media-rss-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let app = AppRecord(id: 0, appKey: "mediakey", appSecret: "mediasecret", name: "", createdAt: 0)
        let server = try await ChildServer(dataDir: dataDir, appKey: app.appKey, appSecret: app.appSecret)
        defer { server.kill() }
        let api = ServerAPIClient(baseURL: server.baseURL, app: app)
        var options = IMClientOptions()
        options.databaseDirectory = dataDir.appendingPathComponent("clients")
        let ann = IMClient(appKey: app.appKey, serverURL: server.baseURL, options: options)
        try await ann.connect(token: try #require(try await api.post("/user/getToken.json", form: ["userId": "ann"]).1["token"] as? String))
        let big = try await MediaFixtures.shared.blob(megabytes: 100)
        let pid = server.process.pid
        let before = Self.residentKiB(pid)
        let peak = Locked(before)
        let sampler = Task {
            while !Task.isCancelled {
                let now = Self.residentKiB(pid)
                peak.withLock { $0 = max($0, now) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let uploaded = try await ann.uploadMedia(file: big.path, type: MediaType.file)
        let copy = dataDir.appendingPathComponent("copy.bin")
        try await ann.downloadMediaFile(url: uploaded.url, to: copy.path)
        sampler.cancel()
        #expect(uploaded.size == 100 * 1_048_576)
        #expect(FileManager.default.contentsEqual(atPath: copy.path, andPath: big.path))
        let growthMiB = Double(peak.value - before) / 1024
        #expect(growthMiB < 40, "the server's RSS grew \(growthMiB) MiB for a 100 MiB file (before: \(before / 1024) MiB)")
        await ann.disconnect()
    }
}
