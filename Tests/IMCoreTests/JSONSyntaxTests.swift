import Foundation
import IMCore
import IMServerTesting
import Testing

/// `JSONSyntax` replaces `JSONSerialization` in the content check: it must give the same answer on
/// every input, valid or not, except trailing commas, which it refuses on purpose (RFC 8259 and
/// `JSON.parse` refuse them). The cases below are the grammar's corners; the generated ones compare
/// the two on thousands of mutations of real contents.
@Suite("JSON syntax check")
struct JSONSyntaxTests {
    static func foundationSaysObject(_ data: Data) -> Bool {
        (try? JSONSerialization.jsonObject(with: data)) is [String: Any] && !hasTrailingComma(Array(data))
    }

    /// Whether a comma outside strings is followed (after whitespace) by a closing bracket.
    static func hasTrailingComma(_ bytes: [UInt8]) -> Bool {
        var inString = false
        var escaped = false
        var comma = false
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true; comma = false
            case UInt8(ascii: ","): comma = true
            case UInt8(ascii: "]"), UInt8(ascii: "}"): if comma { return true }
            case 0x20, 0x09, 0x0A, 0x0D: break
            default: comma = false
            }
        }
        return false
    }

    static let valid: [String] = [
        "{}", " {\n\t} ", #"{"content":"hello"}"#, #"{"a":[1,2.5,-3e10,0,-0.0,1E+2,1e-2],"b":{"c":null,"d":true,"e":false}}"#,
        #"{"s":"\u00e9\u4e2d\ud83d\ude00 \" \\ \/ \b \f \n \r \t"}"#, #"{"中文":"表情😀","k":"\u0000"}"#,
        #"{"a":{"b":{"c":[[[]]]}}}"#, #"{"dup":1,"dup":2}"#, #"{"n":123456789012345678}"#, #"{"x":[{}, [], "", 0]}"#,
        #"{"small":1e-400,"big":1.7e308,"x":123e-5,"zero":0e999999}"#,
    ]

    static let invalid: [String] = [
        "", " ", "[]", "\"text\"", "1", "null", "{", "}", "{,}", #"{"a":1,}"#, #"{"a"}"#, #"{"a":}"#, #"{a:1}"#,
        #"{'a':1}"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":-}"#, #"{"a":1e}"#, #"{"a":+1}"#, #"{"a":NaN}"#,
        #"{"a":tru}"#, #"{"a":nul}"#, #"{"a":"\x"}"#, #"{"a":"\u12"}"#, #"{"a":"\ud800"}"#, #"{"a":"\ud800\u0041"}"#,
        #"{"a":"\udc00"}"#, "{\"a\":\"tab\there\"}", "{\"a\":\"line\nbreak\"}", #"{"a":1} x"#, #"{"a":1}{}"#,
        #"{"a":[1 2]}"#, #"{"a":[1,]}"#, "{\"a\":1 /* c */}", #"{"a":"unterminated}"#, #"{"a":1e400}"#, #"{"a":-1e309}"#,
        "{\"a\":1" + String(repeating: "0", count: 400) + "}",
    ]

    @Test("the grammar's corners: valid objects pass, everything else is refused, as JSONSerialization decides; trailing commas are refused")
    func corners() {
        #expect((try? JSONSerialization.jsonObject(with: Data(#"{"a":[1,],}"#.utf8))) != nil, "JSONSerialization lets trailing commas through")
        for text in Self.valid {
            #expect(JSONSyntax.isObject(Data(text.utf8)), "\(text)")
            #expect(Self.foundationSaysObject(Data(text.utf8)), "the reference disagrees on \(text)")
        }
        for text in Self.invalid {
            #expect(!JSONSyntax.isObject(Data(text.utf8)), "\(text)")
            #expect(!Self.foundationSaysObject(Data(text.utf8)), "the reference disagrees on \(text)")
        }
        #expect(JSONSyntax.isValue(Data("[1,\"a\"]".utf8)) && JSONSyntax.isValue(Data(" 0 ".utf8)) && !JSONSyntax.isValue(Data("[1,".utf8)))
    }

    @Test("bad UTF-8 in a string is refused: a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short")
    func badUTF8() {
        let sequences: [[UInt8]] = [[0x80], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                                    [0xF5, 0x80, 0x80, 0x80], [0xE4, 0xB8], [0xFF]]
        for bytes in sequences {
            let data = Data(#"{"a":""#.utf8) + bytes + Data(#""}"#.utf8)
            #expect(!JSONSyntax.isObject(data), "\(bytes)")
            #expect(!Self.foundationSaysObject(data), "the reference disagrees on \(bytes)")
        }
        let fine: [[UInt8]] = [[0xC2, 0xA9], [0xE4, 0xB8, 0xAD], [0xF0, 0x9F, 0x98, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xEE, 0x80, 0x80]]
        for bytes in fine {
            let data = Data(#"{"a":""#.utf8) + bytes + Data(#""}"#.utf8)
            #expect(JSONSyntax.isObject(data), "\(bytes)")
        }
    }

    @Test("nesting: 512 levels pass, 513 are refused, and a million opening brackets neither crash nor pass")
    func nesting() {
        func nested(_ depth: Int) -> Data {
            Data(("{\"a\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}").utf8)
        }
        #expect(JSONSyntax.isObject(nested(512)))
        #expect(!JSONSyntax.isObject(nested(513)))
        #expect(JSONSyntax.isObject(nested(512)) == Self.foundationSaysObject(nested(512)))
        #expect(!JSONSyntax.isObject(Data(("{\"a\":" + String(repeating: "[", count: 1_000_000)).utf8)))
    }

    @Test("ten thousand mutations of real contents: the check and JSONSerialization agree on each")
    func agreesWithFoundation() {
        let seeds = Self.valid + [
            #"{"content":"hi","extra":"x","user":{"id":"u1","name":"Ann","portrait":"http://x/p.png"},"mentionedInfo":{"type":2,"userIdList":["b"]}}"#,
            #"{"imageUri":"https://h/i.jpg","content":"/9j/4AAQ","latitude":39.9,"longitude":116.3,"poi":"北京"}"#,
        ]
        let alphabet = Array("{}[]\":,\\/ u0123456789abcdefABCDEF.eE+-tnlrsx\u{00e9}中\n\t".utf8) + [0x00, 0x80, 0xC3, 0xE4, 0xFF]
        var generator = SplitMix64(seed: 0x1A2B_3C4D)
        var disagreements: [String] = []
        var validSeen = 0
        for round in 0..<10_000 {
            var bytes = Array(seeds[round % seeds.count].utf8)
            for _ in 0..<(1 + Int(generator.next() % 3)) {
                let position = Int(generator.next() % UInt64(bytes.count + 1))
                switch generator.next() % 3 {
                case 0: bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: position)
                case 1: if position < bytes.count { bytes.remove(at: position) }
                default: if position < bytes.count { bytes[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))] }
                }
            }
            let data = Data(bytes)
            let ours = JSONSyntax.isObject(data)
            if ours { validSeen += 1 }
            if ours != Self.foundationSaysObject(data), disagreements.count < 10 {
                disagreements.append("\(ours ? "accepted" : "refused"): \(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes)")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
        // The mutations must exercise both answers, or the comparison proves little.
        #expect(validSeen > 1_000 && validSeen < 9_000, "\(validSeen) of 10,000 mutations were valid")
    }
}
