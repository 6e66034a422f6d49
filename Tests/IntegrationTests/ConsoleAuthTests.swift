import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMServer
import IMServerTesting
import Testing

/// The console's door: the operator's password stored hashed, sessions in a cookie that expire,
/// failed logins limited per address, pages and the admin API closed without a session. (The
/// console's pages themselves are driven in a real browser by console_browser.py.)
@Suite("Console: login, sessions and access")
struct ConsoleAuthTests {
    static let password = "correct horse battery"

    /// HTTP without following redirects and without a cookie jar: each test says what it sends.
    final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
            completionHandler(nil)
        }
    }

    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        return URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
    }()

    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: String
        var location: String? { headers["Location"] }
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
    }

    static func request(_ server: TestServer, _ method: String, _ path: String, cookie: String? = nil, form: [String: String]? = nil,
                        json: [String: Any]? = nil, fromConsole: Bool = true, headers: [String: String] = [:]) async throws -> Answer {
        var request = URLRequest(url: URL(string: server.baseURL + path)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let cookie { request.setValue("imconsole=\(cookie)", forHTTPHeaderField: "Cookie") }
        if fromConsole { request.setValue("imserver-console", forHTTPHeaderField: "X-Requested-By") }
        if let form {
            request.httpBody = Data(form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
                .joined(separator: "&").utf8)
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields { headers[String(describing: key)] = String(describing: value) }
        return Answer(status: http.statusCode, headers: headers, body: String(decoding: data, as: UTF8.self))
    }

    /// Signs in and returns the session's token from its cookie.
    static func login(_ server: TestServer, password: String = Self.password) async throws -> String {
        let answer = try await request(server, "POST", "/console/login", form: ["name": "admin", "password": password])
        #expect(answer.status == 303 && answer.location == "/console", "\(answer.status) \(answer.body.prefix(300))")
        let cookie = try #require(answer.headers["Set-Cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
        return String(try #require(cookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last))
    }

    static func start(clock: any WallClock = SystemClock()) async throws -> TestServer {
        try await TestServer.start(clock: clock) { config in
            config.console.password = Self.password
            config.console.sessionMinutes = 60
        }
    }

    @Test("the password is stored hashed, pages without a session redirect to the login, a login opens the console and the admin API from its page only")
    func sessions() async throws {
        try await withTestServer(try await Self.start()) { server in
            let stored = try #require(try await server.core.store.operatorPasswordHash(name: "admin"))
            #expect(stored.hasPrefix("pbkdf2-sha256$600000$") && !stored.contains(Self.password))

            let anonymous = try await Self.request(server, "GET", "/console")
            #expect(anonymous.status == 303 && anonymous.location == "/console/login")
            let forged = try await Self.request(server, "GET", "/console", cookie: "not-a-session")
            #expect(forged.status == 303 && forged.location == "/console/login")
            let loginPage = try await Self.request(server, "GET", "/console/login")
            #expect(loginPage.status == 200 && loginPage.body.contains("id=\"login\""))
            #expect(loginPage.headers["Content-Security-Policy"]?.contains("default-src 'self'") == true)

            let token = try await Self.login(server)
            let shell = try await Self.request(server, "GET", "/console", cookie: token)
            #expect(shell.status == 200 && shell.body.contains("id=\"app-select\"") && shell.body.contains("/console/console.js"))
            let apps = try await Self.request(server, "GET", "/admin/apps", cookie: token)
            #expect(apps.status == 200 && (apps.json["apps"] as? [[String: Any]])?.first?["appKey"] as? String == server.app.appKey)
            let crossSite = try await Self.request(server, "GET", "/admin/apps", cookie: token, fromConsole: false)
            #expect(crossSite.status == 401, "the cookie alone (as another site's form would send it) opens nothing")
            let signed = try await server.api.send("GET", "/admin/apps")
            #expect(signed.0 == 401, "an app's signature opens nothing")
            let operatorCall = try await Self.request(server, "POST", "/admin/apps/\(server.app.appKey)/api/user/getToken.json", cookie: token,
                                                      form: ["userId": "ann"])
            #expect(operatorCall.status == 200 && operatorCall.json["token"] is String, "the operator acts through the Server API's endpoints")
            let operatorRefused = try await Self.request(server, "POST", "/admin/apps/\(server.app.appKey)/api/user/getToken.json", cookie: token,
                                                         form: ["userId": "bad id!"])
            #expect(operatorRefused.status == 400 && operatorRefused.json["code"] as? Int == 1002, "with the endpoint's own checks")

            let forgedLogout = try await Self.request(server, "POST", "/console/logout", cookie: token, headers: ["Origin": "http://evil.example"])
            #expect(forgedLogout.status == 403 && forgedLogout.headers["Set-Cookie"] == nil, "another site's form signs nobody out")
            #expect(try await Self.request(server, "GET", "/console", cookie: token).status == 200)
            let out = try await Self.request(server, "POST", "/console/logout", cookie: token)
            #expect(out.status == 303 && out.location == "/console/login")
            #expect(try await Self.request(server, "GET", "/console", cookie: token).status == 303, "signed out")
            #expect(try await Self.request(server, "GET", "/admin/apps", cookie: token).status == 401)
        }
    }

    @Test("a session ends after consoleSessionMinutes; a password change ends every session and takes the new password")
    func expiry() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.start(clock: clock)) { server in
            let token = try await Self.login(server)
            clock.advance(milliseconds: 59 * 60_000)
            #expect(try await Self.request(server, "GET", "/console", cookie: token).status == 200)
            clock.advance(milliseconds: 60_001)
            #expect(try await Self.request(server, "GET", "/console", cookie: token).status == 303, "expired after 60 minutes")

            let first = try await Self.login(server)
            let wrong = try await Self.request(server, "POST", "/console/password", cookie: first, json: ["current": "nope", "new": "another password"])
            #expect(wrong.status == 401 && wrong.json["code"] as? Int == 1004)
            let short = try await Self.request(server, "POST", "/console/password", cookie: first, json: ["current": Self.password, "new": "short"])
            #expect(short.status == 400 && short.json["code"] as? Int == 1002)
            let changed = try await Self.request(server, "POST", "/console/password", cookie: first, json: ["current": Self.password, "new": "another password"])
            #expect(changed.status == 200)
            #expect(try await Self.request(server, "GET", "/console", cookie: first).status == 303, "every session ended")
            let old = try await Self.request(server, "POST", "/console/login", form: ["name": "admin", "password": Self.password])
            #expect(old.status == 401)
            _ = try await Self.login(server, password: "another password")
        }
    }

    @Test("failed logins are limited per address: after consoleLoginAttempts, even the right password is refused with 1008 until 15 minutes pass")
    func attempts() async throws {
        let clock = ManualClock(milliseconds: 1_800_000_000_000)
        try await withTestServer(try await Self.start(clock: clock)) { server in
            for _ in 0..<5 {
                let wrong = try await Self.request(server, "POST", "/console/login", form: ["name": "admin", "password": "guess"])
                #expect(wrong.status == 401 && wrong.body.contains("id=\"login-error\"") && wrong.body.contains("wrong name or password"))
                #expect(wrong.headers["Set-Cookie"] == nil)
            }
            let limited = try await Self.request(server, "POST", "/console/login", form: ["name": "admin", "password": Self.password])
            #expect(limited.status == 429 && limited.body.contains("too many failed logins") && limited.body.contains("(1008)"))
            let unknown = try await Self.request(server, "POST", "/console/login", form: ["name": "root", "password": Self.password])
            #expect(unknown.status == 429)
            clock.advance(milliseconds: 15 * 60_000 + 1)
            _ = try await Self.login(server)

            // A burst at once gets no more guesses than attempts one after another.
            clock.advance(milliseconds: 15 * 60_000 + 1)
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 {
                    group.addTask { try await Self.request(server, "POST", "/console/login", form: ["name": "admin", "password": "guess"]).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(burst.allSatisfy { $0 == 401 || $0 == 429 } && burst.filter { $0 == 401 }.count <= 5, "\(burst)")
            #expect(try await Self.request(server, "POST", "/console/login", form: ["name": "admin", "password": Self.password]).status == 429)
        }
    }
}
