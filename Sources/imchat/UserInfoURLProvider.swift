import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore

/// The user provider of an app whose server answers user info over HTTP (`--user-info-url`): a GET
/// of the template with `{id}` replaced by the user id, answering JSON `{"name": ..., "portrait": ...}`
/// (`userName` and `portraitUri` are read too). Anything but a 200 with a name is "unknown" (nil):
/// the kit then shows the id.
struct UserInfoURLProvider: Sendable {
    let template: String

    func url(for userId: String) -> URL? {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let id = userId.addingPercentEncoding(withAllowedCharacters: allowed) ?? userId
        return URL(string: template.replacingOccurrences(of: "{id}", with: id))
    }

    func user(_ userId: String) async -> UserInfo? {
        guard let url = url(for: userId) else { return nil }
        var request = URLRequest(url: url)
        request.timeoutInterval = 10
        guard let (data, response) = try? await URLSession.shared.data(for: request),
              (response as? HTTPURLResponse)?.statusCode == 200,
              let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
              let name = (object["name"] ?? object["userName"]) as? String else { return nil }
        let portrait = (object["portrait"] ?? object["portraitUri"]) as? String
        return UserInfo(userId: userId, name: name, portraitUri: portrait)
    }
}
