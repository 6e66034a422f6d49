import Foundation
import IMCore
import IMStore

/// `/user/*` for accounts: hosted profiles, deactivation, listing and deleting users, and the
/// one-to-one chat mute (spec/server-api.md §6.1).
extension ServerAPI {
    var accountEndpoints: [APIEndpoint] {
        let users = APIParam.ids("userId", required: true, max: 100, "user ids, repeated or comma-joined")
        let profileFields = [
            APIField("userList", "array", items: "object", "{userId, version (grows with every change), userProfile (JSON text), userExtProfile (JSON text)}"),
        ]
        let personType = APIParam.string("type", required: true, "PERSON")
        return [
            APIEndpoint(
                path: "/user/profile/set.json", tag: "user",
                summary: "Sets fields of a registered user's hosted profile: the keys given replace theirs, the others stay.",
                params: [
                    .id("userId", required: true, "a registered user"),
                    .json("userProfile", "JSON object of uniqueId (<= 32), name (<= 64), portraitUri (<= 1024), email (<= 128), birthday (<= 32), location (<= 32) as strings and gender (0 unknown, 1 male, 2 female), role and level (0-100) as numbers"),
                    .json("userExtProfile", "JSON object of at most 20 keys `ext_` + letters, digits or _ (<= 32 characters), each a string <= 256 characters"),
                ]) { call in
                let userId = call.required("userId")
                let profile = try HostedProfileRules.profile(call.string("userProfile"))
                let extProfile = try HostedProfileRules.extProfile(call.string("userExtProfile"))
                guard profile != nil || extProfile != nil else {
                    throw APIError.badParameter("give userProfile, userExtProfile or both")
                }
                guard try await core.directory.mergeHostedProfile(appId: call.app.id, userId: userId, profile: profile ?? "{}",
                                                                  extProfile: extProfile ?? "{}", now: core.clock.nowMilliseconds()) else {
                    throw APIError.badParameter("user \(userId) is not registered: register it with /user/getToken.json first")
                }
                return [:]
            },
            APIEndpoint(
                path: "/user/profile/clean.json", tag: "user", summary: "Deletes users' hosted profiles.",
                params: [.ids("userId", required: true, max: 20, "user ids, repeated or comma-joined")]) { call in
                try await core.directory.removeHostedProfiles(appId: call.app.id, userIds: call.list("userId"))
                return [:]
            },
            APIEndpoint(
                path: "/user/profile/batch/query.json", tag: "user", summary: "The hosted profiles of these users (users without one are left out).",
                params: [users], response: profileFields) { call in
                let profiles = try await core.directory.hostedProfiles(appId: call.app.id, userIds: call.list("userId").uniqued())
                return ["userList": profiles.map(Self.profileEntry)]
            },
            APIEndpoint(
                path: "/user/profile/query.json", tag: "user", summary: "Hosted profiles, a page at a time, by their users' registration time.",
                params: [
                    .integer("page", in: 1...1_000_000, "page number from 1 (default 1)"),
                    .integer("size", in: 1...100, "profiles per page (default 20, at most 100)"),
                    .integer("order", in: 0...1, "0 oldest registration first (default), 1 newest first"),
                ], response: profileFields) { call in
                let (offset, limit) = try Self.page(call, page: "page", size: "size", defaultSize: 20)
                let profiles = try await core.directory.hostedProfiles(appId: call.app.id, offset: offset, limit: limit,
                                                                       descending: try call.int("order") == 1)
                return ["userList": profiles.map(Self.profileEntry)]
            },
            APIEndpoint(
                path: "/user/deactivate.json", tag: "user",
                summary: "Deactivates users: their connections close with 31029 and connecting is refused until they are reactivated; their name, portrait, hosted profile, push tags and devices, black and white lists, remarks and conversation state (pins, do-not-disturb, quiet hours, tags) are deleted, and their history before reactivation is gone for them. Group memberships stay.",
                params: [users],
                response: [APIField("operateId", "string", "the operation's id")]) { call in
                let userIds = call.list("userId").uniqued()
                try await core.directory.deactivate(appId: call.app.id, userIds: userIds, now: core.clock.nowMilliseconds())
                let operateId = UUID().uuidString
                try await core.callbacks?.accountChanged(appId: call.app.id, userIds: userIds, operateId: operateId, reactivated: false)
                return ["operateId": operateId]
            },
            APIEndpoint(
                path: "/user/reactivate.json", tag: "user",
                summary: "Reactivates deactivated users: they may get a token and connect again; deleted data is not restored.",
                params: [users], response: [APIField("operateId", "string", "the operation's id")], handler: reactivate),
            APIEndpoint(
                path: "/user/activate.json", tag: "user", summary: "The same as /user/reactivate.json (the Java SDK's name for it).",
                params: [users], response: [APIField("operateId", "string", "the operation's id")], handler: reactivate),
            APIEndpoint(
                path: "/user/deactivate/query.json", tag: "user", summary: "Deactivated users, a page at a time, by deactivation time.",
                params: [
                    .integer("pageNo", in: 1...1_000_000, "page number from 1 (default 1)"),
                    .integer("pageSize", in: 1...50, "users per page (default 50, at most 50)"),
                ],
                response: [APIField("users", "array", items: "string", "user ids")]) { call in
                let (offset, limit) = try Self.page(call, page: "pageNo", size: "pageSize", defaultSize: 50)
                return ["users": try await core.directory.deactivatedUsers(appId: call.app.id, offset: offset, limit: limit)]
            },
            APIEndpoint(
                path: "/user/query.json", tag: "user", summary: "Registered users, a page at a time, by registration time.",
                params: [
                    .integer("page", in: 1...1_000_000, "page number from 1 (default 1)"),
                    .integer("pageSize", in: 1...100, "users per page (default 20, at most 100)"),
                    .integer("order", in: 0...1, "0 oldest first (default), 1 newest first"),
                ],
                response: [
                    APIField("total", "integer", "registered users"),
                    APIField("users", "array", items: "object", "{userId, userName, userPortrait, regTime (yyyy-MM-dd HH:mm:ss UTC)}"),
                ]) { call in
                let (offset, limit) = try Self.page(call, page: "page", size: "pageSize", defaultSize: 20)
                let (total, found) = try await core.directory.users(appId: call.app.id, offset: offset, limit: limit,
                                                                    descending: try call.int("order") == 1)
                return ["total": total, "users": found.map { user in
                    ["userId": user.userId, "userName": user.name, "userPortrait": user.portraitUri,
                     "regTime": APITime.text(user.createdAt)] as [String: any Sendable]
                }]
            },
            APIEndpoint(
                path: "/user/delusers.json", tag: "user",
                summary: "Deletes users: their registration and personal data (as deactivation deletes it); their tokens stop working and live connections close with 31004. /user/getToken.json registers the id again.",
                params: [users], handler: deleteUsers),
            APIEndpoint(
                path: "/user/del.json", tag: "user", summary: "The same as /user/delusers.json.",
                params: [users], handler: deleteUsers),
            APIEndpoint(
                path: "/user/chat/fb/set.json", tag: "user",
                summary: "Mutes users in one-to-one chat (state=1) or lifts it (state=0): a muted user's clients get 20106 for private messages. The Server API's private publish is not affected.",
                params: [
                    .ids("userId", required: true, max: 1000, "user ids, repeated or comma-joined"),
                    .integer("state", required: true, in: 0...1, "1 mute, 0 lift"),
                    personType,
                ]) { call in
                try Self.checkPersonType(call)
                try await core.directory.setPrivateChatMuted(appId: call.app.id, userIds: call.list("userId").uniqued(),
                                                             muted: try call.int("state") == 1, now: core.clock.nowMilliseconds())
                return [:]
            },
            APIEndpoint(
                path: "/user/chat/fb/querylist.json", tag: "user", summary: "The users muted in one-to-one chat, by user id.",
                params: [
                    .integer("num", in: 1...200, "users per page (default 100, at most 200)"),
                    .integer("offset", in: 0...APIParameters.maxIntegerMagnitude, "users to skip (default 0)"),
                    personType,
                ],
                response: [APIField("total", "integer", "muted users"), APIField("users", "array", items: "string", "user ids")]) { call in
                try Self.checkPersonType(call)
                let muted = try await core.directory.privateChatMuted(appId: call.app.id).sorted()
                let offset = Int(clamping: try call.int("offset") ?? 0)
                let count = Int(try call.int("num") ?? 100)
                return ["total": muted.count, "users": Array(muted.dropFirst(offset).prefix(count))]
            },
        ]
    }

