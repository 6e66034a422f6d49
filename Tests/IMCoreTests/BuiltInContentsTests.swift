import Foundation
import IMCore
import Testing

/// The built-in contents read and write RongCloud's JSON, field for field.
@Suite("Built-in message contents")
struct BuiltInContentsTests {
    /// The JSON object a content encodes to.
    static func object(_ content: some MessageContent) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: content.encode()) as? [String: Any])
    }

    static func decode<T: MessageContent>(_ type: T.Type, _ json: String) throws -> T {
        try T(data: Data(json.utf8))
    }

    static let user = #""user":{"id":"4242","name":"Robin","portrait":"http://example.com/p1.png","extra":"extra"}"#

    @Test("object names, persistent flags and digests are RongCloud's")
    func namesFlagsDigests() throws {
        let names = BuiltInContentTypes.all.map { $0.objectName }
        #expect(Set(names).count == names.count, "no object name twice")
        #expect(Set(names) == ["RC:TxtMsg", "RC:ImgMsg", "RC:GIFMsg", "RC:FileMsg", "RC:HQVCMsg", "RC:SightMsg", "RC:LBSMsg",
                               "RC:ReferenceMsg", "RC:CmdMsg", "RC:CmdNtf", "RC:ImgTextMsg", "RC:CombineMsg", "RC:chrmKVNotiMsg"])
        for type in BuiltInContentTypes.all {
            switch type.objectName {
            case "RC:CmdMsg", "RC:chrmKVNotiMsg": #expect(type.persistentFlag == .none)
            case "RC:CmdNtf": #expect(type.persistentFlag == .isPersisted)
            default: #expect(type.persistentFlag == .persistedAndCounted, "\(type.objectName) is stored and counted")
            }
        }
        #expect(ImageMessage(thumbnailBase64: "", imageUri: "u").conversationDigest == "[图片]")
        #expect(GIFMessage(remoteUrl: "u", width: 1, height: 1, gifDataSize: 1).conversationDigest == "[图片]")
        #expect(FileMessage(name: "123.txt", size: 1, type: "txt", fileUrl: "u").conversationDigest == "[文件] 123.txt")
        #expect(HQVoiceMessage(remoteUrl: "u", duration: 3).conversationDigest == "[语音]")
        #expect(SightMessage(sightUrl: "u", thumbnailBase64: "", duration: 2, size: 3, name: "v.mp4").conversationDigest == "[小视频]")
        #expect(LocationMessage(thumbnailBase64: "", latitude: 1, longitude: 2, poi: "p").conversationDigest == "[位置]")
        #expect(RichContentMessage(title: "T", content: "c", imageUri: "", url: "").conversationDigest == "[图文] T")
        #expect(CombineMessage(remoteUrl: "", conversationType: .group, nameList: [], title: "t", summaryList: []).conversationDigest == "[聊天记录]")
        #expect(TextMessage(content: "hi").conversationDigest == "hi")
    }

    @Test("searchable words: texts, file names, places, titles; media and commands are not searchable")
    func searchableWords() {
        #expect(TextMessage(content: "今天天气很好").searchableWords == ["今天天气很好"])
        #expect(FileMessage(name: "report.pdf", size: 1, type: "pdf", fileUrl: "u").searchableWords == ["report.pdf"])
        #expect(LocationMessage(thumbnailBase64: "", latitude: 1, longitude: 2, poi: "天安门").searchableWords == ["天安门"])
        #expect(RichContentMessage(title: "T", content: "c", imageUri: "", url: "").searchableWords == ["T", "c"])
        #expect(CombineMessage(remoteUrl: "", conversationType: .private, nameList: ["a", "b"], title: "t",
                               summaryList: ["a: x"]).searchableWords == ["t", "a: x"])
        #expect(ImageMessage(thumbnailBase64: "", imageUri: "u").searchableWords == nil)
        #expect(HQVoiceMessage(remoteUrl: "u", duration: 3).searchableWords == nil)
        #expect(CommandMessage(name: "n", data: "d").searchableWords == nil)
        #expect(CommandNotificationMessage(name: "n", data: "d").searchableWords == nil)
    }

    @Test("RC:TxtMsg with user info")
    func text() throws {
        let text = try Self.decode(TextMessage.self, #"{"content":"hi",\#(Self.user),"extra":"e"}"#)
        #expect(text.content == "hi" && text.extra == "e")
        #expect(text.user == UserInfo(userId: "4242", name: "Robin", portraitUri: "http://example.com/p1.png", extra: "extra"))
        let user = try #require(try Self.object(text)["user"] as? [String: Any])
        #expect(user["id"] as? String == "4242" && user["portrait"] as? String == "http://example.com/p1.png")
    }

    @Test("RC:ImgMsg: content is the thumbnail, imageUri the full image")
    func image() throws {
        let image = try Self.decode(ImageMessage.self, #"{"content":"bhZPzJXimRwrtvc=","imageUri":"http://p1.cdn.com/fds78ruhi.jpg",\#(Self.user),"extra":""}"#)
        #expect(image.thumbnailBase64 == "bhZPzJXimRwrtvc=" && image.imageUri == "http://p1.cdn.com/fds78ruhi.jpg")
        #expect(image.user?.name == "Robin")
        let json = try Self.object(image)
        #expect(json["content"] as? String == "bhZPzJXimRwrtvc=")
        #expect(json["imageUri"] as? String == "http://p1.cdn.com/fds78ruhi.jpg")
        #expect(try ImageMessage(data: image.encode()) == image)
    }

    @Test("RC:GIFMsg")
    func gif() throws {
        let gif = try Self.decode(GIFMessage.self, #"{"gifDataSize":34563,"height":246,"localPath":"/var/mobile/GIF_53","remoteUrl":"https://x/i.gif","width":263,\#(Self.user),"extra":""}"#)
        #expect(gif.gifDataSize == 34563 && gif.width == 263 && gif.height == 246 && gif.remoteUrl == "https://x/i.gif")
        let json = try Self.object(gif)
        #expect(json["gifDataSize"] as? Int == 34563 && json["width"] as? Int == 263 && json["remoteUrl"] as? String == "https://x/i.gif")
        #expect(json["localPath"] == nil, "a local path means nothing on another device")
        #expect(try GIFMessage(data: gif.encode()) == gif)
    }

    @Test("RC:FileMsg: size as a number or, as the Server API documents it, a string")
    func file() throws {
        let file = try Self.decode(FileMessage.self, #"{"name":"file.txt","size":190184,"type":"txt","fileUrl":"http://www.demo.com/am.ind",\#(Self.user),"extra":""}"#)
        #expect(file.name == "file.txt" && file.size == 190184 && file.type == "txt" && file.fileUrl == "http://www.demo.com/am.ind")
        #expect(try Self.decode(FileMessage.self, #"{"name":"a","size":"2048","type":"","fileUrl":"u"}"#).size == 2048)
        #expect(throws: (any Error).self) { try Self.decode(FileMessage.self, #"{"name":"a","size":"big","type":"","fileUrl":"u"}"#) }
        let json = try Self.object(file)
        #expect(json["size"] as? Int == 190184 && json["fileUrl"] as? String == "http://www.demo.com/am.ind")
        #expect(try FileMessage(data: file.encode()) == file)
    }

    @Test("RC:HQVCMsg")
    func voice() throws {
        let voice = try Self.decode(HQVoiceMessage.self, #"{"localPath":"/x","remoteUrl":"http://p1.cdn.com/fds78ruhi.aac","duration":7,\#(Self.user),"extra":""}"#)
        #expect(voice.remoteUrl == "http://p1.cdn.com/fds78ruhi.aac" && voice.duration == 7)
        let json = try Self.object(voice)
        #expect(json["remoteUrl"] as? String == voice.remoteUrl && json["duration"] as? Int == 7)
        #expect(try HQVoiceMessage(data: voice.encode()) == voice)
    }

    @Test("RC:SightMsg")
    func sight() throws {
        let sight = try Self.decode(SightMessage.self, #"{"sightUrl":"http://v/video.mp4","content":"/9j/4AAQ","duration":2,"size":734320,"name":"video_xx.mp4",\#(Self.user),"extra":"extra"}"#)
        #expect(sight.sightUrl == "http://v/video.mp4" && sight.thumbnailBase64 == "/9j/4AAQ" && sight.duration == 2)
        #expect(sight.size == 734320 && sight.name == "video_xx.mp4" && sight.extra == "extra")
        let json = try Self.object(sight)
        #expect(json["sightUrl"] as? String == sight.sightUrl && json["content"] as? String == "/9j/4AAQ" && json["size"] as? Int == 734320)
        #expect(try SightMessage(data: sight.encode()) == sight)
    }

    @Test("RC:LBSMsg")
    func location() throws {
        let location = try Self.decode(LocationMessage.self, #"{"content":"/9j/","latitude":39.9087,"longitude":116.3975,"poi":"天安门","extra":""}"#)
        #expect(location.latitude == 39.9087 && location.longitude == 116.3975 && location.poi == "天安门" && location.thumbnailBase64 == "/9j/")
        let json = try Self.object(location)
        #expect(json["latitude"] as? Double == 39.9087 && json["poi"] as? String == "天安门" && json["content"] as? String == "/9j/")
        #expect(try LocationMessage(data: location.encode()) == location)
    }

    @Test("RC:ReferenceMsg carries the quoted content whole, with its object name and uid")
    func reference() throws {
        let quoted = TextMessage(content: "原文")
        let reply = try ReferenceMessage(content: "回复", quoting: quoted, senderUserId: "alice", messageUId: "ABCD-EFGH-IJKL-MNOP")
        let json = try Self.object(reply)
        #expect(json["content"] as? String == "回复")
        #expect(json["objName"] as? String == "RC:TxtMsg")
        #expect(json["referMsgUserId"] as? String == "alice")
        #expect(json["referMsgUid"] as? String == "ABCD-EFGH-IJKL-MNOP")
        #expect((json["referMsg"] as? [String: Any])?["content"] as? String == "原文")
        let decoded = try ReferenceMessage(data: reply.encode())
        #expect(decoded == reply)
        #expect(try TextMessage(data: decoded.referencedContentData) == quoted)
        let fromRongCloud = try Self.decode(ReferenceMessage.self,
            #"{"content":"ok","referMsgUserId":"u1","referMsg":{"name":"a.pdf","size":12,"type":"pdf","fileUrl":"f"},"objName":"RC:FileMsg","referMsgUid":"X","mentionedInfo":{"type":2,"userIdList":["u1"]}}"#)
        #expect(fromRongCloud.referObjectName == "RC:FileMsg")
        #expect(try FileMessage(data: fromRongCloud.referencedContentData).name == "a.pdf")
        #expect(fromRongCloud.mentionedInfo?.mentions("u1") == true)
        #expect(MentionedInfo.of(content: try fromRongCloud.encode())?.userIdList == ["u1"])
    }

    @Test("RC:CmdNtf, RC:ImgTextMsg and RC:CombineMsg")
    func others() throws {
        let notification = try Self.decode(CommandNotificationMessage.self, #"{"name":"refresh","data":"{\"a\":1}"}"#)
        #expect(notification.name == "refresh" && notification.data == #"{"a":1}"#)
        #expect(try CommandNotificationMessage(data: notification.encode()) == notification)

        let rich = try Self.decode(RichContentMessage.self, #"{"title":"标题","content":"摘要","imageUri":"http://i","url":"http://u","extra":"x"}"#)
        #expect(rich.title == "标题" && rich.content == "摘要" && rich.imageUri == "http://i" && rich.url == "http://u" && rich.extra == "x")
        let richJSON = try Self.object(rich)
        #expect(richJSON["title"] as? String == "标题" && richJSON["url"] as? String == "http://u")
        #expect(try RichContentMessage(data: rich.encode()) == rich)

        let combine = try Self.decode(CombineMessage.self,
            #"{"remoteUrl":"http://c/x.html","conversationType":1,"nameList":["Alice","Bob"],"title":"Alice and Bob","summaryList":["Alice: hi","Bob: yo"]}"#)
        #expect(combine.conversationType == .private && combine.nameList == ["Alice", "Bob"] && combine.summaryList.count == 2)
        let combineJSON = try Self.object(combine)
        #expect(combineJSON["conversationType"] as? Int == 1 && combineJSON["remoteUrl"] as? String == "http://c/x.html")
        #expect(try CombineMessage(data: combine.encode()) == combine)
    }

    @Test("missing optional fields decode to empty values; a body that is not an object fails")
    func lenientAndStrict() throws {
        let bare = try Self.decode(ImageMessage.self, #"{"imageUri":"u"}"#)
        #expect(bare.thumbnailBase64 == "" && bare.extra == nil && bare.user == nil)
        #expect(try Self.object(bare)["extra"] == nil, "absent optionals stay absent")
        #expect(throws: (any Error).self) { try Self.decode(ImageMessage.self, "[1,2]") }
        #expect(throws: (any Error).self) { try Self.decode(TextMessage.self, #"{"extra":"no content"}"#) }
    }

    @Test("JSON values keep every kind of value")
    func jsonValues() throws {
        let text = #"{"a":[1,2.5,"s",true,null,{"b":false}]}"#
        let value = try JSONValue(data: Data(text.utf8))
        #expect(value == .object(["a": .array([.number(1), .number(2.5), .string("s"), .bool(true), .null, .object(["b": .bool(false)])])]))
        #expect(try JSONValue(data: value.data()) == value)
    }
}
