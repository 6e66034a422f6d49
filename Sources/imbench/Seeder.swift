import Foundation
import IMCore
import IMServer
import IMStore
import IMStorePostgres
import IMStoreSQLite
import Logging

/// What a seeded store holds; kept beside the database (`imbench-seed.json`) so that a later run
/// on the same data directory reuses the seed instead of writing it again.
struct SeedPlan: Codable, Equatable, Sendable {
    var messages: Int
    var conversations: Int
    var appKey: String
    var payloadBytes: Int
}

/// SEEDING, not benchmarking: fills a server's store with history before the server starts, by
/// committing large batches straight through `SQLiteStore` (the same store code and schema the
/// server uses, but 20,000 messages per transaction instead of the gateway's path). Nothing here is
/// measured as server performance.
///
/// Conversation c is between users h(2c) and h(2c+1); its messages alternate direction. Messages
/// are written round-robin over the conversations, so one conversation's rows are spread over the
/// whole table as they would be after months of traffic, and stamped 30 days in the past (one
/// millisecond apart), outside the offline-sync window, so they are history only.
enum Seeder {
    static let markerName = "imbench-seed.json"

    static func pair(_ conversation: Int) -> (String, String) {
        ("h\(2 * conversation)", "h\(2 * conversation + 1)")
    }

    /// Seeds the store in `dataDir` unless it already holds this seed. Returns the plan.
    @discardableResult
    static func seed(dataDir: String, plan: SeedPlan, appSecret: String) async throws -> SeedPlan {
        try await seed(site: SeedSite(dataDir: dataDir, databaseURL: nil), plan: plan, appSecret: appSecret)
    }

    /// Seeds the run's store: the SQLite store in the data directory (reused when it already holds
    /// this seed), or the run's fresh PostgreSQL database.
    @discardableResult
    static func seed(site: SeedSite, plan: SeedPlan, appSecret: String) async throws -> SeedPlan {
        let marker = (site.dataDir as NSString).appendingPathComponent(markerName)
        if site.databaseURL == nil, let data = FileManager.default.contents(atPath: marker),
           let existing = try? JSONDecoder().decode(SeedPlan.self, from: data), existing == plan {
            note("seed: \(site.dataDir) already holds \(plan.messages) messages in \(plan.conversations) conversations; reusing it")
            return plan
        }
        guard plan.conversations > 0, plan.messages >= 0 else { throw BenchError("seeding needs at least one conversation") }
        let opened = try await SeedStore.open(site)
        do {
            try await write(plan, into: opened.store, appSecret: appSecret, storeName: opened.name)
        } catch {
            await opened.close()
            throw error
        }
        await opened.close()
        if site.databaseURL == nil {
            try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: marker))
        }
        return plan
    }

    private static func write(_ plan: SeedPlan, into store: any IMStore, appSecret: String, storeName: String) async throws {
        let now = SystemClock().nowMilliseconds()
        let app = try await store.upsertApp(appKey: plan.appKey, appSecret: appSecret, name: "imbench", now: now)
        let content = LoopDriver.payload(bytes: plan.payloadBytes)
        let uids = MessageUIDGenerator()
        let keys = (0..<plan.conversations).map { conversation -> (String, String, String) in
            let (a, b) = pair(conversation)
            return (a, b, privateConversationKey(a, b))
        }
        let base = now - 30 * 86_400_000
        let batchSize = 20_000
        note("seed: writing \(plan.messages) messages into \(plan.conversations) conversations (SEEDING through \(storeName) in batches of \(batchSize); not a measurement)")
        let started = ContinuousClock.now
        var written = 0
        var batch: [StoredMessage] = []
        batch.reserveCapacity(batchSize)
        while written < plan.messages {
            batch.removeAll(keepingCapacity: true)
            for index in written..<min(plan.messages, written + batchSize) {
                let (a, b, key) = keys[index % plan.conversations]
                let forward = (index / plan.conversations) % 2 == 0
                let sentTime = base + Int64(index)
                batch.append(StoredMessage(
                    appId: app.id, conversationType: .private, conversationKey: key,
                    targetId: forward ? b : a, senderId: forward ? a : b, objectName: "RC:TxtMsg",
                    content: content, uid: uids.next(milliseconds: sentTime), sentTime: sentTime,
                    flags: .persistedAndCounted))
            }
            _ = try await store.commit(batch)
            written += batch.count
            if written % 1_000_000 == 0 || written == plan.messages {
                let seconds = (ContinuousClock.now - started).seconds
                note("  seed: \(written)/\(plan.messages) (\(Int(Double(written) / max(seconds, 0.001))) messages/s)")
            }
        }
    }
}

/// A store opened for seeding before the servers start: SQLite in the data directory, or the
/// run's PostgreSQL database (migrated on opening, as a node would).
struct SeedStore {
    let store: any IMStore
    let name: String
    private let closer: @Sendable () async -> Void

    static func open(_ site: SeedSite) async throws -> SeedStore {
        if let url = site.databaseURL {
            let store = try await PostgresStore.connect(url: url, logger: Logger(label: "imbench-seed"), poolSize: 2)
            return SeedStore(store: store, name: "PostgresStore", closer: { await store.close() })
        }
        try FileManager.default.createDirectory(atPath: site.dataDir, withIntermediateDirectories: true)
        let store = try SQLiteStore(directory: site.dataDir)
        return SeedStore(store: store, name: "SQLiteStore", closer: { try? store.close() })
    }

    func close() async { await closer() }
}
