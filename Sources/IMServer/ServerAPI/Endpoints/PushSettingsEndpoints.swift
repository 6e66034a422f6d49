import Foundation
import IMCore
import IMPush
import IMStore

/// The push settings of an app and of its users: provider credentials and switches (RongCloud
/// keeps these in its console; here they are calls of the Server API and `imserver app push`),
/// multi-language templates, user push profiles, remarks, user-level quiet hours
/// (`/user/blockPushPeriod/*`) and the push records behind the troubleshooting view.
extension ServerAPI {
    /// Remarks one call may set (RongCloud's `/user/remarks/set.json`), and their length.
    static let maxRemarksPerCall = 100
    static let maxRemarkLength = 64

    var pushSettingsEndpoints: [APIEndpoint] {
        [
            APIEndpoint(
                path: "/push/settings/set.json", tag: "push",
                summary: "Changes the app's push settings: provider credentials (APNs p8 or p12, FCM service account, webhook secret; each checked before it is kept) and switches. Only the fields given change. Takes effect within 5 seconds on every node.",
                body: .json,
                params: [
                    .json("apns", "{bundleId, keyId, teamId, p8} (token authentication) or {bundleId, p12 (base64), password}"),
                    .json("fcm", "{serviceAccount}: the service-account JSON from the Firebase console, as an object or its text"),
                    .json("webhook", "{secret}: at least 16 characters; requests to webhook endpoints are signed with it"),
                    .list("remove", "apns, fcm and/or webhook: drops those credentials"),
                    .boolean("userSettingsEnabled", "users may keep a push profile (language, show content, receive while on Web/PC); off: those calls answer 34016"),
                    .boolean("webOnlinePushEnabled", "phones get pushes while their user is online on Web or PC"),
                    .boolean("showDetails", "pushes show the message; off: \"You received a notification\" unless the message forces details"),
                    .string("defaultLanguage", "the push language of users who set none: zh_CN (default), en_US, ar_SA or a template's language"),
                    .string("sound", "aps.sound of every push (default \"default\")"),
                    .json("sounds", "{objectName: sound}: a sound per message type"),
                    .integer("ultraGroupPushLimit", "ultra group push frequency: pushes per user and group in each window; 0 no limit"),
                    .integer("ultraGroupPushWindowSeconds", "the frequency's window (default 60)"),
                    .list("voipObjectNames", "message types pushed to the devices' VoIP (PushKit) tokens"),
                ],
                response: [APIField("settings", "object", "the settings now, credentials without their keys (as /push/settings/get.json)")],
                handler: setPushSettings),
            APIEndpoint(
                path: "/push/settings/get.json", tag: "push",
                summary: "The app's push settings; credentials are shown without key material (key ids, team, bundle id, project, a fingerprint).",
                params: [],
                response: [APIField("settings", "object", "every switch, and apns/fcm/webhook summaries when set")]) { call in
                ["settings": try await core.requirePush().settings(appId: call.app.id).redactedView]
            },
            APIEndpoint(
                path: "/push/template/set.json", tag: "push",
                summary: "Creates or replaces a multi-language push template (at most 100 per app). A message whose push config names the template is pushed with the entry of the recipient's language (or the app's default language).",
                body: .json,
                params: [
                    .string("templateId", required: true, maxLength: PushLimits.maxTemplateIdLength, "the id messages name in pushConfig.templateId"),
                    .string("name", maxLength: 128, "a name for the console"),
                    .json("languages", required: true, "{language: {title?, content}}, e.g. {\"en_US\": {\"title\": \"New order\", \"content\": \"You have a new order\"}}"),
                ],
                failures: [400: "a 101st template (26001), or an entry without content (1002)"],
                handler: setPushTemplate),
            APIEndpoint(
                path: "/push/template/del.json", tag: "push", summary: "Deletes a push template.",
                params: [.string("templateId", required: true, "the template")],
                response: [APIField("deleted", "boolean", "false when there was no such template")]) { call in
                ["deleted": try await core.requirePush().deleteTemplate(call.required("templateId"), appId: call.app.id)]
            },
            APIEndpoint(
                path: "/push/template/query.json", tag: "push", summary: "The app's push templates.",
                params: [],
                response: [APIField("templates", "array", items: "object", "{templateId, name, languages{language: {title, content}}, updatedAt}")]) { call in
                let templates = try await core.requirePush().templates(appId: call.app.id)
                return ["templates": templates.map { template -> [String: any Sendable] in
                    ["templateId": template.templateId, "name": template.name, "updatedAt": template.updatedAt,
                     "languages": template.entries.mapValues { entry -> [String: any Sendable] in
                         var fields: [String: any Sendable] = ["content": entry.content]
                         if let title = entry.title { fields["title"] = title }
                         return fields
                     }]
                }]
            },
            APIEndpoint(
                path: "/push/records/query.json", tag: "push",
                summary: "The push troubleshooting view: what became of a message's pushes, or of a user's latest. Each record is a push to one device (status pending, sent, failed, invalidToken) with the provider's answer, or a push a rule held back (suppressed, with its code: P16 no push content, P17 quiet hours, P19 do-not-disturb, P23 no device, SILENT, WEB_ONLINE, ULTRA_GROUP_FREQUENCY). Kept for pushRecordRetentionDays.",
                params: [
                    .string("messageUID", "a message's uid (or a push-only call's id)"),
                    .string("userId", "a recipient"),
                    .integer("limit", in: 1...500, "records, newest first (default 100)"),
                ],
                response: [
                    APIField("records", "array", items: "object", "{messageUID, userId, deviceId, kind, status, code, attempts, createdAt, updatedAt, nextAttemptAt (pending only), title, body}"),
                    APIField("devices", "array", items: "object", "with userId: the user's push devices {deviceId, kind, platform, badge, updatedAt}"),
                    APIField("reason", "string", "with userId: P23 when the user has no push device (such a user is never decided, so no record says it)"),
                ],
                handler: pushRecords),
            APIEndpoint(
                path: "/user/push/profile/get.json", tag: "push",
                summary: "A user's push profile (RCPushProfile): language, whether pushes show the message, whether the phone gets pushes while the user is on Web/PC. 34016 unless the app enabled user-level settings.",
                params: [.string("userId", required: true, "the user")],
                response: [
                    APIField("language", "string", "empty: the app's default"), APIField("showContent", "boolean", "pushes show the message"),
                    APIField("receiveWhileWebOnline", "boolean", "the phone gets pushes while the user is online on Web/PC"),
                ]) { call in
                let userId = try Self.validUser(call.required("userId"))
                return Self.profileFields(try await core.requirePush().profile(appId: call.app.id, userId: userId))
            },
            APIEndpoint(
                path: "/user/push/profile/set.json", tag: "push",
                summary: "Changes a user's push profile (only the fields given); the user's devices read it at their next call. 34016 unless the app enabled user-level settings.",
                params: [
                    .string("userId", required: true, "the user"),
                    APIParam(name: "language", kind: .string, required: false, summary: "zh_CN, en_US, ar_SA or a template's language; empty: the app's default"),
                    .boolean("showContent", "pushes show the message"),
                    .boolean("receiveWhileWebOnline", "the phone gets pushes while the user is online on Web/PC"),
                ],
                response: [APIField("language", "string", "the profile now"), APIField("showContent", "boolean", ""),
                           APIField("receiveWhileWebOnline", "boolean", "")]) { call in
                let userId = try Self.validUser(call.required("userId"))
                let language = call.parameters.values["language"]?.first
                let profile = try await core.requirePush().setProfile(appId: call.app.id, userId: userId, language: language,
                                                                      showContent: try call.bool("showContent"),
                                                                      receiveWhileWebOnline: try call.bool("receiveWhileWebOnline"))
                return Self.profileFields(profile)
            },
            APIEndpoint(
                path: "/user/remarks/set.json", tag: "push",
                summary: "Sets the names a user gives others (remarks): a private push to this user is titled with the sender's remark instead of the sender's name. An empty remark removes one.",
                params: [
                    .string("userId", required: true, "the user who gives the names"),
                    .json("remarks", required: true, "[{\"id\": user id, \"remark\": name (at most 64 characters)}], at most 100"),
                ],
                handler: setRemarks),
            APIEndpoint(
                path: "/user/remarks/del.json", tag: "push", summary: "Removes the name a user gave another.",
                params: [.string("userId", required: true, "the user"), .string("targetId", required: true, "the user named")]) { call in
                let userId = try Self.validUser(call.required("userId"))
                try await core.requirePush().setRemarks([try Self.validUser(call.required("targetId")): ""], userId: userId, appId: call.app.id)
                return [:]
            },
            APIEndpoint(
                path: "/user/remarks/get.json", tag: "push", summary: "The names a user gave others, by user id.",
                params: [
                    .string("userId", required: true, "the user"),
                    .integer("page", in: 1...100_000, "from 1 (default 1)"),
                    .integer("size", in: 1...100, "per page (default 50)"),
                ],
                response: [APIField("total", "integer", "remarks in all"), APIField("users", "array", items: "object", "{id, remark}")],
                handler: remarks),
            APIEndpoint(
                path: "/group/remarks/set.json", tag: "push",
                summary: "Sets a member's push alias in a group: the group's pushes to its other members name the sender with it (\"Alias: text\"), unless the recipient gave the sender a remark of their own.",
                params: [
                    .id("userId", required: true, "the group member"),
                    .id("groupId", required: true, "the group"),
                    .string("remark", required: true, maxLength: Self.maxRemarkLength, "the alias (at most 64 characters)"),
                ]) { call in
                try await core.requirePush().setGroupRemark(call.required("remark"), groupId: call.required("groupId"),
                                                            userId: call.required("userId"), appId: call.app.id)
                return [:]
            },
            APIEndpoint(
                path: "/group/remarks/del.json", tag: "push", summary: "Removes a member's push alias in a group.",
                params: [.id("userId", required: true, "the group member"), .id("groupId", required: true, "the group")]) { call in
                try await core.requirePush().setGroupRemark("", groupId: call.required("groupId"), userId: call.required("userId"),
                                                            appId: call.app.id)
                return [:]
            },
            APIEndpoint(
                path: "/group/remarks/get.json", tag: "push", summary: "A member's push alias in a group (empty when none is set).",
                params: [.id("userId", required: true, "the group member"), .id("groupId", required: true, "the group")],
                response: [APIField("remark", "string", "the alias")]) { call in
                let remark = try await core.requirePush().groupRemark(groupId: call.required("groupId"), userId: call.required("userId"),
                                                                      appId: call.app.id)
                return ["remark": remark ?? ""]
            },
            APIEndpoint(
                path: "/user/blockPushPeriod/set.json", tag: "push",
                summary: "The user's quiet hours (user-level do-not-disturb) from `startTime` for `period` minutes each day: pushes are held back (P17) except those the level lets through; @ messages always pass. Reaches the user's devices like the client's own setting.",
                params: [
                    .string("userId", required: true, "the user"),
                    .string("startTime", required: true, "HH:MM:SS, UTC"),
                    .integer("period", required: true, in: 1...1439, "minutes"),
                    .integer("level", "1 only @ messages push (default), 5 nothing pushes"),
                ],
                handler: setBlockPushPeriod),
            APIEndpoint(
                path: "/user/blockPushPeriod/get.json", tag: "push", summary: "The user's quiet hours.",
                params: [.string("userId", required: true, "the user")],
                response: [APIField("data", "object", "{startTime, period, unPushLevel}; absent when none are set")]) { call in
                let userId = try Self.validUser(call.required("userId"))
                guard let hours = try await core.conversationState.quietHours(appId: call.app.id, userId: userId) else { return [:] }
                return ["data": ["startTime": hours.startTime, "period": hours.spanMinutes, "unPushLevel": hours.level.rawValue] as [String: any Sendable]]
            },
            APIEndpoint(
                path: "/user/blockPushPeriod/delete.json", tag: "push", summary: "Removes the user's quiet hours.",
                params: [.string("userId", required: true, "the user")]) { call in
                try await editConversationState(call, userId: call.required("userId"), .removeQuietHours)
                return [:]
            },
        ]
    }

