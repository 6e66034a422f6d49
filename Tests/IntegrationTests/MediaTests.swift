import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// The media file service: tokens from the connection, uploads streamed to disk with the limits of
/// their type, downloads with Range for the app's users only, and retention.
@Suite("Media files")
struct MediaTests {
    /// Bytes that begin as a file of the format does, and go on as none (the server's first check
    /// looks at the first bytes; its tools then read the whole file).
    static func jpeg(_ size: Int) -> Data { Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data((0..<(size - 4)).map { UInt8($0 % 251) }) }
    static func gif(_ size: Int) -> Data { Data("GIF89a".utf8) + Data(repeating: 7, count: size - 6) }

    static func get(_ url: String, token: String?, headers: [String: String] = [:]) async throws -> (Int, Data, [String: String]) {
        var request = URLRequest(url: URL(string: url)!)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (key, value) in http?.allHeaderFields ?? [:] { fields[String(describing: key)] = String(describing: value) }
        return (http?.statusCode ?? 0, data, fields)
    }

    static func post(_ url: String, token: String?, body: Data) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.upload(for: request, from: body)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }

    @Test("an image uploaded by one user is downloaded by another: the same bytes, its type, Range requests, an ETag; the URL goes in an RC:ImgMsg")
    func uploadAndDownload() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann")
            let bob = try await server.connectedClient("bob")
            let bobInbox = EventRecorder(bob.receivedMessages())
            // Sent as the original: kept as sent.
            let picture = try Data(contentsOf: try await MediaFixtures.shared.jpeg(width: 960, height: 720))
            let uploaded = try await ann.uploadMedia(picture, type: .image, fileName: "cat.jpg", original: true)
            #expect(uploaded.size == Int64(picture.count) && uploaded.mimeType == "image/jpeg")
            #expect(uploaded.url == "\(server.baseURL)/media/\(server.app.appKey)/\(uploaded.fileId)")
            let content = ImageMessage(thumbnailBase64: "", imageUri: uploaded.url)
            _ = try await ann.sendMessage(.private, targetId: "bob", content: content)
            let received = try #require(await bobInbox.wait(for: 1).first?.message.content(as: ImageMessage.self))
            #expect(try await bob.downloadMedia(url: received.imageUri) == picture)

            let token = try await bob.mediaDownloadToken().token
            let (status, whole, headers) = try await Self.get(uploaded.url, token: token)
            #expect(status == 200 && whole == picture && headers["Content-Type"] == "image/jpeg" && headers["Accept-Ranges"] == "bytes")
            let etag = try #require(headers["Etag"] ?? headers["ETag"])
            let (partial, part, partHeaders) = try await Self.get(uploaded.url, token: token, headers: ["Range": "bytes=1000-1999"])
            #expect(partial == 206 && part == picture[1000..<2000] && partHeaders["Content-Range"] == "bytes 1000-1999/\(picture.count)")
            let (tail, tailBytes, _) = try await Self.get(uploaded.url, token: token, headers: ["Range": "bytes=-10"])
            #expect(tail == 206 && tailBytes == picture.suffix(10))
            let (unsatisfiable, _, _) = try await Self.get(uploaded.url, token: token, headers: ["Range": "bytes=\(picture.count)-"])
            #expect(unsatisfiable == 416)
            let (cached, _, _) = try await Self.get(uploaded.url, token: token, headers: ["If-None-Match": etag])
            #expect(cached == 304)
            let (query, byQuery, _) = try await Self.get(uploaded.url + "?token=\(token)", token: nil)
            #expect(query == 200 && byQuery == picture, "a token in the query, for players that cannot set headers")
            await ann.disconnect(); await bob.disconnect()
        }
    }

    @Test("files are private to their app: no token, a forged token, another app's token or an upload token get 1004; nothing leaks")
    func privacy() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.adminKey = AdminAPITests.key }) { server in
            let ann = try await server.connectedClient("ann")
            let uploaded = try await ann.uploadMedia(Self.jpeg(1_000), type: .file, fileName: "a.bin")
            let (_, created) = try await AdminAPITests.call(server, "POST", "/admin/apps", json: ["name": "other"])
            let otherKey = try #require((created["app"] as? [String: Any])?["appKey"] as? String)
            let other = try #require(server.core.apps.app(key: otherKey))
            let stranger = server.client(app: other)
            try await stranger.connect(token: try await server.token("eve", app: other))
            let foreign = try await stranger.mediaDownloadToken().token
            for (token, why) in [(nil, "no token"), ("x.y", "a forged token"), (foreign, "another app's token"),
                                 (try await ann.mediaUploadToken(type: .image, fileName: "b.jpg", size: 10).token, "an upload token")] {
                let (status, body, _) = try await Self.get(uploaded.url, token: token)
                let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
                #expect(status == 401 && answer["code"] as? Int == 1004, "\(why): \(status) \(answer)")
                #expect(body.count < 1_000, "\(why): none of the file")
            }
            // A token tampered with (another user, same signature) is refused too.
            let real = try await ann.mediaDownloadToken().token
            let parts = real.split(separator: ".")
            let tampered = String(parts[0].dropLast()) + (parts[0].last == "A" ? "B" : "A") + "." + parts[1]
            #expect(try await Self.get(uploaded.url, token: tampered).0 == 401)
            await ann.disconnect(); await stranger.disconnect()
        }
    }

    @Test("limits and formats: a GIF over 2 MB gets 34003, an empty file 34018, content not of its type 34019, more bytes than the token allows 34011; nothing is kept")
    func refusals() async throws {
        try await withTestServer(try await TestServer.start { $0.media.maxFileMB = 1 }) { server in
            let ann = try await server.connectedClient("ann")
            #expect(await failureCode { _ = try await ann.mediaUploadToken(type: .gif, fileName: "big.gif", size: 2 * 1_048_576 + 1) } == 34003)
            #expect(await failureCode { _ = try await ann.mediaUploadToken(type: .file, fileName: "big.bin", size: 1_048_577) } == 34011)
            #expect(await failureCode { _ = try await ann.mediaUploadToken(type: .image, fileName: "none.jpg", size: 0) } == 34018)
            #expect(await failureCode { _ = try await ann.uploadMedia(Self.jpeg(2_000), type: .gif, fileName: "fake.gif") } == 34019,
                    "a JPEG is not a GIF")
            #expect(await failureCode { _ = try await ann.uploadMedia(Self.gif(2_000), type: .sight, fileName: "fake.mp4") } == 34019)
            #expect(await failureCode { _ = try await ann.uploadMedia(Data("plain text".utf8), type: .voice, fileName: "x.aac") } == 34019)
            // The token was asked for 100 bytes; the body carries more.
            let token = try await ann.mediaUploadToken(type: .image, fileName: "lie.jpg", size: 100)
            let (status, answer) = try await Self.post(server.baseURL + token.url, token: token.token, body: Self.jpeg(50_000))
            #expect(status == 413 && answer["code"] as? Int == 34011, "\(answer)")
            let (noToken, noTokenAnswer) = try await Self.post(server.baseURL + "/media/upload", token: nil, body: Self.jpeg(100))
            #expect(noToken == 401 && noTokenAnswer["code"] as? Int == 1004)
            // A download token does not upload, nor does an upload token with its claims changed.
            let download = try await ann.mediaDownloadToken().token
            let (wrongPurpose, wrongPurposeAnswer) = try await Self.post(server.baseURL + "/media/upload", token: download, body: Self.jpeg(100))
            #expect(wrongPurpose == 401 && wrongPurposeAnswer["code"] as? Int == 1004)
            let upload = try await ann.mediaUploadToken(type: .file, fileName: "a.bin", size: 100).token
            let parts = upload.split(separator: ".")
            let forged = String(parts[0].dropLast()) + (parts[0].last == "A" ? "B" : "A") + "." + parts[1]
            let (forgedStatus, forgedAnswer) = try await Self.post(server.baseURL + "/media/upload", token: forged, body: Self.jpeg(100))
            #expect(forgedStatus == 401 && forgedAnswer["code"] as? Int == 1004, "\(forgedAnswer)")
            let media = server.dataDir.appendingPathComponent("media/\(server.app.id)")
            let kept = (FileManager.default.enumerator(atPath: media.path)?.allObjects as? [String] ?? []).filter { !$0.hasSuffix("/") && $0.count > 3 }
            #expect(kept.isEmpty, "refused uploads leave no file: \(kept)")
            // A file message takes any content, a short video an MP4.
            #expect(try await ann.uploadMedia(Data("plain text".utf8), type: .file, fileName: "notes.txt", mimeType: "text/plain").mimeType == "text/plain")
            let clip = try Data(contentsOf: try await MediaFixtures.shared.mp4(seconds: 2))
            #expect(try await ann.uploadMedia(clip, type: .sight, fileName: "clip.mp4").mimeType == "video/mp4")
            await ann.disconnect()
        }
    }

    @Test("retention on the injected clock: a short video goes after 7 days, an image after 180; a download of an expired file gets 34020, then nothing")
    func retention() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock)) { server in
            let ann = try await server.connectedClient("ann")
            let image = try await ann.uploadMedia(try Data(contentsOf: try await MediaFixtures.shared.jpeg(width: 64, height: 48)),
                                                  type: .image, fileName: "a.jpg")
            let clip = try await ann.uploadMedia(try Data(contentsOf: try await MediaFixtures.shared.mp4(seconds: 2)), type: .sight, fileName: "c.mp4")
            clock.advance(milliseconds: 7 * 86_400_000 + 1)
            let token = try await ann.mediaDownloadToken().token
            let (expired, body, _) = try await Self.get(clip.url, token: token)
            #expect(expired == 410 && ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["code"] as? Int == 34020)
            #expect(try await server.core.media.sweep(now: clock.nowMilliseconds()) == 1)
            #expect(try await Self.get(clip.url, token: token).0 == 404, "swept")
            #expect(try await Self.get(image.url, token: token).0 == 200, "an image is kept 180 days")
            clock.advance(milliseconds: 173 * 86_400_000)
            #expect(try await server.core.media.sweep(now: clock.nowMilliseconds()) == 1)
            let fresh = try await ann.mediaDownloadToken().token
            #expect(try await Self.get(image.url, token: fresh).0 == 404)
            let media = server.dataDir.appendingPathComponent("media/\(server.app.id)")
            let left = (FileManager.default.enumerator(atPath: media.path)?.allObjects as? [String] ?? []).filter { $0.count > 3 }
            #expect(left.isEmpty, "the files are gone from disk: \(left)")
            await ann.disconnect()
        }
    }
}
