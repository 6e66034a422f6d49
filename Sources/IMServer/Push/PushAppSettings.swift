import Foundation
import IMCore
import IMPush

/// One app's push switches and provider credentials (RongCloud's console settings for push),
/// stored per app (`PushStore.pushSettings`) and changed at runtime through the Server API.
public struct PushAppSettings: Codable, Sendable, Equatable {
    public var credentials = PushCredentials()
    /// 「用户级别功能设置」: users may keep a push profile; without it those calls answer 34016.
    public var userSettingsEnabled = false
    /// 「Web/PC 在线手机端接收 Push」: phones get pushes while their user is online on Web or PC
    /// (each user may then turn it off in the profile). Off: no push while on Web/PC.
    public var webOnlinePushEnabled = false
    /// The push language of users who set none, and the fallback of a template.
    public var defaultLanguage = PushLanguage.chinese
    /// Pushes show the message (off: every push reads "you received a notification" unless the
    /// message forces details).
    public var showDetails = true
    /// `aps.sound` for every push, and per object name.
    public var sound = "default"
    public var sounds: [String: String] = [:]
    /// Ultra group push frequency (§2.8): at most this many pushes per user per ultra group in each
    /// window; 0: no limit.
    public var ultraGroupPushLimit = 0
    public var ultraGroupPushWindowSeconds = 60
    /// Object names pushed to a device's VoIP (PushKit) token rather than its alert token.
    public var voipObjectNames: [String] = []

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = PushAppSettings()
        credentials = try c.decodeIfPresent(PushCredentials.self, forKey: .credentials) ?? defaults.credentials
        userSettingsEnabled = try c.decodeIfPresent(Bool.self, forKey: .userSettingsEnabled) ?? defaults.userSettingsEnabled
        webOnlinePushEnabled = try c.decodeIfPresent(Bool.self, forKey: .webOnlinePushEnabled) ?? defaults.webOnlinePushEnabled
        defaultLanguage = try c.decodeIfPresent(String.self, forKey: .defaultLanguage) ?? defaults.defaultLanguage
        showDetails = try c.decodeIfPresent(Bool.self, forKey: .showDetails) ?? defaults.showDetails
        sound = try c.decodeIfPresent(String.self, forKey: .sound) ?? defaults.sound
        sounds = try c.decodeIfPresent([String: String].self, forKey: .sounds) ?? defaults.sounds
        ultraGroupPushLimit = try c.decodeIfPresent(Int.self, forKey: .ultraGroupPushLimit) ?? defaults.ultraGroupPushLimit
        ultraGroupPushWindowSeconds = try c.decodeIfPresent(Int.self, forKey: .ultraGroupPushWindowSeconds) ?? defaults.ultraGroupPushWindowSeconds
        voipObjectNames = try c.decodeIfPresent([String].self, forKey: .voipObjectNames) ?? defaults.voipObjectNames
    }
}
