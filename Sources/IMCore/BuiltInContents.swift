import Foundation

// The built-in message contents, with RongCloud's object names, persistent flags and JSON field
// names (spec/system-push-ultra.md §1.2 and §6), so messages pass to and from RongCloud's SDKs
// unchanged. Decoding is lenient where RongCloud's platforms differ: a missing string is empty, a
// missing number 0, and sizes may be numbers or numeric strings (the Server API documents `size`
// as a string, the SDKs send a number; we send a number).

/// The built-in content types every client knows without registering them.
public enum BuiltInContentTypes {
    public static let all: [any MessageContent.Type] = [
        TextMessage.self, ImageMessage.self, GIFMessage.self, FileMessage.self, HQVoiceMessage.self,
        SightMessage.self, LocationMessage.self, ReferenceMessage.self, CommandMessage.self,
        CommandNotificationMessage.self, RichContentMessage.self, CombineMessage.self, ChatroomKVNotificationMessage.self,
    ]
}

/// RongCloud's `RCUserInfo` as contents carry it (`user`): the sender's display info, which a UI
/// prefers to its own cache when it renders the message.
public struct UserInfo: Codable, Sendable, Hashable {
    public var userId: String
    public var name: String
    /// The avatar's URL.
    public var portraitUri: String?
    public var extra: String?

    public init(userId: String, name: String, portraitUri: String? = nil, extra: String? = nil) {
        self.userId = userId
        self.name = name
        self.portraitUri = portraitUri
        self.extra = extra
    }

    enum CodingKeys: String, CodingKey {
        case userId = "id", name, portraitUri = "portrait", extra
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userId = try container.value(.userId, or: "")
        name = try container.value(.name, or: "")
        portraitUri = try container.decodeIfPresent(String.self, forKey: .portraitUri)
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
    }
}

