import Foundation
import IMCore
import IMStore
import IMWire

/// Where a chatroom call runs: what the gateway, the message services and the Server API call
/// instead of `ChatroomService` for everything about one room's live state.
///
/// A single server holds every room, and each call goes straight to its `ChatroomService`. In a
/// cluster a room lives on one node, its owner (the first node that needed it claims it,
/// `ChatroomCluster`), which runs the call on its `ChatroomService`, unchanged; on any other node
/// the call is sent to the owner and its answer returned as if it had run here. A client's request
/// runs on the owner for a stand-in of the client's session, whose frames come back to this node
/// (`ChatroomRelay`); the room's pushes reach this node's members through a mirror of the room
/// (`ChatroomService+Mirrors`). Moderation settings are not here: they are stored, and every node
/// applies a change to the rooms it holds (`ChatroomService.addSettings`).
public final class ChatroomRouting: Sendable {
    let chatrooms: ChatroomService
    /// The other nodes, in a cluster.
    let cluster: ChatroomCluster?

    init(chatrooms: ChatroomService, cluster: ChatroomCluster?) {
        self.chatrooms = chatrooms
        self.cluster = cluster
    }

    // MARK: clients

    /// A client's chatroom request (the gateway's chatroom ops, `GatewayOps.chatroom`): its reply,
    /// or nil when the op queued its own (a join).
    func client(_ frame: Im_Frame, from session: ClientSession) async throws -> [UInt8]? {
        guard let op = GatewayOps.chatroom[frame.op] else {
            throw IMError(.invalidParameter, "unknown request op \(frame.op.rawValue)")
        }
        guard cluster != nil else { return try await op.run(chatrooms, frame, session) }
        let result = try await route(.client(WireFrame(frame)), appId: session.appId, roomId: try op.roomId(frame), session: session)
        guard case .reply(let reply) = result else { throw Self.unexpected(result) }
        return reply?.bytes
    }

    /// A client's chatroom message, checked and filtered (`MessageService`).
    func send(_ message: StoredMessage, from session: ClientSession) async throws -> (message: StoredMessage, discarded: Bool) {
        guard cluster != nil else { return try await chatrooms.send(message, from: session) }
        let result = try await route(.send(message), appId: message.appId, roomId: message.targetId, session: session)
        guard case .sent(let sent, let discarded) = result else { throw Self.unexpected(result) }
        return (sent, discarded)
    }

    /// A recall of a chatroom message, by its sender or through the Server API.
    func recall(appId: Int64, operatorId: String, roomId: String, uid: String, isAdmin: Bool, window: Int64?,
                extra: String? = nil, origin: Origin) async throws -> RecallOutcome {
        guard cluster != nil else {
            return try await chatrooms.recall(appId: appId, operatorId: operatorId, roomId: roomId, uid: uid, isAdmin: isAdmin,
                                              window: window, extra: extra, origin: origin)
        }
        let result = try await route(.recall(operatorId: operatorId, uid: uid, isAdmin: isAdmin, window: window, extra: extra,
                                             origin: ClusterOrigin(origin)),
                                     appId: appId, roomId: roomId, session: nil)
        guard case .recalled(let outcome) = result else { throw Self.unexpected(result) }
        return outcome
    }

    // MARK: the Server API

    /// Server API publish (`ChatroomService.publish`).
    public func publish(_ message: StoredMessage) async throws -> (message: StoredMessage, discarded: Bool) {
        guard cluster != nil else { return try await chatrooms.publish(message) }
        let result = try await route(.publish(message), appId: message.appId, roomId: message.targetId, session: nil)
        guard case .sent(let sent, let discarded) = result else { throw Self.unexpected(result) }
        return (sent, discarded)
    }

