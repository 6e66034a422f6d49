import Foundation
import IMCore
import IMStore
import IMWire
import Synchronization

/// A chatroom as the server holds it, in memory: its members' seats (one per device that joined),
/// its latest messages, its attributes, its intake quota and the pushes waiting to go out.
///
/// Every field is read and written under `ChatroomService`'s lock only; the class is marked
/// `@unchecked Sendable` so that the room's delivery task can hold it.
final class ChatroomRoom: @unchecked Sendable {
    struct Key: Hashable, Sendable {
        let appId: Int64
        let roomId: String
    }

    /// One device's place in the room: its live session, or nil while it is offline.
    struct Seat {
        var session: ClientSession?
        /// While offline: since when, and how many messages the room has had since.
        var offlineSince: Int64 = 0
        var missed = 0
    }

    struct Member {
        var joinTime: Int64
        var seats: [String: Seat] = [:]   // by device id

        var hasOnlineSeat: Bool { seats.values.contains { $0.session != nil } }
    }

    struct Entry {
        var value: String
        var ownerId: String
        var autoDelete: Bool
        var updatedAt: Int64
    }

    /// What the delivery task sends, in the room's order.
    enum Push {
        /// A message for the members online when it goes out, but `origin` (the session it came
        /// from) and, without `includeSender`, the sender's sessions.
        case message(StoredMessage, origin: Origin, stored: CommitSignal?)
        /// An encoded push for the room's members online when it goes out.
        case roomFrame([UInt8])
        /// An encoded push for the listed sessions only (by session id).
        case frame([UInt8], to: Set<String>)
    }

    struct SeatKey: Hashable {
        let userId: String
        let deviceId: String
    }

    let key: Key
    /// Identifies this incarnation of the room (RongCloud's chatroom sessionid).
    let sessionId: String
    let createdAt: Int64
    var name: String
    var lastActivity: Int64
    /// Minutes of inactivity before the room is destroyed (the server's setting unless the Server
    /// API set one for the room).
    var idleDestroyMinutes: Int
    /// A room created to be destroyed at a fixed time (`destroyType` 1).
    var destroyAt: Int64?
    /// `/chatroom/message/stopDistribution.json`: messages are accepted but not delivered.
    var distributionStopped = false
    var members: [String: Member] = [:]
    /// An online seat's session and its cursor: the position of the last push written to it.
    struct Reader {
        var session: ClientSession
        var cursor: UInt64
    }
    /// The online seats' sessions, in the order the delivery sweep goes round them (a session that
    /// leaves takes the last one's place): who a push goes to.
    private(set) var readers: [Reader] = []
    /// Where each online session is in `readers`, by session id.
    private var readerSlots: [String: Int] = [:]
    /// The online seats of sessions connected to other nodes of a cluster (stand-ins, by session
    /// id): not swept here, their nodes deliver the room's pushes to them (`ChatroomRouting`).
    private(set) var remoteReaders: [String: ClientSession] = [:]
    /// The nodes of those sessions, with how many each has.
    private(set) var remoteNodes: [String: Int] = [:]
    var offline: [SeatKey: Void] = [:]
    /// The latest messages kept in history (at most 50), oldest first: what a join fetches.
    var recent: [StoredMessage] = []
    var entries: [String: Entry] = [:]
    var entryWindowStart: Int64 = .min
    var entryOperations = 0
    var quota = ChatroomIntakeQuota()
    var lastSentTime: Int64 = 0
    var pending: [Push] = []
    var delivering = false
    /// Pushes published for delivery, in room order, each at a position; `head` is the latest
    /// position. Every online seat's session has a cursor: the position written to it so far.
    var log: [(position: UInt64, push: Push)] = []
    var head: UInt64 = 0
    /// Where the delivery sweep goes on in `readers`.
    var sweepIndex = 0

    init(key: Key, name: String, now: Int64, idleDestroyMinutes: Int) {
        self.key = key
        self.sessionId = UUID().uuidString
        self.createdAt = now
        self.name = name
        self.lastActivity = now
        self.idleDestroyMinutes = idleDestroyMinutes
    }

    /// The live sessions of the room's members.
    var onlineSessions: [ClientSession] {
        remoteReaders.isEmpty ? readers.map(\.session) : readers.map(\.session) + remoteReaders.values
    }

    /// A session takes a seat: it gets what is published from now on (a session already seated,
    /// joining again, keeps its place: what it has not been written yet still comes). A session of
    /// another node is told to its node, which delivers to it from here on.
    func seatOnline(_ session: ClientSession) {
        if let link = session.relayLink {
            if remoteReaders.updateValue(session, forKey: session.id) == nil { remoteNodes[link.node, default: 0] += 1 }
            link.seated(in: key)
            return
        }
        if let slot = readerSlots[session.id] {
            readers[slot].session = session
        } else {
            readerSlots[session.id] = readers.count
            readers.append(Reader(session: session, cursor: head))
        }
    }

