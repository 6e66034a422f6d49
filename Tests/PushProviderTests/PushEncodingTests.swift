import Foundation
import IMPush
@testable import IMPushProviders
import Testing

/// The hand-written encodings on the send path against what Foundation makes of the same values.
@Suite("Push encodings")
struct PushEncodingTests {
    static let awkward = "quote \" backslash \\ slash / newline \n tab \t cr \r bell \u{07} nul \u{00} emoji 🙂 中文 العربية"

    static let samples: [PushNotification] = [
        PushNotification(id: "uid:bob:phone:apns", body: "hello"),
        PushNotification(id: "x", title: "Team", body: awkward, badge: 12, sound: "ding.caf", threadId: "t/1", collapseId: "c-1",
                         interruptionLevel: "time-sensitive", rc: ["cType": "GRP", "fId": "ann", "oName": "RC:TxtMsg", "tId": "g1",
                                                                    "rc-dlt-identifier": "UID-9", "bId": awkward],
                         appData: #"{"k":"v \"q\""}"#, fcmCollapseKey: "k", fcmChannelId: "ch", fcmImageURL: "https://e.example/i.png",
                         timeToLiveSeconds: -5),
        PushNotification(id: "", title: "", body: "", badge: 0, sound: nil, rc: [:], timeToLiveSeconds: Int.max),
        PushNotification(id: "neg", body: "b", badge: Int.min, timeToLiveSeconds: Int.min),
    ]

    @Test("the APNs payload written by hand is the document Foundation's encoder writes")
    func apnsPayload() throws {
        for notification in Self.samples {
            let payload = APNsPayload(notification)
            let byHand = try JSONSerialization.jsonObject(with: try payload.encoded()) as? NSDictionary
            let foundation = try JSONSerialization.jsonObject(with: try payload.encodedByFoundation()) as? NSDictionary
            #expect(byHand != nil && byHand == foundation, "\(notification.id)")
        }
    }

    @Test("a stored notification reads back whole; JSON is read too; malformed records are refused, not trapped on")
    func storedForm() throws {
        for notification in Self.samples {
            #expect(PushNotification(stored: notification.stored) == notification)
            #expect(PushNotification(stored: try JSONEncoder().encode(notification)) == notification)
        }
        let stored = Self.samples[1].stored
        for cut in [0, 1, 2, stored.count / 2, stored.count - 1] {
            #expect(PushNotification(stored: stored.prefix(cut)) == nil, "cut at \(cut)")
        }
        #expect(PushNotification(stored: stored + Data([0])) == nil, "trailing bytes")
        #expect(PushNotification(stored: Data([9, 1, 2])) == nil, "an unknown version")
        var huge = Data([1])
        huge.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(PushNotification(stored: huge) == nil, "a length past the end")
        #expect(PushNotification(stored: Data([2]) + huge.dropFirst()) == nil, "a shared part longer than the record")
    }

    @Test("recipients of one message share the stored form's leading part; only the id, badge and rc.rId follow it; the single form still reads")
    func sharedPart() throws {
        func member(_ user: String, badge: Int) -> PushNotification {
            PushNotification(id: "M1:\(user):phone:apns", title: "Team", body: Self.awkward, badge: badge,
                             rc: ["cType": "GRP", "fId": "ann", "tId": "g1", "rId": user])
        }
        let bob = member("bob", badge: 3).stored, carol = member("carolina", badge: 250).stored
        let length = try #require(PushNotification.sharedPrefixLength(of: bob))
        #expect(PushNotification.sharedPrefixLength(of: carol) == length)
        #expect(bob.prefix(length) == carol.prefix(length), "the same leading part")
        #expect(bob.count - length < 40, "what follows it is the recipient's own: \(bob.count - length) bytes")
        #expect(PushNotification(stored: bob) == member("bob", badge: 3))
        // The shared part is the single form (version 1) of the notification without id, badge and rId.
        var shared = member("bob", badge: 3)
        shared.id = ""
        shared.badge = nil
        shared.rc["rId"] = nil
        // After the version byte, the part's length as a varint: its last byte is below 0x80.
        var start = 1
        while bob[bob.startIndex + start] >= 0x80 { start += 1 }
        let single = Data(bob[(bob.startIndex + start + 1)..<(bob.startIndex + length)])
        #expect(PushNotification(stored: single) == shared)
        #expect(PushNotification.sharedPrefixLength(of: single) == nil, "the single form has no shared part")
        #expect(PushNotification.sharedPrefixLength(of: Data([2])) == nil)
        #expect(PushNotification.sharedPrefixLength(of: Data([2, 0x7F])) == nil, "a length past the end")

        // A batch's reader decodes the shared part once and gives every record its own fields.
        var reader = StoredNotificationReader()
        let noRecipient = PushNotification(id: "M1:x:d:apns", title: "Team", body: Self.awkward, rc: ["cType": "GRP", "fId": "ann", "tId": "g1"])
        let batch = [member("bob", badge: 3), member("carolina", badge: 250), noRecipient, member("dan", badge: 1)] + Self.samples
        #expect(batch.map { reader.read($0.stored) } == batch.map { Optional($0) })
        #expect(reader.read(single) == shared, "the single form")
        #expect(reader.read(bob + Data([0])) == nil, "trailing bytes after a known shared part")
        #expect(reader.read(bob.prefix(length + 1)) == nil, "a record cut in its own fields")

        // The shared part's number: one per part, the same for every record that has it.
        var numbering = StoredNotificationReader()
        let parts = [member("bob", badge: 3), noRecipient, member("carolina", badge: 250), Self.samples[1]]
            .map { numbering.readApart($0.stored)?.part }
        #expect(parts[0] != nil && parts[0] == parts[2], "recipients of one message: one part")
        #expect(parts[1] != nil && parts[1] == parts[0], "rId is not part of the shared part")
        #expect(parts[3] != nil && parts[3] != parts[0], "another message: another part")
        #expect(numbering.readApart(single)?.part == nil, "the single form has none")

        // Read apart, a shared part's record gives its rId beside a notification without it, and
        // the push made of them sends the record's notification whole.
        var apart = StoredNotificationReader()
        for original in batch {
            let readOrNil = apart.readApart(original.stored)
            let read = try #require(readOrNil)
            let push = PushSend(read.notification, to: .fcm(token: "t"), credentials: PushCredentials(), sharedPart: read.part,
                                recipient: read.recipient)
            #expect(push.whole == original)
            if PushNotification.sharedPrefixLength(of: original.stored) != nil {
                #expect(read.notification.rc["rId"] == nil && read.recipient == original.rc["rId"])
            } else {
                #expect(read.recipient == nil && read.notification == original, "without a shared part: whole")
            }
        }
        var withRecipient = 0
        for original in batch where apart.readApart(original.stored)?.recipient != nil { withRecipient += 1 }
        #expect(withRecipient == 3, "bob's, carolina's and dan's records have their rId apart")
        let singleRead = apart.readApart(single)
        #expect(singleRead != nil && singleRead?.recipient == nil)
    }

