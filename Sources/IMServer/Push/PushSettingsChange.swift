import Foundation
import IMCore
import IMPush

/// A change to an app's push settings, read from the JSON object `/push/settings/set.json` takes
/// (and `imserver app push` builds): only the fields given change. Credentials are checked before
/// anything is kept (PushCredentialError says what is wrong); `remove` drops a provider's.
///
///     {"apns": {"bundleId", "keyId", "teamId", "p8"} or {"bundleId", "p12" (base64), "password"},
///      "fcm": {"serviceAccount": the service-account JSON (an object or its text)},
///      "webhook": {"secret"}, "remove": ["apns", "fcm", "webhook"],
///      "userSettingsEnabled", "webOnlinePushEnabled", "showDetails", "defaultLanguage", "sound",
///      "sounds": {objectName: sound}, "ultraGroupPushLimit", "ultraGroupPushWindowSeconds",
///      "voipObjectNames": [objectName]}
public enum PushSettingsChange {
    public static let keys: Set<String> = [
        "apns", "fcm", "webhook", "remove", "userSettingsEnabled", "webOnlinePushEnabled", "showDetails", "defaultLanguage",
        "sound", "sounds", "ultraGroupPushLimit", "ultraGroupPushWindowSeconds", "voipObjectNames",
    ]

    public static func apply(_ object: [String: Any], to settings: inout PushAppSettings, now: Date = Date()) throws {
        if let unknown = object.keys.first(where: { !keys.contains($0) }) {
            throw PushCredentialError("unknown push setting '\(unknown)': the settings are \(keys.sorted().joined(separator: ", "))")
        }
        for name in try strings(object["remove"], "remove") {
            switch name {
            case "apns": settings.credentials.apns = nil
            case "fcm": settings.credentials.fcm = nil
            case "webhook": settings.credentials.webhook = nil
            default: throw PushCredentialError("remove lists '\(name)': give apns, fcm or webhook")
            }
        }
        if let apns = object["apns"] {
            guard let apns = apns as? [String: Any] else { throw PushCredentialError("apns must be an object: {bundleId, keyId, teamId, p8} or {bundleId, p12, password}") }
            settings.credentials.apns = try apnsCredentials(apns).validated(now: now)
        }
        if let fcm = object["fcm"] {
            guard let fcm = fcm as? [String: Any], let account = fcm["serviceAccount"] else {
                throw PushCredentialError("fcm must be an object {serviceAccount}: the service-account JSON the Firebase console downloads")
            }
            let data: Data
            switch account {
            case let text as String: data = Data(text.utf8)
            case let value as [String: Any]: data = try JSONSerialization.data(withJSONObject: value)
            default: throw PushCredentialError("fcm.serviceAccount must be the service-account JSON, as an object or as its text")
            }
            settings.credentials.fcm = try FCMCredentials(serviceAccountJSON: data)
        }
        if let webhook = object["webhook"] {
            guard let secret = (webhook as? [String: Any])?["secret"] as? String else {
                throw PushCredentialError("webhook must be an object {secret}: the secret the requests are signed with")
            }
            settings.credentials.webhook = try WebhookCredentials(secret: secret).validated()
        }
        if let value = try flag(object["userSettingsEnabled"], "userSettingsEnabled") { settings.userSettingsEnabled = value }
        if let value = try flag(object["webOnlinePushEnabled"], "webOnlinePushEnabled") { settings.webOnlinePushEnabled = value }
        if let value = try flag(object["showDetails"], "showDetails") { settings.showDetails = value }
        if let language = object["defaultLanguage"] {
            guard let language = language as? String, PushLanguage.isLanguageId(language) else {
                throw PushCredentialError("defaultLanguage must be a language id such as zh_CN, en_US or ar_SA")
            }
            settings.defaultLanguage = language
        }
        if let sound = object["sound"] {
            guard let sound = sound as? String, !sound.isEmpty, sound.utf8.count <= 256 else {
                throw PushCredentialError("sound must be the name of a sound file of the app (1 to 256 bytes), or \"default\"")
            }
            settings.sound = sound
        }
        if let sounds = object["sounds"] {
            guard let sounds = sounds as? [String: String], sounds.count <= 100,
                  sounds.allSatisfy({ !$0.key.isEmpty && !$0.value.isEmpty && $0.value.utf8.count <= 256 }) else {
                throw PushCredentialError("sounds must be an object of at most 100 {objectName: sound file}")
            }
            settings.sounds = sounds
        }
        if let limit = try integer(object["ultraGroupPushLimit"], "ultraGroupPushLimit", 0...10_000) { settings.ultraGroupPushLimit = limit }
        if let window = try integer(object["ultraGroupPushWindowSeconds"], "ultraGroupPushWindowSeconds", 1...86_400) {
            settings.ultraGroupPushWindowSeconds = window
        }
        if object["voipObjectNames"] != nil {
            settings.voipObjectNames = try strings(object["voipObjectNames"], "voipObjectNames")
        }
    }

