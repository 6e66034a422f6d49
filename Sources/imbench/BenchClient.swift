import Foundation
import IMCore
import IMWire
import NIOCore
import NIOPosix
import SwiftProtobuf

/// One simulated client: a WebSocket connection speaking imserver's wire protocol (protobuf
/// `Frame`s in binary messages), as IMLib's `WireConnection` does, without IMLib's database and
/// actors, so that one worker thread can drive thousands of them.
///
/// It lives on one event loop (its `LoopDriver`'s) and is touched only there.
final class BenchClient: ChannelInboundHandler {
    /// The socket's bytes once the handshake is done; the client frames them itself.
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum State { case idle, opening, authenticating, syncing, joining, ready, closed }

    let spec: ClientSpec
    /// The client's index in its worker's job.
    let index: Int
    unowned let driver: LoopDriver
    private(set) var state = State.idle

    private var context: ChannelHandlerContext?
    private var frames = WebSocketFrameReader()
    /// Request id → (op, monotonic ns when written).
    private var pending: [UInt32: (op: Im_Op, at: UInt64)] = [:]
    private var nextRequestId: UInt32 = 0
    private var connectStarted: UInt64 = 0
    private var watermark: UInt64 = 0
    private var heartbeat = TimeAmount.seconds(30)
    private var pingTimer: Scheduled<Void>?
    private var ready: EventLoopPromise<Void>?
    private var closingByUs = false
    private var random: Xoshiro256
    private var sendNumber: UInt64 = 0
    /// History paging: the sentTime to page back from (0 = newest), and whether a query is out.
    private var historyCursor: Int64 = 0
    private(set) var historyBusy = false
    /// Group messages sent inside the window that this member received, by seq (the server's commit
    /// order, unique per message): a sparse bitset, one word per 64 seqs, to find duplicates.
    private var groupSeqsSeen: [UInt64: UInt64] = [:]
    /// Chatroom messages sent inside the window that this member received, by message number (see
    /// `ClientRole.chatroomMember`): a bitset, one word per 64 numbers (numbers count from the start
    /// of the load, so it stays small); and the number each chatroom send in flight carries
    /// (publishers only).
    private var chatroomNumbersSeen: [UInt64] = []
    private var chatroomSends: [UInt32: UInt64] = [:]
    /// A chatroom member's user id as bytes, to recognise its own messages in a push; nil otherwise.
    private let chatroomUserId: [UInt8]?
    /// Mailer state: the next mail to send, how many are out, and which mail each request carries.
    private var nextMail = 0
    private var mailsAcked = 0
    private var mailByRequest: [UInt32: Int] = [:]

    init(spec: ClientSpec, index: Int, driver: LoopDriver) {
        self.spec = spec
        self.index = index
        self.driver = driver
        self.random = Xoshiro256(seed: UInt64(index) &* 0x9E37_79B9_7F4A_7C15 &+ monotonicNanos())
        if case .chatroomMember = spec.role { chatroomUserId = Array(spec.userId.utf8) } else { chatroomUserId = nil }
    }

    var outstandingRequests: Int { pending.count }

    // MARK: connecting

