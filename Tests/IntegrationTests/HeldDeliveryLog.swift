import Foundation
import IMCore
import IMStoreSQLite
@testable import IMServer

/// A SQLite store in a new directory for `body`, closed and removed after it.
func withTemporaryStore<T>(_ name: String, _ body: (SQLiteStore) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-\(name)-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try SQLiteStore(directory: directory.path)
    defer { try? store.close() }
    return try await body(store)
}

/// A message log whose every batch's delivery waits for the test's go (`release()`), then runs
/// `deliver` (what the fan-out would read): for tests of what waits behind a fan-out. `stop()`
/// before the store closes.
final class HeldDeliveryLog: Sendable {
    let log: MessageLog
    private let gate: AsyncStream<Void>.Continuation
    private let writer: Task<(committed: Int, failed: Int), Never>

    init(store: SQLiteStore, fanOut: FanOutOrder = FanOutOrder(), deliveryFirst: DeliveryFirst = DeliveryFirst(),
         deliver: @escaping @Sendable ([CommittedMessage]) async -> Void) {
        let (released, gate) = AsyncStream.makeStream(of: Void.self)
        let log = MessageLog(store: store, clock: SystemClock(), fanOut: fanOut, deliveryFirst: deliveryFirst) { batch in
            for await _ in released { break }
            await deliver(batch)
        }
        self.log = log
        self.gate = gate
        writer = Task { await log.runWriter() }
    }

    /// Lets the next batch's delivery go.
    func release() { gate.yield() }

    /// Stops the writer (a delivery still held goes) and waits for it.
    func stop() async {
        gate.finish()
        log.stopWriting()
        _ = await writer.value
    }
}
