import Foundation
import IMCore
import IMStore
import IMWire

/// What the Server API and the server itself do to chatrooms: create, destroy (by call, when idle,
/// or at a set time), moderation settings and their events, and room queries.
extension ChatroomService {
    /// A room as the Server API describes it.
    public struct RoomSummary: Sendable, Equatable, Codable {
        public var roomId: String
        public var name: String
        public var createdAt: Int64
        public var memberCount: Int
        /// 0: destroyed when idle; 1: destroyed at a fixed time.
        public var destroyType: Int
        /// Minutes: the idle time, or the time after creation for a fixed-time room.
        public var destroyMinutes: Int
        public var isMuted: Bool
        public var sessionId: String
    }

    /// How a room created through the Server API is destroyed.
    public enum DestroyRule: Sendable, Equatable, Codable {
        /// After this many minutes without a message, join or quit (the server's setting if nil).
        case whenIdle(minutes: Int?)
        /// This many minutes after creation.
        case atTime(minutes: Int)
    }

    /// Creates rooms that do not exist yet (existing ones keep their members and only take the
    /// new name). Returns the rooms created.
    @discardableResult
    public func create(appId: Int64, rooms: [(id: String, name: String)], rule: DestroyRule = .whenIdle(minutes: nil)) throws -> [String] {
        for room in rooms where !ChatroomID.isValid(room.id) {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(room.id)) is invalid: use \(UserID.rule)")
        }
        let now = clock.nowMilliseconds()
        let limits = limits(appId)
        return try state.withLock { state in
            let new = Set(rooms.map(\.id).filter { state.rooms[ChatroomRoom.Key(appId: appId, roomId: $0)] == nil })
            if limits.maxRooms > 0, state.roomCounts[appId, default: 0] + new.count > limits.maxRooms {
                throw IMError(.apiBadParameter, "the app would have more than \(limits.maxRooms) chatrooms, the most it may have (chatroomMaxRooms): destroy rooms first; none was created")
            }
            var created: [String] = []
            for (id, name) in rooms {
                let key = ChatroomRoom.Key(appId: appId, roomId: id)
                if let existing = state.rooms[key] {
                    existing.name = name
                    apply(rule, to: existing)
                    continue
                }
                let room = ChatroomRoom(key: key, name: name, now: now, idleDestroyMinutes: limits.idleDestroyMinutes)
                apply(rule, to: room)
                state.insert(room)
                report(key, .created)
                created.append(id)
            }
            return created
        }
    }

    private func apply(_ rule: DestroyRule, to room: ChatroomRoom) {
        switch rule {
        case .whenIdle(let minutes):
            room.destroyAt = nil
            room.idleDestroyMinutes = minutes ?? limits(room.key.appId).idleDestroyMinutes
        case .atTime(let minutes):
            room.destroyAt = room.createdAt + Int64(minutes) * 60_000
        }
    }

    /// `/chatroom/destroy/set.json`: changes how an existing room is destroyed.
    public func setDestroyRule(appId: Int64, roomId: String, _ rule: DestroyRule) throws {
        try state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist")
            }
            apply(rule, to: room)
        }
    }

    public func summary(appId: Int64, roomId: String) -> RoomSummary? {
        let now = clock.nowMilliseconds()
        return state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else { return nil }
            let settings = state.settings[appId] ?? ChatroomSettings([])
            return RoomSummary(roomId: roomId, name: room.name, createdAt: room.createdAt, memberCount: room.members.count,
                               destroyType: room.destroyAt == nil ? 0 : 1,
                               destroyMinutes: room.destroyAt.map { Int(($0 - room.createdAt) / 60_000) } ?? room.idleDestroyMinutes,
                               isMuted: settings.isActive(.roomMute, room: roomId, item: "", now: now), sessionId: room.sessionId)
        }
    }

    /// Whether each user has a seat in the room (any device, online or within its grace period).
    public func areMembers(appId: Int64, roomId: String, userIds: [String]) -> [Bool] {
        state.withLock { state in
            let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)]
            return userIds.map { room?.members[$0] != nil }
        }
    }

    /// The ids of the app's rooms.
    public func roomIds(appId: Int64) -> [String] {
        state.withLock { state in state.rooms.keys.filter { $0.appId == appId }.map(\.roomId).sorted() }
    }

    /// The device id of the seat `addMembers` gives: no client device is online on it.
    static let serverSeatDevice = "(server api)"

    /// `/chatroom/join.json` (legacy): creates the room if needed and adds the users, all or none,
    /// as members without a device online. Such a member counts in the room (member queries,
    /// `areMembers`) until the room's next message after the offline grace period (30 s or 30
    /// messages), like any member gone offline; a device of theirs that joins takes a seat of its
    /// own. Bans (23409) and the member limit (23411) apply; the user's other rooms are left alone.
    public func addMembers(appId: Int64, roomId: String, userIds: [String]) async throws {
        guard ChatroomID.isValid(roomId) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(roomId)) is invalid: use \(UserID.rule)")
        }
        try await loadSettings(appId: appId)
        await callbacks?.prepare(appId: appId)
        let key = ChatroomRoom.Key(appId: appId, roomId: roomId)
        let now = clock.nowMilliseconds()
        let limits = limits(appId)
        try state.withLock { state in
            let settings = state.settings[appId] ?? ChatroomSettings([])
            for userId in userIds {
                if let until = settings.until(.block, room: roomId, item: userId), until > now {
                    throw IMError(.bannedFromChatroom, "user \(userId) is banned from chatroom \(roomId) until \(until) (ms): lift it with /chatroom/user/block/rollback.json; nobody was added")
                }
            }
            let existing = state.rooms[key]
            let newcomers = Set(userIds).filter { existing?.members[$0] == nil }.count
            let count = existing?.members.count ?? 0
            if limits.maxMembers > 0, count + newcomers > limits.maxMembers {
                throw IMError(.chatroomFull, "chatroom \(roomId) would have \(count + newcomers) members, more than the app allows (chatroomMaxMembers \(limits.maxMembers)); nobody was added")
            }
            let room: ChatroomRoom
            if let existing {
                room = existing
            } else {
                guard state.mayCreateRoom(appId: appId, limit: limits.maxRooms) else {
                    throw IMError(.apiBadParameter, "chatroom \(roomId) does not exist and the app has \(limits.maxRooms) chatrooms, the most it may have (chatroomMaxRooms): destroy rooms first")
                }
                room = ChatroomRoom(key: key, name: roomId, now: now, idleDestroyMinutes: limits.idleDestroyMinutes)
                state.insert(room)
                report(key, .created)
            }
            let joining = Set(userIds).filter { room.members[$0] == nil }
            if !joining.isEmpty { report(key, .joined, users: joining.sorted()) }
            for userId in userIds where room.members[userId] == nil {
                var member = ChatroomRoom.Member(joinTime: now)
                member.seats[Self.serverSeatDevice] = ChatroomRoom.Seat(session: nil, offlineSince: now, missed: 0)
                room.members[userId] = member
                room.offline[ChatroomRoom.SeatKey(userId: userId, deviceId: Self.serverSeatDevice)] = ()
                state.userRooms[UserKey(appId: appId, userId: userId), default: []].insert(key)
            }
            room.lastActivity = now
        }
    }

    /// `/chatroom/message/stopDistribution.json` and `resumeDistribution.json`.
    public func setDistribution(appId: Int64, roomId: String, stopped: Bool) throws {
        try state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist")
            }
            room.distributionStopped = stopped
        }
    }

    // MARK: destroying

    /// Destroys rooms: members are told (with the room's session id) and lose their seats, and the
    /// attributes go. Returns the rooms that existed.
    @discardableResult
    public func destroy(appId: Int64, roomIds: [String], automatically: Bool = false) -> [String] {
        state.withLock { state in
            roomIds.filter { destroy(ChatroomRoom.Key(appId: appId, roomId: $0), automatically: automatically, in: &state) }
        }
    }

    private func destroy(_ key: ChatroomRoom.Key, automatically: Bool, in state: inout State) -> Bool {
        guard let room = state.removeRoom(key) else { return false }
        report(key, .destroyed, cause: automatically ? .destroyedByServer : .asked)
        let sessions = room.onlineSessions
        for (userId, member) in room.members {
            state.forgetUserRoom(UserKey(appId: key.appId, userId: userId), key)
            for seat in member.seats.values {
                if let session = seat.session { state.sessionRooms[session.id]?.remove(key) }
            }
        }
        room.members = [:]
        room.offline = [:]
        room.entries = [:]
        for session in sessions { room.seatOffline(sessionId: session.id) }
        if let frame = eventFrame(room, automatically ? .chatroomDestroyedAutomatically : .chatroomDestroyedManually) {
            for session in sessions { session.send(frame) }
        }
        logger.debug("chatroom destroyed", metadata: ["room": "\(key.roomId)", "automatically": "\(automatically)"])
        return true
    }

    /// Destroys the rooms idle for their destroy time (unless kept alive) and those whose fixed
    /// time has come, and drops chatroom history older than its retention. Run periodically by the
    /// server; tests call it after moving their clock. Returns the rooms destroyed.
    @discardableResult
    public func sweep() async -> [String] {
        let now = clock.nowMilliseconds()
        let apps = state.withLock { Set($0.rooms.keys.map(\.appId)) }
        for app in apps { try? await loadSettings(appId: app) }
        let destroyed = state.withLock { state -> [String] in
            var destroyed: [String] = []
            for (key, room) in state.rooms {
                let settings = state.settings[key.appId] ?? ChatroomSettings([])
                let due: Bool
                if let destroyAt = room.destroyAt {
                    due = now >= destroyAt
                } else {
                    due = !settings.isActive(.keepAlive, item: key.roomId, now: now)
                        && now - room.lastActivity >= Int64(room.idleDestroyMinutes) * 60_000
                }
                if due, destroy(key, automatically: true, in: &state) { destroyed.append(key.roomId) }
            }
            return destroyed
        }
        // Each app's history by its own retention; an app that turned history off keeps none to
        // read, and what it kept goes once the retention has passed.
        for app in self.apps.all {
            let limits = limits(app.id)
            do {
                try await store.pruneChatroomHistory(appId: app.id, before: now - Int64(limits.historyRetentionDays) * 86_400_000)
            } catch {
                logger.warning("old chatroom history could not be pruned", metadata: ["appKey": "\(app.appKey)", "error": "\(error)"])
            }
        }
        return destroyed.sorted()
    }

    // MARK: moderation

    /// The events a setting change tells members about.
    private func events(for kind: ChatroomSettingKind, adding: Bool) -> Im_ChatroomEventKind? {
        switch kind {
        case .block: return adding ? .chatroomKicked : .chatroomUnbanned
        case .gag: return adding ? .chatroomMuted : .chatroomUnmuted
        case .roomMute: return adding ? .chatroomRoomMuted : .chatroomRoomUnmuted
        case .muteWhitelist: return adding ? .chatroomMuteWhitelistAdded : .chatroomMuteWhitelistRemoved
        case .globalMute: return adding ? .chatroomGloballyMuted : .chatroomGloballyUnmuted
        case .userWhitelist, .keepAlive, .lowPriority, .messageWhitelist: return nil
        }
    }

    /// Adds settings (for `minutes` when given, otherwise without an end) and applies them: a
    /// block kicks the users out of the room at once. With `notify`, the room's members online (for
    /// a global mute, the users' rooms) are told; a kicked user is always told.
    public func addSettings(appId: Int64, kind: ChatroomSettingKind, roomId: String = "", items: [String], minutes: Int? = nil,
                            notify: Bool = false, extra: String = "") async throws {
        try await loadSettings(appId: appId)
        let now = clock.nowMilliseconds()
        let until = minutes.map { now + Int64($0) * 60_000 } ?? .max
        let records = (items.isEmpty && kind == .roomMute ? [""] : items).map {
            ChatroomSettingRecord(appId: appId, kind: kind, roomId: roomId, item: $0, until: until)
        }
        try await store.putChatroomSettings(records)
        peers.chatroomSettingsChanged(ChatroomSettingsChange(appId: appId, kind: kind.rawValue, adding: true, roomId: roomId, users: items,
                                                             minutes: minutes, notify: notify, extra: extra))
        state.withLock { state in
            state.settings[appId, default: ChatroomSettings([])].apply(records)
            announce(kind, adding: true, appId: appId, roomId: roomId, users: items, minutes: minutes, notify: notify, extra: extra,
                     now: now, in: &state)
        }
        await peers.flush()
    }

    /// Removes settings and tells members as `addSettings` does.
    public func removeSettings(appId: Int64, kind: ChatroomSettingKind, roomId: String = "", items: [String], notify: Bool = false,
                               extra: String = "") async throws {
        try await loadSettings(appId: appId)
        let names = items.isEmpty && kind == .roomMute ? [""] : items
        try await store.deleteChatroomSettings(appId: appId, kind: kind, roomId: roomId, items: names)
        peers.chatroomSettingsChanged(ChatroomSettingsChange(appId: appId, kind: kind.rawValue, adding: false, roomId: roomId, users: items,
                                                             minutes: nil, notify: notify, extra: extra))
        let now = clock.nowMilliseconds()
        state.withLock { state in
            state.settings[appId]?.remove(kind, room: roomId, items: names)
            announce(kind, adding: false, appId: appId, roomId: roomId, users: items, minutes: nil, notify: notify, extra: extra,
                     now: now, in: &state)
        }
        await peers.flush()
    }

    /// Another node of the cluster added or removed settings: they are read again, and the change
    /// applies to the rooms this node holds as `addSettings` and `removeSettings` apply it.
    func applySettingsChange(_ change: ChatroomSettingsChange) async {
        await reloadSettings(appId: change.appId)
        guard let kind = ChatroomSettingKind(rawValue: change.kind) else { return }
        let now = clock.nowMilliseconds()
        state.withLock { state in
            announce(kind, adding: change.adding, appId: change.appId, roomId: change.roomId, users: change.users, minutes: change.minutes,
                     notify: change.notify, extra: change.extra, now: now, in: &state)
        }
    }

    /// The active settings of a kind (in a room, or app-wide), with their end times.
    public func settings(appId: Int64, kind: ChatroomSettingKind, roomId: String = "") async throws -> [(item: String, until: Int64)] {
        try await loadSettings(appId: appId)
        let now = clock.nowMilliseconds()
        return state.withLock { $0.settings[appId]?.items(kind, room: roomId, now: now) ?? [] }
    }

    /// The rooms with an active setting of a kind (e.g. the muted rooms).
    public func rooms(appId: Int64, with kind: ChatroomSettingKind) async throws -> [String] {
        try await loadSettings(appId: appId)
        let now = clock.nowMilliseconds()
        return state.withLock { $0.settings[appId]?.rooms(kind, now: now) ?? [] }
    }

    private func announce(_ kind: ChatroomSettingKind, adding: Bool, appId: Int64, roomId: String, users: [String], minutes: Int?,
                          notify: Bool, extra: String, now: Int64, in state: inout State) {
        guard let eventKind = events(for: kind, adding: adding) else { return }
        let rooms: [ChatroomRoom]
        if kind == .globalMute {
            let keys = users.flatMap { state.userRooms[UserKey(appId: appId, userId: $0)] ?? [] }
            rooms = Set(keys).compactMap { state.rooms[$0] }
        } else {
            rooms = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)].map { [$0] } ?? []
        }
        for room in rooms {
            guard let frame = eventFrame(room, eventKind, userIds: users, minutes: Int64(minutes ?? 0), extra: extra) else { continue }
            var kicked: [ClientSession] = []
            if kind == .block && adding {
                let present = users.filter { room.members[$0] != nil }
                if !present.isEmpty { report(room.key, .left, cause: .banned, users: present) }
                for userId in users {
                    let sessions = room.removeMember(userId)
                    for session in sessions { state.sessionRooms[session.id]?.remove(room.key) }
                    state.forgetUserRoom(UserKey(appId: appId, userId: userId), room.key)
                    dropAutoDeleteEntries(of: userId, in: room)
                    kicked += sessions
                }
                room.lastActivity = now
            }
            // Kicked devices hear it now (they are out of the room's queue); the members in turn.
            for session in kicked { session.send(frame) }
            if notify { queue(.frame(frame, to: Set(room.onlineSessions.map(\.id))), in: room) }
        }
    }
}