/// `RC:ImgMsg`: an image, a JPG thumbnail inline and the full image by URL. Stored and counted.
public struct ImageMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:ImgMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    /// The thumbnail, Base64 JPG without line breaks (`content`; longest side ≤ 240 px, ≤ 10 KB).
    public var thumbnailBase64: String
    /// The full image's URL.
    public var imageUri: String
    public var extra: String?
    public var user: UserInfo?
    /// The image on this device to send (not sent; see `MediaMessageContent`).
    public var localPath: String?
    /// RongCloud's `full`: send the original image; otherwise the server keeps it reduced to 960 px
    /// on its longer side. Not sent.
    public var full = false

    public init(thumbnailBase64: String, imageUri: String, extra: String? = nil, user: UserInfo? = nil) {
        self.thumbnailBase64 = thumbnailBase64
        self.imageUri = imageUri
        self.extra = extra
        self.user = user
    }

    /// An image to send from a file (`sendMediaMessage` uploads it and fills in the thumbnail and
    /// the URL).
    public init(localPath: String, full: Bool = false, extra: String? = nil, user: UserInfo? = nil) {
        self.init(thumbnailBase64: "", imageUri: "", extra: extra, user: user)
        self.localPath = localPath
        self.full = full
    }

    enum CodingKeys: String, CodingKey {
        case thumbnailBase64 = "content", imageUri, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        thumbnailBase64 = try container.value(.thumbnailBase64, or: "")
        imageUri = try container.value(.imageUri, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[图片]" }
}

/// `RC:GIFMsg`: an animated GIF by URL. Stored and counted.
public struct GIFMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:GIFMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var remoteUrl: String
    public var width: Int
    public var height: Int
    /// The file's size in bytes.
    public var gifDataSize: Int64
    public var extra: String?
    public var user: UserInfo?
    /// The GIF on this device to send (not sent).
    public var localPath: String?

    public init(remoteUrl: String, width: Int, height: Int, gifDataSize: Int64, extra: String? = nil, user: UserInfo? = nil) {
        self.remoteUrl = remoteUrl
        self.width = width
        self.height = height
        self.gifDataSize = gifDataSize
        self.extra = extra
        self.user = user
    }

    /// A GIF to send from a file (the size and dimensions are filled in from the upload).
    public init(localPath: String, extra: String? = nil, user: UserInfo? = nil) {
        self.init(remoteUrl: "", width: 0, height: 0, gifDataSize: 0, extra: extra, user: user)
        self.localPath = localPath
    }

    enum CodingKeys: String, CodingKey {
        case remoteUrl, width, height, gifDataSize, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        remoteUrl = try container.value(.remoteUrl, or: "")
        width = Int(try container.integer(.width))
        height = Int(try container.integer(.height))
        gifDataSize = try container.integer(.gifDataSize)
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[图片]" }
}

/// `RC:FileMsg`: a file by URL. Stored and counted; found by its name.
public struct FileMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:FileMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var name: String
    /// The file's size in bytes.
    public var size: Int64
    /// The file type, e.g. its extension `txt`.
    public var type: String
    public var fileUrl: String
    public var extra: String?
    public var user: UserInfo?
    /// The file on this device to send (not sent).
    public var localPath: String?

    public init(name: String, size: Int64, type: String, fileUrl: String, extra: String? = nil, user: UserInfo? = nil) {
        self.name = name
        self.size = size
        self.type = type
        self.fileUrl = fileUrl
        self.extra = extra
        self.user = user
    }

    /// A file to send: its name and type come from the path, its size from the upload.
    public init(localPath: String, extra: String? = nil, user: UserInfo? = nil) {
        let url = URL(fileURLWithPath: localPath)
        self.init(name: url.lastPathComponent, size: 0, type: url.pathExtension, fileUrl: "", extra: extra, user: user)
        self.localPath = localPath
    }

    enum CodingKeys: String, CodingKey {
        case name, size, type, fileUrl, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.value(.name, or: "")
        size = try container.integer(.size)
        type = try container.value(.type, or: "")
        fileUrl = try container.value(.fileUrl, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[文件] \(name)" }
    public var searchableWords: [String]? { [name] }
}

/// `RC:HQVCMsg`: a voice clip (AAC, at most 60 s) by URL. Stored and counted.
public struct HQVoiceMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:HQVCMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var remoteUrl: String
    /// Seconds.
    public var duration: Int
    public var extra: String?
    public var user: UserInfo?
    /// The clip on this device to send (not sent).
    public var localPath: String?

    public init(remoteUrl: String, duration: Int, extra: String? = nil, user: UserInfo? = nil) {
        self.remoteUrl = remoteUrl
        self.duration = duration
        self.extra = extra
        self.user = user
    }

    /// A clip to send from a file; the server measures its duration (at most 60 s).
    public init(localPath: String, duration: Int = 0, extra: String? = nil, user: UserInfo? = nil) {
        self.init(remoteUrl: "", duration: duration, extra: extra, user: user)
        self.localPath = localPath
    }

    enum CodingKeys: String, CodingKey {
        case remoteUrl, duration, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        remoteUrl = try container.value(.remoteUrl, or: "")
        duration = Int(try container.integer(.duration))
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[语音]" }
}

/// `RC:SightMsg`: a short video (MP4) by URL, with its first frame inline. Stored and counted.
public struct SightMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:SightMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var sightUrl: String
    /// The first frame, Base64 JPG without line breaks (`content`).
    public var thumbnailBase64: String
    /// Seconds.
    public var duration: Int
    /// The file's size in bytes.
    public var size: Int64
    /// The file name on the sender's side.
    public var name: String
    public var extra: String?
    public var user: UserInfo?
    /// The video on this device to send (not sent).
    public var localPath: String?

    public init(sightUrl: String, thumbnailBase64: String, duration: Int, size: Int64, name: String,
                extra: String? = nil, user: UserInfo? = nil) {
        self.sightUrl = sightUrl
        self.thumbnailBase64 = thumbnailBase64
        self.duration = duration
        self.size = size
        self.name = name
        self.extra = extra
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case sightUrl, thumbnailBase64 = "content", duration, size, name, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sightUrl = try container.value(.sightUrl, or: "")
        thumbnailBase64 = try container.value(.thumbnailBase64, or: "")
        duration = Int(try container.integer(.duration))
        size = try container.integer(.size)
        name = try container.value(.name, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    /// A video to send from an MP4 file (H.264 and AAC); the server makes the first frame and
    /// measures the duration (at most 2 minutes).
    public init(localPath: String, extra: String? = nil, user: UserInfo? = nil) {
        self.init(sightUrl: "", thumbnailBase64: "", duration: 0, size: 0, name: URL(fileURLWithPath: localPath).lastPathComponent,
                  extra: extra, user: user)
        self.localPath = localPath
    }

    public var conversationDigest: String { "[小视频]" }
}

/// `RC:LBSMsg`: a location, with a map thumbnail inline. Stored and counted; found by its place name.
public struct LocationMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:LBSMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    /// The map thumbnail, Base64 JPG (`content`).
    public var thumbnailBase64: String
    public var latitude: Double
    public var longitude: Double
    /// The place's name or address.
    public var poi: String
    public var extra: String?
    public var user: UserInfo?

    public init(thumbnailBase64: String, latitude: Double, longitude: Double, poi: String,
                extra: String? = nil, user: UserInfo? = nil) {
        self.thumbnailBase64 = thumbnailBase64
        self.latitude = latitude
        self.longitude = longitude
        self.poi = poi
        self.extra = extra
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case thumbnailBase64 = "content", latitude, longitude, poi, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        thumbnailBase64 = try container.value(.thumbnailBase64, or: "")
        latitude = try container.value(.latitude, or: 0)
        longitude = try container.value(.longitude, or: 0)
        poi = try container.value(.poi, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[位置]" }
    public var searchableWords: [String]? { poi.isEmpty ? nil : [poi] }
}

/// `RC:ReferenceMsg`: a reply quoting an earlier message. Stored and counted; found by its text.
public struct ReferenceMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:ReferenceMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    /// The reply's own text.
    public var content: String
    /// The sender of the quoted message.
    public var referMsgUserId: String
    /// The quoted message's content JSON.
    public var referMsg: JSONValue
    /// The quoted message's object name (`objName`).
    public var referObjectName: String
    /// The quoted message's messageUId.
    public var referMsgUid: String
    public var extra: String?
    /// The users a group reply mentions.
    public var mentionedInfo: MentionedInfo?
    public var user: UserInfo?

    public init(content: String, referMsgUserId: String, referMsg: JSONValue, referObjectName: String, referMsgUid: String,
                extra: String? = nil, mentionedInfo: MentionedInfo? = nil, user: UserInfo? = nil) {
        self.content = content
        self.referMsgUserId = referMsgUserId
        self.referMsg = referMsg
        self.referObjectName = referObjectName
        self.referMsgUid = referMsgUid
        self.extra = extra
        self.mentionedInfo = mentionedInfo
        self.user = user
    }

    /// A reply quoting `quoted`, a message of `senderUserId` with uid `messageUId`.
    public init(content: String, quoting quoted: some MessageContent, senderUserId: String, messageUId: String,
                mentionedInfo: MentionedInfo? = nil) throws {
        self.init(content: content, referMsgUserId: senderUserId, referMsg: try JSONValue(data: quoted.encode()),
                  referObjectName: type(of: quoted).objectName, referMsgUid: messageUId, mentionedInfo: mentionedInfo)
    }

    /// The quoted content's JSON, to decode with the type named by `referObjectName`.
    public var referencedContentData: Data { (try? referMsg.data()) ?? Data("{}".utf8) }

    enum CodingKeys: String, CodingKey {
        case content, referMsgUserId, referMsg, referObjectName = "objName", referMsgUid, extra, mentionedInfo, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        content = try container.value(.content, or: "")
        referMsgUserId = try container.value(.referMsgUserId, or: "")
        referMsg = try container.value(.referMsg, or: .object([:]))
        referObjectName = try container.value(.referObjectName, or: "")
        referMsgUid = try container.value(.referMsgUid, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        mentionedInfo = try container.decodeIfPresent(MentionedInfo.self, forKey: .mentionedInfo)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { content }
    public var searchableWords: [String]? { [content] }
}

/// `RC:CmdNtf`: a command notification. Unlike `RC:CmdMsg` it is stored (not counted), so it shows
/// in the conversation.
public struct CommandNotificationMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:CmdNtf"
    public static let persistentFlag = PersistentFlag.isPersisted

    public var name: String
    public var data: String
    public var user: UserInfo?

    public init(name: String, data: String, user: UserInfo? = nil) {
        self.name = name
        self.data = data
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case name, data, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.value(.name, or: "")
        data = try container.value(.data, or: "")
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }
}

/// `RC:ImgTextMsg`: rich content, a title, a text and an image linking to a page. Stored and
/// counted; found by its title and text.
public struct RichContentMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:ImgTextMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var title: String
    /// The summary text (`content`).
    public var content: String
    public var imageUri: String
    /// The page the message opens.
    public var url: String
    public var extra: String?
    public var user: UserInfo?

    public init(title: String, content: String, imageUri: String, url: String, extra: String? = nil, user: UserInfo? = nil) {
        self.title = title
        self.content = content
        self.imageUri = imageUri
        self.url = url
        self.extra = extra
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case title, content, imageUri, url, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        title = try container.value(.title, or: "")
        content = try container.value(.content, or: "")
        imageUri = try container.value(.imageUri, or: "")
        url = try container.value(.url, or: "")
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[图文] \(title)" }
    public var searchableWords: [String]? { [title, content] }
}

/// `RC:CombineMsg`: several messages forwarded as one; the messages themselves are an HTML file at
/// `remoteUrl`. Stored and counted; found by its title and summary lines.
public struct CombineMessage: MessageContent, Codable, Equatable {
    public static let objectName = "RC:CombineMsg"
    public static let persistentFlag = PersistentFlag.persistedAndCounted

    public var remoteUrl: String
    /// The type of the conversation the messages come from.
    public var conversationType: ConversationType
    /// The senders' names (for a private chat, the two users'; empty for a group).
    public var nameList: [String]
    /// The title, e.g. "Alice and Bob's chat history".
    public var title: String
    /// The first few messages, one line each ("name: digest").
    public var summaryList: [String]
    public var extra: String?
    public var user: UserInfo?
    /// The HTML file on this device to send (not sent).
    public var localPath: String?

    public init(remoteUrl: String, conversationType: ConversationType, nameList: [String], title: String, summaryList: [String],
                extra: String? = nil, user: UserInfo? = nil) {
        self.remoteUrl = remoteUrl
        self.conversationType = conversationType
        self.nameList = nameList
        self.title = title
        self.summaryList = summaryList
        self.extra = extra
        self.user = user
    }

    enum CodingKeys: String, CodingKey {
        case remoteUrl, conversationType, nameList, title, summaryList, extra, user
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        remoteUrl = try container.value(.remoteUrl, or: "")
        conversationType = ConversationType(rawValue: Int(try container.integer(.conversationType))) ?? .private
        nameList = try container.value(.nameList, or: [])
        title = try container.value(.title, or: "")
        summaryList = try container.value(.summaryList, or: [])
        extra = try container.decodeIfPresent(String.self, forKey: .extra)
        user = try container.decodeIfPresent(UserInfo.self, forKey: .user)
    }

    public var conversationDigest: String { "[聊天记录]" }
    public var searchableWords: [String]? { [title] + summaryList }
}

extension KeyedDecodingContainer {
    /// The value at `key`, or `fallback` when the key is absent or null.
    func value<T: Decodable>(_ key: Key, or fallback: T) throws -> T {
        try decodeIfPresent(T.self, forKey: key) ?? fallback
    }

    /// An integer written as a JSON number or a numeric string; 0 when absent.
    func integer(_ key: Key) throws -> Int64 {
        guard contains(key), try !decodeNil(forKey: key) else { return 0 }
        if let value = try? decode(Int64.self, forKey: key) { return value }
        if let value = try? decode(Double.self, forKey: key), let exact = Int64(exactly: value.rounded(.towardZero)) { return exact }
        let text = try decode(String.self, forKey: key)
        guard let value = Int64(text.trimmingCharacters(in: .whitespaces)) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "'\(text)' is not an integer")
        }
        return value
    }
}
