import Foundation
import IMCore
import IMPush
import IMStore
import IMWire

/// What clients set: their device's token and their push profile.
extension PushService {
    /// Stores (or, with an empty token, removes) the session's device token of one kind.
    func setToken(_ request: Im_SetPushTokenRequest, for session: ClientSession) async throws {
        guard let kind = PushTokenKind(rawValue: request.kind) else {
            throw IMError(.invalidParameter, "push token kind '\(request.kind)' is unknown: use apns, apns_voip, fcm or webhook")
        }
        guard !session.deviceId.isEmpty else {
            throw IMError(.invalidParameter, "this connection named no device id: connect with a device id to register a push token")
        }
        if request.token.isEmpty {
            try await store.removePushDevice(appId: session.appId, userId: session.userId, deviceId: session.deviceId, kind: kind)
            return
        }
        guard request.token.utf8.count <= PushLimits.maxTokenLength, !request.token.contains(where: \.isWhitespace) else {
            throw IMError(.invalidParameter, "a push token is at most \(PushLimits.maxTokenLength) bytes without spaces")
        }
        var environment = ""
        switch kind {
        case .apns, .apnsVoIP:
            guard request.token.count >= 32, request.token.allSatisfy(\.isHexDigit) else {
                throw IMError(.invalidParameter, "an APNs device token is hexadecimal (64 characters from a device), got '\(request.token.prefix(80))'")
            }
            let given = request.environment.isEmpty ? PushEnvironment.production.rawValue : request.environment
            guard PushEnvironment(rawValue: given) != nil else {
                throw IMError(.invalidParameter, "the APNs environment must be production or sandbox, got '\(request.environment)'")
            }
            environment = given
        case .webhook:
            guard let url = URL(string: request.token), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw IMError(.invalidParameter, "a webhook push endpoint is an http(s) URL, got '\(request.token.prefix(80))'")
            }
        case .fcm:
            break
        }
        try await store.setPushDevice(PushDeviceRecord(
            appId: session.appId, userId: session.userId, deviceId: session.deviceId, platform: "\(session.platform)",
            kind: kind, token: request.token, environment: environment, updatedAt: clock.nowMilliseconds()))
    }

    /// The device no longer gets pushes: logout, or a disconnect that asks for none.
    func forgetDevice(of session: ClientSession) async {
        guard !session.deviceId.isEmpty else { return }
        do {
            try await store.removePushDevice(appId: session.appId, userId: session.userId, deviceId: session.deviceId, kind: nil)
        } catch {
            logger.warning("push: a device's tokens could not be removed", metadata: ["error": "\(error)"])
        }
    }

    /// The user's push profile; 34016 when the app has not enabled user-level settings.
    func profile(appId: Int64, userId: String) async throws -> PushProfileRecord {
        guard try await settings(appId: appId).userSettingsEnabled else {
            throw IMError(.userSettingsNotEnabled, "user-level push settings are not enabled for this app: the app's operator enables them (userSettingsEnabled in /push/settings/set.json)")
        }
        return try await store.pushProfiles(appId: appId, userIds: [userId])[userId] ?? .default
    }

    func setProfile(_ request: Im_SetPushProfileRequest, appId: Int64, userId: String) async throws -> PushProfileRecord {
        try await setProfile(appId: appId, userId: userId, language: request.hasLanguage_p ? request.language : nil,
                             showContent: request.hasShowContent_p ? request.showContent : nil,
                             receiveWhileWebOnline: request.hasReceiveWhileWebOnline_p ? request.receiveWhileWebOnline : nil)
    }

    /// Changes the given fields of the user's push profile (`language` empty: the app's default);
    /// 34016 when the app has not enabled user-level settings.
    func setProfile(appId: Int64, userId: String, language: String?, showContent: Bool?, receiveWhileWebOnline: Bool?) async throws -> PushProfileRecord {
        var profile = try await profile(appId: appId, userId: userId)
        if let language {
            guard language.isEmpty || PushLanguage.isLanguageId(language) else {
                throw IMError(.invalidParameter, "a push language is an id such as zh_CN, en_US or ar_SA, got '\(language.prefix(40))'")
            }
            profile.language = language.isEmpty ? nil : language
        }
        if let showContent { profile.showContent = showContent }
        if let receiveWhileWebOnline { profile.receiveWhileWebOnline = receiveWhileWebOnline }
        try await store.setPushProfile(appId: appId, userId: userId, profile: profile)
        return profile
    }

    static func wire(_ profile: PushProfileRecord) -> Im_PushProfile {
        var wire = Im_PushProfile()
        wire.language = profile.language ?? ""
        wire.showContent = profile.showContent
        wire.receiveWhileWebOnline = profile.receiveWhileWebOnline
        return wire
    }
}
