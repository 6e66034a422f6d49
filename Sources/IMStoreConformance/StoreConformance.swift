import Foundation
import IMCore
import IMStore
import Testing

/// The behaviour every `IMStore` must have, as Swift Testing checks: run it against a store and
/// the store behaves as the server expects, or the failures say where it does not.
///
/// Each area (one per port, then conversation keys, tenant isolation and concurrency) runs its
/// checks one after another. Every check asks the factory for a store and creates an app of its
/// own (`upsertApp` with a fresh key), so checks share nothing and a failing check does not stop
/// the next: an error it throws is recorded as an issue naming the area and the check.
///
/// ```swift
/// let suite = StoreConformance { try await PostgresStore.connect(to: testDatabase) }
/// @Test func messageStore() async throws { try await suite.messageStore() }
/// ```
public struct StoreConformance: Sendable {
    public typealias StoreFactory = @Sendable () async throws -> any IMStore

    let makeStore: StoreFactory

    /// - Parameter makeStore: returns the store a check runs against, a new one each time or one
    ///   over the same database: every check works in apps of its own (the one check that prunes
    ///   chatroom history of every app uses times of 1970, which no other check writes).
    public init(makeStore: @escaping StoreFactory) {
        self.makeStore = makeStore
    }

    /// Every area in turn.
    public func all() async throws {
        try await appStore()
        try await messageStore()
        try await syncStore()
        try await messageLifecycleStore()
        try await userStore()
        try await groupStore()
        try await sensitiveWordStore()
        try await conversationStateStore()
        try await chatroomStore()
        try await ultraGroupStore()
        try await pushStore()
        try await callbackStore()
        try await operationsStore()
        try await conversationKeys()
        try await tenantIsolation()
        try await concurrency()
    }

    /// Runs one check on a fresh store and app. A failed `#require` (or `CheckFailed`) has been
    /// recorded already; any other error is recorded here, named by the area and the check.
    func check(_ area: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation,
               _ body: (Fixture) async throws -> Void) async {
        do {
            let fixture = try await Fixture(store: makeStore())
            try await body(fixture)
        } catch is ExpectationFailedError {
        } catch is CheckFailed {
        } catch {
            Issue.record(error, "\(area): \(name)", sourceLocation: sourceLocation)
        }
    }
}
