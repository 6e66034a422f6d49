import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

/// The operator's admin API for apps: its key only, then create, rename, rotate, ban.
@Suite("Admin API: apps")
struct AdminAPITests {
    static let key = "operator-key-0123456789"

    static func call(_ server: TestServer, _ method: String, _ path: String, key: String? = Self.key,
                     json: [String: Any]? = nil) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: server.baseURL + path)!)
        request.httpMethod = method
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }

    @Test("only the operator's key opens it: off without adminKey, refused with a wrong key or an app's signature")
    func access() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (off, offBody) = try await Self.call(server, "GET", "/admin/apps")
            #expect(off == 403 && offBody["code"] as? Int == 1009)
        }
        try await withTestServer(try await TestServer.start { $0.serverAPI.adminKey = Self.key }) { server in
            let (wrong, wrongBody) = try await Self.call(server, "GET", "/admin/apps", key: "not-the-operator-key")
            #expect(wrong == 401 && wrongBody["code"] as? Int == 1004)
            let (none, _) = try await Self.call(server, "GET", "/admin/apps", key: nil)
            #expect(none == 401)
            let (signed, _) = try await server.api.send("GET", "/admin/apps")
            #expect(signed == 401, "an app's signature is not the operator's key")
            let (listed, list) = try await Self.call(server, "GET", "/admin/apps")
            #expect(listed == 200)
            let apps = try #require(list["apps"] as? [[String: Any]])
            #expect(apps.contains { $0["appKey"] as? String == server.app.appKey } && apps.allSatisfy { $0["appSecret"] == nil })
        }
    }

    @Test("create, rename and rotate: a new app works at once; after a rotation old tokens get 31004 and the old secret's calls 1004")
    func lifecycle() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.adminKey = Self.key }) { server in
            let (created, body) = try await Self.call(server, "POST", "/admin/apps", json: ["name": "shop"])
            #expect(created == 200)
            let view = try #require(body["app"] as? [String: Any])
            let appKey = try #require(view["appKey"] as? String), secret = try #require(view["appSecret"] as? String)
            let app = try #require(server.core.apps.app(key: appKey))
            #expect(app.appSecret == secret && app.name == "shop")
            let oldToken = try await server.token("ann", app: app)
            #expect(try await server.client(app: app).connect(token: oldToken) == "ann")

            let (renamed, renamedBody) = try await Self.call(server, "PUT", "/admin/apps/\(appKey)", json: ["name": "shop 2"])
            #expect(renamed == 200 && (renamedBody["app"] as? [String: Any])?["name"] as? String == "shop 2")
            let (rotated, rotatedBody) = try await Self.call(server, "POST", "/admin/apps/\(appKey)/secret")
            #expect(rotated == 200)
            let newSecret = try #require((rotatedBody["app"] as? [String: Any])?["appSecret"] as? String)
            #expect(newSecret != secret)
            let rotatedApp = try #require(server.core.apps.app(key: appKey))
            await #expect { try await server.client(app: rotatedApp).connect(token: oldToken) } throws: { ($0 as? IMError)?.code == .tokenIncorrect }
            let (oldSigned, oldSignedBody) = try await ServerAPIClient(baseURL: server.baseURL, app: app).post("/user/getToken.json", form: ["userId": "ann"])
            #expect(oldSigned == 401 && oldSignedBody["code"] as? Int == 1004)
            #expect(try await server.client(app: rotatedApp).connect(token: try await server.token("ann", app: rotatedApp)) == "ann")

            let (missing, missingBody) = try await Self.call(server, "PUT", "/admin/apps/nosuchapp", json: ["name": "x"])
            #expect(missing == 404 && missingBody["code"] as? Int == 404)
            let (badName, _) = try await Self.call(server, "POST", "/admin/apps", json: ["name": ""])
            #expect(badName == 400)
        }
    }

    @Test("ban: the app's connected clients are kicked with 31008, connects are refused with 31008, Server API calls with 1006; other apps go on; lifting it restores both")
    func ban() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.adminKey = Self.key }) { server in
            let other = try await server.core.apps.upsert(appKey: "otherapp", appSecret: "othersecret", name: "other", now: 0)
            let ann = try await server.connectedClient("ann")
            let statuses = EventRecorder(ann.connectionStatusUpdates())
            let outsider = server.client(app: other)
            #expect(try await outsider.connect(token: try await server.token("zed", app: other)) == "zed")

            let (status, body) = try await Self.call(server, "POST", "/admin/apps/\(server.app.appKey)/ban", json: ["banned": true])
            #expect(status == 200 && (body["app"] as? [String: Any])?["banned"] as? Bool == true)
            #expect(await statuses.first { $0 == .disconnectException } != nil)
            #expect(await ann.lastKick?.code == .appBlockedOrDeleted)
            let token = try await ServerAPIClient(baseURL: server.baseURL, app: other).post("/user/getToken.json", form: ["userId": "yan"])
            #expect(token.0 == 200, "another app's calls go on")
            let (refused, refusedBody) = try await server.api.post("/user/getToken.json", form: ["userId": "bob"])
            #expect(refused == 403 && refusedBody["code"] as? Int == 1006)
            let banned = try #require(server.core.apps.app(key: server.app.appKey))
            let tokenBefore = TokenService().issue(app: banned, userId: "ann", now: Int64(Date().timeIntervalSince1970 * 1000))
            await #expect { try await server.client().connect(token: tokenBefore) } throws: { ($0 as? IMError)?.code == .appBlockedOrDeleted }
            #expect(server.core.registry.isOnline(appId: other.id, userId: "zed"))

            _ = try await Self.call(server, "POST", "/admin/apps/\(server.app.appKey)/ban", json: ["banned": false])
            #expect(try await server.client().connect(token: try await server.token("ann")) == "ann")
            await outsider.disconnect()
        }
    }
}

