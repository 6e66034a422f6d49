import IMStore
import Synchronization

/// The decide loop's writes, in the order it made them, carried out by a task of their own: the
/// loop decides the next message while the store writes the last one's records, and a write that
/// fails is tried again before any later one, so the node's cursor never passes decisions that
/// were not recorded. Bounded: the loop waits once `limit` writes are waiting.
final class PushDecisionWrites: Sendable {
    enum Work: Sendable {
        /// Records, the badges they set, and how far the node has decided (nil: unchanged).
        case decisions([PushRecord], [PushBadge], cursor: UInt64?)
        /// A device came online: its badge starts again from 0.
        case resetBadge(appId: Int64, userId: String, deviceId: String)
    }

    struct Item: Sendable {
        var seq: UInt64
        var work: Work
    }

    private struct State {
        var items: [Item] = []
        var consumer: CheckedContinuation<Item?, Never>?
        var producers: [CheckedContinuation<Void, Never>] = []
        var finished = false
        var lastSeq: UInt64 = 0
    }

    private let state = Mutex(State())
    private let limit: Int

    init(limit: Int = 4) {
        self.limit = limit
    }

    /// The seq of the next write, taken before it is enqueued (so what depends on it can name it).
    func reserve() -> UInt64 {
        state.withLock { state in
            state.lastSeq += 1
            return state.lastSeq
        }
    }

    /// Adds a write (with a seq from `reserve`, in order); waits while `limit` are waiting.
    func enqueue(_ item: Item) async {
        while true {
            let (ready, consumer) = state.withLock { state -> (Bool, CheckedContinuation<Item?, Never>?) in
                guard state.items.count < limit || state.finished else { return (false, nil) }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return (true, consumer)
                }
                state.items.append(item)
                return (true, nil)
            }
            if ready {
                consumer?.resume(returning: item)
                return
            }
            await withCheckedContinuation { continuation in
                let waiting = state.withLock { state -> Bool in
                    guard state.items.count >= limit && !state.finished else { return false }
                    state.producers.append(continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
        }
    }

    /// The next write, nil once `finish` was called and none is left.
    func next() async -> Item? {
        let (item, producer) = state.withLock { state -> (Item?, CheckedContinuation<Void, Never>?) in
            guard !state.items.isEmpty else { return (nil, nil) }
            let item = state.items.removeFirst()
            return (item, state.producers.isEmpty ? nil : state.producers.removeFirst())
        }
        if let item {
            producer?.resume()
            return item
        }
        return await withCheckedContinuation { continuation in
            let now = state.withLock { state -> (ready: Bool, item: Item?) in
                if let item = state.items.first {
                    state.items.removeFirst()
                    return (true, item)
                }
                if state.finished { return (true, nil) }
                state.consumer = continuation
                return (false, nil)
            }
            if now.ready { continuation.resume(returning: now.item) }
        }
    }

    /// No more writes: `next` returns nil once the waiting ones are taken.
    func finish() {
        let (consumer, producers) = state.withLock { state -> (CheckedContinuation<Item?, Never>?, [CheckedContinuation<Void, Never>]) in
            state.finished = true
            defer {
                state.consumer = nil
                state.producers = []
            }
            return (state.items.isEmpty ? state.consumer : nil, state.producers)
        }
        consumer?.resume(returning: nil)
        for producer in producers { producer.resume() }
    }
}

/// The badges decided whose writes have not finished: the next decisions count on from them, not
/// from the store, which does not have them yet. An entry goes when the write that carries it
/// (or a later one) is done.
final class PushBadgeLedger: Sendable {
    struct Key: Hashable {
        var appId: Int64
        var userId: String
        var deviceId: String
    }

    private struct State {
        var entries: [Key: (badge: Int, seq: UInt64)] = [:]
        /// The keys each pending write set, by the write's seq.
        var setBy: [UInt64: [Key]] = [:]
    }

    private let state = Mutex(State())

    /// Every badge waiting to be written. The decide loop alone adds to the ledger, so a badge
    /// not in it when this is taken is in the store by then.
    func snapshot() -> [Key: Int] {
        state.withLock { state in state.entries.isEmpty ? [:] : state.entries.mapValues(\.badge) }
    }

    /// Notes badges set by the write `seq`.
    func set(_ badges: [PushBadge], seq: UInt64) {
        guard !badges.isEmpty else { return }
        state.withLock { state in
            var keys: [Key] = []
            keys.reserveCapacity(badges.count)
            for badge in badges {
                let key = Key(appId: badge.appId, userId: badge.userId, deviceId: badge.deviceId)
                state.entries[key] = (badge.badge, seq)
                keys.append(key)
            }
            state.setBy[seq, default: []] += keys
        }
    }

    /// Forgets what the write `seq` (and any before it) carried: the store has it now. A key a
    /// later write set again stays.
    func written(through seq: UInt64) {
        state.withLock { state in
            for done in state.setBy.keys where done <= seq {
                for key in state.setBy.removeValue(forKey: done) ?? [] where (state.entries[key]?.seq ?? .max) <= seq {
                    state.entries[key] = nil
                }
            }
        }
    }
}
