import Foundation
import IMCore
import IMServerTesting
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

    /// The decoder before the one-pass one: Foundation's, then the result encoded again and
    /// compared, so only the canonical text of a value decodes.
    static func referenceBase64URL(_ text: String) -> Data? {
        var bytes = Array(text.utf8)
        guard bytes.count % 4 != 1 else { return nil }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): continue
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            default: return nil
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        guard let data = Data(base64Encoded: Data(bytes)), Base64URL.encode(data) == text else { return nil }
        return data
    }

    @Test("base64url decodes every value's canonical text and nothing else, as Foundation's decoder with a re-encoding check did")
    func base64URL() {
        var random = SplitMix64(seed: 5)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var accepted = 0
        for round in 0..<20_000 {
            let text: String
            if round % 2 == 0 {
                // A value's own text, sometimes changed by one character or cut.
                let data = Data((0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                var bytes = Array(Base64URL.encode(data).utf8)
                #expect(Base64URL.decode(String(decoding: bytes, as: UTF8.self)) == data)
                switch random.next() % 4 {
                case 0 where !bytes.isEmpty: bytes[Int(random.next() % UInt64(bytes.count))] = alphabet[Int(random.next() % 64)]
                case 1 where !bytes.isEmpty: bytes.removeLast()
                case 2: bytes.append(UInt8(ascii: "="))
                default: break
                }
                text = String(decoding: bytes, as: UTF8.self)
            } else {
                let pool = alphabet + Array("+/=. é".utf8)
                text = String(decoding: (0..<Int(random.next() % 12)).map { _ in pool[Int(random.next() % UInt64(pool.count))] }, as: UTF8.self)
            }
            let expected = Self.referenceBase64URL(text)
            #expect(Base64URL.decode(text) == expected, "\(text)")
            if expected != nil { accepted += 1 }
        }
        #expect(accepted > 5_000, "both accepted and refused texts were tried")
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