extension AdminAPITests {
    @Test("delete: the app's clients are kicked with 31008, its key is unknown afterwards (31002, 1004), its data is gone, other apps keep theirs")
    func deleteApp() async throws {
        try await withTestServer(try await TestServer.start { $0.serverAPI.adminKey = Self.key }) { server in
            let (_, body) = try await Self.call(server, "POST", "/admin/apps", json: ["name": "doomed"])
            let appKey = try #require((body["app"] as? [String: Any])?["appKey"] as? String)
            let doomed = try #require(server.core.apps.app(key: appKey))
            let doomedAPI = ServerAPIClient(baseURL: server.baseURL, app: doomed)
            let ann = server.client(app: doomed)
            #expect(try await ann.connect(token: try await server.token("ann", app: doomed)) == "ann")
            let sent = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "gone soon"))
            _ = try await doomedAPI.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])
            // The development app has data of its own, under the same ids.
            let keeper = try await server.connectedClient("ann")
            let kept = try await keeper.sendMessage(.private, targetId: "bob", content: TextMessage(content: "stays"))
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])

            let statuses = EventRecorder(ann.connectionStatusUpdates())
            let (deleted, _) = try await Self.call(server, "DELETE", "/admin/apps/\(appKey)")
            #expect(deleted == 200)
            #expect(await statuses.first { $0 == .disconnectException } != nil)
            let store = server.core.store
            #expect(try await store.message(appId: doomed.id, uid: sent.messageUId) == nil)
            #expect(try await store.user(appId: doomed.id, userId: "ann") == nil)
            #expect(try await store.group(appId: doomed.id, groupId: "g1") == nil)
            #expect(try await store.loadApps().allSatisfy { $0.appKey != appKey })
            #expect(try await store.message(appId: server.app.id, uid: kept.messageUId) != nil)
            #expect(try await store.group(appId: server.app.id, groupId: "g1") != nil)

            let (call, callBody) = try await doomedAPI.post("/user/getToken.json", form: ["userId": "ann"])
            #expect(call == 401 && callBody["code"] as? Int == 1004)
            let stale = TokenService().issue(app: doomed, userId: "ann", now: Int64(Date().timeIntervalSince1970 * 1000))
            await #expect { try await server.client(app: doomed).connect(token: stale) } throws: { ($0 as? IMError)?.code == .wrongAppKey }
            let (listed, list) = try await Self.call(server, "GET", "/admin/apps")
            #expect(listed == 200 && (list["apps"] as? [[String: Any]])?.contains { $0["appKey"] as? String == appKey } == false)
            await keeper.disconnect()
        }
    }
}
