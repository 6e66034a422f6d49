import Crypto
import Foundation
import IMCore
import IMServer
import IMStore
import IMServerTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Raw HTTP requests the way each official SDK writes them (spec/server-api.md §§2-3).
@Suite("Server API: wire quirks of the official SDKs")
struct ServerAPIEncodingTests {
    /// Sends a request with exactly these headers and body.
    func raw(_ server: TestServer, _ path: String, headers: [String: String], body: String,
             contentType: String = "application/x-www-form-urlencoded") async throws -> (Int, [String: Any], String) {
        var request = URLRequest(url: URL(string: server.baseURL + path)!)
        request.httpMethod = "POST"
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body.utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, object, String(decoding: data, as: UTF8.self))
    }

    func signed(_ server: TestServer, nonce: String, timestamp: String, prefix: String = "", lowercase: Bool = false) -> [String: String] {
        let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp)
        let headers = ["App-Key": server.app.appKey, "Nonce": nonce, "Timestamp": timestamp, "Signature": signature]
        return Dictionary(uniqueKeysWithValues: headers.map { ((lowercase ? (prefix + $0.key).lowercased() : prefix + $0.key), $0.value) })
    }

    @Test("every SDK's signature style: rc- lowercase headers with ms and a 20-char nonce, a reused nonce, an upper-case hex signature")
    func signatures() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let seconds = String(Int(Date().timeIntervalSince1970))
            let python2 = signed(server, nonce: "0.052330289554476495", timestamp: seconds + "000", prefix: "RC-", lowercase: true)
            #expect(try await raw(server, "/user/checkOnline.json", headers: python2, body: "userId=u").0 == 200)
            // The Node SDK signs once and reuses the same headers for every call.
            let node = signed(server, nonce: "12345", timestamp: seconds)
            #expect(try await raw(server, "/user/checkOnline.json", headers: node, body: "userId=u").0 == 200)
            #expect(try await raw(server, "/user/checkOnline.json", headers: node, body: "userId=u").0 == 200)
            var upper = node
            upper["Signature"] = upper["Signature"]!.uppercased()
            #expect(try await raw(server, "/user/checkOnline.json", headers: upper, body: "userId=u").0 == 200)
            var missing = node
            missing["Nonce"] = nil
            let (status, body, _) = try await raw(server, "/user/checkOnline.json", headers: missing, body: "userId=u")
            #expect(status == 401 && body["code"] as? Int == 1004)
        }
    }

    @Test("a timestamp window, when turned on, refuses stale calls in seconds and in ms")
    func timestampWindow() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { $0.serverAPI.timestampWindowSeconds = 300 }) { server in
            #expect(try await raw(server, "/user/checkOnline.json", headers: signed(server, nonce: "1", timestamp: "1800000000"), body: "userId=u").0 == 200)
            #expect(try await raw(server, "/user/checkOnline.json", headers: signed(server, nonce: "1", timestamp: "1800000000000"), body: "userId=u").0 == 200)
            let (stale, body, _) = try await raw(server, "/user/checkOnline.json", headers: signed(server, nonce: "1", timestamp: "1799999000"), body: "userId=u")
            #expect(stale == 401 && body["code"] as? Int == 1004)
            let (staleMs, msBody, _) = try await raw(server, "/user/checkOnline.json", headers: signed(server, nonce: "1", timestamp: "1799999000000"), body: "userId=u")
            #expect(staleMs == 401 && msBody["code"] as? Int == 1004)
        }
    }

    @Test("unencoded Python 3.x form values, True/False booleans, empty values as absent, a stray %")
    func lenientForms() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let headers = signed(server, nonce: "227547464", timestamp: String(Int(Date().timeIntervalSince1970)))
            let (status, body, _) = try await raw(server, "/user/getToken.json", headers: headers,
                                                 body: "userId=u1&name=Alice Bob 张三 100%&portraitUri=")
            #expect(status == 200, "\(body)")
            let (_, info, _) = try await raw(server, "/user/info.json", headers: headers, body: "userId=u1")
            #expect(info["userName"] as? String == "Alice Bob 张三 100%")
            _ = try await raw(server, "/user/refresh.json", headers: headers, body: "userId=u1&name=50%+off%21 %zz")
            let (_, escaped, _) = try await raw(server, "/user/info.json", headers: headers, body: "userId=u1")
            #expect(escaped["userName"] as? String == "50% off! %zz", "a stray % does not stop the other escapes from decoding")
            let content = #"{"content":"hi"}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let (published, reply, _) = try await raw(server, "/message/private/publish.json", headers: headers,
                body: "fromUserId=u1&toUserId=u2&objectName=RC:TxtMsg&content=\(content)&isPersisted=True&isCounted=False&expansion=True&pushData=&count=")
            #expect(published == 200, "\(reply)")
        }
    }

    @Test("doubled slashes, JSON errors, unknown paths and features of later releases all answer in the JSON envelope")
    func envelope() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let headers = signed(server, nonce: "1", timestamp: "1")
            #expect(try await raw(server, "//user/checkOnline.json", headers: headers, body: "userId=u").0 == 200)
            let (badJSON, badBody, _) = try await raw(server, "/user/tag/set.json", headers: headers, body: "{not json", contentType: "application/json")
            #expect(badJSON == 400 && badBody["code"] as? Int == 1002)
            let (later, laterBody, _) = try await raw(server, "/message/discussion/publish.json", headers: headers, body: "fromUserId=u")
            #expect(later == 404 && laterBody["code"] as? Int == 404)
            #expect((laterBody["errorMessage"] as? String)?.contains("retired") == true)
            let (unknown, _, text) = try await raw(server, "/nothing/here", headers: [:], body: "")
            #expect(unknown == 404 && text.hasPrefix("{"))
            #expect((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["code"] as? Int == 404)
            let big = "userId=u&name=" + String(repeating: "x", count: 3 * 1024 * 1024)
            let (tooLarge, tooLargeBody, _) = try await raw(server, "/user/refresh.json", headers: headers, body: big)
            #expect(tooLarge == 413 && tooLargeBody["code"] as? Int == 1005)
        }
    }

    @Test("calls per endpoint per second are limited (1008 / 429) and the limit resets each second")
    func callRateLimit() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await TestServer.start(clock: clock) { $0.serverAPI.callsPerSecond = 3 }) { server in
            var statuses: [Int] = []
            for _ in 0..<4 { statuses.append(try await server.api.post("/user/checkOnline.json", form: ["userId": "u"]).0) }
            #expect(statuses == [200, 200, 200, 429])
            #expect(try await server.api.post("/user/info.json", form: ["userId": "nobody"]).1["code"] as? Int == 1002, "other endpoints have their own budget")
            clock.advance(milliseconds: 1000)
            #expect(try await server.api.post("/user/checkOnline.json", form: ["userId": "u"]).0 == 200)
        }
    }

    @Test("the served OpenAPI document is the one in docs/openapi.json and lists every endpoint")
    func openAPI() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (served, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/openapi.json")!)
            let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("docs/openapi.json")
            let kept = try Data(contentsOf: file)
            #expect(served == kept, "docs/openapi.json is out of date: regenerate it with `curl -s http://127.0.0.1:8080/openapi.json > docs/openapi.json`")
            let document = try #require(try JSONSerialization.jsonObject(with: served) as? [String: Any])
            let paths = try #require(document["paths"] as? [String: Any])
            for path in ["/user/getToken.json", "/message/private/publish.json", "/group/create.json", "/sensitiveword/add.json", "/v3/message/private/query.json",
                         "/chatroom/create.json", "/message/chatroom/publish.json", "/ultragroup/create.json", "/message/ultragroup/publish.json"] {
                #expect(paths[path] != nil, "\(path)")
            }
            // Every status the server answers with is listed: the transport's own failures on every path.
            func statuses(_ path: String) -> Set<String> {
                Set((((paths[path] as? [String: Any])?["post"] as? [String: Any])?["responses"] as? [String: Any])?.keys.map { $0 } ?? [])
            }
            for path in paths.keys {
                #expect(statuses(path).isSuperset(of: ["200", "400", "401", "404", "408", "413", "429", "500", "503"]), "\(path)")
            }
        }
    }
}
