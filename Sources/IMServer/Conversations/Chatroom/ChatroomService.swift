import Foundation
import IMCore
import IMStore
import IMWire
import Logging
import Synchronization

/// Chatrooms (spec/group-chatroom.md, part B): rooms live in memory, messages reach the members
/// online now, and nothing is queued offline or pushed.
///
/// - Membership is per device: a seat per (user, device) that joined. A quit removes that device's
///   seat; a disconnect leaves it offline, and it is removed on the room's next message once it has
///   been offline more than 30 s or through more than 30 messages (user-whitelisted members
///   excepted). A reconnecting client rejoins and, if it still holds its seat, gets the recent
///   messages it missed.
/// - Messages pass the room's intake quota (`ChatroomIntakeQuota`), get a sentTime strictly
///   increasing within the room, and are queued as pushes. One delivery task per room sends what
///   is queued: consecutive messages go out as one `CHATROOM_MESSAGES` frame, encoded once for the
///   whole room, so under load a member gets one frame per round instead of one per message.
/// - Attributes (KV) change under the same lock; every change is queued as a
///   `CHATROOM_ENTRIES_CHANGED` push (notified or silent), so every member's copy follows the
///   room's order.
/// - A room idle for its destroy time (no message, join or quit) is destroyed by `sweep`, unless
///   it is kept alive; its members are told with the room's session id.
public final class ChatroomService: Sendable {
    struct UserKey: Hashable {
        let appId: Int64
        let userId: String
    }

    struct State {
        var rooms: [ChatroomRoom.Key: ChatroomRoom] = [:]
        /// The rooms each online session has a seat in.
        var sessionRooms: [String: Set<ChatroomRoom.Key>] = [:]
        /// The rooms each user has a seat in (any device).
        var userRooms: [UserKey: Set<ChatroomRoom.Key>] = [:]
        var settings: [Int64: ChatroomSettings] = [:]
        /// In a cluster, the rooms other nodes hold that this node's sessions sit in: their pushes,
        /// relayed by the owner, are delivered here to those sessions (`ChatroomService+Mirrors`).
        var mirrors: [ChatroomRoom.Key: ChatroomRoom] = [:]
        /// Rooms per app, against `chatroomMaxRooms`.
        var roomCounts: [Int64: Int] = [:]

        mutating func insert(_ room: ChatroomRoom) {
            if rooms.updateValue(room, forKey: room.key) == nil { roomCounts[room.key.appId, default: 0] += 1 }
        }

        mutating func removeRoom(_ key: ChatroomRoom.Key) -> ChatroomRoom? {
            guard let room = rooms.removeValue(forKey: key) else { return nil }
            let left = roomCounts[key.appId, default: 1] - 1
            roomCounts[key.appId] = left > 0 ? left : nil
            return room
        }

        func mayCreateRoom(appId: Int64, limit: Int) -> Bool {
            limit == 0 || roomCounts[appId, default: 0] < limit
        }

        mutating func forgetUserRoom(_ user: UserKey, _ key: ChatroomRoom.Key) {
            userRooms[user]?.remove(key)
            if userRooms[user]?.isEmpty == true { userRooms[user] = nil }
        }
    }

    let state = Mutex(State())
    static let frameBudgetBytes = MessageLimits.frameBudgetBytes
    let store: any ChatroomStore
    let clock: any WallClock
    let config: ServerConfig
    /// Each app's chatroom settings (`limits(_:)`).
    let apps: AppRegistry
    let logger: Logger
    let uids = MessageUIDGenerator()
    /// Rooms whose delivery task is to start: `ChatroomDeliveryService` runs the tasks.
    let deliveryStarts: AsyncStream<ChatroomRoom>
    let deliveryStarter: AsyncStream<ChatroomRoom>.Continuation

