import Foundation
import HTTPTypes
import Hummingbird
import IMCore

/// The operator console at `/console`: a login page rendered by the server, then one page of
/// plain HTML, CSS and JavaScript (served from this binary, nothing from elsewhere) that works
/// through the admin API with the session's cookie. A page asked for without a live session
/// redirects to the login. The cookie is HttpOnly and SameSite=Strict, and the admin API also
/// wants the `X-Requested-By` header, which only a script of this origin can add.
struct ConsoleRoutes: Sendable {
    typealias Context = IMRequestContext

    static let cookieName = "imconsole"
    static let requestedBy = "imserver-console"

    let core: ServerCore

    func register(on router: Router<Context>) {
        guard core.config.console.enabled else { return }
        router.get("/console/login") { request, _ in
            if try await operatorName(request) != nil { return Self.redirect("/console") }
            return Self.html(ConsoleAssets.loginPage(error: nil), status: .ok)
        }
        router.post("/console/login") { request, context in
            let form = APIParameters(form: String(buffer: try await request.body.collect(upTo: 16 * 1024)))
            let address = AddressConnections.key(of: context.channel.remoteAddress)
            do {
                let token = try await core.console.login(name: form.string("name") ?? "", password: form.string("password") ?? "",
                                                         address: address)
                core.logger.notice("console login", metadata: ["address": "\(address)"])
                var response = Self.redirect("/console")
                response.headers[.setCookie] = cookie(token, maxAge: core.config.console.sessionMinutes * 60)
                return response
            } catch let error as IMError where error.code == .apiRateLimited || error.code == .apiSignatureFailed {
                core.logger.warning("console login refused", metadata: ["address": "\(address)", "code": "\(error.code.rawValue)"])
                let status: HTTPResponse.Status = error.code == .apiRateLimited ? .tooManyRequests : .unauthorized
                return Self.html(ConsoleAssets.loginPage(error: "\(error.message) (\(error.code.rawValue))"), status: status)
            } catch {
                // What went wrong inside (a store error) is for the log, not for a visitor.
                core.logger.error("console login failed", metadata: ["address": "\(address)", "error": "\(error)"])
                return Self.html(ConsoleAssets.loginPage(error: "the server could not check the password: try again in a moment (1000)"),
                                 status: .serviceUnavailable)
            }
        }
        router.post("/console/logout") { request, _ in
            // The console's own form only: a page of another site cannot sign the operator out.
            guard Self.isSameOrigin(request) else {
                return APIResponse.failure(APIError(.apiSignatureFailed, .forbidden, "sign out from the console's own page"))
            }
            if let token = request.cookies[Self.cookieName]?.value { try await core.console.logout(token: token) }
            var response = Self.redirect("/console/login")
            response.headers[.setCookie] = cookie("", maxAge: 0)
            return response
        }
        router.post("/console/password") { request, _ in
            do {
                guard try await operatorName(request) != nil,
                      request.headers[HTTPField.Name("X-Requested-By")!] == Self.requestedBy else {
                    throw APIError(.apiSignatureFailed, .unauthorized, "sign in to the console first")
                }
                let body = try JSONSerialization.jsonObject(with: Data(buffer: try await request.body.collect(upTo: 16 * 1024))) as? [String: Any]
                try await core.console.changePassword(current: body?["current"] as? String ?? "", new: body?["new"] as? String ?? "")
                core.logger.notice("console password changed")
                return APIResponse.success()
            } catch let error as IMError {
                return APIResponse.failure(APIError(error.code, error.code == .apiSignatureFailed ? .unauthorized : .badRequest, error.message))
            } catch let error as APIError {
                return APIResponse.failure(error)
            }
        }
        router.get("/console/console.js") { _, _ in
            Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8")
        }
        router.get("/console/console.css") { _, _ in
            Self.asset(ConsoleAssets.style, type: "text/css; charset=utf-8")
        }
        router.get("/console") { request, _ in
            guard let name = try await operatorName(request) else { return Self.redirect("/console/login") }
            return Self.html(ConsoleAssets.shell(operatorName: name), status: .ok)
        }
    }

    /// Whether a form post comes from a page of this server: its `Origin` (which browsers send with
    /// every POST) names the host the request was sent to; `Sec-Fetch-Site`, when sent, says so too.
    static func isSameOrigin(_ request: Request) -> Bool {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site != "same-origin" { return false }
        guard let origin = request.headers[HTTPField.Name("Origin")!] else { return true }
        guard let host = URL(string: origin)?.host, let authority = request.head.authority else { return false }
        let requested = authority.split(separator: ":").first.map(String.init) ?? authority
        return host.lowercased() == requested.lowercased() && origin.hasSuffix(authority)
    }

    /// The operator of the request's session, nil without a live one.
    private func operatorName(_ request: Request) async throws -> String? {
        guard let token = request.cookies[Self.cookieName]?.value else { return nil }
        return try await core.console.operatorName(token: token)
    }

    private func cookie(_ token: String, maxAge: Int) -> String {
        let secure = core.config.serverAPI.publicURL?.lowercased().hasPrefix("https://") == true ? "; Secure" : ""
        return "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(maxAge)\(secure)"
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// A console page. Its referrer policy is same-origin, not no-referrer: under no-referrer a
    /// browser sends `Origin: null` with the page's forms, and sign-out checks the origin.
    static func html(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [
            .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
            .contentSecurityPolicy: "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
            HTTPField.Name("X-Frame-Options")!: "DENY", HTTPField.Name("Referrer-Policy")!: "same-origin",
        ], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
