import Foundation
import IMCore
import IMStore
import IMWire

/// Chatroom attributes (KV, spec/group-chatroom.md B5): at most 100 per room, only their owner may
/// change or remove them unless forced, 100 operations per second per room. Every change is pushed
/// to the members online (`CHATROOM_ENTRIES_CHANGED`); with a notification, an `RC:chrmKVNotiMsg`
/// message follows it.
extension ChatroomService {
    /// Who changes attributes: a member's session (which must hold a seat) or the Server API.
    enum EntryOperator {
        case member(ClientSession)
        case server(userId: String)

        var userId: String {
            switch self {
            case .member(let session): return session.userId
            case .server(let userId): return userId
            }
        }

        var origin: Origin {
            if case .member(let session) = self { return session.origin }
            return .serverAPI
        }
    }

    /// SET_CHATROOM_ENTRY.
    func setEntry(_ request: Im_SetChatroomEntryRequest, from session: ClientSession) async throws {
        try await setEntries(appId: session.appId, roomId: request.roomID, [request.key: request.value], by: .member(session),
                             autoDelete: request.autoDelete, force: request.force, notify: request.sendNotification,
                             extra: request.notificationExtra)
    }

    /// REMOVE_CHATROOM_ENTRY.
    func removeEntry(_ request: Im_RemoveChatroomEntryRequest, from session: ClientSession) async throws {
        try await removeEntries(appId: session.appId, roomId: request.roomID, [request.key], by: .member(session),
                                force: request.force, notify: request.sendNotification, extra: request.notificationExtra)
    }

