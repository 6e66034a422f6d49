import IMStore
import NIOCore

/// The pending pushes the decisions handed to the sender, oldest first, held as the slices of the
/// arrays they were decided in: handing them over and taking them in batches shares those arrays,
/// it does not copy records (each copy of a record retains its strings, on two threads at once).
struct PushHandOff {
    private var parts = CircularBuffer<ArraySlice<PushRecord>>()
    /// The records held.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The ids held, oldest first.
    var ids: [Int64] { parts.flatMap { $0.map(\.id) } }

    mutating func append(_ records: ArraySlice<PushRecord>) {
        guard !records.isEmpty else { return }
        parts.append(records)
        count += records.count
    }

    /// Up to `limit` records, oldest first, as the slices they are held in (the last one taken
    /// cut at `limit`): a batch as large as asked for, its records not copied.
    mutating func take(limit: Int) -> [ArraySlice<PushRecord>] {
        var taken: [ArraySlice<PushRecord>] = []
        var room = limit
        while room > 0, let first = parts.first {
            let piece = first.prefix(room)
            let rest = first.dropFirst(piece.count)
            if rest.isEmpty { parts.removeFirst() } else { parts[parts.startIndex] = rest }
            taken.append(piece)
            room -= piece.count
            count -= piece.count
        }
        return taken
    }
}
