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

@Suite("Server API: getToken and the envelope")
struct ServerAPITests {
    @Test("getToken returns a token that connects, in RongCloud's envelope")
    func getToken() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = ServerAPIClient(baseURL: server.baseURL, app: server.app)
            let (status, body) = try await api.post("/user/getToken.json", form: ["userId": "user_1|a=b", "name": "Ann & Bob+", "portraitUri": "http://x/y.png?a=1"])
            #expect(status == 200)
            #expect(body["code"] as? Int == 200)
            #expect(body["userId"] as? String == "user_1|a=b")
            let token = try #require(body["token"] as? String)
            #expect(token.utf8.count <= 256)
            let client = server.client()
            #expect(try await client.connect(token: token) == "user_1|a=b")
            // A second token does not invalidate the first.
            _ = try await server.token("user_1|a=b")
            let again = server.client(platform: .iOS)
            #expect(try await again.connect(token: token) == "user_1|a=b")
        }
    }

    @Test("bad signatures, unknown keys and bad user ids get their codes and statuses")
    func errors() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = ServerAPIClient(baseURL: server.baseURL, app: server.app)

            let (badSignature, badSignatureBody) = try await api.post("/user/getToken.json", form: ["userId": "u"], signatureSecret: "wrong")
            #expect(badSignature == 401)
            #expect(badSignatureBody["code"] as? Int == 1004)
            #expect((badSignatureBody["errorMessage"] as? String)?.isEmpty == false)

            let stranger = ServerAPIClient(baseURL: server.baseURL, app: AppRecord(id: 0, appKey: "nosuchkey", appSecret: "x", name: "", createdAt: 0))
            let (unknownKey, unknownKeyBody) = try await stranger.post("/user/getToken.json", form: ["userId": "u"])
            #expect(unknownKey == 401)
            #expect(unknownKeyBody["code"] as? Int == 1004)

            for userId in ["", "has space", String(repeating: "a", count: 65), "中文"] {
                let (status, body) = try await api.post("/user/getToken.json", form: ["userId": userId])
                #expect(status == 400, "userId '\(userId)'")
                #expect(body["code"] as? Int == 1002, "userId '\(userId)'")
            }
            let (ok64, _) = try await api.post("/user/getToken.json", form: ["userId": String(repeating: "a", count: 64)])
            #expect(ok64 == 200)

            let (notFound, notFoundBody) = try await api.post("/no/such/path.json", form: [:])
            #expect(notFound == 404)
            #expect(notFoundBody["code"] as? Int == 404)
        }
    }

    @Test("RC- prefixed headers, JSON bodies and checkOnline")
    func headerSpellingsAndJSON() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            var request = URLRequest(url: URL(string: server.baseURL + "/user/getToken.json")!)
            request.httpMethod = "POST"
            let nonce = "0.6243302391516486", timestamp = "1795287978000"
            let signature = APISignature.sign(secret: server.app.appSecret, nonce: nonce, timestamp: timestamp).uppercased()
            request.setValue(server.app.appKey, forHTTPHeaderField: "rc-app-key")
            request.setValue(nonce, forHTTPHeaderField: "rc-nonce")
            request.setValue(timestamp, forHTTPHeaderField: "rc-timestamp")
            request.setValue(signature, forHTTPHeaderField: "rc-signature")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(#"{"userId":"json_user","name":"J"}"#.utf8)
            let (data, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(body["userId"] as? String == "json_user")

            let api = ServerAPIClient(baseURL: server.baseURL, app: server.app)
            #expect(try await api.post("/user/checkOnline.json", form: ["userId": "json_user"]).1["status"] as? String == "0")
            let client = server.client()
            try await client.connect(token: try #require(body["token"] as? String))
            #expect(try await api.post("/user/checkOnline.json", form: ["userId": "json_user"]).1["status"] as? String == "1")
        }
    }
}