    /// Opens the connection: TCP, WebSocket upgrade, CONNECT, then SYNC pages until none is left.
    /// The future succeeds when the client is ready (a mailer: when its mail is delivered too).
    func connect() -> EventLoopFuture<Void> {
        let promise = driver.loop.makePromise(of: Void.self)
        ready = promise
        state = .opening
        connectStarted = monotonicNanos()
        let me = NIOLoopBound(self, eventLoop: driver.loop)
        let host = driver.job.host
        var bootstrap = ClientBootstrap(group: driver.loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(30))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        [WebSocketHandshakeHandler(host: host, path: "/ws"), me.value])
                }
            }
        if let source = driver.sourceAddress(for: index) {
            bootstrap = bootstrap.bind(to: source)
        }
        let address: SocketAddress
        do {
            address = try driver.serverAddress(port: spec.port)
        } catch {
            failConnect("connect-failed", error)
            return promise.futureResult
        }
        bootstrap.connect(to: address).assumeIsolated().whenFailure { error in
            self.failConnect("connect-failed", error)
        }
        return promise.futureResult
    }

    private func failConnect(_ kind: String, _ error: (any Error)? = nil) {
        guard let promise = ready else { return }
        ready = nil
        driver.stats.error(kind)
        if let error, driver.loggedConnectErrors < 5 {
            driver.loggedConnectErrors += 1
            note("worker \(driver.job.workerIndex): client \(spec.userId): \(kind): \(error)")
        }
        promise.fail(BenchError("\(kind) for \(spec.userId)"))
        close()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is WebSocketHandshakeHandler.Opened else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        state = .authenticating
        var request = Im_ConnectRequest()
        request.appKey = driver.job.appKey
        request.token = spec.token
        request.platform = .android
        request.deviceID = "imbench-\(driver.job.workerIndex)-\(index)"
        request.sdkVersion = "imbench"
        write(.connect, request, at: monotonicNanos())
    }

    private func sync() {
        var request = Im_SyncRequest()
        request.since = watermark
        write(.sync, request, at: monotonicNanos())
    }

    private func becameReady(_ now: UInt64) {
        if case .chatroomMember(let room, _, _) = spec.role, state != .joining {
            // Synced: now into the room, without its recent messages, before counting as ready.
            state = .joining
            var request = Im_JoinChatroomRequest()
            request.roomID = room
            request.messageCount = -1
            write(.joinChatroom, request, at: now)
            return
        }
        state = .ready
        recordConnectLatency(.synced, now)
        schedulePing(first: true)
        if case .mailer = spec.role {
            sendMail()
        } else {
            ready?.succeed(())
            ready = nil
        }
    }

    private func recordConnectLatency(_ latency: Latency, _ now: UInt64) {
        if case .mailer = spec.role { return }
        driver.stats.record(latency, nanos: now &- connectStarted)
        if latency == .synced {
            driver.stats.count(.connected)
            if spec.role == .storm {
                driver.stats.stormFirstStart = min(driver.stats.stormFirstStart, connectStarted)
                driver.stats.stormLastDone = max(driver.stats.stormLastDone, now)
            }
        }
    }

    // MARK: load

    /// Sends one message, stamped with the send time: a private message to the peer (chat role) or a
    /// group message to the group (a group member that sends).
    func sendChat(now: UInt64) {
        guard state == .ready else { return }
        var request = Im_SendMessageRequest()
        switch spec.role {
        case .chat(let peer):
            request.conversationType = 1
            request.targetID = peer
        case .groupMember(let group, sender: true, let ultra):
            request.conversationType = ultra ? 10 : 3
            request.targetID = group
        case .chatroomMember(let room, let publisher?, let publishers):
            request.conversationType = 4
            request.targetID = room
            // The message's number in the whole room: publisher p's n-th message is n × publishers + p.
            let number = sendNumber * UInt64(publishers) + UInt64(publisher)
            sendNumber += 1
            request.objectName = "RC:TxtMsg"
            request.content = driver.payload
            request.flags = 3
            request.clientMessageID = "ib:\(now):\(number)"
            guard let id = write(.sendMessage, request, at: now) else { return }
            if driver.inWindow(now) {
                driver.stats.count(.sent)
                driver.stats.chatroom.published(number, at: now)
                chatroomSends[id] = number
            }
            return
        default:
            return
        }
        sendNumber += 1
        request.objectName = "RC:TxtMsg"
        request.content = driver.payload
        request.flags = 3   // ISPERSISTED | ISCOUNTED, as RC:TxtMsg
        request.clientMessageID = "ib:\(now):\(sendNumber)"
        if driver.inWindow(now) { driver.stats.count(.sent) }
        write(.sendMessage, request, at: now)
    }

    /// Asks for the next page of history with the peer (history role): backwards from the newest to
    /// the oldest, then from the newest again.
    func queryHistory(now: UInt64) {
        guard state == .ready, !historyBusy, case .history(let peer) = spec.role else { return }
        var request = Im_HistoryRequest()
        request.conversationType = 1
        request.targetID = peer
        request.recordTime = historyCursor
        request.count = Int32(driver.job.historyCount)
        request.order = 0
        historyBusy = true
        write(.history, request, at: now)
    }

    var canQueryHistory: Bool { state == .ready && !historyBusy }

    private func sendMail() {
        guard case .mailer(let targets, let perTarget) = spec.role else { return }
        let total = targets.count * perTarget
        while nextMail < total && mailByRequest.count < 64 {
            let mail = nextMail
            nextMail += 1
            sendMail(mail, to: targets[mail / perTarget])
        }
        if mailsAcked == total {
            ready?.succeed(())
            ready = nil
        }
    }

    private func sendMail(_ mail: Int, to target: String) {
        var request = Im_SendMessageRequest()
        request.conversationType = 1
        request.targetID = target
        request.objectName = "RC:TxtMsg"
        request.content = driver.payload
        request.flags = 3
        request.clientMessageID = "mail-\(mail)"
        if let id = write(.sendMessage, request, at: monotonicNanos()) { mailByRequest[id] = mail }
    }

    private func mailAnswered(_ id: UInt32, code: Int32) {
        guard let mail = mailByRequest.removeValue(forKey: id), case .mailer(let targets, let perTarget) = spec.role else { return }
        if code == Int32(ErrorCode.sendRateTooHigh.rawValue) {
            // The server's per-client limit: send this one again a little later.
            driver.loop.assumeIsolated().scheduleTask(in: .milliseconds(200)) {
                self.sendMail(mail, to: targets[mail / perTarget])
            }
            return
        }
        mailsAcked += 1
        if code == 0 { driver.stats.count(.mailed) }
        sendMail()
    }

    // MARK: heartbeat

    private func schedulePing(first: Bool) {
        let interval = heartbeat.nanoseconds
        let delay = first ? Int64(random.next() % UInt64(max(interval, 1))) : interval
        pingTimer = driver.loop.assumeIsolated().scheduleTask(in: .nanoseconds(delay)) {
            guard self.state == .ready else { return }
            self.write(.ping, Google_Protobuf_Empty(), at: monotonicNanos())
            self.schedulePing(first: false)
        }
    }

    // MARK: wire

    @discardableResult
    private func write<M: SwiftProtobuf.Message>(_ op: Im_Op, _ body: M, at now: UInt64) -> UInt32? {
        guard let context else { return nil }
        nextRequestId = nextRequestId == UInt32.max ? 1 : nextRequestId + 1
        let id = nextRequestId
        var frame = Im_Frame()
        frame.id = id
        frame.op = op
        let bytes: [UInt8]
        do {
            frame.payload = try body.serializedData()
            bytes = try frame.serializedBytes()
        } catch {
            driver.stats.error("encode")
            return nil
        }
        pending[id] = (op, now)
        context.writeAndFlush(wrapOutboundOut(webSocketFrame(.binary, bytes, context)), promise: nil)
        return id
    }

    /// A frame to the server, masked with a fresh key (RFC 6455 §5.3).
    private func webSocketFrame(_ opcode: WebSocketFrameReader.Opcode, _ payload: some Collection<UInt8>,
                                _ context: ChannelHandlerContext) -> ByteBuffer {
        let key = random.next()
        return WebSocketFrameReader.clientFrame(opcode, payload: payload,
                                                maskKey: (UInt8(truncatingIfNeeded: key), UInt8(truncatingIfNeeded: key >> 8),
                                                          UInt8(truncatingIfNeeded: key >> 16), UInt8(truncatingIfNeeded: key >> 24)),
                                                allocator: context.channel.allocator)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        do {
            try frames.read(unwrapInboundIn(data)) { message in
                switch message.opcode {
                case .binary:
                    readMessage(message.payload)
                case .ping:
                    context.writeAndFlush(wrapOutboundOut(webSocketFrame(.pong, message.payload.readableBytesView, context)), promise: nil)
                case .close:
                    close()
                default:
                    break
                }
            }
        } catch {
            driver.stats.error("websocket-framing")
            close()
        }
    }

    /// One binary WebSocket message from the server: a protobuf `Frame`.
    private func readMessage(_ message: ByteBuffer) {
        var data = message
        if let ownUserId = chatroomUserId {
            // A room's pushes are read without decoding every message (ChatroomPushReader), and
            // counted per frame: at 400,000 receipts a second the generator's own costs matter.
            let now = monotonicNanos()
            let driver = self.driver
            var delivered = 0, duplicates = 0, own = 0
            let outcome = data.withUnsafeReadableBytes { bytes in
                ChatroomPushReader.read(bytes, ownUserId: ownUserId) { item in
                    // Only messages sent inside the window are counted.
                    guard let (sentAt, number) = item.stamp, driver.inWindow(sentAt) else { return }
                    // Every member but the sending session gets each message once; the sender
                    // gets its reply instead.
                    if item.fromSelf {
                        own += 1
                    } else if !firstReceipt(of: number) {
                        duplicates += 1
                    } else {
                        delivered += 1
                        driver.chatroomDeliveries.record(nanos: now &- sentAt)
                        driver.chatroomReceipts.received(number, sentAt: sentAt, at: now)
                    }
                }
            }
            switch outcome {
            case .push(let messages):
                driver.stats.count(.chatroomFrames)
                driver.stats.count(.pushes, messages)
                if driver.inWindow(now) { driver.stats.count(.pushesArrivingInWindow, messages) }
                if delivered > 0 { driver.stats.count(.delivered, delivered) }
                if duplicates > 0 { driver.stats.count(.duplicateDeliveries, duplicates) }
                if own > 0 { driver.stats.count(.ownMessagePushed, own) }
                return
            case .malformed:
                driver.stats.error("undecodable-chatroom-push")
                return
            case .other:
                break
            }
        }
        let bytes = data.readBytes(length: data.readableBytes) ?? []
        guard let frame = try? Im_Frame(serializedBytes: bytes) else {
            driver.stats.error("undecodable-frame")
            return
        }
        received(frame)
    }

    private func received(_ frame: Im_Frame) {
        let now = monotonicNanos()
        guard frame.id != 0 else {
            pushed(frame, now)
            return
        }
        guard let request = pending.removeValue(forKey: frame.id) else { return }   // answered after its timeout
        if frame.code != 0 {
            driver.stats.error(String(frame.code))
            switch request.op {
            case .connect, .sync: failConnect("connect-refused-\(frame.code)")
            case .joinChatroom: failConnect("join-refused-\(frame.code)")
            case .history: historyBusy = false
            case .sendMessage where mailByRequest[frame.id] != nil: mailAnswered(frame.id, code: frame.code)
            case .sendMessage:
                if let number = chatroomSends.removeValue(forKey: frame.id) { driver.stats.chatroom.answered(number, .refused) }
            default: break
            }
            return
        }
        switch request.op {
        case .connect:
            if let reply = try? frame.body(Im_ConnectReply.self), reply.heartbeatIntervalMs > 0 {
                heartbeat = .milliseconds(Int64(reply.heartbeatIntervalMs))
            }
            recordConnectLatency(.connect, now)
            state = .syncing
            sync()
        case .sync:
            guard let reply = try? frame.body(Im_SyncReply.self) else { return failConnect("bad-sync-reply") }
            driver.stats.count(.syncedMessages, reply.messages.count)
            watermark = max(watermark, reply.watermark)
            if reply.morePackages { sync() } else { becameReady(now) }
        case .joinChatroom:
            if let reply = try? frame.body(Im_JoinChatroomReply.self) {
                driver.stats.roomMembersAtJoin = max(driver.stats.roomMembersAtJoin, Int(reply.memberCount))
            }
            becameReady(now)
        case .ping:
            if driver.inWindow(request.at) {
                driver.stats.record(.ping, nanos: now &- request.at)
                driver.stats.count(.pings)
            }
        case .sendMessage:
            if mailByRequest[frame.id] != nil {
                mailAnswered(frame.id, code: 0)
            } else if let number = chatroomSends.removeValue(forKey: frame.id) {
                // A chatroom message sent inside the window: acknowledged, or dropped by the room's
                // intake quota (then no member may receive it).
                let discarded = (try? frame.body(Im_SendMessageReply.self))?.discarded ?? false
                driver.stats.record(.ack, nanos: now &- request.at)
                driver.stats.count(discarded ? .discarded : .acked)
                driver.stats.chatroom.answered(number, discarded ? .discarded : .acked)
                if driver.inWindow(now) { driver.stats.count(.ackedArrivingInWindow) }
            } else {
                driver.stats.count(.ackedTotal)
                if driver.inWindow(request.at) {
                    driver.stats.record(.ack, nanos: now &- request.at)
                    driver.stats.count(.acked)
                }
                if driver.inWindow(now) { driver.stats.count(.ackedArrivingInWindow) }
            }
        case .history:
            historyBusy = false
            guard let reply = try? frame.body(Im_HistoryReply.self) else { return }
            if driver.inWindow(request.at) {
                driver.stats.record(.history, nanos: now &- request.at)
                driver.stats.count(.historyPages)
                driver.stats.count(.historyMessages, reply.messages.count)
            }
            historyCursor = reply.isRemaining ? (reply.messages.last?.sentTime ?? 0) : 0
        default:
            break
        }
    }

    private func pushed(_ frame: Im_Frame, _ now: UInt64) {
        guard frame.op == .message, let message = try? frame.body(Im_Message.self) else {
            if frame.op == .kicked { driver.stats.error("kicked") }
            if frame.op == .chatroomEvent, let event = try? frame.body(Im_ChatroomEvent.self) {
                driver.stats.error("chatroom-event-\(event.kind)")
            }
            return
        }
        driver.stats.count(.pushes)
        if driver.inWindow(now) { driver.stats.count(.pushesArrivingInWindow) }
        watermark = max(watermark, message.seq)
        guard let sentAt = Self.sendTime(message.clientMessageID), driver.inWindow(sentAt) else { return }
        if message.conversationType == 3 || message.conversationType == 10 {
            // Every online member but the sender gets each group (or ultra group) message once; the
            // sending session gets its reply instead.
            if message.senderUserID == spec.userId {
                driver.stats.count(.ownMessagePushed)
                return
            }
            let bit: UInt64 = 1 << (message.seq & 63)
            let word = groupSeqsSeen[message.seq >> 6, default: 0]
            if word & bit != 0 {
                driver.stats.count(.duplicateDeliveries)
                return
            }
            groupSeqsSeen[message.seq >> 6] = word | bit
        }
        driver.stats.record(.delivery, nanos: now &- sentAt)
        driver.stats.count(.delivered)
    }

    /// Marks a chatroom message number as received by this member; false if it was already.
    private func firstReceipt(of number: UInt64) -> Bool {
        let word = Int(number >> 6)
        if word >= chatroomNumbersSeen.count {
            chatroomNumbersSeen.append(contentsOf: repeatElement(0, count: word + 1 - chatroomNumbersSeen.count))
        }
        let bit: UInt64 = 1 << (number & 63)
        guard chatroomNumbersSeen[word] & bit == 0 else { return false }
        chatroomNumbersSeen[word] |= bit
        return true
    }

    /// The send time a benchmark message carries in its client message id ("ib:<ns>:<n>").
    static func sendTime(_ clientMessageId: String) -> UInt64? {
        let utf8 = clientMessageId.utf8
        guard utf8.count > 3, utf8.starts(with: "ib:".utf8) else { return nil }
        var value: UInt64 = 0
        for byte in utf8.dropFirst(3) {
            guard byte != UInt8(ascii: ":") else { return value }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// Counts requests unanswered for longer than the timeout as errors and forgets them.
    func expireRequests(olderThan deadline: UInt64) {
        guard !pending.isEmpty else { return }
        for (id, request) in pending where request.at < deadline {
            pending[id] = nil
            chatroomSends[id] = nil   // its publication stays pending: unanswered
            driver.stats.error("timeout-\(request.op)")
            switch request.op {
            case .connect, .sync, .joinChatroom: failConnect("connect-timeout")
            case .history: historyBusy = false
            case .sendMessage where mailByRequest[id] != nil: mailAnswered(id, code: -1)
            default: break
            }
        }
    }

    // MARK: closing

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if ready != nil {
            failConnect(error is WebSocketHandshakeHandler.Refused ? "upgrade-refused" : "connect-error", error)
        } else {
            driver.stats.error("connection-error")
            close()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let wasReady = state == .ready
        state = .closed
        pingTimer?.cancel()
        pingTimer = nil
        if ready != nil {
            failConnect("closed-while-connecting")
        } else if wasReady && !closingByUs {
            driver.stats.error("disconnected")
        }
        context.fireChannelInactive()
    }

    /// Closes the connection (not counted as an error).
    func close() {
        closingByUs = true
        pingTimer?.cancel()
        pingTimer = nil
        if state != .closed, let context {
            state = .closed
            context.close(promise: nil)
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A small fast generator for masking keys and timer jitter (the system generator makes a syscall
/// per call, which would show up in the generator's profile).
struct Xoshiro256: RandomNumberGenerator {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    init(seed: UInt64) {
        var x = seed
        func splitmix() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s = (splitmix(), splitmix(), splitmix(), splitmix())
    }

    mutating func next() -> UInt64 {
        let result = ((s.1 &* 5) << 7 | (s.1 &* 5) >> 57) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = (s.3 << 45) | (s.3 >> 19)
        return result
    }
}
