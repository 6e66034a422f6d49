import IMCore
import IMWire
import SwiftProtobuf

/// What one request op of a signed-in session does: decode its body, call the service, encode the
/// reply. A handler returns nil when it queued its own reply (a sync page, a chatroom join).
struct GatewayOp: Sendable {
    let run: @Sendable (ServerCore, Im_Frame, ClientSession) async throws -> [UInt8]?

    /// A request the service answers with a reply body.
    static func reply<Request: SwiftProtobuf.Message, Reply: SwiftProtobuf.Message>(
        _: Request.Type, _ call: @escaping @Sendable (ServerCore, Request, ClientSession) async throws -> Reply
    ) -> GatewayOp {
        GatewayOp { core, frame, session in
            try FrameCodec.reply(to: frame, try await call(core, try body(Request.self, of: frame), session))
        }
    }

    /// A request whose answer is read in a child task: the reads that go deep (sync pages,
    /// history, summaries, receipts) leave their memory with the child, not in the connection's
    /// long-lived task, whose high-water mark every idle connection would otherwise keep.
    static func read<Request: SwiftProtobuf.Message, Reply: SwiftProtobuf.Message>(
        _: Request.Type, _ call: @escaping @Sendable (ServerCore, Request, ClientSession) async throws -> Reply
    ) -> GatewayOp {
        GatewayOp { core, frame, session in
            let request = try body(Request.self, of: frame)
            async let reading = call(core, request, session)
            return try FrameCodec.reply(to: frame, try await reading)
        }
    }

    /// A request answered with an empty reply once the service is done.
    static func done<Request: SwiftProtobuf.Message>(
        _: Request.Type, _ call: @escaping @Sendable (ServerCore, Request, ClientSession) async throws -> Void
    ) -> GatewayOp {
        GatewayOp { core, frame, session in
            try await call(core, try body(Request.self, of: frame), session)
            return FrameCodec.emptyReply(to: frame)
        }
    }

    static func body<M: SwiftProtobuf.Message>(_ type: M.Type, of frame: Im_Frame) throws -> M {
        do {
            return try frame.body(type)
        } catch {
            throw IMError(.invalidParameter, "malformed \(frame.op) request")
        }
    }
}

/// The gateway's op table: every request a signed-in client may send, and the service that answers it.
enum GatewayOps {
    /// The answer to a PING: the server's time. (The gateway answers pings on the event loop
    /// itself; the table's entry is for callers that run ops directly.)
    static func pong(to frame: Im_Frame, now: Int64) throws -> [UInt8] {
        var pong = Im_Pong()
        pong.serverTime = now
        return try FrameCodec.reply(to: frame, pong)
    }

