import IMCore
import IMStore

/// Checks on numbers that arrive in client requests before they reach arithmetic or the store.
///
/// The store keeps seqs and versions as SQLite integers (signed 64-bit), so a watermark above
/// `Int64.max` names nothing this server ever handed out: it is refused with 33003 rather than
/// converted (a trapping `Int64(_:)` would stop the whole process).
enum WireNumbers {
    /// A watermark or cursor (`since`, a version) that must be one the server could have returned.
    static func checkWatermark(_ value: UInt64, field: String) throws {
        guard value <= UInt64(Int64.max) else {
            throw IMError(.invalidParameter, "\(field) \(value) is beyond any position this server hands out: pass the value of the previous reply (0 to start over)")
        }
    }
}