    private func reactivate(_ call: APICall) async throws -> [String: any Sendable] {
        let userIds = call.list("userId").uniqued()
        try await core.directory.reactivate(appId: call.app.id, userIds: userIds, now: core.clock.nowMilliseconds())
        let operateId = UUID().uuidString
        try await core.callbacks?.accountChanged(appId: call.app.id, userIds: userIds, operateId: operateId, reactivated: true)
        return ["operateId": operateId]
    }

    private func deleteUsers(_ call: APICall) async throws -> [String: any Sendable] {
        try await core.directory.delete(appId: call.app.id, userIds: call.list("userId").uniqued(), now: core.clock.nowMilliseconds())
        return [:]
    }

    private static func checkPersonType(_ call: APICall) throws {
        guard call.required("type") == "PERSON" else {
            throw APIError.badParameter("type must be PERSON, got \(TextLength.quoted(call.required("type")))")
        }
    }

    /// `page` (from 1) and `size` as an offset and a limit.
    private static func page(_ call: APICall, page: String, size: String, defaultSize: Int64) throws -> (offset: Int, limit: Int) {
        let number = try call.int(page) ?? 1
        let limit = try call.int(size) ?? defaultSize
        return (Int(clamping: (number - 1) * limit), Int(limit))
    }

    private static func profileEntry(_ profile: HostedProfile) -> [String: any Sendable] {
        ["userId": profile.userId, "version": profile.version, "userProfile": profile.profile, "userExtProfile": profile.extProfile]
    }
}

