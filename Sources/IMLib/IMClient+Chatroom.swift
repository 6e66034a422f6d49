import Foundation
import IMCore
import IMWire

/// Chatrooms (RongCloud's chatroom APIs of `RCChatRoomClient`): join and quit, room info,
/// attributes and remote chatroom history. Messages are sent with `sendMessage(.chatroom, ...)` and
/// arrive through `receivedMessages()` while this device is in the room.
extension IMClient {
    /// Chatroom status changes: joining, joined, quit, destroyed, removed, moderation events.
    public nonisolated func chatRoomStatusUpdates() -> AsyncStream<ChatRoomStatusEvent> {
        chatroomStatusEvents.stream()
    }

    /// Chatroom attribute changes, and the sync after each join.
    public nonisolated func chatRoomKVUpdates() -> AsyncStream<ChatRoomKVEvent> {
        chatroomKVEvents.stream()
    }

    /// The rooms this device is in (rejoined by itself after a reconnect).
    public var joinedChatRooms: [String] { joinedChatrooms.keys.sorted() }

    /// Joins a room, creating it if it does not exist. `messageCount`: -1 fetches no history, 0 the
    /// default of 10, otherwise up to 50 of the room's latest messages, which arrive through
    /// `receivedMessages()`. By default a user is in one room at a time: joining another quits the
    /// first (on every device).
    ///
    /// - Throws: 23409 when banned from the room, 23411 when it is full, 23412 for a bad id or count.
    public func joinChatRoom(_ roomId: String, messageCount: Int = ChatroomLimits.joinHistoryDefault) async throws {
        try await join(roomId, messageCount: messageCount, mustExist: false)
    }

    /// Joins a room only if it exists (23410 otherwise); as `joinChatRoom` in every other way.
    public func joinExistChatRoom(_ roomId: String, messageCount: Int = ChatroomLimits.joinHistoryDefault) async throws {
        try await join(roomId, messageCount: messageCount, mustExist: true)
    }