    func seatOffline(sessionId: String) {
        if let session = remoteReaders.removeValue(forKey: sessionId), let link = session.relayLink {
            let left = remoteNodes[link.node, default: 1] - 1
            remoteNodes[link.node] = left > 0 ? left : nil
            link.unseated(from: key)
            return
        }
        guard let slot = readerSlots.removeValue(forKey: sessionId) else { return }
        let last = readers.removeLast()
        if slot < readers.count {
            readers[slot] = last
            readerSlots[last.session.id] = slot
        }
    }

    /// Where a session is in `readers`; nil when it has no online seat here.
    func slot(of sessionId: String) -> Int? {
        readerSlots[sessionId]
    }

    /// Moves a reader's cursor to `position` if it is behind it; returns where it was then (the
    /// delivery sweep writes it what lies between), nil if it was not behind.
    func advance(reader slot: Int, to position: UInt64) -> UInt64? {
        let cursor = readers[slot].cursor
        guard cursor < position else { return nil }
        readers[slot].cursor = position
        return cursor
    }

    /// Removes a device's seat, and the member with its last seat. Returns whether the user has no
    /// online seat left.
    @discardableResult
    func removeSeat(userId: String, deviceId: String) -> Bool {
        guard var member = members[userId], let seat = member.seats.removeValue(forKey: deviceId) else {
            return !(members[userId]?.hasOnlineSeat ?? false)
        }
        if let session = seat.session { seatOffline(sessionId: session.id) }
        offline[SeatKey(userId: userId, deviceId: deviceId)] = nil
        members[userId] = member.seats.isEmpty ? nil : member
        return !member.hasOnlineSeat
    }

    /// Removes every seat of a user; returns the sessions that were online.
    func removeMember(_ userId: String) -> [ClientSession] {
        guard let member = members.removeValue(forKey: userId) else { return [] }
        var sessions: [ClientSession] = []
        for (deviceId, seat) in member.seats {
            offline[SeatKey(userId: userId, deviceId: deviceId)] = nil
            if let session = seat.session {
                seatOffline(sessionId: session.id)
                sessions.append(session)
            }
        }
        return sessions
    }

    /// Keeps a message among the latest 50 that joins fetch.
    func remember(_ message: StoredMessage) {
        recent.append(message)
        if recent.count > ChatroomLimits.joinHistoryMax { recent.removeFirst(recent.count - ChatroomLimits.joinHistoryMax) }
    }
}

/// The chatroom settings of one app, as loaded from the store (bans, mutes, whitelists,
/// keep-alive rooms, message priorities). Timed ones hold their end time.
struct ChatroomSettings: Sendable {
    var rows: [ChatroomSettingKind: [String: [String: Int64]]] = [:]   // kind → room → item → until

    init(_ records: [ChatroomSettingRecord]) {
        for record in records { rows[record.kind, default: [:]][record.roomId, default: [:]][record.item] = record.until }
    }

    func until(_ kind: ChatroomSettingKind, room: String = "", item: String) -> Int64? {
        rows[kind]?[room]?[item]
    }

    func isActive(_ kind: ChatroomSettingKind, room: String = "", item: String, now: Int64) -> Bool {
        guard let until = until(kind, room: room, item: item) else { return false }
        return until > now
    }

    /// The active items of a kind in a room, with their end times.
    func items(_ kind: ChatroomSettingKind, room: String = "", now: Int64) -> [(item: String, until: Int64)] {
        (rows[kind]?[room] ?? [:]).filter { $0.value > now }.map { ($0.key, $0.value) }.sorted { $0.item < $1.item }
    }

    /// Rooms that have an active item of this kind.
    func rooms(_ kind: ChatroomSettingKind, now: Int64) -> [String] {
        (rows[kind] ?? [:]).filter { $0.value.values.contains { $0 > now } }.map(\.key).sorted()
    }

    mutating func apply(_ records: [ChatroomSettingRecord]) {
        for record in records { rows[record.kind, default: [:]][record.roomId, default: [:]][record.item] = record.until }
    }

    mutating func remove(_ kind: ChatroomSettingKind, room: String, items: [String]) {
        for item in items { rows[kind]?[room]?[item] = nil }
    }
}

/// Resolves once: a sender of a chatroom message kept in history waits for its store write.
final class CommitSignal: Sendable {
    private let state = Mutex<(result: Result<Void, any Error>?, waiter: CheckedContinuation<Void, any Error>?)>((nil, nil))

    func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let ready = state.withLock { state -> Result<Void, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    func resolve(_ result: Result<Void, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }
}

extension ChatroomRoom.Entry {
    func wire(key: String) -> Im_ChatroomEntry {
        var entry = Im_ChatroomEntry()
        entry.key = key
        entry.value = value
        entry.ownerID = ownerId
        entry.autoDelete = autoDelete
        entry.updatedAt = updatedAt
        return entry
    }
}