    private static func apnsCredentials(_ apns: [String: Any]) throws -> APNsCredentials {
        guard let bundleId = apns["bundleId"] as? String, !bundleId.isEmpty else {
            throw PushCredentialError("apns.bundleId is required: the app's bundle id, e.g. com.example.chat", code: 75)
        }
        if let p8 = apns["p8"] as? String {
            return APNsCredentials(bundleId: bundleId, authentication: .token(p8: p8, keyId: apns["keyId"] as? String ?? "",
                                                                              teamId: apns["teamId"] as? String ?? ""))
        }
        if let p12 = apns["p12"] as? String {
            guard let data = Data(base64Encoded: p12, options: .ignoreUnknownCharacters) else {
                throw PushCredentialError("apns.p12 must be the .p12 file in base64", code: 53)
            }
            return APNsCredentials(bundleId: bundleId, authentication: .certificate(p12: data, password: apns["password"] as? String ?? ""))
        }
        throw PushCredentialError("apns needs p8 (with keyId and teamId) or p12 (base64, with password)")
    }

    private static func flag(_ value: Any?, _ name: String) throws -> Bool? {
        guard let value else { return nil }
        guard let flag = value as? Bool else { throw PushCredentialError("\(name) must be true or false") }
        return flag
    }

    private static func integer(_ value: Any?, _ name: String, _ range: ClosedRange<Int>) throws -> Int? {
        guard let value else { return nil }
        guard let number = value as? NSNumber, let int = Int(exactly: number.doubleValue), range.contains(int), !(value is Bool) else {
            throw PushCredentialError("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return int
    }

    private static func strings(_ value: Any?, _ name: String) throws -> [String] {
        guard let value else { return [] }
        guard let list = value as? [String], list.count <= 100 else { throw PushCredentialError("\(name) must be an array of at most 100 strings") }
        return list
    }
}

extension PushAppSettings {
    /// What `/push/settings/get.json` shows: every switch, and the credentials without their keys.
    public var redactedView: [String: any Sendable] {
        var view: [String: any Sendable] = [
            "userSettingsEnabled": userSettingsEnabled, "webOnlinePushEnabled": webOnlinePushEnabled, "showDetails": showDetails,
            "defaultLanguage": defaultLanguage, "sound": sound, "sounds": sounds, "ultraGroupPushLimit": ultraGroupPushLimit,
            "ultraGroupPushWindowSeconds": ultraGroupPushWindowSeconds, "voipObjectNames": voipObjectNames,
        ]
        if let apns = credentials.apns {
            var entry: [String: any Sendable] = ["bundleId": apns.bundleId, "summary": apns.redacted]
            switch apns.authentication {
            case .token(_, let keyId, let teamId):
                entry["auth"] = "p8"
                entry["keyId"] = keyId
                entry["teamId"] = teamId
            case .certificate:
                entry["auth"] = "p12"
            }
            view["apns"] = entry
        }
        if let fcm = credentials.fcm {
            view["fcm"] = ["projectId": fcm.projectId, "clientEmail": fcm.clientEmail, "privateKeyId": fcm.privateKeyId ?? "",
                           "summary": fcm.redacted] as [String: any Sendable]
        }
        if let webhook = credentials.webhook {
            view["webhook"] = ["summary": webhook.redacted] as [String: any Sendable]
        }
        return view
    }
}
