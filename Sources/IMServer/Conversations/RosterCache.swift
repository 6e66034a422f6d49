import IMCore
import IMStore
import Synchronization

/// What `RosterCache` keeps per group: the members, and the recipients a delivery takes, derived
/// from the members' live sessions whenever those change (so a message never builds them).
protocol CachedRoster: Sendable {
    associatedtype MemberIds: Sequence<String>
    associatedtype Recipients: Sendable
    var memberIds: MemberIds { get }
    static func recipients(of roster: Self, online: [String: [ClientSession]]) -> Recipients
}

/// Groups in memory, for sending and fan-out: each group's record, read from the store on first
/// use, and the live sessions of its members, kept current as sessions open and close. A message
/// to a group therefore costs one write per online member's session, whatever the number of
/// offline members.
///
/// Every change of a group goes through `changing(appId:ids:_:)`, which marks the groups as
/// changing and drops them from the cache before the store is written, and again after. A read
/// that overlapped a change of its group is used once but not kept, so the cache never holds a
/// record older than the store.
final class RosterCache<Record: CachedRoster>: Sendable {
    struct Key: Hashable {
        let appId: Int64
        let id: String
    }

    private struct Entry {
        var record: Record
        /// Live sessions of members, by user id.
        var online: [String: [ClientSession]] {
            didSet { recipients = Record.recipients(of: record, online: online) }
        }
        private(set) var recipients: Record.Recipients

        init(record: Record, online: [String: [ClientSession]]) {
            self.record = record
            self.online = online
            self.recipients = Record.recipients(of: record, online: online)
        }
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// For each user, the cached groups they are a member of (where their sessions go on connect).
        var idsOfUser: [SessionRegistry.UserKey: Set<String>] = [:]
        /// Changes under way, and changes begun so far, per group; a load that overlapped one is
        /// not cached.
        var changesUnderWay: [Key: Int] = [:]
        var generation: [Key: UInt64] = [:]
        /// Store reads under way, with the generation they started at: readers of the same
        /// generation share one (a group of 100,000 members is read once, not once per caller).
        var loading: [Key: (generation: UInt64, task: Task<Record?, any Error>)] = [:]
    }

    private let registry: SessionRegistry
    private let maxCached: Int
    private let load: @Sendable (Int64, String) async throws -> Record?
    private let state = Mutex(State())
    private let fanOut: FanOutOrder

    init(registry: SessionRegistry, maxCached: Int, fanOut: FanOutOrder, load: @escaping @Sendable (Int64, String) async throws -> Record?) {
        self.registry = registry
        self.maxCached = maxCached
        self.fanOut = fanOut
        self.load = load
    }

    /// The group's record (nil if there is none), from the cache or the store.
    func record(appId: Int64, id: String) async throws -> Record? {
        let key = Key(appId: appId, id: id)
        let (cached, generation, task) = state.withLock { state -> (Record?, UInt64, Task<Record?, any Error>?) in
            let generation = state.generation[key, default: 0]
            if let cached = state.entries[key]?.record { return (cached, generation, nil) }
            if let loading = state.loading[key], loading.generation == generation { return (nil, generation, loading.task) }
            let task = Task { [load] in try await load(appId, id) }
            state.loading[key] = (generation, task)
            return (nil, generation, task)
        }
        if let cached { return cached }
        let loaded: Record?
        do {
            loaded = try await task!.value
        } catch {
            state.withLock { state in if state.loading[key]?.generation == generation { state.loading[key] = nil } }
            throw error
        }
        guard let record = loaded else {
            state.withLock { state in if state.loading[key]?.generation == generation { state.loading[key] = nil } }
            return nil
        }
        state.withLock { state in
            if state.loading[key]?.generation == generation { state.loading[key] = nil }
            guard state.changesUnderWay[key, default: 0] == 0, state.generation[key, default: 0] == generation,
                  state.entries[key] == nil else { return }
            if state.entries.count >= maxCached, let evicted = state.entries.keys.first {
                Self.remove(evicted, from: &state)
            }
            for userId in record.memberIds {
                state.idsOfUser[SessionRegistry.UserKey(appId: appId, userId: userId), default: []].insert(id)
            }
            // Inside the lock, so a session opening or closing now is either seen here or applied
            // by sessionOpened / sessionClosed after it.
            let online = registry.sessions(appId: appId, userIds: record.memberIds)
            state.entries[key] = Entry(record: record, online: online)
        }
        return record
    }