    private func join(_ roomId: String, messageCount: Int, mustExist: Bool) async throws {
        guard ChatroomID.isValid(roomId) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id '\(roomId.prefix(80))' is invalid: use \(UserID.rule)")
        }
        guard chatroomJoinHistoryCount(messageCount) != nil else {
            throw IMError(.chatroomParameterInvalid, "messageCount must be -1 (no history), 0 (the default, 10) or 1 to 50; got \(messageCount)")
        }
        let connection = try connected()
        var request = Im_JoinChatroomRequest()
        request.roomID = roomId
        request.messageCount = Int32(min(messageCount, ChatroomLimits.joinHistoryMax))
        request.mustExist = mustExist
        chatroomStatusEvents.yield(.joining(roomId: roomId))
        // Tracked (unsynced) before the request, so that pushes handled before the reply are kept.
        let previous = joinedChatrooms[roomId]
        if previous == nil { joinedChatrooms[roomId] = JoinedChatroom(messageCount: messageCount, mustExist: mustExist) }
        let reply: Im_JoinChatroomReply
        do {
            reply = try await connection.request(.joinChatroom, request, timeout: options.requestTimeout).body(Im_JoinChatroomReply.self)
        } catch {
            if previous == nil { joinedChatrooms[roomId] = nil }
            chatroomStatusEvents.yield(.joinFailed(roomId: roomId, code: (error as? IMError)?.code ?? .responseTimeout))
            throw error
        }
        // Other rooms this device left by joining this one are told by the server
        // (`.removed(leftForOtherRoom)`), so that a server allowing several rooms keeps them.
        joinedChatrooms[roomId, default: JoinedChatroom(messageCount: messageCount, mustExist: mustExist)].messageCount = messageCount
        await joined(reply, rejoin: false)
    }

    /// Applies a join reply: the history messages, the attribute cache, and the events.
    private func joined(_ reply: Im_JoinChatroomReply, rejoin: Bool) async {
        let roomId = reply.roomID
        guard var room = joinedChatrooms[roomId] else { return }
        let recreated = !room.sessionId.isEmpty && room.sessionId != reply.sessionID
        room.sessionId = reply.sessionID
        let before = room.entries
        let after = Dictionary(reply.entries.map { ($0.key, $0.value) }) { _, last in last }
        room.entries = after
        room.synced = true
        room.keyChanges = [:]
        room.snapshots += 1
        room.lastMessageTime = max(room.lastMessageTime, reply.lastSentTime, reply.messages.map(\.sentTime).max() ?? 0)
        joinedChatrooms[roomId] = room
        chatroomStatusEvents.yield(.joined(roomId: roomId, sessionId: reply.sessionID))
        if rejoin && (!reply.resumed || recreated) { chatroomStatusEvents.yield(.reset(roomId: roomId)) }
        if rejoin {
            // What changed while this device was away is reported like any change.
            let updated = after.filter { before[$0.key] != $0.value }
            let removed = before.filter { after[$0.key] == nil }
            if !updated.isEmpty { chatroomKVEvents.yield(.updated(roomId: roomId, entries: updated)) }
            if !removed.isEmpty { chatroomKVEvents.yield(.removed(roomId: roomId, entries: removed)) }
        }
        chatroomKVEvents.yield(.synced(roomId: roomId))
        if !reply.messages.isEmpty { await receive(reply.messages, offline: false, hasPackage: false, watermark: nil) }
    }

    /// Leaves a room on this device (the user's other devices stay in it) and deletes the room's
    /// messages from this device.
    public func quitChatRoom(_ roomId: String) async throws {
        guard ChatroomID.isValid(roomId) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id '\(roomId.prefix(80))' is invalid")
        }
        var request = Im_QuitChatroomRequest()
        request.roomID = roomId
        _ = try await connected().request(.quitChatroom, request, timeout: options.requestTimeout)
        await forgetChatroom(roomId)
        chatroomStatusEvents.yield(.quit(roomId: roomId))
    }

    /// Drops a room from this device: no rejoin, no attribute cache, and its local messages go.
    func forgetChatroom(_ roomId: String) async {
        joinedChatrooms[roomId] = nil
        guard let store else { return }
        do {
            _ = try await store.deleteMessages(type: .chatroom, targetId: roomId, channelId: "", sentAtOrBefore: 0)
            _ = try await store.removeConversation(type: .chatroom, targetId: roomId, channelId: "")
        } catch {
            options.logger.error("could not delete a chatroom's local messages", metadata: ["room": "\(roomId)", "error": "\(error)"])
        }
    }

    /// The room's member count and, for `count` > 0, up to 20 members by join time.
    public func getChatRoomInfo(_ roomId: String, count: Int = 0, order: ChatroomMemberOrder = .ascending) async throws -> ChatRoomInfo {
        guard count >= 0 else { throw IMError(.chatroomParameterInvalid, "count must be 0 to \(ChatroomLimits.infoMembersMax), got \(count)") }
        var request = Im_ChatroomInfoRequest()
        request.roomID = roomId
        request.count = Int32(min(count, ChatroomLimits.infoMembersMax))
        request.order = Int32(order.rawValue)
        let info = try await connected().request(.chatroomInfo, request, timeout: options.requestTimeout).body(Im_ChatroomInfo.self)
        return ChatRoomInfo(roomId: roomId, totalMemberCount: Int(info.totalMembers),
                            members: info.members.map { ChatRoomInfo.Member(userId: $0.userID, joinTime: $0.joinTime) },
                            memberOrder: order)
    }

    // MARK: attributes

    /// Sets an attribute of a room this device is in. A new key is created; an existing one may be
    /// changed only by the user who set it (23424). `autoDelete`: removed when this user leaves the
    /// room or goes offline. `sendNotification`: members also get an `RC:chrmKVNotiMsg` message.
    ///
    /// - Throws: 23423 when the room has 100 attributes, 23425 over 100 operations per second,
    ///   23426 when attributes are off, 23406 when not in the room, 23412 for a bad key or value.
    public func setChatRoomEntry(_ roomId: String, key: String, value: String, sendNotification: Bool = false,
                                 autoDelete: Bool = false, notificationExtra: String = "") async throws {
        try await setEntry(roomId, key: key, value: value, sendNotification: sendNotification, autoDelete: autoDelete,
                           notificationExtra: notificationExtra, force: false)
    }

    /// Sets an attribute whoever set it; this user becomes its owner.
    public func forceSetChatRoomEntry(_ roomId: String, key: String, value: String, sendNotification: Bool = false,
                                      autoDelete: Bool = false, notificationExtra: String = "") async throws {
        try await setEntry(roomId, key: key, value: value, sendNotification: sendNotification, autoDelete: autoDelete,
                           notificationExtra: notificationExtra, force: true)
    }

    private func setEntry(_ roomId: String, key: String, value: String, sendNotification: Bool, autoDelete: Bool,
                          notificationExtra: String, force: Bool) async throws {
        try ChatroomEntryLimits.check(key: key, value: value, extra: notificationExtra)
        var request = Im_SetChatroomEntryRequest()
        request.roomID = roomId
        request.key = key
        request.value = value
        request.sendNotification = sendNotification
        request.autoDelete = autoDelete
        request.notificationExtra = notificationExtra
        request.force = force
        let mark = joinedChatrooms[roomId]?.mark(key)
        _ = try await connected().request(.setChatroomEntry, request, timeout: options.requestTimeout)
        // The change push may come after the reply: the cache takes the change now, unless the
        // server told of the key since (its own push, or a later change by someone else).
        if joinedChatrooms[roomId]?.synced == true, joinedChatrooms[roomId]?.mark(key) == mark {
            joinedChatrooms[roomId]?.entries[key] = value
        }
    }

    /// Removes an attribute this user set (23424 for another user's, 23427 for a missing one).
    public func removeChatRoomEntry(_ roomId: String, key: String, sendNotification: Bool = false, notificationExtra: String = "") async throws {
        try await removeEntry(roomId, key: key, sendNotification: sendNotification, notificationExtra: notificationExtra, force: false)
    }

    /// Removes an attribute whoever set it.
    public func forceRemoveChatRoomEntry(_ roomId: String, key: String, sendNotification: Bool = false, notificationExtra: String = "") async throws {
        try await removeEntry(roomId, key: key, sendNotification: sendNotification, notificationExtra: notificationExtra, force: true)
    }

    private func removeEntry(_ roomId: String, key: String, sendNotification: Bool, notificationExtra: String, force: Bool) async throws {
        try ChatroomEntryLimits.check(key: key, extra: notificationExtra)
        var request = Im_RemoveChatroomEntryRequest()
        request.roomID = roomId
        request.key = key
        request.sendNotification = sendNotification
        request.notificationExtra = notificationExtra
        request.force = force
        let mark = joinedChatrooms[roomId]?.mark(key)
        _ = try await connected().request(.removeChatroomEntry, request, timeout: options.requestTimeout)
        if joinedChatrooms[roomId]?.synced == true, joinedChatrooms[roomId]?.mark(key) == mark {
            joinedChatrooms[roomId]?.entries[key] = nil
        }
    }

    /// An attribute's value from this device's copy, kept in step with the server while in the room.
    ///
    /// - Throws: 34004 before the room's attributes are synced (listen for `.synced`), 23427 when
    ///   there is no such attribute, 23406 when this device is not in the room.
    public func getChatRoomEntry(_ roomId: String, key: String) throws -> String {
        let entries = try getAllChatRoomEntries(roomId)
        guard let value = entries[key] else {
            throw IMError(.chatroomEntryNotFound, "chatroom \(roomId) has no attribute '\(key)'")
        }
        return value
    }

    /// Every attribute of a room, from this device's copy (34004 before it is synced).
    public func getAllChatRoomEntries(_ roomId: String) throws -> [String: String] {
        guard let room = joinedChatrooms[roomId] else {
            throw IMError(.notInChatroom, "this device is not in chatroom \(roomId): join it first")
        }
        guard room.synced else {
            throw IMError(.chatroomNotSynced, "the attributes of chatroom \(roomId) are not synced yet: wait for chatRoomKVUpdates() to report .synced")
        }
        return room.entries
    }

    // MARK: remote history

    /// A page of the room's history kept by the server (when its operator turned it on; 23414
    /// otherwise). `count` is 1 to 200. Returns the messages and the `syncTime` to pass as the next
    /// page's `recordTime`: the earliest sentTime (descending) or the latest (ascending).
    public func getRemoteChatroomHistoryMessages(_ roomId: String, recordTime: Int64, count: Int,
                                                 order: TimestampOrder) async throws -> (messages: [Message], syncTime: Int64) {
        guard ChatroomLimits.historyCountRange.contains(count) else {
            throw IMError(.chatroomParameterInvalid, "count must be 1 to \(ChatroomLimits.historyCountRange.upperBound), got \(count)")
        }
        var request = Im_ChatroomHistoryRequest()
        request.roomID = roomId
        request.recordTime = recordTime
        request.count = Int32(count)
        request.ascending = order == .ascending
        let reply = try await connected().request(.chatroomHistory, request, timeout: options.requestTimeout).body(Im_ChatroomHistoryReply.self)
        let me = store?.userId ?? ""
        let now = options.clock.nowMilliseconds()
        return (reply.messages.map { message(from: $0, me: me, receivedAt: now) }, reply.syncTime)
    }

    // MARK: pushes and reconnects

    /// A batch of the room's live messages.
    func chatroomMessages(_ push: Im_ChatroomMessages) async {
        guard var room = joinedChatrooms[push.roomID] else { return }
        if let last = push.messages.map(\.sentTime).max() { room.lastMessageTime = max(room.lastMessageTime, last) }
        joinedChatrooms[push.roomID] = room
        await receive(push.messages, offline: false, hasPackage: false, watermark: nil)
    }

    /// Attributes changed in a room: the cache follows, and the change is reported.
    func chatroomEntriesChanged(_ changes: Im_ChatroomEntryChanges) {
        guard var room = joinedChatrooms[changes.roomID], room.synced else { return }
        var updated: [String: String] = [:]
        var removed: [String: String] = [:]
        for entry in changes.set {
            if room.entries[entry.key] != entry.value { updated[entry.key] = entry.value }
            room.entries[entry.key] = entry.value
            room.keyChanges[entry.key, default: 0] += 1
        }
        for key in changes.removed {
            if let value = room.entries.removeValue(forKey: key) { removed[key] = value }
            room.keyChanges[key, default: 0] += 1
        }
        joinedChatrooms[changes.roomID] = room
        if !updated.isEmpty { chatroomKVEvents.yield(.updated(roomId: changes.roomID, entries: updated)) }
        if !removed.isEmpty { chatroomKVEvents.yield(.removed(roomId: changes.roomID, entries: removed)) }
    }

    func chatroomEvent(_ event: Im_ChatroomEvent) async {
        let roomId = event.roomID
        func notification(_ kind: ChatRoomNotification.Kind) -> ChatRoomNotification {
            ChatRoomNotification(roomId: roomId, kind: kind, userIds: event.userIds, durationMinutes: event.durationMinutes, extra: event.extra)
        }
        let me = store?.userId
        switch event.kind {
        case .chatroomDestroyedManually, .chatroomDestroyedAutomatically:
            // A notice about an earlier incarnation of a room joined again since is stale.
            guard let room = joinedChatrooms[roomId], room.sessionId.isEmpty || room.sessionId == event.sessionID else { return }
            await forgetChatroom(roomId)
            chatroomStatusEvents.yield(.destroyed(roomId: roomId, sessionId: event.sessionID,
                                                  automatically: event.kind == .chatroomDestroyedAutomatically))
        case .chatroomKicked:
            if let me, event.userIds.contains(me), joinedChatrooms[roomId] != nil {
                await forgetChatroom(roomId)
                chatroomStatusEvents.yield(.removed(roomId: roomId, reason: .banned))
            }
            chatroomStatusEvents.yield(.notification(notification(.banned)))
        case .chatroomLeftForOtherRoom:
            guard joinedChatrooms[roomId] != nil else { return }
            await forgetChatroom(roomId)
            chatroomStatusEvents.yield(.removed(roomId: roomId, reason: .leftForOtherRoom))
        case .chatroomUnbanned: chatroomStatusEvents.yield(.notification(notification(.unbanned)))
        case .chatroomMuted: chatroomStatusEvents.yield(.notification(notification(.muted)))
        case .chatroomUnmuted: chatroomStatusEvents.yield(.notification(notification(.unmuted)))
        case .chatroomRoomMuted: chatroomStatusEvents.yield(.notification(notification(.roomMuted)))
        case .chatroomRoomUnmuted: chatroomStatusEvents.yield(.notification(notification(.roomUnmuted)))
        case .chatroomMuteWhitelistAdded: chatroomStatusEvents.yield(.notification(notification(.muteWhitelistAdded)))
        case .chatroomMuteWhitelistRemoved: chatroomStatusEvents.yield(.notification(notification(.muteWhitelistRemoved)))
        case .chatroomGloballyMuted: chatroomStatusEvents.yield(.notification(notification(.globallyMuted)))
        case .chatroomGloballyUnmuted: chatroomStatusEvents.yield(.notification(notification(.globallyUnmuted)))
        default: break
        }
    }

    /// The connection dropped: the attribute caches are no longer in step with the server.
    func chatroomsDisconnected() {
        for roomId in joinedChatrooms.keys { joinedChatrooms[roomId]?.synced = false }
    }

    /// After a reconnect: joins the rooms this device was in again, asking for the messages it
    /// missed if it still held its seat.
    func rejoinChatrooms(_ scope: ConnectionScope) async {
        let connection = scope.connection
        for roomId in joinedChatrooms.keys.sorted() {
            guard !Task.isCancelled else { return }
            // The app may have quit or left the room while earlier rooms were rejoining.
            guard let room = joinedChatrooms[roomId] else { continue }
            var request = Im_JoinChatroomRequest()
            request.roomID = roomId
            request.messageCount = Int32(room.messageCount)
            request.mustExist = room.mustExist
            request.rejoin = true
            request.since = room.lastMessageTime
            chatroomStatusEvents.yield(.joining(roomId: roomId))
            do {
                let reply = try await connection.request(.joinChatroom, request, timeout: options.requestTimeout).body(Im_JoinChatroomReply.self)
                guard !Task.isCancelled else { return }
                guard joinedChatrooms[roomId] != nil else {
                    // Quit while the rejoin was on its way: leave again.
                    var quit = Im_QuitChatroomRequest()
                    quit.roomID = roomId
                    _ = try? await connection.request(.quitChatroom, quit, timeout: options.requestTimeout)
                    continue
                }
                await joined(reply, rejoin: true)
            } catch {
                guard !Task.isCancelled else { return }
                let code = (error as? IMError)?.code ?? .responseTimeout
                chatroomStatusEvents.yield(.joinFailed(roomId: roomId, code: code))
                switch code {
                case .notInChatroom:
                    await forgetChatroom(roomId)
                    chatroomStatusEvents.yield(.removed(roomId: roomId, reason: .leftForOtherRoom))
                case .bannedFromChatroom, .chatroomNotFound, .chatroomFull:
                    await forgetChatroom(roomId)
                default:
                    break
                }
            }
        }
    }
}
