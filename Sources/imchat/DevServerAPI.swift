import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The development login's view of the app's server: Server API calls signed with the app secret
/// (RongCloud's `Signature = sha1(secret + nonce + timestamp)`). A real app asks its own server
/// for the token; with `--app-secret`, imchat stands in for that server.
struct DevServerAPI: Sendable {
    let baseURL: String
    let appKey: String
    let appSecret: String

    func call(_ path: String, _ form: [String: String]) async throws -> [String: Any] {
        var request = URLRequest(url: URL(string: baseURL + path)!)
        request.httpMethod = "POST"
        let nonce = String(UInt32.random(in: 0...UInt32.max))
        let timestamp = String(Int(Date().timeIntervalSince1970))
        let digest = Insecure.SHA1.hash(data: Data((appSecret + nonce + timestamp).utf8))
        request.setValue(appKey, forHTTPHeaderField: "App-Key")
        request.setValue(nonce, forHTTPHeaderField: "Nonce")
        request.setValue(timestamp, forHTTPHeaderField: "Timestamp")
        request.setValue(digest.map { String(format: "%02x", $0) }.joined(), forHTTPHeaderField: "Signature")
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        request.httpBody = Data(form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.value)" }
            .joined(separator: "&").utf8)
        let (data, _) = try await URLSession.shared.data(for: request)
        guard let body = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw DevLoginError("the server's answer to \(path) is not JSON: is \(baseURL) an imserver?")
        }
        if let code = body["code"] as? Int, code != 200 {
            throw DevLoginError("\(path) answered \(code): \(body["errorMessage"] ?? "")")
        }
        return body
    }

    func token(for userId: String) async throws -> String {
        let body = try await call("/user/getToken.json", ["userId": userId, "name": userId])
        guard let token = body["token"] as? String else { throw DevLoginError("/user/getToken.json gave no token") }
        return token
    }

    func userName(_ userId: String) async -> String? {
        (try? await call("/user/info.json", ["userId": userId]))?["userName"] as? String
    }

    func groupMembers(_ groupId: String) async -> [String] {
        let users = (try? await call("/group/user/query.json", ["groupId": groupId]))?["users"] as? [[String: Any]] ?? []
        return users.compactMap { $0["id"] as? String }
    }
}

struct DevLoginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
