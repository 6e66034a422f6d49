import Foundation
import IMCore
import IMStore

/// The bodies of RongCloud's callbacks, field by field as its documentation names them
/// (docs/CALLBACKS.md has each with its source).
enum CallbackPayloads {
    /// RongCloud's `channelType` of a conversation type.
    static func channelType(_ type: ConversationType) -> String {
        switch type {
        case .private: return "PERSON"
        case .discussion: return "PERSONS"
        case .group: return "GROUP"
        case .chatroom: return "TEMPGROUP"
        case .customerService: return "CUSTOMERSERVICE"
        case .system: return "NOTIFY"
        case .appPublicService: return "MC"
        case .publicService: return "MP"
        case .pushService: return "NOTIFY"
        case .ultraGroup: return "ULTRAGROUP"
        }
    }

    /// RongCloud's `source` / `os` of a sender: its platform, or `Server` for the Server API.
    static func source(_ platform: Platform?) -> String {
        switch platform {
        case .iOS?: return "iOS"
        case .android?: return "Android"
        case .harmonyOS?: return "HarmonyOS"
        case .web?: return "Websocket"
        case .miniProgram?: return "MiniProgram"
        case .windows?, .macOS?, .linux?, .electron?: return "PC"
        case nil: return "Server"
        }
    }

    /// `sensitiveType`: 0 none, 1 a blocking word (the message was held back), 2 a word replaced.
    enum Sensitivity: Int {
        case none = 0, blocked = 1, replaced = 2
    }

    /// Full message routing: one message, form-encoded.
    static func routing(_ message: StoredMessage, source: String, sensitivity: Sensitivity) -> Data {
        var form = FormBody()
        form.add("fromUserId", message.senderId)
        form.add("toUserId", message.targetId)
        form.add("objectName", message.objectName)
        form.add("content", String(decoding: message.content, as: UTF8.self))
        form.add("channelType", channelType(message.conversationType))
        form.add("msgTimestamp", String(message.sentTime))
        form.add("msgUID", message.uid)
        form.add("originalMsgUID", "")
        form.add("sensitiveType", String(sensitivity.rawValue))
        form.add("source", source)
        form.add("busChannel", message.channelId)
        for user in message.directedUserIds { form.add("groupUserIds", user) }
        return form.data
    }

    /// The message callback: the message about to be delivered, form-encoded.
    static func messageCallback(_ message: StoredMessage, appKey: String, source: String, clientIp: String) -> Data {
        var form = FormBody()
        form.add("appKey", appKey)
        form.add("fromUserId", message.senderId)
        form.add("targetId", message.targetId)
        if !message.directedUserIds.isEmpty { form.add("toUserIds", message.directedUserIds.joined(separator: ",")) }
        form.add("msgType", message.objectName)
        form.add("content", String(decoding: message.content, as: UTF8.self))
        form.add("pushContent", message.pushContent)
        form.add("disablePush", message.disableNotification ? "true" : "false")
        form.add("pushExt", String(decoding: message.pushConfig, as: UTF8.self))
        form.add("expansion", message.canIncludeExpansion ? "true" : "false")
        if !message.expansion.isEmpty, let extra = try? JSONSerialization.data(withJSONObject: message.expansion, options: [.sortedKeys]) {
            form.add("extraContent", String(decoding: extra, as: UTF8.self))
        }
        form.add("channelType", channelType(message.conversationType))
        form.add("msgTimeStamp", String(message.sentTime))
        form.add("messageId", message.uid)
        form.add("originalMsgUID", "")
        form.add("os", source)
        form.add("busChannel", message.channelId)
        form.add("clientIp", clientIp)
        return form.data
    }

    /// RongCloud's online status values.
    enum Status: String {
        case online = "0", offline = "1", logout = "2"
    }

    /// Online status: one transition, in RongCloud's array (its receivers take several at once).
    /// A deactivation (`type` 0) or reactivation (1) result; `code` "0" is success.
    static func deactivation(userId: String, operateId: String, type: Int, time: Int64) -> Data {
        var form = FormBody()
        form.add("userId", userId)
        form.add("operateId", operateId)
        form.add("type", String(type))
        form.add("code", "0")
        form.add("time", String(time))
        return form.data
    }

    static func status(userId: String, status: Status, platform: Platform, time: Int64, clientIp: String, sessionId: String) -> Data {
        json([["userid": userId, "status": status.rawValue, "os": source(platform), "time": time, "clientIp": clientIp,
               "sessionId": sessionId]])
    }

    /// Chatroom status: `type` 0 created, 1 joined, 2 left, 3 destroyed; `status` 0 asked for,
    /// 1 removed by the server (offline too long), 2 banned, 3 destroyed by the server (idle).
    static func chatroomStatus(roomId: String, userIds: [String], type: Int, status: Int, time: Int64) -> Data {
        json([["chatRoomId": roomId, "userIds": userIds, "status": status, "type": type, "time": time]])
    }

    /// Chatroom attributes: `optType` 1 set, 2 removed, 3 all removed.
    static func chatroomAttribute(roomId: String, key: String, value: String, optType: Int, userId: String, time: Int64,
                                  version: Int64) -> Data {
        json(["chatroomId": roomId, "key": key, "value": value, "optType": optType, "userId": userId, "status": 0,
              "timestamp": time, "version": version])
    }

    private static func json(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("[]".utf8)
    }
}

/// An `application/x-www-form-urlencoded` body: names and values percent-encoded, spaces as `+`.
struct FormBody {
    private var bytes: [UInt8] = []

    var data: Data { Data(bytes) }

    /// The bytes that stay as they are (the WHATWG form-urlencoded set), by value.
    private static let kept: [Bool] = {
        var kept = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._".utf8 { kept[Int(byte)] = true }
        return kept
    }()
    private static let hex = Array("0123456789ABCDEF".utf8)

    mutating func add(_ name: String, _ value: String) {
        if !bytes.isEmpty { bytes.append(UInt8(ascii: "&")) }
        Self.encode(name, into: &bytes)
        bytes.append(UInt8(ascii: "="))
        Self.encode(value, into: &bytes)
    }

    static func encode(_ string: String, into bytes: inout [UInt8]) {
        let utf8 = string.utf8
        bytes.reserveCapacity(bytes.count + utf8.count + utf8.count / 2)
        for byte in utf8 {
            if kept[Int(byte)] {
                bytes.append(byte)
            } else if byte == UInt8(ascii: " ") {
                bytes.append(UInt8(ascii: "+"))
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            }
        }
    }

    static func encode(_ string: String) -> String {
        var bytes: [UInt8] = []
        encode(string, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