    /// Sets attributes, all or none: each key must be free, the operator's own, or `force`d (the
    /// operator then owns it).
    func setEntries(appId: Int64, roomId: String, _ values: [String: String], by actor: EntryOperator, autoDelete: Bool,
                    force: Bool, notify: Bool, extra: String, objectName: String? = nil, content: Data? = nil) async throws {
        try checkEntriesEnabled(appId: appId)
        guard !values.isEmpty else { throw IMError(.chatroomParameterInvalid, "no attribute to set") }
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            try ChatroomEntryLimits.check(key: key, value: value, extra: extra)
        }
        try await loadSettings(appId: appId)
        let now = clock.nowMilliseconds()
        try state.withLock { state in
            let room = try entryRoom(appId: appId, roomId: roomId, actor: actor, state: state)
            for key in values.keys.sorted() {
                if let existing = room.entries[key], existing.ownerId != actor.userId, !force {
                    throw IMError(.chatroomEntryNotOwned, "attribute '\(key)' of chatroom \(roomId) belongs to \(existing.ownerId): only its owner may change it (or force it)")
                }
            }
            let added = values.keys.filter { room.entries[$0] == nil }.count
            guard room.entries.count + added <= ChatroomEntryLimits.entriesPerRoom else {
                throw IMError(.chatroomEntriesExceeded, "chatroom \(roomId) has \(room.entries.count) attributes; a room holds at most \(ChatroomEntryLimits.entriesPerRoom): remove some first")
            }
            try countOperations(values.count, in: room, now: now)
            var changes = Im_ChatroomEntryChanges()
            changes.roomID = roomId
            changes.operatorID = actor.userId
            for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                let entry = ChatroomRoom.Entry(value: value, ownerId: actor.userId, autoDelete: autoDelete, updatedAt: now)
                room.entries[key] = entry
                changes.set.append(entry.wire(key: key))
            }
            if let frame = try? FrameCodec.push(op: .chatroomEntriesChanged, changes) { queue(.roomFrame(frame), in: room) }
            if notify {
                for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                    try queueNotification(ChatroomKVNotificationMessage(type: ChatroomKVNotificationMessage.setType, key: key, value: value,
                                                                        extra: extra.isEmpty ? nil : extra),
                                          in: room, from: actor, now: now)
                }
            } else if let objectName, let content {
                queueMessage(objectName: objectName, content: content, in: room, from: actor, now: now)
            }
        }
        try await callbacks?.chatroomAttributesChanged(appId: appId, roomId: roomId, userId: actor.userId, .set,
                                                       entries: values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, version: now)
    }

    /// Removes attributes, all or none: each must exist and be the operator's own unless `force`d.
    func removeEntries(appId: Int64, roomId: String, _ keys: [String], by actor: EntryOperator, force: Bool, notify: Bool,
                       extra: String) async throws {
        try checkEntriesEnabled(appId: appId)
        guard !keys.isEmpty else { throw IMError(.chatroomParameterInvalid, "no attribute to remove") }
        for key in keys { try ChatroomEntryLimits.check(key: key, extra: extra) }
        try await loadSettings(appId: appId)
        let now = clock.nowMilliseconds()
        try state.withLock { state in
            let room = try entryRoom(appId: appId, roomId: roomId, actor: actor, state: state)
            for key in keys {
                guard let existing = room.entries[key] else {
                    throw IMError(.chatroomEntryNotFound, "chatroom \(roomId) has no attribute '\(key)'")
                }
                if existing.ownerId != actor.userId, !force {
                    throw IMError(.chatroomEntryNotOwned, "attribute '\(key)' of chatroom \(roomId) belongs to \(existing.ownerId): only its owner may remove it (or force it)")
                }
            }
            try countOperations(keys.count, in: room, now: now)
            var changes = Im_ChatroomEntryChanges()
            changes.roomID = roomId
            changes.operatorID = actor.userId
            for key in Set(keys).sorted() {
                room.entries[key] = nil
                changes.removed.append(key)
            }
            if let frame = try? FrameCodec.push(op: .chatroomEntriesChanged, changes) { queue(.roomFrame(frame), in: room) }
            if notify {
                for key in Set(keys).sorted() {
                    try queueNotification(ChatroomKVNotificationMessage(type: ChatroomKVNotificationMessage.removeType, key: key, value: nil,
                                                                        extra: extra.isEmpty ? nil : extra),
                                          in: room, from: actor, now: now)
                }
            }
        }
        try await callbacks?.chatroomAttributesChanged(appId: appId, roomId: roomId, userId: actor.userId, .removed,
                                                       entries: Set(keys).sorted().map { ($0, "") }, version: now)
    }

    /// A room's attributes (all, or the named ones), for the Server API.
    public func entries(appId: Int64, roomId: String, keys: [String]) throws -> [(key: String, value: String, ownerId: String, autoDelete: Bool, updatedAt: Int64)] {
        try checkEntriesEnabled(appId: appId)
        return try state.withLock { state in
            guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else {
                throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist")
            }
            let wanted = keys.isEmpty ? room.entries.keys.sorted() : keys.filter { room.entries[$0] != nil }
            return wanted.compactMap { key in
                room.entries[key].map { (key, $0.value, $0.ownerId, $0.autoDelete, $0.updatedAt) }
            }
        }
    }

    private func checkEntriesEnabled(appId: Int64) throws {
        guard limits(appId).entriesEnabled else {
            throw IMError(.chatroomEntriesDisabled, "chatroom attributes are turned off for this app: the server's operator can turn on chatroomEntriesEnabled")
        }
    }

    private func entryRoom(appId: Int64, roomId: String, actor: EntryOperator, state: State) throws -> ChatroomRoom {
        guard let room = state.rooms[ChatroomRoom.Key(appId: appId, roomId: roomId)] else {
            if case .member = actor {
                throw IMError(.notInChatroom, "you are not in chatroom \(roomId): join it before changing its attributes")
            }
            throw IMError(.chatroomNotFound, "chatroom \(roomId) does not exist")
        }
        if case .member(let session) = actor,
           room.members[session.userId]?.seats[session.deviceId]?.session?.id != session.id {
            throw IMError(.notInChatroom, "you are not in chatroom \(roomId) on this device: join it before changing its attributes")
        }
        return room
    }

    /// 100 attribute operations per second per room; a call touching n keys counts n.
    private func countOperations(_ count: Int, in room: ChatroomRoom, now: Int64) throws {
        if room.entryWindowStart == .min || now - room.entryWindowStart >= 1000 {
            room.entryWindowStart = now
            room.entryOperations = 0
        }
        guard room.entryOperations + count <= ChatroomEntryLimits.operationsPerSecond else {
            throw IMError(.chatroomEntryRateExceeded, "chatroom \(room.key.roomId) had \(room.entryOperations) attribute operations this second; the limit is \(ChatroomEntryLimits.operationsPerSecond) per second: retry in a moment")
        }
        room.entryOperations += count
    }

    private func queueNotification(_ content: ChatroomKVNotificationMessage, in room: ChatroomRoom, from actor: EntryOperator, now: Int64) throws {
        queueMessage(objectName: ChatroomKVNotificationMessage.objectName, content: try content.encode(), in: room, from: actor, now: now,
                     flags: ChatroomKVNotificationMessage.persistentFlag)
    }

    /// Queues a server-made message of the room (no quota: it is the room's own notice).
    private func queueMessage(objectName: String, content: Data, in room: ChatroomRoom, from actor: EntryOperator, now: Int64,
                              flags: PersistentFlag = .persistedAndCounted) {
        var message = StoredMessage(appId: room.key.appId, conversationType: .chatroom, conversationKey: chatroomConversationKey(room.key.roomId),
                                    targetId: room.key.roomId, senderId: actor.userId, objectName: objectName, content: content,
                                    flags: flags)
        message.sentTime = max(now, room.lastSentTime + 1)
        room.lastSentTime = message.sentTime
        message.uid = uids.next(milliseconds: message.sentTime)
        queue(.message(message, origin: actor.origin, stored: nil), in: room)
    }

    /// Removes the attributes a user set with autoDelete (when the user leaves or goes offline),
    /// silently: members' copies follow through the changes push, without a notification message.
    func dropAutoDeleteEntries(of userId: String, in room: ChatroomRoom) {
        let keys = room.entries.filter { $0.value.ownerId == userId && $0.value.autoDelete }.map(\.key).sorted()
        guard !keys.isEmpty else { return }
        var changes = Im_ChatroomEntryChanges()
        changes.roomID = room.key.roomId
        changes.operatorID = userId
        for key in keys {
            room.entries[key] = nil
            changes.removed.append(key)
        }
        if let frame = try? FrameCodec.push(op: .chatroomEntriesChanged, changes) { queue(.roomFrame(frame), in: room) }
        callbacks?.chatroomAttributesRemovedSoon(appId: room.key.appId, roomId: room.key.roomId, userId: userId, keys: keys,
                                                 version: clock.nowMilliseconds())
    }
}
