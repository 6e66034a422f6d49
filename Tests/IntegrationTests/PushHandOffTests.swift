import IMStore
import Testing
@testable import IMServer

/// The decided pushes held for the sender (`PushHandOff`): taken oldest first, in batches as large
/// as asked for across the arrays they were handed over in, each record once.
@Suite("Push hand-off")
struct PushHandOffTests {
    static func records(_ ids: ClosedRange<Int64>) -> [PushRecord] {
        ids.map { PushRecord(id: $0, appId: 1, messageUid: "M-\($0)", userId: "u\($0)", status: .pending, createdAt: 0) }
    }

    @Test("batches cut across the arrays handed over: every record once, oldest first, none past the limit; the count follows")
    func takesAcrossParts() {
        var handOff = PushHandOff()
        handOff.append(Self.records(1...5)[...])
        handOff.append([][...])
        handOff.append(Self.records(6...7)[...])
        handOff.append(Self.records(8...12)[2...])   // a slice that does not start at 0: 10, 11, 12
        #expect(handOff.count == 10)
        #expect(handOff.ids == [1, 2, 3, 4, 5, 6, 7, 10, 11, 12])

        var batches: [[Int64]] = []
        while !handOff.isEmpty {
            let batch = handOff.take(limit: 4)
            #expect(!batch.contains { $0.isEmpty }, "no empty slice in a batch")
            batches.append(batch.joined().map(\.id))
        }
        #expect(batches == [[1, 2, 3, 4], [5, 6, 7, 10], [11, 12]])
        #expect(handOff.count == 0)
        #expect(handOff.take(limit: 4).isEmpty)
        #expect(handOff.take(limit: 0).isEmpty)

        handOff.append(Self.records(20...22)[...])
        #expect(handOff.take(limit: 0).isEmpty, "nothing taken at a limit of 0")
        #expect(handOff.take(limit: 100).joined().map(\.id) == [20, 21, 22])
    }
}