/// What a hosted profile may hold (RongCloud's user profile hosting): the basic keys with their
/// types and limits, and the app's `ext_` keys. Each check returns the object as JSON text, or
/// nil when the parameter was not given, and refuses anything else with 1002 naming the key.
enum HostedProfileRules {
    enum Field {
        case text(maxCharacters: Int)
        case number(ClosedRange<Int>)
    }

    static let fields: [String: Field] = [
        "uniqueId": .text(maxCharacters: 32), "name": .text(maxCharacters: 64), "portraitUri": .text(maxCharacters: 1024),
        "email": .text(maxCharacters: 128), "birthday": .text(maxCharacters: 32), "location": .text(maxCharacters: 32),
        "gender": .number(0...2), "role": .number(0...100), "level": .number(0...100),
    ]
    static let maxExtKeys = 20
    static let maxExtKeyCharacters = 32
    static let maxExtValueCharacters = 256

    static func profile(_ text: String?) throws -> String? {
        guard let object = try object(text, "userProfile") else { return nil }
        for (key, value) in object {
            guard let field = fields[key] else {
                throw APIError.badParameter("userProfile has no key \(TextLength.quoted(key)): use \(fields.keys.sorted().joined(separator: ", "))")
            }
            switch field {
            case .text(let most):
                guard let string = value as? String else { throw APIError.badParameter("userProfile.\(key) must be a string") }
                guard TextLength.characters(string) <= most else {
                    throw APIError.badParameter("userProfile.\(key) is longer than \(most) characters")
                }
            case .number(let range):
                guard let number = value as? NSNumber, !(value is Bool),
                      let int = Int(exactly: number.doubleValue), range.contains(int) else {
                    throw APIError.badParameter("userProfile.\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
                }
            }
        }
        return try serialized(object)
    }

    static func extProfile(_ text: String?) throws -> String? {
        guard let object = try object(text, "userExtProfile") else { return nil }
        guard object.count <= maxExtKeys else {
            throw APIError.badParameter("userExtProfile has \(object.count) keys; at most \(maxExtKeys)")
        }
        for (key, value) in object {
            let name = key.dropFirst(4)
            guard key.hasPrefix("ext_"), !name.isEmpty, key.count <= maxExtKeyCharacters,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                throw APIError.badParameter("userExtProfile key \(TextLength.quoted(key)) must be ext_ followed by letters, digits or _ (at most \(maxExtKeyCharacters) characters)")
            }
            guard let string = value as? String, TextLength.characters(string) <= maxExtValueCharacters else {
                throw APIError.badParameter("userExtProfile.\(key) must be a string of at most \(maxExtValueCharacters) characters")
            }
        }
        return try serialized(object)
    }

    private static func object(_ text: String?, _ name: String) throws -> [String: Any]? {
        guard let text else { return nil }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            throw APIError.badParameter("\(name) must be a JSON object")
        }
        return object
    }

    private static func serialized(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }
}
