import Foundation
import IMCore
import IMServer
import IMStore
import Testing

/// What the cluster bus carries: a message comes out on the other node as it went in, whatever
/// its fields, in a compact encoding.
@Suite("Cluster bus encoding")
struct ClusterCodingTests {
    static func roundTrip(_ message: ClusterMessage) throws -> (ClusterMessage, Int) {
        let data = try JSONEncoder().encode(message)
        return (try JSONDecoder().decode(ClusterMessage.self, from: data), data.count)
    }

    @Test("a committed message with every field set, with none, and with binary content arrives unchanged")
    func everyField() throws {
        var full = StoredMessage(seq: 123_456_789, appId: 42, conversationType: .group, conversationKey: "g:team", targetId: "team",
                                 senderId: "alice", objectName: "RC:TxtMsg", content: Data(#"{"content":"héllo \"quoted\" 👋"}"#.utf8),
                                 uid: "C1B2-D3E4", sentTime: 1_790_000_000_123, flags: .persistedAndCounted, clientMessageId: "m-1",
                                 pushContent: "alice: héllo", pushData: #"{"k":1}"#, disableNotification: true, canIncludeExpansion: true,
                                 expansion: ["a": "1", "b": "two"], channelId: "ch-1", includeSender: false,
                                 directedUserIds: ["bob", "carol"], receiptRequested: true)
        full.mentions = MentionedInfo(type: .users, userIdList: ["bob"], mentionedContent: "look")
        let bare = StoredMessage(appId: 1, conversationType: .private, conversationKey: "a\u{1}b", targetId: "b", senderId: "a",
                                 objectName: "RC:CmdMsg", content: Data(), flags: [])
        let binary = StoredMessage(appId: 1, conversationType: .system, conversationKey: "s", targetId: "b", senderId: "a",
                                   objectName: "X:Bin", content: Data([0xff, 0xfe, 0x00, 0x80]), flags: .isPersisted)
        for message in [full, bare, binary] {
            let sent = ClusterMessage.deliver(message, origin: .session(id: "s1", appId: message.appId, userId: message.senderId))
            #expect(try Self.roundTrip(sent).0 == sent)
        }
        // A type the receiving node does not know is an error, not a message of another type.
        let unknown = #"{"a":1,"ct":99,"ck":"k","t":"t","f":"f","o":"o","c":"","fl":0}"#
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(StoredMessage.self, from: Data(unknown.utf8)) }
    }

    @Test("a 100-byte text message with a client message id takes under 450 bytes on the bus (the synthesized encoding took about 690)")
    func compact() throws {
        let content = Data(#"{"content":"\#(String(repeating: "x", count: 86))"}"#.utf8)
        #expect(content.count == 100)
        let message = StoredMessage(seq: 1_000_000, appId: 1, conversationType: .private, conversationKey: "user-000123\u{1}user-004567",
                                    targetId: "user-004567", senderId: "user-000123", objectName: "RC:TxtMsg", content: content,
                                    uid: "CJ6G-R4S7-K2L0-ABCD", sentTime: 1_790_000_000_123, flags: .persistedAndCounted,
                                    clientMessageId: "8c3f1a2b-0d4e-4f5a-9b6c-7d8e9f0a1b2c")
        let (decoded, size) = try Self.roundTrip(.deliver(message, origin: .session(id: "5f7c-1a2b-3c4d", appId: 1, userId: "user-000123")))
        #expect(decoded == .deliver(message, origin: .session(id: "5f7c-1a2b-3c4d", appId: 1, userId: "user-000123")))
        #expect(size < 450, "\(size) bytes")
    }
}
