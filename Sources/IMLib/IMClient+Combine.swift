import Foundation
import IMCore

/// One message of a combined forward, as the HTML file carries it for clients to read back.
public struct CombinedEntry: Sendable, Equatable, Codable {
    public var senderUserId: String
    public var senderName: String
    public var sentTime: Int64
    public var objectName: String
    /// The message's content JSON.
    public var content: String
}

/// Combined forward (RongCloud's 合并转发, `RC:CombineMsg`): the messages are written into one
/// HTML file, uploaded like a file message's, and a message with its URL, a title and the first
/// lines is sent.
extension IMClient {
    /// The types a combined forward takes: RongCloud's built-in contents, not custom messages (nor
    /// red packets or burn-after-reading ones, which are custom here).
    public static let combinableObjectNames: Set<String> = [
        TextMessage.objectName, ImageMessage.objectName, GIFMessage.objectName, FileMessage.objectName, HQVoiceMessage.objectName,
        SightMessage.objectName, LocationMessage.objectName, ReferenceMessage.objectName, RichContentMessage.objectName,
        CombineMessage.objectName,
    ]
    /// Lines in a combined message's summary.
    public static let combineSummaryLines = 4

    /// Forwards `messages` as one combined message to a conversation: the HTML file of the messages
    /// is made under the media folder and uploaded, then an `RC:CombineMsg` is sent with its URL,
    /// the title ("A和B的聊天记录" for a one-to-one chat, "群聊的聊天记录" otherwise, unless `title`
    /// is given), the senders' names and the first four lines. `names` gives display names by user
    /// id (the id is shown otherwise). A group mention is forwarded as its text only.
    ///
    /// - Throws: 33003 for no messages, more than 100, or a type a combined forward does not take;
    ///   the errors of `sendMediaMessage`.
    @discardableResult
    public func sendCombinedMessage(
        _ messages: [Message], to conversationType: ConversationType, targetId: String, channelId: String = "",
        names: [String: String] = [:], title: String? = nil, events: @escaping @Sendable (MediaSendEvent) -> Void = { _ in }
    ) async throws -> Message {
        guard !messages.isEmpty, messages.count <= 100 else {
            throw IMError(.invalidParameter, "a combined forward takes 1 to 100 messages, not \(messages.count)")
        }
        if let refused = messages.first(where: { !Self.combinableObjectNames.contains($0.objectName) }) {
            throw IMError(.invalidParameter, "\(refused.objectName) messages cannot be forwarded combined: forward them one by one")
        }
        let ordered = messages.sorted { $0.sentTime < $1.sentTime }
        let source = ordered[0]
        func name(_ userId: String) -> String { names[userId].flatMap { $0.isEmpty ? nil : $0 } ?? userId }
        let senders = ordered.map(\.senderUserId).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        let nameList: [String]
        let heading: String
        if source.conversationType == .private {
            let me = try openStore().userId
            let other = source.targetId
            nameList = [name(me), name(other)]
            heading = title ?? "\(name(me))和\(name(other))的聊天记录"
        } else {
            nameList = senders.map(name)
            heading = title ?? "群聊的聊天记录"
        }
        let entries = ordered.map { message in
            CombinedEntry(senderUserId: message.senderUserId, senderName: name(message.senderUserId), sentTime: message.sentTime,
                          objectName: message.objectName, content: String(decoding: Self.withoutMentions(message.contentData), as: UTF8.self))
        }
        let summary = ordered.prefix(Self.combineSummaryLines).map { "\(name($0.senderUserId))：\(Self.digest($0))" }
        let folder = try mediaDirectory().appendingPathComponent("combine")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("\(UUID().uuidString).html")
        try Data(CombineHTML.render(title: heading, entries: entries).utf8).write(to: file, options: .atomic)
        var content = CombineMessage(remoteUrl: "", conversationType: source.conversationType, nameList: nameList, title: heading,
                                     summaryList: summary)
        content.localPath = file.path
        return try await sendMediaMessage(conversationType, targetId: targetId, channelId: channelId, content: content, events: events)
    }

    /// The messages a received or sent combined message holds, read back from its HTML file
    /// (downloaded into the media folder first if it is not there).
    public func combinedMessages(of messageId: Int64) async throws -> [CombinedEntry] {
        guard try await openStore().message(id: messageId)?.objectName == CombineMessage.objectName else {
            throw IMError(.invalidParameter, "local message \(messageId) is not a combined message")
        }
        let path = try await downloadMediaMessage(messageId: messageId)
        guard let entries = CombineHTML.entries(in: try String(contentsOfFile: path, encoding: .utf8)) else {
            throw IMError(.mediaFormatUnsupported, "the combined message's file holds no messages this client can read")
        }
        return entries
    }

