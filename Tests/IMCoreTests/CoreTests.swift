import Foundation
import IMCore
import IMWire
import Testing

@Suite("IMCore")
struct CoreTests {
    @Test("user ids: 1-64 bytes of letters, digits and + = - _ |")
    func userIds() {
        #expect(UserID.isValid("a"))
        #expect(UserID.isValid(String(repeating: "Z", count: 64)))
        #expect(UserID.isValid("a+b=c-d_e|f"))
        #expect(!UserID.isValid(""))
        #expect(!UserID.isValid(String(repeating: "Z", count: 65)))
        #expect(!UserID.isValid("a b"))
        #expect(!UserID.isValid("a/b"))
        #expect(!UserID.isValid("用户"))
    }

    @Test("message uids are RongCloud-shaped and do not repeat")
    func messageUIDs() {
        let generator = MessageUIDGenerator()
        var seen = Set<String>()
        // The guarantee is 65,536 ids per millisecond (the counter's range); past it the random
        // bits alone separate ids, so the test stays within it.
        for _ in 0..<65_536 {
            seen.insert(generator.next(milliseconds: 1_700_000_000_000))
        }
        #expect(seen.count == 65_536)
        let uid = generator.next(milliseconds: 1_700_000_000_000)
        #expect(uid.count == 19)
        #expect(uid.range(of: #"^[A-Z2-7]{4}-[A-Z2-7]{4}-[A-Z2-7]{4}-[A-Z2-7]{4}$"#, options: .regularExpression) != nil)
    }

    @Test("frames round-trip and failed replies carry their code")
    func frames() throws {
        var request = Im_SendMessageRequest()
        request.targetID = "bob"
        let bytes = try FrameCodec.request(id: 7, op: .sendMessage, request)
        let frame = try FrameCodec.decode(bytes)
        #expect(frame.id == 7 && frame.op == .sendMessage)
        #expect(try frame.body(Im_SendMessageRequest.self).targetID == "bob")
        let failure = try FrameCodec.decode(FrameCodec.errorReply(to: frame, IMError(.sendRateTooHigh, "slow down")))
        #expect(failure.error == IMError(.sendRateTooHigh, "slow down"))
        #expect(failure.id == 7)
    }

    @Test("token claims are readable without the secret")
    func tokenClaims() throws {
        let claims = ConnectTokenClaims(appKey: "k", userId: "u", issuedAt: 5, nonce: "n")
        let token = Base64URL.encode(try JSONEncoder().encode(claims)) + "." + Base64URL.encode(Data([1, 2, 3]))
        #expect(ConnectTokenClaims.unverified(token) == claims)
        #expect(ConnectTokenClaims.unverified("garbage") == nil)
        #expect(ConnectTokenClaims.unverified("a.b.c") == nil)
    }
}