    static let table: [Im_Op: GatewayOp] = [
        .ping: GatewayOp { core, frame, _ in try pong(to: frame, now: core.clock.nowMilliseconds()) },
        .disconnect: GatewayOp { core, frame, session in
            // disconnect(receivePush: false) and logout: the device gets no pushes any more.
            if let request = try? frame.body(Im_DisconnectRequest.self), !request.receivePush {
                session.markLoggedOut()
                if let push = core.push { await push.forgetDevice(of: session) }
            }
            session.send(try FrameCodec.reply(to: frame, Im_DisconnectRequest()))
            session.close()
            return nil
        },
        .connect: GatewayOp { _, _, _ in throw IMError(.connectionExists, "this connection is already connected") },

        // Push: the device's token and the user's push profile.
        .setPushToken: .done(Im_SetPushTokenRequest.self) { core, request, session in
            try await core.requirePush().setToken(request, for: session)
        },
        .getPushProfile: .reply(Im_SetPushProfileRequest.self) { core, _, session in
            PushService.wire(try await core.requirePush().profile(appId: session.appId, userId: session.userId))
        },
        .setPushProfile: .reply(Im_SetPushProfileRequest.self) { core, request, session in
            PushService.wire(try await core.requirePush().setProfile(request, appId: session.appId, userId: session.userId))
        },

        // Media files: tokens for uploading and downloading over HTTP.
        .mediaUploadToken: .reply(Im_MediaUploadRequest.self) { core, request, session in
            try core.media.uploadToken(request, for: session)
        },
        .mediaDownloadToken: .reply(Im_MediaUploadRequest.self) { core, _, session in
            try core.media.downloadToken(for: session)
        },

        // Messages, offline sync and history.
        .sendMessage: .reply(Im_SendMessageRequest.self) { core, request, session in
            let started = ContinuousClock.now
            defer { core.metrics.clientMessageAnswered(took: ContinuousClock.now - started) }
            do {
                if !request.pushConfig.isEmpty { try await core.checkPushTemplate(request.pushConfig, appId: session.appId) }
                let reply = try await core.messages.send(request, from: session)
                core.metrics.clientMessage(type: ConversationType(rawValue: Int(request.conversationType)), outcome: "stored")
                return reply
            } catch {
                core.metrics.clientMessage(type: ConversationType(rawValue: Int(request.conversationType)),
                                           outcome: String((error as? IMError)?.code.rawValue ?? ErrorCode.serverUnavailable.rawValue))
                throw error
            }
        },
        .sync: GatewayOp { core, frame, session in
            let request = try GatewayOp.body(Im_SyncRequest.self, of: frame)
            async let reading = core.sync.page(request, for: session)
            var page = try await reading
            core.metrics.syncPage(messages: page.messages.count)
            page.morePackages = !session.syncPageMayEnd(!page.morePackages)
            // The page goes out before the live messages held during sync are released.
            session.send(try FrameCodec.reply(to: frame, page))
            session.syncProgressed(watermark: page.watermark, complete: !page.morePackages)
            return nil
        },
        .history: .read(Im_HistoryRequest.self) { core, request, session in
            if request.conversationType == Int32(ConversationType.ultraGroup.rawValue) {
                return try await core.ultraGroups.history(request, for: session)
            }
            return try await core.sync.history(request, for: session)
        },

        // Ultra groups.
        .ultraGroupSummary: .read(Im_UltraGroupSummaryRequest.self) { core, request, session in try await core.ultraGroups.summary(request, for: session) },
        .ultraGroupRead: .reply(Im_UltraGroupReadRequest.self) { core, request, session in try await core.ultraGroups.markRead(request, from: session) },
        .modifyMessage: .reply(Im_ModifyMessageRequest.self) { core, request, session in try await core.ultraGroups.modify(request, from: session) },

        // Read receipts of group messages.
        .readReceiptRequest: .done(Im_ReadReceiptRequest.self) { core, request, session in try await core.groups.requestReceipts(request, from: session) },
        .readReceiptResponse: .done(Im_ReadReceiptResponse.self) { core, request, session in try await core.groups.respond(request, from: session) },
        .readReceiptUsers: .read(Im_ReadUsersRequest.self) { core, request, session in try await core.groups.readUsers(request, from: session) },
        .readReceiptSync: .read(Im_ReadReceiptSyncRequest.self) { core, request, session in try await core.groups.receiptSync(request, for: session) },

        // The message lifecycle.
        .recallMessage: .reply(Im_RecallRequest.self) { core, request, session in try await core.lifecycle.recall(request, from: session) },
        .deleteRemoteMessages: .done(Im_DeleteRemoteMessagesRequest.self) { core, request, session in try await core.lifecycle.deleteRemote(request, from: session) },
        .clearRemoteHistory: .done(Im_ClearRemoteHistoryRequest.self) { core, request, session in try await core.lifecycle.clearRemote(request, from: session) },
        .updateExpansion: .done(Im_ExpansionUpdate.self) { core, request, session in try await core.lifecycle.updateExpansion(request, from: session) },

        // Conversation state.
        .conversationStateSync: .read(Im_ConversationStateSyncRequest.self) { core, request, session in try await core.conversationState.sync(request, for: session) },
        .setConversationNotification: .reply(Im_SetConversationNotificationRequest.self) { core, request, session in
            try await core.conversationState.setNotification(request, from: session)
        },
        .setConversationTop: .reply(Im_SetConversationTopRequest.self) { core, request, session in try await core.conversationState.setTop(request, from: session) },
        .setQuietHours: .reply(Im_SetQuietHoursRequest.self) { core, request, session in try await core.conversationState.setQuietHours(request, from: session) },
        .removeQuietHours: GatewayOp { core, frame, session in
            try FrameCodec.reply(to: frame, try await core.conversationState.removeQuietHours(from: session))
        },
        .editConversationTag: .reply(Im_ConversationTagRequest.self) { core, request, session in try await core.conversationState.editTag(request, from: session) },
        .tagConversations: .read(Im_TagConversationsRequest.self) { core, request, session in try await core.conversationState.tagConversations(request, from: session) },

        // Chatrooms: run where the room lives (`ChatroomRouting`), as the table below says.
        .joinChatroom: .chatroom, .quitChatroom: .chatroom, .chatroomInfo: .chatroom,
        .setChatroomEntry: .chatroom, .removeChatroomEntry: .chatroom, .chatroomHistory: .chatroom,
    ]