    /// Where moderation setting changes are announced to the other nodes of a cluster.
    let peers: ClusterPeers
    /// In a cluster, the way to the other nodes' sessions that sit in this node's rooms.
    let relay: ChatroomRelay?
    /// The app's chatroom status and attribute callbacks (nil: the server sends none).
    let callbacks: CallbackService?
    /// Where the messages of the day are counted.
    let statistics: ServerStatistics?
    /// Where the sweeps' writes are counted.
    let metrics: ServerMetrics?

    init(store: any ChatroomStore, clock: any WallClock, config: ServerConfig, apps: AppRegistry, logger: Logger, peers: ClusterPeers,
         relay: ChatroomRelay? = nil, callbacks: CallbackService? = nil, statistics: ServerStatistics? = nil,
         metrics: ServerMetrics? = nil) {
        self.metrics = metrics
        self.callbacks = callbacks
        self.statistics = statistics
        self.peers = peers
        self.relay = relay
        self.store = store
        self.clock = clock
        self.config = config
        self.apps = apps
        self.logger = logger
        (deliveryStarts, deliveryStarter) = AsyncStream.makeStream(of: ChatroomRoom.self)
    }

    // MARK: settings

    /// The app's chatroom settings: the server's, with the app's own values.
    func limits(_ appId: Int64) -> ServerConfig.ChatroomSettings {
        apps.settings(appId: appId).chatrooms
    }

    /// The app's chatroom settings, loaded from the store on first use.
    func loadSettings(appId: Int64) async throws {
        if state.withLock({ $0.settings[appId] != nil }) { return }
        let loaded = ChatroomSettings(try await store.chatroomSettings(appId: appId))
        state.withLock { state in
            if state.settings[appId] == nil { state.settings[appId] = loaded }
        }
    }

    /// Reads the app's settings again if they were loaded (another node changed them).
    func reloadSettings(appId: Int64) async {
        guard state.withLock({ $0.settings[appId] != nil }) else { return }
        do {
            let loaded = ChatroomSettings(try await store.chatroomSettings(appId: appId))
            state.withLock { $0.settings[appId] = loaded }
        } catch {
            // Dropped instead: the next use loads them.
            state.withLock { $0.settings[appId] = nil }
            logger.error("chatroom settings not reloaded after another node changed them", metadata: ["error": "\(error)"])
        }
    }

    // MARK: join and quit