    /// `ChatroomService.create`. In a cluster each room is created by its owner (the node that
    /// claims it, this one for a room no node holds), so the room limit holds per node and a
    /// failure leaves the rooms before it created.
    @discardableResult
    public func create(appId: Int64, rooms: [(id: String, name: String)],
                       rule: ChatroomService.DestroyRule = .whenIdle(minutes: nil)) async throws -> [String] {
        guard cluster != nil else { return try chatrooms.create(appId: appId, rooms: rooms, rule: rule) }
        for room in rooms where !ChatroomID.isValid(room.id) {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(room.id)) is invalid: use \(UserID.rule)")
        }
        var created: [String] = []
        for room in rooms {
            let result = try await route(.create(name: room.name, rule: rule), appId: appId, roomId: room.id, session: nil)
            guard case .rooms(let ids) = result else { throw Self.unexpected(result) }
            created += ids
        }
        return created
    }

    /// `ChatroomService.destroy`: each room on its owner.
    @discardableResult
    public func destroy(appId: Int64, roomIds: [String]) async throws -> [String] {
        guard cluster != nil else { return chatrooms.destroy(appId: appId, roomIds: roomIds) }
        var destroyed: [String] = []
        for roomId in roomIds {
            let result = try await route(.destroy, appId: appId, roomId: roomId, session: nil)
            guard case .rooms(let ids) = result else { throw Self.unexpected(result) }
            destroyed += ids
        }
        return destroyed
    }

    public func setDestroyRule(appId: Int64, roomId: String, _ rule: ChatroomService.DestroyRule) async throws {
        guard cluster != nil else { return try chatrooms.setDestroyRule(appId: appId, roomId: roomId, rule) }
        try await routeDone(.setDestroyRule(rule), appId: appId, roomId: roomId)
    }

    public func summary(appId: Int64, roomId: String) async throws -> ChatroomService.RoomSummary? {
        guard cluster != nil else { return chatrooms.summary(appId: appId, roomId: roomId) }
        let result = try await route(.summary, appId: appId, roomId: roomId, session: nil)
        guard case .summary(let summary) = result else { throw Self.unexpected(result) }
        return summary
    }

    public func areMembers(appId: Int64, roomId: String, userIds: [String]) async throws -> [Bool] {
        guard cluster != nil else { return chatrooms.areMembers(appId: appId, roomId: roomId, userIds: userIds) }
        let result = try await route(.areMembers(userIds), appId: appId, roomId: roomId, session: nil)
        guard case .membership(let present) = result else { throw Self.unexpected(result) }
        return present
    }

    public func addMembers(appId: Int64, roomId: String, userIds: [String]) async throws {
        guard cluster != nil else { return try await chatrooms.addMembers(appId: appId, roomId: roomId, userIds: userIds) }
        guard ChatroomID.isValid(roomId) else {
            throw IMError(.chatroomParameterInvalid, "chatroom id \(TextLength.quoted(roomId)) is invalid: use \(UserID.rule)")
        }
        try await routeDone(.addMembers(userIds), appId: appId, roomId: roomId)
    }

    public func setDistribution(appId: Int64, roomId: String, stopped: Bool) async throws {
        guard cluster != nil else { return try chatrooms.setDistribution(appId: appId, roomId: roomId, stopped: stopped) }
        try await routeDone(.setDistribution(stopped: stopped), appId: appId, roomId: roomId)
    }

    public func members(appId: Int64, roomId: String, count: Int, order: ChatroomMemberOrder) async throws
        -> (total: Int, members: [ChatroomMemberRecord], createdAt: Int64, sessionId: String) {
        guard cluster != nil else {
            let found = try chatrooms.members(appId: appId, roomId: roomId, count: count, order: order)
            return (found.total, found.members.map { ChatroomMemberRecord(userId: $0.userId, joinTime: $0.joinTime) }, found.createdAt, found.sessionId)
        }
        let result = try await route(.members(count: count, order: order), appId: appId, roomId: roomId, session: nil)
        guard case .members(let total, let members, let createdAt, let sessionId) = result else { throw Self.unexpected(result) }
        return (total, members, createdAt, sessionId)
    }

    public func entries(appId: Int64, roomId: String, keys: [String]) async throws -> [ChatroomEntryRecord] {
        guard cluster != nil else { return try Self.records(chatrooms.entries(appId: appId, roomId: roomId, keys: keys)) }
        let result = try await route(.entries(keys: keys), appId: appId, roomId: roomId, session: nil)
        guard case .entries(let entries) = result else { throw Self.unexpected(result) }
        return entries
    }

    /// Sets attributes for the Server API (`ChatroomService.setEntries` by `.server(userId:)`).
    func setEntries(appId: Int64, roomId: String, _ values: [String: String], userId: String, autoDelete: Bool, force: Bool,
                    notify: Bool, extra: String, objectName: String? = nil, content: Data? = nil) async throws {
        guard cluster != nil else {
            return try await chatrooms.setEntries(appId: appId, roomId: roomId, values, by: .server(userId: userId), autoDelete: autoDelete,
                                                  force: force, notify: notify, extra: extra, objectName: objectName, content: content)
        }
        try await routeDone(.setEntries(values, userId: userId, autoDelete: autoDelete, force: force, notify: notify, extra: extra,
                                        objectName: objectName, content: content),
                            appId: appId, roomId: roomId)
    }

    /// Removes attributes for the Server API.
    func removeEntries(appId: Int64, roomId: String, _ keys: [String], userId: String, force: Bool, notify: Bool, extra: String) async throws {
        guard cluster != nil else {
            return try await chatrooms.removeEntries(appId: appId, roomId: roomId, keys, by: .server(userId: userId), force: force,
                                                     notify: notify, extra: extra)
        }
        try await routeDone(.removeEntries(keys, userId: userId, force: force, notify: notify, extra: extra), appId: appId, roomId: roomId)
    }

    /// The ids of the app's rooms, on every node.
    public func roomIds(appId: Int64) async throws -> [String] {
        guard let cluster else { return chatrooms.roomIds(appId: appId) }
        return try await cluster.roomIds(appId: appId)
    }

    // MARK: running a call

    /// Runs a call where the room lives: here when this node holds it (or no node does and the
    /// call does not create it), otherwise on its owner. An owner that no longer holds the room
    /// says so and the owner is looked up again.
    private func route(_ call: ChatroomCall, appId: Int64, roomId: String, session: ClientSession?) async throws -> ChatroomCallResult {
        guard let cluster else { return try await execute(call, appId: appId, roomId: roomId, session: session) }
        let key = ChatroomRoom.Key(appId: appId, roomId: roomId)
        for _ in 0..<4 {
            switch try await cluster.owner(key, claim: call.createsRoom) {
            case nil:
                return try await execute(call, appId: appId, roomId: roomId, session: session)
            case .this?:
                if let result = try await cluster.whileHeld(key, { try await self.execute(call, appId: appId, roomId: roomId, session: session) }) {
                    return result
                }
            case .node(let node)?:
                let result = try await cluster.request(call, appId: appId, roomId: roomId, session: session, to: node)
                switch result {
                case .notOwner:
                    cluster.forgetOwner(key)
                case .failure(let code, let message):
                    throw IMError(ErrorCode(code), message)
                default:
                    return result
                }
            }
        }
        throw IMError(.serverUnavailable, "chatroom \(roomId) is moving between the server's nodes: retry in a moment")
    }

    private func routeDone(_ call: ChatroomCall, appId: Int64, roomId: String) async throws {
        let result = try await route(call, appId: appId, roomId: roomId, session: nil)
        guard case .done = result else { throw Self.unexpected(result) }
    }

    /// Runs a call on this node's `ChatroomService` (for `session`, a client's call).
    func execute(_ call: ChatroomCall, appId: Int64, roomId: String, session: ClientSession?) async throws -> ChatroomCallResult {
        func caller() throws -> ClientSession {
            guard let session else { throw IMError(.invalidParameter, "a client's chatroom request came without its session") }
            return session
        }
        switch call {
        case .client(let wire):
            guard let op = GatewayOps.chatroom[wire.frame.op] else {
                throw IMError(.invalidParameter, "unknown request op \(wire.frame.op.rawValue)")
            }
            return .reply(try await op.run(chatrooms, wire.frame, try caller()).map(WireBytes.init))
        case .send(let message):
            let (sent, discarded) = try await chatrooms.send(message, from: try caller())
            return .sent(sent, discarded: discarded)
        case .recall(let operatorId, let uid, let isAdmin, let window, let extra, let origin):
            return .recalled(try await chatrooms.recall(appId: appId, operatorId: operatorId, roomId: roomId, uid: uid, isAdmin: isAdmin,
                                                        window: window, extra: extra, origin: origin.origin))
        case .create(let name, let rule):
            return .rooms(try chatrooms.create(appId: appId, rooms: [(roomId, name)], rule: rule))
        case .destroy:
            return .rooms(chatrooms.destroy(appId: appId, roomIds: [roomId]))
        case .setDestroyRule(let rule):
            try chatrooms.setDestroyRule(appId: appId, roomId: roomId, rule)
            return .done
        case .summary:
            return .summary(chatrooms.summary(appId: appId, roomId: roomId))
        case .areMembers(let userIds):
            return .membership(chatrooms.areMembers(appId: appId, roomId: roomId, userIds: userIds))
        case .addMembers(let userIds):
            try await chatrooms.addMembers(appId: appId, roomId: roomId, userIds: userIds)
            return .done
        case .setDistribution(let stopped):
            try chatrooms.setDistribution(appId: appId, roomId: roomId, stopped: stopped)
            return .done
        case .members(let count, let order):
            let found = try chatrooms.members(appId: appId, roomId: roomId, count: count, order: order)
            return .members(total: found.total, members: found.members.map { ChatroomMemberRecord(userId: $0.userId, joinTime: $0.joinTime) },
                            createdAt: found.createdAt, sessionId: found.sessionId)
        case .entries(let keys):
            return .entries(Self.records(try chatrooms.entries(appId: appId, roomId: roomId, keys: keys)))
        case .setEntries(let values, let userId, let autoDelete, let force, let notify, let extra, let objectName, let content):
            try await chatrooms.setEntries(appId: appId, roomId: roomId, values, by: .server(userId: userId), autoDelete: autoDelete,
                                           force: force, notify: notify, extra: extra, objectName: objectName, content: content)
            return .done
        case .removeEntries(let keys, let userId, let force, let notify, let extra):
            try await chatrooms.removeEntries(appId: appId, roomId: roomId, keys, by: .server(userId: userId), force: force,
                                              notify: notify, extra: extra)
            return .done
        case .publish(let message):
            let (sent, discarded) = try await chatrooms.publish(message)
            return .sent(sent, discarded: discarded)
        }
    }

    private static func records(_ entries: [(key: String, value: String, ownerId: String, autoDelete: Bool, updatedAt: Int64)]) -> [ChatroomEntryRecord] {
        entries.map { ChatroomEntryRecord(key: $0.key, value: $0.value, ownerId: $0.ownerId, autoDelete: $0.autoDelete, updatedAt: $0.updatedAt) }
    }

    private static func unexpected(_ result: ChatroomCallResult) -> IMError {
        IMError(.serverUnavailable, "another node of the server answered a chatroom call unexpectedly (\(result)): retry in a moment")
    }

    /// Another node's request about a room this node holds (`ClusterNode`).
    func received(_ request: ChatroomRequest) {
        cluster?.received(request) { [self] call, session in
            try await execute(call, appId: request.appId, roomId: request.roomId, session: session)
        }
    }

    // MARK: sessions

    /// A session of this node ended: it leaves the mirrors it sits in, and the owners it asked are
    /// told (they mark its seats offline).
    func sessionEnded(_ session: ClientSession) {
        cluster?.sessionEnded(session)
    }

    /// After `ChatroomService.sweep`: the rooms this node no longer has are given up.
    func releaseUnusedRooms() async {
        await cluster?.releaseUnused()
    }
}