    /// The recipients of the group's messages (nil if there is no such group); read from the store
    /// if the group is not cached.
    func recipients(appId: Int64, id: String) async throws -> Record.Recipients? {
        let key = Key(appId: appId, id: id)
        func cached() -> Record.Recipients? { state.withLock { $0.entries[key]?.recipients } }
        if let recipients = cached() { return recipients }
        guard let record = try await record(appId: appId, id: id) else { return nil }
        if let recipients = cached() { return recipients }
        // Read during a change and not cached: this once, from the registry.
        return Record.recipients(of: record, online: registry.sessions(appId: appId, userIds: record.memberIds))
    }

    // MARK: changes

    /// Runs a change of these groups in the store, keeping the cache from serving what the change
    /// replaces.
    func changing<T: Sendable>(appId: Int64, ids: [String], _ change: () async throws -> T) async throws -> T {
        // A message committed before the change reaches the members it was sent to: its fan-out,
        // which reads the members, is queued before they change (a member removed now still gets it).
        await fanOut.behindCommitted()
        mark(appId: appId, ids: ids, starting: true)
        defer { mark(appId: appId, ids: ids, starting: false) }
        return try await explainingRefusals(change)
    }

    /// Drops groups from the cache after a change whose groups were known only once it was done.
    func changed(appId: Int64, ids: [String]) {
        state.withLock { state in
            for id in ids {
                let key = Key(appId: appId, id: id)
                state.generation[key, default: 0] &+= 1
                Self.remove(key, from: &state)
            }
        }
    }

    private func mark(appId: Int64, ids: [String], starting: Bool) {
        state.withLock { state in
            for id in ids {
                let key = Key(appId: appId, id: id)
                state.changesUnderWay[key, default: 0] += starting ? 1 : -1
                if state.changesUnderWay[key] == 0 { state.changesUnderWay[key] = nil }
                state.generation[key, default: 0] &+= 1
                Self.remove(key, from: &state)
            }
        }
    }

    private static func remove(_ key: Key, from state: inout State) {
        guard let entry = state.entries.removeValue(forKey: key) else { return }
        for userId in entry.record.memberIds {
            let user = SessionRegistry.UserKey(appId: key.appId, userId: userId)
            state.idsOfUser[user]?.remove(key.id)
            if state.idsOfUser[user]?.isEmpty == true { state.idsOfUser[user] = nil }
        }
    }

    // MARK: presence

    /// A session of a user opened: it joins the online set of the user's cached groups. Call after
    /// the registry holds it.
    func sessionOpened(_ session: ClientSession) {
        let user = SessionRegistry.UserKey(appId: session.appId, userId: session.userId)
        state.withLock { state in
            guard let ids = state.idsOfUser[user] else { return }
            for id in ids {
                let key = Key(appId: session.appId, id: id)
                guard state.entries[key] != nil else { continue }
                var sessions = state.entries[key]!.online[session.userId, default: []]
                if !sessions.contains(where: { $0 === session }) { sessions.append(session) }
                state.entries[key]!.online[session.userId] = sessions
            }
        }
    }

    /// A session ended: it leaves every online set. Call after the registry dropped it.
    func sessionClosed(_ session: ClientSession) {
        let user = SessionRegistry.UserKey(appId: session.appId, userId: session.userId)
        state.withLock { state in
            guard let ids = state.idsOfUser[user] else { return }
            for id in ids {
                let key = Key(appId: session.appId, id: id)
                guard var sessions = state.entries[key]?.online[session.userId] else { continue }
                sessions.removeAll { $0 === session }
                state.entries[key]!.online[session.userId] = sessions.isEmpty ? nil : sessions
            }
        }
    }
}