    /// JOIN_CHATROOM. The reply is queued here, under the lock, so that it reaches the session
    /// before any push of the room.
    func join(_ request: Im_JoinChatroomRequest, frame: Im_Frame, from session: ClientSession) async throws {
        let roomId = request.roomID
        guard ChatroomID.isValid(roomId) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(roomId)) is invalid: use \(UserID.rule)")
        }
        guard let count = chatroomJoinHistoryCount(Int(request.messageCount)) else {
            throw IMError(.chatroomParameterInvalid, "messageCount must be -1 (no history), 0 (the default, 10) or 1 to 50; got \(request.messageCount)")
        }
        try await loadSettings(appId: session.appId)
        await callbacks?.prepare(appId: session.appId)
        let limits = limits(session.appId)
        let key = ChatroomRoom.Key(appId: session.appId, roomId: roomId)
        let now = clock.nowMilliseconds()
        try state.withLock { state in
            // A session closed meanwhile (heartbeat sweep) would leave a seat nobody marks offline.
            guard !session.isClosed else { throw IMError(.connectionUnavailable, "the connection closed during the join: join again once reconnected") }
            let settings = state.settings[session.appId] ?? ChatroomSettings([])
            if let until = settings.until(.block, room: roomId, item: session.userId), until > now {
                throw IMError(.bannedFromChatroom, "user \(session.userId) is banned from chatroom \(roomId) until \(until) (ms): the app's server can lift it with /chatroom/user/block/rollback.json")
            }
            let existing = state.rooms[key]
            // Joins are limited per connection; a client's automatic rejoin of a room that still
            // exists (after a reconnect, every room at once) is not charged.
            if existing == nil || !request.rejoin,
               !session.admitChatroomJoin(now: now, perSecond: limits.joinsPerSecond) {
                throw IMError(.callFrequencyExceeded, "more than \(limits.joinsPerSecond) chatroom joins per second from this client: wait a second before joining again")
            }
            if existing == nil && request.mustExist {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist: use joinChatRoom to create it, or create it through the Server API")
            }
            if existing == nil, !state.mayCreateRoom(appId: session.appId, limit: limits.maxRooms) {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist and cannot be created: the app has \(limits.maxRooms) chatrooms, the most it may have (chatroomMaxRooms); join an existing room")
            }
            if let existing, existing.members[session.userId] == nil, limits.maxMembers > 0,
               existing.members.count >= limits.maxMembers {
                throw IMError(.chatroomFull, "chatroom \(roomId) has \(existing.members.count) members, the most the app allows (chatroomMaxMembers)")
            }
            let held = existing?.members[session.userId]?.seats[session.deviceId]
            let userKey = UserKey(appId: session.appId, userId: session.userId)
            if request.rejoin, held == nil, !limits.multipleRooms,
               state.userRooms[userKey]?.contains(where: { $0 != key }) == true {
                // Removed while away because the user joined another room: an automatic rejoin
                // must not take the user out of that one.
                throw IMError(.notInChatroom, "user \(session.userId) joined another chatroom meanwhile and is no longer in \(roomId)")
            }
            let room = existing ?? createRoom(key, name: roomId, now: now, in: &state)
            if existing == nil { report(key, .created) }
            if room.members[session.userId] == nil { report(key, .joined, users: [session.userId]) }
            if !limits.multipleRooms {
                leaveOtherRooms(userId: session.userId, appId: session.appId, except: key, now: now, in: &state)
                // The user's rooms on other nodes too (published under the lock, ahead of the reply).
                peers.chatroomUserJoined(appId: session.appId, userId: session.userId, roomId: roomId)
            }
            let seatKey = ChatroomRoom.SeatKey(userId: session.userId, deviceId: session.deviceId)
            if let previous = held?.session, previous.id != session.id {
                room.seatOffline(sessionId: previous.id)
                state.sessionRooms[previous.id]?.remove(key)
            }
            var member = room.members[session.userId] ?? ChatroomRoom.Member(joinTime: now)
            member.seats[session.deviceId] = ChatroomRoom.Seat(session: session)
            room.members[session.userId] = member
            room.offline[seatKey] = nil
            room.seatOnline(session)
            room.lastActivity = now
            state.sessionRooms[session.id, default: []].insert(key)
            state.userRooms[UserKey(appId: session.appId, userId: session.userId), default: []].insert(key)

            var reply = Im_JoinChatroomReply()
            reply.roomID = roomId
            reply.sessionID = room.sessionId
            reply.createdAt = room.createdAt
            reply.memberCount = Int32(clamping: room.members.count)
            reply.lastSentTime = room.recent.last?.sentTime ?? 0
            if request.rejoin {
                reply.resumed = held != nil
                reply.messages = held == nil ? [] : Self.newest(room.recent.filter { $0.sentTime > request.since }).map(\.wire)
            } else {
                reply.messages = Self.newest(Array(room.recent.suffix(count))).map(\.wire)
            }
            reply.entries = room.entries.sorted { $0.key < $1.key }.map { $0.value.wire(key: $0.key) }
            session.send(try FrameCodec.reply(to: frame, reply))
        }
    }

    /// The newest of these messages (oldest first) that fit in one frame's budget.
    static func newest(_ messages: [StoredMessage]) -> [StoredMessage] {
        var bytes = 0
        var kept = 0
        for message in messages.reversed() {
            bytes += message.wireSize
            if bytes > frameBudgetBytes && kept > 0 { break }
            kept += 1
        }
        return Array(messages.suffix(kept))
    }

    private func createRoom(_ key: ChatroomRoom.Key, name: String, now: Int64, in state: inout State) -> ChatroomRoom {
        let room = ChatroomRoom(key: key, name: name, now: now, idleDestroyMinutes: limits(key.appId).idleDestroyMinutes)
        state.insert(room)
        logger.debug("chatroom created", metadata: ["room": "\(key.roomId)", "session": "\(room.sessionId)"])
        return room
    }

    /// One room per user: removes the user's seats (every device) from the other rooms and tells
    /// those devices.
    private func leaveOtherRooms(userId: String, appId: Int64, except key: ChatroomRoom.Key, now: Int64, in state: inout State) {
        leaveRooms(userId: userId, appId: appId, except: key, now: now, in: &state)
        state.userRooms[UserKey(appId: appId, userId: userId)] = [key]
    }

    /// The user joined a room another node of the cluster holds, while rooms hold one user at a
    /// time: the user leaves this node's rooms, as `leaveOtherRooms` does.
    func userJoinedElsewhere(appId: Int64, userId: String, roomId: String) {
        let now = clock.nowMilliseconds()
        state.withLock { state in
            let key = ChatroomRoom.Key(appId: appId, roomId: roomId), userKey = UserKey(appId: appId, userId: userId)
            leaveRooms(userId: userId, appId: appId, except: key, now: now, in: &state)
            state.userRooms[userKey] = state.userRooms[userKey]?.contains(key) == true ? [key] : nil
        }
    }

    private func leaveRooms(userId: String, appId: Int64, except key: ChatroomRoom.Key, now: Int64, in state: inout State) {
        let userKey = UserKey(appId: appId, userId: userId)
        for other in state.userRooms[userKey] ?? [] where other != key {
            guard let room = state.rooms[other] else { continue }
            let sessions = room.removeMember(userId)
            for session in sessions { state.sessionRooms[session.id]?.remove(other) }
            report(other, .left, users: [userId])
            room.lastActivity = now
            dropAutoDeleteEntries(of: userId, in: room)
            // Sent now, not after the room's queued pushes: a quick return to this room must not
            // be undone by a late notice.
            if !sessions.isEmpty, let frame = eventFrame(room, .chatroomLeftForOtherRoom, userIds: [userId]) {
                for session in sessions { session.send(frame) }
            }
        }
    }

    /// QUIT_CHATROOM: removes this device's seat; the user's other devices stay in the room.
    func quit(_ request: Im_QuitChatroomRequest, from session: ClientSession) throws {
        let key = ChatroomRoom.Key(appId: session.appId, roomId: request.roomID)
        let now = clock.nowMilliseconds()
        state.withLock { state in
            state.sessionRooms[session.id]?.remove(key)
            guard let room = state.rooms[key] else { return }
            guard room.members[session.userId]?.seats[session.deviceId] != nil else { return }
            let noneLeft = room.removeSeat(userId: session.userId, deviceId: session.deviceId)
            if room.members[session.userId] == nil {
                state.forgetUserRoom(UserKey(appId: session.appId, userId: session.userId), key)
                report(key, .left, users: [session.userId])
            }
            if noneLeft { dropAutoDeleteEntries(of: session.userId, in: room) }
            room.lastActivity = now
        }
    }

    /// A session closed: its seats go offline (kept for the grace period), and the attributes its
    /// user set with autoDelete go once the user has no online seat left in the room.
    func sessionClosed(_ session: ClientSession) {
        let now = clock.nowMilliseconds()
        state.withLock { state in
            guard let keys = state.sessionRooms.removeValue(forKey: session.id) else { return }
            for key in keys {
                guard let room = state.rooms[key], var member = room.members[session.userId],
                      var seat = member.seats[session.deviceId], seat.session?.id == session.id else { continue }
                seat.session = nil
                seat.offlineSince = now
                seat.missed = 0
                member.seats[session.deviceId] = seat
                room.members[session.userId] = member
                room.seatOffline(sessionId: session.id)
                room.offline[ChatroomRoom.SeatKey(userId: session.userId, deviceId: session.deviceId)] = ()
                if !member.hasOnlineSeat { dropAutoDeleteEntries(of: session.userId, in: room) }
            }
        }
    }

    // MARK: sending

    /// A client's chatroom message (already checked by `MessageService`): the sender's device must
    /// hold a seat, and the sender must not be muted.
    func send(_ message: StoredMessage, from session: ClientSession) async throws -> (message: StoredMessage, discarded: Bool) {
        try await loadSettings(appId: session.appId)
        return try await accept(message, origin: session.origin, seatOf: session)
    }

    /// Server API publish: no seat needed, no mute check; `includeSender` decides whether the
    /// sender's own sessions get it.
    public func publish(_ message: StoredMessage) async throws -> (message: StoredMessage, discarded: Bool) {
        try await loadSettings(appId: message.appId)
        return try await accept(message, origin: .serverAPI, seatOf: nil)
    }

    private func accept(_ message: StoredMessage, origin: Origin, seatOf session: ClientSession?) async throws -> (message: StoredMessage, discarded: Bool) {
        let key = ChatroomRoom.Key(appId: message.appId, roomId: message.targetId)
        let keep = limits(message.appId).historyEnabled && message.isInHistory
        let signal = keep ? CommitSignal() : nil
        let now = clock.nowMilliseconds()
        let (stamped, discarded) = try state.withLock { state -> (StoredMessage, Bool) in
            guard let room = state.rooms[key] else {
                if session != nil {
                    throw IMError(.notInChatroom, "you are not in chatroom \(message.targetId): join it before sending")
                }
                throw IMError(.chatroomNotFound, "chatroom \(message.targetId) does not exist: create it or let a member join it first")
            }
            let settings = state.settings[message.appId] ?? ChatroomSettings([])
            if let session {
                guard room.members[session.userId]?.seats[session.deviceId]?.session?.id == session.id else {
                    throw IMError(.notInChatroom, "you are not in chatroom \(message.targetId) on this device: join it before sending")
                }
                let roomId = message.targetId, userId = session.userId
                if settings.isActive(.globalMute, item: userId, now: now) {
                    throw IMError(.mutedInChatroom, "user \(userId) is muted in every chatroom of the app")
                }
                if let until = settings.until(.gag, room: roomId, item: userId), until > now {
                    throw IMError(.mutedInChatroom, "user \(userId) is muted in chatroom \(roomId) until \(until) (ms)")
                }
                if settings.isActive(.roomMute, room: roomId, item: "", now: now),
                   !settings.isActive(.muteWhitelist, room: roomId, item: userId, now: now) {
                    throw IMError(.mutedInChatroom, "chatroom \(roomId) is muted: only its mute whitelist may speak")
                }
            }
            var message = message
            message.sentTime = max(now, room.lastSentTime + 1)
            room.lastSentTime = message.sentTime
            message.uid = uids.next(milliseconds: message.sentTime)
            let priority: ChatroomIntakeQuota.Priority
            if settings.isActive(.userWhitelist, room: message.targetId, item: message.senderId, now: now)
                || settings.isActive(.messageWhitelist, item: message.objectName, now: now) {
                priority = .whitelisted
            } else if settings.isActive(.lowPriority, item: message.objectName, now: now) {
                priority = .low
            } else {
                priority = .high
            }
            guard room.quota.admit(priority, now: now) else { return (message, true) }
            room.lastActivity = now
            removeLongOffline(room, now: now, settings: settings, in: &state)
            if !room.distributionStopped || keep {
                queue(.message(message, origin: origin, stored: signal), in: room)
            }
            return (message, false)
        }
        if !discarded, let signal { try await signal.wait() }
        if !discarded { statistics?.count(CollectionOfOne(stamped)) }
        // Routed before the sender hears it was sent: a chatroom message is in no log to route from.
        if !discarded { try await callbacks?.route(stamped) }
        return (stamped, discarded)
    }

    /// Counts a new message against every offline seat and removes those offline for more than
    /// 30 s or through more than 30 messages (user-whitelisted members stay).
    private func removeLongOffline(_ room: ChatroomRoom, now: Int64, settings: ChatroomSettings, in state: inout State) {
        guard !room.offline.isEmpty else { return }
        for seatKey in Array(room.offline.keys) {
            guard var member = room.members[seatKey.userId], var seat = member.seats[seatKey.deviceId] else {
                room.offline[seatKey] = nil
                continue
            }
            if settings.isActive(.userWhitelist, room: room.key.roomId, item: seatKey.userId, now: now) { continue }
            seat.missed += 1
            if now - seat.offlineSince > ChatroomLimits.offlineGraceMilliseconds || seat.missed > ChatroomLimits.offlineGraceMessages {
                room.removeSeat(userId: seatKey.userId, deviceId: seatKey.deviceId)
                if room.members[seatKey.userId] == nil {
                    state.forgetUserRoom(UserKey(appId: room.key.appId, userId: seatKey.userId), room.key)
                    report(room.key, .left, cause: .removedByServer, users: [seatKey.userId])
                }
                logger.debug("chatroom member removed after being offline", metadata: ["room": "\(room.key.roomId)", "user": "\(seatKey.userId)"])
            } else {
                member.seats[seatKey.deviceId] = seat
                room.members[seatKey.userId] = member
            }
        }
    }

    // MARK: delivery

    /// Queues a push and starts the room's delivery task if it is not running. Under the lock.
    func queue(_ push: ChatroomRoom.Push, in room: ChatroomRoom) {
        room.pending.append(push)
        guard !room.delivering else { return }
        room.delivering = true
        if case .terminated = deliveryStarter.yield(room) { deliveriesEnded(room) }
    }

    func eventFrame(_ room: ChatroomRoom, _ kind: Im_ChatroomEventKind, userIds: [String] = [], minutes: Int64 = 0,
                    extra: String = "") -> [UInt8]? {
        var event = Im_ChatroomEvent()
        event.roomID = room.key.roomId
        event.sessionID = room.sessionId
        event.kind = kind
        event.userIds = userIds
        event.durationMinutes = minutes
        event.extra = extra
        return try? FrameCodec.push(op: .chatroomEvent, event)
    }

    // MARK: room info

    /// CHATROOM_INFO: the member count and up to 20 members by join time, for a member of the room.
    func info(_ request: Im_ChatroomInfoRequest, from session: ClientSession) throws -> Im_ChatroomInfo {
        guard request.count >= 0 else {
            throw IMError(.chatroomParameterInvalid, "count must be 0 (the member count only) to \(ChatroomLimits.infoMembersMax), got \(request.count)")
        }
        try checkMember(session, roomId: request.roomID)
        let order = ChatroomMemberOrder(rawValue: Int(request.order)) ?? .ascending
        let (total, members, createdAt, sessionId) = try members(appId: session.appId, roomId: request.roomID,
                                                                 count: min(Int(request.count), ChatroomLimits.infoMembersMax), order: order)
        var info = Im_ChatroomInfo()
        info.roomID = request.roomID
        info.totalMembers = Int32(clamping: total)
        info.createdAt = createdAt
        info.sessionID = sessionId
        info.members = members.map {
            var member = Im_ChatroomMember()
            member.userID = $0.userId
            member.joinTime = $0.joinTime
            return member
        }
        return info
    }

    /// Room information and history are for the room's members, as on RongCloud (23406 otherwise;
    /// 23410 for a room that does not exist).
    private func checkMember(_ session: ClientSession, roomId: String) throws {
        try state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: session.appId, roomId: roomId)] else {
                throw IMError(.chatroomNotFound, "chatroom \(TextLength.quoted(roomId)) does not exist")
            }
            guard room.members[session.userId] != nil else {
                throw IMError(.notInChatroom, "user \(session.userId) is not in chatroom \(roomId): join it first")
            }
        }
    }

    /// A room's member count and its first `count` members by join time (ties by user id).
    public func members(appId: Int64, roomId: String, count: Int, order: ChatroomMemberOrder) throws
        -> (total: Int, members: [(userId: String, joinTime: Int64)], createdAt: Int64, sessionId: String) {
        // The members are copied under the lock (copy on write) and sorted outside it.
        let (members, createdAt, sessionId) = try state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist")
            }
            return (room.members, room.createdAt, room.sessionId)
        }
        var listed: [(userId: String, joinTime: Int64)] = []
        if count > 0 {
            let all: [(userId: String, joinTime: Int64)] = members.map { ($0.key, $0.value.joinTime) }
            let ascending = order == .ascending
            let sorted = all.sorted { (a: (userId: String, joinTime: Int64), b: (userId: String, joinTime: Int64)) -> Bool in
                if a.joinTime == b.joinTime { return a.userId < b.userId }
                return ascending ? a.joinTime < b.joinTime : a.joinTime > b.joinTime
            }
            listed = Array(sorted.prefix(count))
        }
        return (members.count, listed, createdAt, sessionId)
    }

    // MARK: history

    /// The room's stored history between two times, for the Server API's `/v3` query: ascending
    /// from `start` to `end` when `end >= start`, else descending from `start` down to `end`;
    /// within the retention window. 23414 when the server keeps no chatroom history.
    public func history(appId: Int64, roomId: String, start: Int64, end: Int64, includeStart: Bool, limit: Int) async throws -> [StoredMessage] {
        let floor = try historyFloor(appId: appId)
        // The store reads strictly after (ascending) or before (descending) its record time.
        if end >= start {
            let page = try await store.chatroomHistory(appId: appId, roomId: roomId, recordTime: includeStart ? start - 1 : start,
                                                       count: limit, ascending: true, minSentTime: floor, maxBytes: .max)
            return page.filter { $0.sentTime <= end }
        }
        return try await store.chatroomHistory(appId: appId, roomId: roomId, recordTime: includeStart ? start + 1 : start,
                                               count: limit, ascending: false, minSentTime: max(floor, end), maxBytes: .max)
    }

    /// The oldest time the app's chatroom history is kept for; 23414 when it keeps none.
    private func historyFloor(appId: Int64) throws -> Int64 {
        let limits = limits(appId)
        guard limits.historyEnabled else {
            throw IMError(.chatroomHistoryDisabled, "chatroom history is off for this app: the server's operator can turn on chatroomHistoryEnabled")
        }
        return clock.nowMilliseconds() - Int64(limits.historyRetentionDays) * 86_400_000
    }

    /// CHATROOM_HISTORY: a page of the room's stored history (only when the server keeps it).
    func history(_ request: Im_ChatroomHistoryRequest, from session: ClientSession) async throws -> Im_ChatroomHistoryReply {
        let minTime = try historyFloor(appId: session.appId)
        guard ChatroomLimits.historyCountRange.contains(Int(request.count)) else {
            throw IMError(.chatroomParameterInvalid, "count must be 1 to \(ChatroomLimits.historyCountRange.upperBound), got \(request.count)")
        }
        guard ChatroomID.isValid(request.roomID) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(request.roomID)) is invalid")
        }
        try checkMember(session, roomId: request.roomID)
        let page = try await store.chatroomHistory(appId: session.appId, roomId: request.roomID, recordTime: request.recordTime,
                                                   count: Int(request.count), ascending: request.ascending, minSentTime: minTime,
                                                   maxBytes: Self.frameBudgetBytes)
        // A page of large messages is cut to the frame budget; syncTime then continues after the cut.
        var bytes = 0
        let messages = Array(page.prefix { message in
            bytes += message.wireSize
            return bytes <= Self.frameBudgetBytes || message.uid == page.first?.uid
        })
        var reply = Im_ChatroomHistoryReply()
        reply.messages = messages.map(\.wire)
        reply.syncTime = request.ascending ? (messages.map(\.sentTime).max() ?? request.recordTime)
                                           : (messages.map(\.sentTime).min() ?? request.recordTime)
        return reply
    }

    // MARK: recall

    /// Recalls a chatroom message: the sender within the window (or an admin through the Server
    /// API). The room's latest messages and its stored history get the recall notification; the
    /// members online get `RC:RcCmd`.
    func recall(appId: Int64, operatorId: String, roomId: String, uid: String, isAdmin: Bool, window: Int64?,
                extra: String? = nil, origin: Origin) async throws -> RecallOutcome {
        try await loadSettings(appId: appId)
        let key = ChatroomRoom.Key(appId: appId, roomId: roomId)
        let remembered = state.withLock { $0.rooms[key]?.recent.first { $0.uid == uid } }
        let historyEnabled = limits(appId).historyEnabled
        let stored = remembered == nil && historyEnabled ? try await store.chatroomMessage(appId: appId, uid: uid) : nil
        guard let original = remembered ?? stored, original.targetId == roomId,
              original.objectName != RecallNotificationMessage.objectName else {
            throw IMError(.recallParameterInvalid, "no recallable message \(uid) in chatroom \(roomId): only the room's latest 50 messages (or its stored history) can be recalled")
        }
        guard isAdmin || original.senderId == operatorId else {
            throw IMError(.recallParameterInvalid, "message \(uid) was not sent by \(operatorId): only its sender can recall it")
        }
        let now = clock.nowMilliseconds()
        if let window, now - original.sentTime > window {
            throw IMError(.recallParameterInvalid, "message \(uid) was sent \((now - original.sentTime) / 1000) s ago; messages can be recalled for \(window / 1000) s after sending")
        }
        let notification = try RecallNotificationMessage(operatorId: operatorId, recallTime: now, originalObjectName: original.objectName,
                                                         isAdmin: isAdmin, extra: extra).encode()
        if historyEnabled {
            try await store.replaceChatroomMessage(appId: appId, uid: uid, objectName: RecallNotificationMessage.objectName, content: notification)
        }
        let command = RecallCommandMessage(messageUId: uid, conversationType: ConversationType.chatroom.rawValue, targetId: roomId,
                                           sentTime: original.sentTime, isAdmin: isAdmin ? 1 : 0, extra: extra)
        let content = try command.encode()
        state.withLock { state in
            guard let room = state.rooms[key] else { return }
            if let index = room.recent.firstIndex(where: { $0.uid == uid }) {
                room.recent[index].objectName = RecallNotificationMessage.objectName
                room.recent[index].content = notification
                room.recent[index].flags = .isPersisted
            }
            var recall = StoredMessage(appId: appId, conversationType: .chatroom, conversationKey: chatroomConversationKey(roomId), targetId: roomId,
                                       senderId: original.senderId, objectName: RecallCommandMessage.objectName, content: content,
                                       flags: .none)
            recall.sentTime = max(now, room.lastSentTime + 1)
            room.lastSentTime = recall.sentTime
            recall.uid = uids.next(milliseconds: recall.sentTime)
            queue(.message(recall, origin: origin, stored: nil), in: room)
        }
        return RecallOutcome(command: original, notification: notification, recallTime: now)
    }
}

extension ChatroomService {
    /// Tells the app's server of a room's change (chatroom status sync): taken on with the
    /// callbacks' next batch, from under the rooms' lock.
    func report(_ key: ChatroomRoom.Key, _ change: CallbackService.ChatroomChange, cause: CallbackService.ChatroomCause = .asked,
                users: [String] = []) {
        callbacks?.chatroomChangedSoon(appId: key.appId, roomId: key.roomId, change, cause: cause, userIds: users)
    }
}
