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
    }
}