    /// The chatroom ops: each names its room, and runs on the node that holds the room (in a
    /// cluster, for a session standing in for the client's).
    static let chatroom: [Im_Op: ChatroomOp] = [
        .joinChatroom: ChatroomOp(Im_JoinChatroomRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            // The join queues its own reply, ahead of the room's pushes.
            try await chatrooms.join(request, frame: frame, from: session)
            // What the join told the app's server (created, joined) is durable before the op ends.
            await chatrooms.callbacks?.durable()
            return nil
        },
        .quitChatroom: ChatroomOp(Im_QuitChatroomRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            try chatrooms.quit(request, from: session)
            await chatrooms.callbacks?.durable()
            return FrameCodec.emptyReply(to: frame)
        },
        .chatroomInfo: ChatroomOp(Im_ChatroomInfoRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            try FrameCodec.reply(to: frame, try chatrooms.info(request, from: session))
        },
        .setChatroomEntry: ChatroomOp(Im_SetChatroomEntryRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            try await chatrooms.setEntry(request, from: session)
            return FrameCodec.emptyReply(to: frame)
        },
        .removeChatroomEntry: ChatroomOp(Im_RemoveChatroomEntryRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            try await chatrooms.removeEntry(request, from: session)
            return FrameCodec.emptyReply(to: frame)
        },
        .chatroomHistory: ChatroomOp(Im_ChatroomHistoryRequest.self, room: { $0.roomID }) { chatrooms, request, frame, session in
            // Read in a child task, as `GatewayOp.read` does.
            async let reading = chatrooms.history(request, from: session)
            return try FrameCodec.reply(to: frame, try await reading)
        },
    ]
}

extension GatewayOp {
    /// A chatroom op (`GatewayOps.chatroom`), run where its room lives.
    static let chatroom = GatewayOp { core, frame, session in try await core.chatroomRouting.client(frame, from: session) }
}

/// A client request about one chatroom: the room it names, and what `ChatroomService` does with it
/// (the reply frame, or nil when it queued its own).
struct ChatroomOp: Sendable {
    let roomId: @Sendable (Im_Frame) throws -> String
    let run: @Sendable (ChatroomService, Im_Frame, ClientSession) async throws -> [UInt8]?

    init<Request: SwiftProtobuf.Message>(_: Request.Type, room: @escaping @Sendable (Request) -> String,
                                         _ call: @escaping @Sendable (ChatroomService, Request, Im_Frame, ClientSession) async throws -> [UInt8]?) {
        roomId = { frame in room(try GatewayOp.body(Request.self, of: frame)) }
        run = { chatrooms, frame, session in try await call(chatrooms, try GatewayOp.body(Request.self, of: frame), frame, session) }
    }
}

extension ServerCore {
    /// Runs one request of a signed-in session through the op table, as the gateway does for each
    /// frame it reads, and returns the reply to write: the op's answer, or an error reply with
    /// RongCloud's code and what to do. Nil when the op queued its own replies (a sync page, a
    /// chatroom join) or ended the session.
    package func answer(_ frame: Im_Frame, from session: ClientSession) async -> [UInt8]? {
        session.touch(now: clock.nowMilliseconds())
        do {
            guard let op = GatewayOps.table[frame.op] else {
                throw IMError(.invalidParameter, "unknown request op \(frame.op.rawValue)")
            }
            return try await op.run(self, frame, session)
        } catch let error as IMError {
            return FrameCodec.errorReply(to: frame, error)
        } catch {
            logger.error("request failed", metadata: ["op": "\(frame.op)", "error": "\(error)"])
            return FrameCodec.errorReply(to: frame, IMError(.serverUnavailable, "the server failed to handle the request: retry later"))
        }
    }
}
