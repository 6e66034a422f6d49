import IMCore
import IMStore
import IMWire
import Logging

/// Conversation state a user keeps on the server and sees on every device: do-not-disturb levels
/// (per conversation and per conversation type), pins, global quiet hours and conversation tags.
///
/// An edit, from a client or the Server API, is checked, applied by the store in one transaction
/// and answered with the rows it changed; every other live session of the user is then sent a
/// `CONVERSATION_STATE_CHANGED` notice and pulls what it has not seen with
/// `CONVERSATION_STATE_SYNC`. The session that made a change already holds it (its reply), so it
/// gets no notice.
public final class ConversationStateService: Sendable {
    private let store: any ConversationStateStore
    private let clock: any WallClock
    private let bus: any SessionBus
    private let events: ServerEvents
    private let logger: Logger

    init(store: any ConversationStateStore, clock: any WallClock, bus: any SessionBus, events: ServerEvents, logger: Logger) {
        self.store = store
        self.clock = clock
        self.bus = bus
        self.events = events
        self.logger = logger
    }

    /// Applies an edit for a user and notifies the user's sessions other than `origin`.
    @discardableResult
    public func edit(_ edit: ConversationStateEdit, appId: Int64, userId: String, origin: Origin) async throws -> ConversationStateDeltaRecord {
        try Self.check(edit)
        let delta = try await explainingRefusals {
            try await store.editConversationState(appId: appId, userId: userId, edit, now: clock.nowMilliseconds())
        }
        if delta.version != delta.previousVersion {
            notify(appId: appId, userId: userId, version: delta.version, except: origin)
            await events.publish(.conversationStateChanged(ConversationStateEvent(appId: appId, userId: userId,
                                                                                   version: delta.version, origin: origin)))
        }
        return delta
    }

    /// The do-not-disturb level a user set for a conversation (or, with an empty target, for a
    /// conversation type); 0 when none is set.
    /// The user's quiet hours, if set.
    public func quietHours(appId: Int64, userId: String) async throws -> QuietHours? {
        try await store.quietHours(appId: appId, userId: userId)
    }

    public func unpushLevel(appId: Int64, userId: String, type: ConversationType, targetId: String, channelId: String) async throws -> Int {
        try await store.conversationUnpushLevel(appId: appId, userId: userId, type: type, targetId: targetId, channelId: channelId)
    }

    /// Sends the user's sessions (all but `except`) a notice that their state is at `version` now.
    func notify(appId: Int64, userId: String, version: UInt64, except origin: Origin) {
        var notice = Im_ConversationStateChanged()
        notice.version = version
        guard let frame = try? FrameCodec.push(op: .conversationStateChanged, notice) else { return }
        bus.send(frame, appId: appId, userId: userId, except: origin)
    }

    /// The checks every edit passes whoever makes it; the store checks what needs stored data
    /// (unknown and duplicate tags, the tag count).
    static func check(_ edit: ConversationStateEdit) throws {
        switch edit {
        case .setLevel(let conversation, _):
            try ConversationStateRules.checkNotificationTarget(conversation, allowTypeWide: true)
        case .setTop(let conversation, _):
            try ConversationStateRules.checkPinTarget(conversation)
        case .setQuietHours(let hours):
            try hours.validate()
        case .removeQuietHours:
            break
        case .addTag(let tagId, let name, _), .renameTag(let tagId, let name):
            try ConversationStateRules.checkTagId(tagId)
            try ConversationStateRules.checkTagName(name)
        case .removeTag(let tagId):
            try ConversationStateRules.checkTagId(tagId)
        case .addConversations(let tagId, let conversations), .removeConversations(let tagId, let conversations):
            try ConversationStateRules.checkTagId(tagId)
            try ConversationStateRules.checkTaggedConversations(conversations)
        case .removeTags(let conversation, let tagIds):
            try ConversationStateRules.checkTaggedConversations([conversation])
            guard !tagIds.isEmpty, tagIds.count <= ConversationStateLimits.maxTagIdsPerCall else {
                throw IMError(.invalidParameter, "pass 1 to \(ConversationStateLimits.maxTagIdsPerCall) tag ids, got \(tagIds.count)")
            }
            for tagId in tagIds { try ConversationStateRules.checkTagId(tagId) }
        case .setTopInTag(let tagId, let conversation, _):
            try ConversationStateRules.checkTagId(tagId)
            try ConversationStateRules.checkTaggedConversations([conversation])
        }
    }

    // MARK: client requests

    /// One page of the session user's state changed after `since`.
    func sync(_ request: Im_ConversationStateSyncRequest, for session: ClientSession) async throws -> Im_ConversationStateDelta {
        let limit = request.limit == 0 ? ConversationStateLimits.defaultSyncPage : Int(request.limit)
        guard ConversationStateLimits.syncPageRange.contains(limit) else {
            throw IMError(.invalidParameter, "limit must be 1...\(ConversationStateLimits.syncPageRange.upperBound), got \(request.limit)")
        }
        try WireNumbers.checkWatermark(request.since, field: "since")
        let page = try await store.conversationStateChanges(appId: session.appId, userId: session.userId, since: request.since, limit: limit)
        return page.wire
    }

