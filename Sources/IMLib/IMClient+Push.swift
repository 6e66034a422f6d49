import Foundation
import IMCore
import IMWire

/// RongCloud's push profile (`RCPushProfile`): the user's push language, whether pushes show the
/// message, and whether the phone gets pushes while the user is online on Web/PC.
public struct PushProfile: Sendable, Equatable {
    /// Nil: the app's default push language.
    public var language: String?
    public var showContent: Bool
    public var receiveWhileWebOnline: Bool
}

/// Push notifications: this device's token and the user's push profile, kept by the server.
extension IMClient {
    /// Registers this device's push token (RongCloud's `setDeviceToken`): an APNs device token
    /// (hex) with its environment, a PushKit token (`.apnsVoIP`), an FCM registration token, or an
    /// http(s) URL of the app's own relay (`.webhook`). The server pushes to it while this device
    /// is offline; `logout()` and `disconnect(receivePush: false)` remove it. An empty token
    /// removes this device's token of that kind.
    public func setPushToken(_ token: String, kind: PushTokenKind, environment: String = "production") async throws {
        var request = Im_SetPushTokenRequest()
        request.kind = kind.rawValue
        request.token = token
        request.environment = kind == .apns || kind == .apnsVoIP ? environment : ""
        _ = try await connected().request(.setPushToken, request, timeout: options.requestTimeout).body(Im_SetPushTokenRequest.self)
    }

    /// The user's push profile; 34016 when the app has not enabled user-level settings.
    public func pushProfile() async throws -> PushProfile {
        let reply = try await connected().request(.getPushProfile, Im_SetPushProfileRequest(), timeout: options.requestTimeout)
        return Self.profile(try reply.body(Im_PushProfile.self))
    }

    /// Changes the fields given (nil leaves one as it is); an empty language returns to the app's
    /// default. 34016 when the app has not enabled user-level settings.
    @discardableResult
    public func setPushProfile(language: String? = nil, showContent: Bool? = nil, receiveWhileWebOnline: Bool? = nil) async throws -> PushProfile {
        var request = Im_SetPushProfileRequest()
        if let language {
            request.hasLanguage_p = true
            request.language = language
        }
        if let showContent {
            request.hasShowContent_p = true
            request.showContent = showContent
        }
        if let receiveWhileWebOnline {
            request.hasReceiveWhileWebOnline_p = true
            request.receiveWhileWebOnline = receiveWhileWebOnline
        }
        let reply = try await connected().request(.setPushProfile, request, timeout: options.requestTimeout)
        return Self.profile(try reply.body(Im_PushProfile.self))
    }

    private static func profile(_ wire: Im_PushProfile) -> PushProfile {
        PushProfile(language: wire.language.isEmpty ? nil : wire.language, showContent: wire.showContent,
                    receiveWhileWebOnline: wire.receiveWhileWebOnline)
    }
}