    @Test("the APNs payload written once per message and given each recipient's badge and rId is that recipient's payload, byte for byte")
    func apnsTemplate() throws {
        // The bytes themselves (key order, rId once in its sorted place), which parsed comparisons cannot see.
        let fixed = APNsPayloadTemplate(APNsPayload(PushNotification(id: "x", title: "T", body: "b", badge: 1, sound: "s",
                                                                     rc: ["tId": "g1", "cType": "GRP", "rId": "old"], appData: "{}")))
        #expect(String(decoding: fixed.payload(badge: 5, recipient: "bob"), as: UTF8.self)
            == #"{"aps":{"alert":{"title":"T","body":"b"},"badge":5,"sound":"s"},"rc":{"cType":"GRP","rId":"bob","tId":"g1"},"appData":"{}"}"#)
        #expect(String(decoding: fixed.payload(badge: nil, recipient: nil), as: UTF8.self)
            == #"{"aps":{"alert":{"title":"T","body":"b"},"sound":"s"},"rc":{"cType":"GRP","tId":"g1"},"appData":"{}"}"#)
        let bare = APNsPayloadTemplate(APNsPayload(PushNotification(id: "y", body: "b", sound: nil)))
        #expect(String(decoding: bare.payload(badge: 0, recipient: "ann"), as: UTF8.self) == #"{"aps":{"alert":"b","badge":0},"rc":{"rId":"ann"}}"#)
        let after = APNsPayloadTemplate(APNsPayload(PushNotification(id: "z", body: "b", sound: nil, rc: ["tId": "g1"])))
        #expect(String(decoding: after.payload(badge: nil, recipient: "ann"), as: UTF8.self) == #"{"aps":{"alert":"b"},"rc":{"rId":"ann","tId":"g1"}}"#)
        // rc keys sorting before rId, after it, both, and none.
        let shapes: [[String: String]] = [[:], ["cType": "GRP", "fId": "ann"], ["tId": "g1", "zz": Self.awkward],
                                          ["cType": "GRP", "tId": "g1", "rc-dlt-identifier": "UID-9"], ["rId": "stale"]]
        for rc in shapes {
            for title in [nil, "Team \"A\""] {
                let first = PushNotification(id: "M1:bob:p:apns", title: title, body: Self.awkward, badge: 3, sound: "ding",
                                             interruptionLevel: "active", rc: rc.merging(["rId": "bob"]) { $1 }, appData: "{}")
                let template = APNsPayloadTemplate(APNsPayload(first))
                for (recipient, badge) in [("carol", 250), ("\"q\" \n", 0), ("dan", -7)] as [(String?, Int?)] + [(nil, nil), ("eve", nil), (nil, 9)] {
                    var own = first
                    own.id = "M1:\(recipient ?? "-"):p:apns"
                    own.badge = badge
                    own.rc = rc.filter { $0.key != "rId" }
                    if let recipient { own.rc["rId"] = recipient }
                    let written = template.payload(badge: badge, recipient: recipient)
                    #expect(written == APNsPayload(own).encodedBytes(), "rc \(rc.keys.sorted()), \(recipient ?? "no rId")")
                    let parsed = try JSONSerialization.jsonObject(with: Data(written)) as? NSDictionary
                    let foundation = try JSONSerialization.jsonObject(with: try APNsPayload(own).encodedByFoundation()) as? NSDictionary
                    #expect(parsed != nil && parsed == foundation, "rc \(rc.keys.sorted()), \(recipient ?? "no rId")")
                }
            }
        }
    }
}