    private static func validUser(_ id: String) throws -> String {
        guard UserID.isValid(id) else { throw APIError.badParameter("'\(id.prefix(80))' is not a valid user id (\(UserID.rule))") }
        return id
    }

    private static func profileFields(_ profile: PushProfileRecord) -> [String: any Sendable] {
        ["language": profile.language ?? "", "showContent": profile.showContent, "receiveWhileWebOnline": profile.receiveWhileWebOnline]
    }

    private func setPushSettings(_ call: APICall) async throws -> [String: any Sendable] {
        let push = try core.requirePush()
        guard let body = call.parameters.json, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw APIError.badParameter("the body must be a JSON object of settings, e.g. {\"apns\": {\"bundleId\": ..., \"keyId\": ..., \"teamId\": ..., \"p8\": ...}}")
        }
        do {
            let settings = try await push.updateSettings(appId: call.app.id) { settings in
                try PushSettingsChange.apply(object, to: &settings, now: Date(timeIntervalSince1970: Double(core.clock.nowMilliseconds()) / 1000))
            }
            return ["settings": settings.redactedView]
        } catch let error as PushCredentialError {
            throw APIError.badParameter(error.code.map { "\(error.message) (APNs status \($0))" } ?? error.message)
        }
    }

    private func setPushTemplate(_ call: APICall) async throws -> [String: any Sendable] {
        let templateId = call.required("templateId")
        guard !templateId.isEmpty, templateId.count <= PushLimits.maxTemplateIdLength else {
            throw APIError.badParameter("templateId must be 1 to \(PushLimits.maxTemplateIdLength) characters")
        }
        guard let body = call.parameters.json, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let languages = Self.object(object["languages"]), !languages.isEmpty else {
            throw APIError.badParameter("languages must be an object {language: {title?, content}} with at least one language")
        }
        var entries: [String: PushTemplateRecord.Entry] = [:]
        for (language, value) in languages {
            guard PushLanguage.isLanguageId(language) else {
                throw APIError.badParameter("'\(language.prefix(40))' is not a language id such as zh_CN, en_US or ar_SA")
            }
            guard let entry = value as? [String: Any], let content = entry["content"] as? String, !content.isEmpty else {
                throw APIError.badParameter("languages.\(language) needs a non-empty content")
            }
            let title = entry["title"] as? String
            for (name, text) in [("content", content), ("title", title ?? "")] where text.utf8.count > PushLimits.maxFieldBytes {
                throw APIError(.apiParameterTooLong, .badRequest, "languages.\(language).\(name) is \(text.utf8.count) bytes; at most \(PushLimits.maxFieldBytes)")
            }
            entries[language] = PushTemplateRecord.Entry(title: title.flatMap { $0.isEmpty ? nil : $0 }, content: content)
        }
        let template = PushTemplateRecord(templateId: templateId, name: call.string("name") ?? "", entries: entries,
                                          updatedAt: core.clock.nowMilliseconds())
        do {
            try await core.requirePush().setTemplate(template, appId: call.app.id)
        } catch StoreRefusal.tooManyPushTemplates(_) {
            throw APIError(.invalidPushParameter, .badRequest,
                           "the app has \(PushLimits.maxTemplatesPerApp) push templates, the most it may have: delete one with /push/template/del.json first")
        }
        return [:]
    }

    private func pushRecords(_ call: APICall) async throws -> [String: any Sendable] {
        let uid = call.string("messageUID")
        let userId = call.string("userId")
        guard uid != nil || userId != nil else { throw APIError.badParameter("give messageUID, userId or both") }
        let limit = Int(try call.int("limit") ?? 100)
        let (records, devices) = try await core.requirePush().records(appId: call.app.id, messageUid: uid, userId: userId, limit: limit)
        var result: [String: any Sendable] = [:]
        if let devices {
            // A user without a device is never decided (no record): P23 says why they get no push.
            result["devices"] = devices.map { ["deviceId": $0.deviceId, "kind": $0.kind.rawValue, "platform": $0.platform,
                                               "badge": $0.badge, "updatedAt": $0.updatedAt] as [String: any Sendable] }
            if devices.isEmpty { result["reason"] = PushCode.noDevice }
        }
        result["records"] = records.map { record -> [String: any Sendable] in
            var fields: [String: any Sendable] = [
                "messageUID": record.messageUid, "userId": record.userId, "deviceId": record.deviceId, "kind": record.kind?.rawValue ?? "",
                "status": Self.statusName(record.status), "code": record.code, "attempts": record.attempts,
                "createdAt": record.createdAt, "updatedAt": record.updatedAt,
            ]
            if record.status == .pending { fields["nextAttemptAt"] = record.nextAttemptAt }
            if let notification = PushNotification(stored: record.notification) {
                fields["title"] = notification.title ?? ""
                fields["body"] = notification.body
            }
            return fields
        }
        return result
    }

    static func statusName(_ status: PushStatus) -> String {
        switch status {
        case .pending: "pending"
        case .sent: "sent"
        case .failed: "failed"
        case .invalidToken: "invalidToken"
        case .suppressed: "suppressed"
        }
    }

    private func setRemarks(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = try Self.validUser(call.required("userId"))
        guard let data = call.string("remarks")?.data(using: .utf8),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw APIError.badParameter("remarks must be a JSON array [{\"id\": user id, \"remark\": name}]")
        }
        guard list.count <= Self.maxRemarksPerCall else {
            throw APIError(.apiParameterTooLong, .badRequest, "remarks lists \(list.count) entries; at most \(Self.maxRemarksPerCall) per call")
        }
        var remarks: [String: String] = [:]
        for entry in list {
            guard let id = entry["id"] as? String, let remark = entry["remark"] as? String else {
                throw APIError.badParameter("each remark is {\"id\": user id, \"remark\": name}")
            }
            guard remark.count <= Self.maxRemarkLength else {
                throw APIError(.apiParameterTooLong, .badRequest, "the remark for \(id.prefix(64)) is \(remark.count) characters; at most \(Self.maxRemarkLength)")
            }
            remarks[try Self.validUser(id)] = remark
        }
        try await core.requirePush().setRemarks(remarks, userId: userId, appId: call.app.id)
        return [:]
    }

    private func remarks(_ call: APICall) async throws -> [String: any Sendable] {
        let userId = try Self.validUser(call.required("userId"))
        let page = Int(try call.int("page") ?? 1)
        let size = Int(try call.int("size") ?? 50)
        let all = try await core.requirePush().remarks(userId: userId, appId: call.app.id)
        let start = min((page - 1) * size, all.count)
        let slice = all[start..<min(start + size, all.count)]
        return ["total": all.count, "users": slice.map { ["id": $0.userId, "remark": $0.remark] as [String: any Sendable] }]
    }

    private func setBlockPushPeriod(_ call: APICall) async throws -> [String: any Sendable] {
        let startTime = call.required("startTime")
        let parts = startTime.split(separator: ":").map { Int($0) }
        guard parts.count == 3, let h = parts[0], let m = parts[1], let s = parts[2], (0..<24).contains(h), (0..<60).contains(m), (0..<60).contains(s) else {
            throw APIError.badParameter("startTime must be HH:MM:SS (00:00:00 to 23:59:59), got \(TextLength.quoted(startTime))")
        }
        let raw = try call.int("level") ?? 1
        guard let level = PushNotificationLevel(rawValue: Int(raw)), level == .mention || level == .blocked else {
            throw APIError.badParameter("level must be 1 (only @ messages push) or 5 (nothing pushes), got \(raw)")
        }
        let hours = QuietHours(startTime: startTime, spanMinutes: Int(try call.int("period") ?? 0), level: level, timeZone: "UTC")
        try await editConversationState(call, userId: call.required("userId"), .setQuietHours(hours))
        return [:]
    }
}