    /// A message's line in a summary: its digest, or its text.
    static func digest(_ message: Message) -> String {
        if let text = message.content as? TextMessage { return String(text.content.prefix(60)) }
        return message.content?.conversationDigest ?? message.objectName
    }

    /// The content JSON without its `mentionedInfo`: a forwarded mention mentions no one.
    static func withoutMentions(_ data: Data) -> Data {
        guard var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], object["mentionedInfo"] != nil else { return data }
        object["mentionedInfo"] = nil
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? data
    }
}

/// The HTML file of a combined forward: readable in any browser (the Web too), each message with
/// its sender, time and content, and the messages as JSON in a `<script type="application/json">`
/// block that clients read back. Everything from a message is escaped.
enum CombineHTML {
    static let dataElementId = "rc-combine-data"

    static func render(title: String, entries: [CombinedEntry]) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        var rows = ""
        for entry in entries {
            let time = formatter.string(from: Date(timeIntervalSince1970: Double(entry.sentTime) / 1000))
            rows += """
                <div class="message"><div class="sender">\(escape(entry.senderName)) <time>\(time) UTC</time></div>\
                <div class="content">\(body(entry))</div></div>\n
                """
        }
        let json = (try? JSONEncoder().encode(entries)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        // No markup characters in the script element (they only occur inside JSON strings, where
        // their \u escapes mean the same).
        var embedded = ""
        for scalar in json.unicodeScalars {
            switch scalar {
            case "<": embedded += "\\u003c"
            case ">": embedded += "\\u003e"
            case "&": embedded += "\\u0026"
            default: embedded.unicodeScalars.append(scalar)
            }
        }
        return """
            <!DOCTYPE html>
            <html lang="zh"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title))</title>
            <style>body{font-family:system-ui,sans-serif;max-width:720px;margin:0 auto;padding:12px;color:#222}\
            .message{border-bottom:1px solid #eee;padding:8px 0}.sender{font-size:13px;color:#666}\
            .content{margin-top:4px;white-space:pre-wrap;word-break:break-word}img{max-width:240px;border-radius:4px}</style>
            </head><body><h1>\(escape(title))</h1>
            \(rows)<script type="application/json" id="\(dataElementId)">\(embedded)</script>
            </body></html>
            """
    }

    /// The messages embedded in a combined forward's HTML, nil when there are none.
    static func entries(in html: String) -> [CombinedEntry]? {
        guard let open = html.range(of: "<script type=\"application/json\" id=\"\(dataElementId)\">"),
              let close = html.range(of: "</script>", range: open.upperBound..<html.endIndex) else { return nil }
        return try? JSONDecoder().decode([CombinedEntry].self, from: Data(html[open.upperBound..<close.lowerBound].utf8))
    }

    private static func body(_ entry: CombinedEntry) -> String {
        let data = Data(entry.content.utf8)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        func text(_ key: String) -> String { object[key] as? String ?? "" }
        func link(_ url: String, _ label: String) -> String {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else { return escape(label) }
            return "<a href=\"\(escape(url))\">\(escape(label))</a>"
        }
        switch entry.objectName {
        case TextMessage.objectName, ReferenceMessage.objectName:
            return escape(text("content"))
        case ImageMessage.objectName:
            // Decoded and encoded again: only Base64's own characters reach the attribute.
            let thumbnail = Data(base64Encoded: text("content"), options: .ignoreUnknownCharacters)?.base64EncodedString() ?? ""
            let image = thumbnail.isEmpty ? "[图片]" : "<img alt=\"[图片]\" src=\"data:image/jpeg;base64,\(thumbnail)\">"
            let url = text("imageUri")
            return url.hasPrefix("http") ? "<a href=\"\(escape(url))\">\(image)</a>" : image
        case GIFMessage.objectName:
            return link(text("remoteUrl"), "[动图]")
        case HQVoiceMessage.objectName:
            return link(text("remoteUrl"), "[语音] \((object["duration"] as? NSNumber)?.intValue ?? 0)\"")
        case FileMessage.objectName:
            return link(text("fileUrl"), "[文件] \(text("name"))")
        case SightMessage.objectName:
            return link(text("sightUrl"), "[小视频] \(text("name"))")
        case LocationMessage.objectName:
            return escape("[位置] \(text("poi"))")
        case RichContentMessage.objectName:
            return link(text("url"), "[图文] \(text("title"))")
        case CombineMessage.objectName:
            return link(text("remoteUrl"), "[聊天记录] \(text("title"))")
        default:
            return escape(entry.objectName)
        }
    }

    /// Escapes by Unicode scalar, not by character: a mark that joins a `<` or a quote into one
    /// grapheme must not carry it through.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
