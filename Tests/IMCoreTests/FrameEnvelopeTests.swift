import Foundation
import IMCore
import IMServerTesting
import IMWire
import SwiftProtobuf
import Testing

/// `FrameEnvelope` writes and reads the `Frame` envelope by hand in place of SwiftProtobuf: its
/// bytes must be SwiftProtobuf's byte for byte, and reading (by hand, or through SwiftProtobuf for
/// what the hand-written reader leaves to it) must accept and refuse exactly what SwiftProtobuf
/// accepts and refuses, with the same fields.
@Suite("Frame envelope")
struct FrameEnvelopeTests {
    static func randomFrame(_ random: inout SplitMix64) -> Im_Frame {
        var frame = Im_Frame()
        func pick(_ n: UInt64) -> UInt64 { random.next() % n }
        if pick(4) != 0 { frame.id = [0, 1, 127, 128, 16_383, 16_384, UInt32.max, UInt32(truncatingIfNeeded: random.next())][Int(pick(8))] }
        if pick(4) != 0 { frame.op = Im_Op(rawValue: Int(pick(40))) ?? .UNRECOGNIZED(Int(pick(40))) }
        if pick(7) == 0 { frame.op = .UNRECOGNIZED([-1, -200, Int(Int32.max), Int(Int32.min), 1_000][Int(pick(5))]) }
        if pick(3) != 0 {
            let count = [0, 1, 13, 14, 15, 127, 128, 300, 70_000][Int(pick(9))]
            frame.payload = Data((0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        }
        if pick(3) == 0 { frame.code = [0, 1, -1, 200, 31_004, Int32.max, Int32.min][Int(pick(7))] }
        if pick(3) == 0 { frame.errorMessage = ["", "x", "wrong token: pass the right one", "中文 😀", String(repeating: "é", count: 200)][Int(pick(5))] }
        return frame
    }

    @Test("written as SwiftProtobuf writes it", arguments: 0..<4)
    func writtenAsSwiftProtobuf(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<2_000 {
            let frame = Self.randomFrame(&random)
            let expected: [UInt8] = try frame.serializedBytes()
            let written = FrameEnvelope.bytes(id: frame.id, op: frame.op, payload: frame.payload, code: frame.code, errorMessage: frame.errorMessage)
            #expect(written == expected, "frame \(frame)")
            #expect(FrameEnvelope.size(id: frame.id, op: frame.op, payloadCount: frame.payload.count, code: frame.code,
                                       errorMessageCount: frame.errorMessage.utf8.count) == expected.count)
            // And read back by hand to the same frame.
            #expect(expected.withUnsafeBytes { FrameEnvelope.read($0) } == frame)
        }
    }

    @Test("the codec's replies and pushes are SwiftProtobuf's bytes")
    func codecBytes() throws {
        var pong = Im_Pong()
        pong.serverTime = 1_764_000_000_123
        var request = Im_Frame()
        request.id = 300
        request.op = .ping
        var reference = Im_Frame()
        reference.id = 300
        reference.op = .ping
        reference.payload = try pong.serializedData()
        #expect(try FrameCodec.reply(to: request, pong) == (try reference.serializedBytes() as [UInt8]))
        #expect(try FrameCodec.request(id: 300, op: .ping, pong) == (try reference.serializedBytes() as [UInt8]))
        reference.id = 0
        #expect(try FrameCodec.push(op: .ping, pong) == (try reference.serializedBytes() as [UInt8]))
        var empty = Im_Frame()
        empty.id = 300
        empty.op = .ping
        #expect(FrameCodec.emptyReply(to: request) == (try empty.serializedBytes() as [UInt8]))
        empty.code = 31_004
        empty.errorMessage = "the token is not valid"
        #expect(FrameCodec.errorReply(to: request, IMError(.tokenIncorrect, "the token is not valid")) == (try empty.serializedBytes() as [UInt8]))
    }

    /// What SwiftProtobuf makes of `bytes`: the frame, or nil when it refuses them.
    static func reference(_ bytes: [UInt8]) -> Im_Frame? {
        guard var frame = try? Im_Frame(serializedBytes: bytes) else { return nil }
        // The hand-written reader leaves frames with unknown fields to SwiftProtobuf, so they
        // compare whole; the rest compares field by field.
        frame.unknownFields = UnknownStorage()
        return frame
    }

    @Test("reads what SwiftProtobuf reads, refuses what it refuses", arguments: 0..<4)
    func readsAsSwiftProtobuf(seed: UInt64) throws {
        var random = SplitMix64(seed: 1_000 + seed)
        var refused = 0
        var byHand = 0
        for round in 0..<5_000 {
            var bytes: [UInt8] = try Self.randomFrame(&random).serializedBytes()
            // Damage most of them: a byte changed, one cut off or added, a stray field appended.
            switch random.next() % 6 {
            case 0: break
            case 1 where !bytes.isEmpty: bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: random.next())
            case 2 where !bytes.isEmpty: bytes.removeLast(Int(random.next() % UInt64(min(bytes.count, 4))) + 1)
            case 3: bytes.append(UInt8(truncatingIfNeeded: random.next()))
            case 4: bytes += [0x30, 0x05]              // field 6, varint: unknown
            default: bytes += [0x0A, 0x01, 0x41]       // field 1 as length-delimited: wrong wire type
            }
            let expected = Self.reference(bytes)
            var decoded = try? FrameCodec.decode(bytes)
            decoded?.unknownFields = UnknownStorage()
            #expect(decoded == expected, "round \(round): \(bytes)")
            if expected == nil { refused += 1 }
            if bytes.withUnsafeBytes({ FrameEnvelope.read($0) }) != nil { byHand += 1 }
        }
        // Both paths were taken and both outcomes seen.
        #expect(refused > 100)
        #expect(byHand > 1_000)
    }

    @Test("a hand-read frame is never one SwiftProtobuf refuses")
    func handReadIsValid() {
        var random = SplitMix64(seed: 77)
        for _ in 0..<50_000 {
            let count = Int(random.next() % 24)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            if let frame = bytes.withUnsafeBytes({ FrameEnvelope.read($0) }) {
                #expect(Self.reference(bytes) == frame, "\(bytes)")
            }
        }
    }
}
