import Foundation
import IMCore
import IMStore

/// Online status (在线状态订阅) and chatroom callbacks: taken on where they happen.
extension CallbackService {
    /// A device came online: taken on before its connect is answered, when the app subscribes.
    func sessionOnline(_ session: ClientSession) async throws {
        guard let url = try await settings(appId: session.appId).statusURL, !url.isEmpty else { return }
        session.markStatusReported()
        let body = CallbackPayloads.status(userId: session.userId, status: .online, platform: session.platform,
                                           time: clock.nowMilliseconds(), clientIp: session.clientAddress, sessionId: session.id)
        try await takeOn([record(appId: session.appId, kind: .status, orderKey: "user:" + session.userId,
                                 dedupKey: session.id + ":online", body: body)])
    }

    /// A device's session ended (closed, dropped, kicked: offline; logout: logout), if its coming
    /// online was reported. After the online record in the user's order.
    func sessionEnded(_ session: ClientSession) {
        let report = session.statusReport
        guard report.reported else { return }
        let status: CallbackPayloads.Status = report.loggedOut ? .logout : .offline
        let body = CallbackPayloads.status(userId: session.userId, status: status, platform: session.platform,
                                           time: clock.nowMilliseconds(), clientIp: session.clientAddress, sessionId: session.id)
        takeOnSoon([record(appId: session.appId, kind: .status, orderKey: "user:" + session.userId,
                           dedupKey: session.id + ":ended", body: body)])
    }

    /// The results of a deactivation (`reactivated` false) or reactivation, one per user, taken on
    /// before the call is answered when the app subscribes. RongCloud reports them this way because
    /// its deactivation runs later; here the work is done when the call answers.
    func accountChanged(appId: Int64, userIds: [String], operateId: String, reactivated: Bool) async throws {
        guard let url = try await settings(appId: appId).deactivationURL, !url.isEmpty else { return }
        let time = clock.nowMilliseconds()
        try await takeOn(userIds.map { userId in
            record(appId: appId, kind: .deactivation, orderKey: "user:" + userId, dedupKey: operateId + ":" + userId,
                   body: CallbackPayloads.deactivation(userId: userId, operateId: operateId, type: reactivated ? 1 : 0, time: time))
        })
    }

    /// RongCloud's chatroom status `type`.
    enum ChatroomChange: Int {
        case created = 0, joined = 1, left = 2, destroyed = 3
    }

    /// RongCloud's chatroom status `status`: why.
    enum ChatroomCause: Int {
        /// A client or the Server API asked for it.
        case asked = 0
        /// The server let the member go (offline too long).
        case removedByServer = 1
        /// The member was banned from the room.
        case banned = 2
        /// The server destroyed the room (idle, or its rule).
        case destroyedByServer = 3
    }

    /// The chatroom status record of a change, nil when the app does not subscribe.
    func chatroomStatusRecord(appId: Int64, roomId: String, change: ChatroomChange, cause: ChatroomCause,
                              userIds: [String] = []) async -> CallbackRecord? {
        guard let url = try? await settings(appId: appId).chatroomStatusURL, !url.isEmpty else { return nil }
        let body = CallbackPayloads.chatroomStatus(roomId: roomId, userIds: userIds, type: change.rawValue, status: cause.rawValue,
                                                   time: clock.nowMilliseconds())
        return record(appId: appId, kind: .chatroomStatus, orderKey: "room:" + roomId, body: body)
    }

    /// Takes a chatroom change on, durable when this returns (the change is then answered).
    func chatroomChanged(appId: Int64, roomId: String, _ change: ChatroomChange, cause: ChatroomCause = .asked,
                         userIds: [String] = []) async throws {
        guard let record = await chatroomStatusRecord(appId: appId, roomId: roomId, change: change, cause: cause, userIds: userIds) else { return }
        try await takeOn([record])
    }

    /// Takes a chatroom change on from code that cannot wait.
    func chatroomChangedSoon(appId: Int64, roomId: String, _ change: ChatroomChange, cause: ChatroomCause, userIds: [String] = []) {
        guard let settings = cachedSettings(appId: appId) else {
            Task {
                guard let record = await self.chatroomStatusRecord(appId: appId, roomId: roomId, change: change, cause: cause,
                                                                   userIds: userIds) else { return }
                self.takeOnSoon([record])
            }
            return
        }
        guard let url = settings.chatroomStatusURL, !url.isEmpty else { return }
        let body = CallbackPayloads.chatroomStatus(roomId: roomId, userIds: userIds, type: change.rawValue, status: cause.rawValue,
                                                   time: clock.nowMilliseconds())
        takeOnSoon([record(appId: appId, kind: .chatroomStatus, orderKey: "room:" + roomId, body: body)])
    }

    /// RongCloud's chatroom attribute `optType`.
    enum AttributeChange: Int {
        case set = 1, removed = 2, cleared = 3
    }

    /// Takes attribute changes on, durable when this returns.
    func chatroomAttributesChanged(appId: Int64, roomId: String, userId: String, _ change: AttributeChange,
                                   entries: [(key: String, value: String)], version: Int64) async throws {
        guard let url = try await settings(appId: appId).chatroomAttributeURL, !url.isEmpty else { return }
        let now = clock.nowMilliseconds()
        let records = entries.map { entry in
            record(appId: appId, kind: .chatroomAttribute, orderKey: "room:" + roomId,
                   body: CallbackPayloads.chatroomAttribute(roomId: roomId, key: entry.key, value: entry.value, optType: change.rawValue,
                                                            userId: userId, time: now, version: version))
        }
        try await takeOn(records)
    }

    /// Attributes a user's leaving took away (autoDelete), from code that cannot wait.
    func chatroomAttributesRemovedSoon(appId: Int64, roomId: String, userId: String, keys: [String], version: Int64) {
        guard let url = cachedSettings(appId: appId)?.chatroomAttributeURL, !url.isEmpty else { return }
        let now = clock.nowMilliseconds()
        takeOnSoon(keys.map { key in
            record(appId: appId, kind: .chatroomAttribute, orderKey: "room:" + roomId,
                   body: CallbackPayloads.chatroomAttribute(roomId: roomId, key: key, value: "", optType: AttributeChange.removed.rawValue,
                                                            userId: userId, time: now, version: version))
        })
    }

    /// Reads the app's settings into the cache, so that code under a lock finds them.
    func prepare(appId: Int64) async {
        _ = try? await settings(appId: appId)
    }

    /// Returns once every record taken on so far is durable.
    func durable() async {
        try? await intake.write([])
    }
}