    func setNotification(_ request: Im_SetConversationNotificationRequest, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        let level = try ConversationStateRules.checkLevel(Int(request.level))
        return try await edit(.setLevel(try request.conversation.identifier(), level), from: session)
    }

    func setTop(_ request: Im_SetConversationTopRequest, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        try await edit(.setTop(try request.conversation.identifier(), request.isTop), from: session)
    }

    func setQuietHours(_ request: Im_SetQuietHoursRequest, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        let level = request.level == 0 ? PushNotificationLevel.blocked : try ConversationStateRules.checkLevel(Int(request.level))
        let hours = QuietHours(startTime: request.startTime, spanMinutes: Int(request.spanMins), level: level,
                               timeZone: request.timeZone.isEmpty ? nil : request.timeZone)
        return try await edit(.setQuietHours(hours), from: session)
    }

    func removeQuietHours(from session: ClientSession) async throws -> Im_ConversationStateDelta {
        try await edit(.removeQuietHours, from: session)
    }

    func editTag(_ request: Im_ConversationTagRequest, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        switch request.action {
        case .add:
            return try await edit(.addTag(tagId: request.tagID, name: request.name, limit: ConversationStateLimits.maxTagsPerUser), from: session)
        case .rename:
            return try await edit(.renameTag(tagId: request.tagID, name: request.name), from: session)
        case .remove:
            return try await edit(.removeTag(tagId: request.tagID), from: session)
        case .UNRECOGNIZED(let raw):
            throw IMError(.invalidParameter, "unknown tag action \(raw)")
        }
    }

    func tagConversations(_ request: Im_TagConversationsRequest, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        let conversations = try request.conversations.map { try $0.identifier() }
        func single<T>(_ values: [T], _ what: String) throws -> T {
            guard values.count == 1 else { throw IMError(.invalidParameter, "this tag action takes exactly one \(what), got \(values.count)") }
            return values[0]
        }
        switch request.action {
        case .add:
            return try await edit(.addConversations(tagId: try single(request.tagIds, "tag id"), conversations), from: session)
        case .remove:
            return try await edit(.removeConversations(tagId: try single(request.tagIds, "tag id"), conversations), from: session)
        case .removeTags:
            return try await edit(.removeTags(try single(conversations, "conversation"), tagIds: request.tagIds), from: session)
        case .setTop:
            return try await edit(.setTopInTag(tagId: try single(request.tagIds, "tag id"), try single(conversations, "conversation"), request.isTop),
                                  from: session)
        case .UNRECOGNIZED(let raw):
            throw IMError(.invalidParameter, "unknown tag action \(raw)")
        }
    }

    /// A device's own change, answered with what changed. A change too large for one frame (removing
    /// a tag that holds many thousands of conversations) is answered with its version only, and a
    /// previous version no device holds, so the device pulls the change in pages
    /// (CONVERSATION_STATE_SYNC) as it does for changes made elsewhere.
    private func edit(_ edit: ConversationStateEdit, from session: ClientSession) async throws -> Im_ConversationStateDelta {
        let delta = try await self.edit(edit, appId: session.appId, userId: session.userId, origin: session.origin).wire
        guard ((try? delta.serializedData())?.count ?? 0) > FrameBudget.bytes else { return delta }
        var slim = Im_ConversationStateDelta()
        slim.version = delta.version
        slim.previousVersion = UInt64.max
        return slim
    }
}

extension ConversationStateDeltaRecord {
    /// The delta as clients receive it.
    var wire: Im_ConversationStateDelta {
        var delta = Im_ConversationStateDelta()
        delta.settings = settings.map { record in
            var setting = Im_ConversationSetting()
            setting.conversation = Im_ConversationRef(record.conversation)
            setting.notificationLevel = Int32(record.level.rawValue)
            setting.isTop = record.isTop
            setting.version = record.version
            setting.updatedAt = record.updatedAt
            return setting
        }
        if let record = quietHours {
            var state = Im_QuietHoursState()
            state.version = record.version
            if let hours = record.hours {
                state.set = true
                state.startTime = hours.startTime
                state.spanMins = Int32(hours.spanMinutes)
                state.level = Int32(hours.level.rawValue)
                state.timeZone = hours.timeZone ?? ""
            }
            delta.quietHours = state
        }
        delta.tags = tags.map { record in
            var tag = Im_ConversationTag()
            tag.tagID = record.tagId
            tag.name = record.name
            tag.createdAt = record.createdAt
            tag.removed = record.removed
            tag.version = record.version
            return tag
        }
        delta.links = links.map { record in
            var link = Im_ConversationTagLink()
            link.tagID = record.tagId
            link.conversation = Im_ConversationRef(record.conversation)
            link.isTop = record.isTop
            link.removed = record.removed
            link.version = record.version
            link.linkedAt = record.linkedAt
            return link
        }
        delta.version = version
        delta.previousVersion = previousVersion
        delta.more = more
        return delta
    }
}
