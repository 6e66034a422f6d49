import Foundation
import IMCore
import IMStore
import IMWire

/// A chatroom's delivery: one task per room, sweeping over the room's online sessions.
///
/// What is queued is published in room order (messages kept in history are stored first; their
/// senders hear back only then), each push at a position. The sweep takes the next sessions that
/// are behind (`chatroomSweepStep` at a time, 1,000 by default), writes to each, as few frames as
/// possible, everything published after its cursor, waits until the event loops have written them,
/// and goes on with the next sessions, round the room again and again until every session has
/// everything. A message published while the sweep is under way goes to the sessions the sweep
/// reaches next, so it has reached every member after one pass over the room, whatever was in
/// progress when it came; and a session gets one write per pass however many messages arrived
/// meanwhile.
extension ChatroomService {
    /// One step's work, taken under the lock.
    private struct SweepStep {
        var sessions: [(session: ClientSession, cursor: UInt64)] = []
        var items: [(position: UInt64, push: ChatroomRoom.Push)] = []
        /// The indexes in `sessions` of the sessions that sent a message still in the room's log (a
        /// superset of the items' senders, found through the room's slots so that the other
        /// sessions are not compared with every sender); each gets an encoding of its own.
        var origins = Set<Int>()
    }

    /// The room's delivery task: publishes what is queued and sweeps until every online session
    /// has everything published.
    func deliver(_ room: ChatroomRoom) async {
        while true {
            await publishQueued(room)
            // Decided under the lock: a push queued after this task stops starts a new task.
            let next = state.withLock { _ -> SweepStep?? in
                if let step = Self.nextStep(room, size: config.chatrooms.sweepStep) { return .some(step) }
                guard room.pending.isEmpty else { return .some(nil) }
                room.delivering = false
                return nil
            }
            guard let next else { return }
            guard let step = next else { continue }
            var frames = SessionOutbound.Batch()
            write(step, room: room, into: &frames)
            metrics?.fannedOut(.chatroom, sessions: step.sessions.count)
            // The next step starts once these frames have been written: a session never has a
            // frame per message queued faster than its event loop writes them.
            await frames.write()
        }
    }

    /// Publishes the queued pushes: stores the messages kept in history (a message that cannot be
    /// stored is dropped and its sender told), then appends them to the room's log.
    private func publishQueued(_ room: ChatroomRoom) async {
        let pushes = state.withLock { _ -> [ChatroomRoom.Push] in
            defer { room.pending = [] }
            return room.pending
        }
        guard !pushes.isEmpty else { return }
        var failed = Set<String>()
        let kept = pushes.compactMap { push -> StoredMessage? in
            if case .message(let message, _, _?) = push { return message }
            return nil
        }
        if !kept.isEmpty {
            var result: Result<Void, any Error> = .success(())
            do {
                try await store.appendChatroomHistory(kept)
            } catch {
                logger.error("chatroom messages could not be stored", metadata: ["room": "\(room.key.roomId)", "error": "\(error)"])
                result = .failure(IMError(.serverUnavailable, "the chatroom message could not be stored: send it again"))
                failed = Set(kept.map(\.uid))
            }
            for case .message(_, _, let stored?) in pushes { stored.resolve(result) }
        }
        state.withLock { _ in
            // What members connected to other nodes get too (nothing to collect on a single server).
            var published: [ChatroomRoom.Push]? = relay != nil && !room.remoteNodes.isEmpty ? [] : nil
            for push in pushes {
                if case .message(let message, _, _) = push {
                    guard !failed.contains(message.uid) else { continue }
                    // What a join fetches from now on; a session joining later gets it from there.
                    if message.isInHistory { room.remember(message) }
                    guard !room.distributionStopped else { continue }
                }
                room.head += 1
                room.log.append((room.head, push))
                published?.append(push)
            }
            // Members connected to other nodes get the same pushes at the same place, from their
            // nodes (under the lock, so in the order of the seats they take and lose).
            if let relay, let published { relayPushes(published, of: room, through: relay) }
        }
    }

    /// Sends the pushes a room published to the nodes of its members connected elsewhere. Under the lock.
    private func relayPushes(_ pushes: [ChatroomRoom.Push], of room: ChatroomRoom, through relay: ChatroomRelay) {
        for node in room.remoteNodes.keys {
            let records = pushes.compactMap { push -> ChatroomPushRecord? in
                switch push {
                case .message(let message, let origin, _):
                    return .message(message, origin: ClusterOrigin(origin))
                case .roomFrame(let frame):
                    return .roomFrame(WireBytes(frame))
                case .frame(let frame, let sessions):
                    let theirs = Array(sessions.filter { room.remoteReaders[$0]?.relayLink?.node == node })
                    return theirs.isEmpty ? nil : .frame(WireBytes(frame), sessions: theirs)
                }
            }
            relay.pushes(room.key, records, to: node)
        }
    }

    /// The next sessions behind the head, from where the sweep is, with their cursors moved to the
    /// head; nil when every session has everything (the log is then emptied). Under the lock.
    private static func nextStep(_ room: ChatroomRoom, size: Int) -> SweepStep? {
        let count = room.readers.count
        let head = room.head
        var step = SweepStep()
        var wrapped = false
        var oldest = head
        // The senders' places among the readers (a superset of those this step's messages came
        // from: everything published since the oldest cursor in the room).
        var originSlots = Set<Int>()
        for (_, push) in room.log {
            if case .message(_, let origin, _) = push, let id = origin.sessionId, let slot = room.slot(of: id) { originSlots.insert(slot) }
        }
        if count > 0 {
            var index = room.sweepIndex % count
            var scanned = 0
            step.sessions.reserveCapacity(min(count, size))
            while scanned < count && step.sessions.count < size {
                if let cursor = room.advance(reader: index, to: head) {
                    if !originSlots.isEmpty, originSlots.contains(index) { step.origins.insert(step.sessions.count) }
                    step.sessions.append((room.readers[index].session, cursor))
                    oldest = min(oldest, cursor)
                }
                scanned += 1
                index += 1
                if index == count {
                    index = 0
                    wrapped = true
                }
            }
            room.sweepIndex = index
        }
        guard !step.sessions.isEmpty else {
            room.log = []
            return nil
        }
        let from = room.log.firstIndex { $0.position > oldest } ?? room.log.count
        step.items = Array(room.log[from...])
        // Once per pass over the room, what every session has goes.
        if wrapped { trim(room) }
        return step
    }

    /// Drops the log entries every session has.
    private static func trim(_ room: ChatroomRoom) {
        let oldest = room.readers.lazy.map(\.cursor).min() ?? room.head
        if let keep = room.log.firstIndex(where: { $0.position > oldest }) {
            if keep > 0 { room.log.removeFirst(keep) }
        } else {
            room.log = []
        }
    }

    /// Queues each session's frames: what was published after its cursor, consecutive messages as
    /// one `CHATROOM_MESSAGES` frame (split at the frame budget), encoded once for every session
    /// with the same cursor unless the session sent one of the messages, is a sender left out
    /// (`includeSender` off), or is the target of a push for listed sessions.
    private func write(_ step: SweepStep, room: ChatroomRoom, into frames: inout SessionOutbound.Batch) {
        /// What sessions with one cursor get (a step has few distinct cursors: those written in the
        /// same earlier step share one).
        struct Range {
            let cursor: UInt64
            let items: ArraySlice<(position: UInt64, push: ChatroomRoom.Push)>
            /// Senders left out of their own messages.
            var excludedUsers = FewStrings()
            /// The pushes for listed sessions, by position.
            var targeted: [(position: UInt64, sessions: Set<String>)] = []
            /// The frames of a session that is none of the above.
            var common: [OutboundFrame]?
            /// Encoded frames by the positions of the listed pushes a session is among.
            var listed: [[UInt64]: [OutboundFrame]] = [:]

            init(cursor: UInt64, items: ArraySlice<(position: UInt64, push: ChatroomRoom.Push)>) {
                self.cursor = cursor
                self.items = items
                for (position, push) in items {
                    switch push {
                    case .message(let message, _, _):
                        if !message.includeSender { excludedUsers.insert(message.senderId) }
                    case .frame(_, let sessions):
                        targeted.append((position, sessions))
                    case .roomFrame:
                        break
                    }
                }
            }
        }
        var ranges: [Range] = []
        var current = -1
        for (position, (session, cursor)) in step.sessions.enumerated() {
            if current < 0 || ranges[current].cursor != cursor {
                if let index = ranges.firstIndex(where: { $0.cursor == cursor }) {
                    current = index
                } else {
                    ranges.append(Range(cursor: cursor, items: step.items.drop { $0.position <= cursor }))
                    current = ranges.count - 1
                }
            }
            if step.origins.contains(position) || ranges[current].excludedUsers.contains(session.userId) {
                for frame in encodedFrames(ranges[current].items, room: room, for: session) { frames.add(OutboundFrame(frame), for: session) }
                continue
            }
            if ranges[current].targeted.isEmpty {
                if ranges[current].common == nil {
                    ranges[current].common = encodedFrames(ranges[current].items, room: room, for: nil).map(OutboundFrame.init)
                }
                for frame in ranges[current].common! { frames.add(frame, for: session) }
                continue
            }
            // Sessions among the same listed pushes share one encoding.
            let listed = ranges[current].targeted.filter { $0.sessions.contains(session.id) }.map(\.position)
            if ranges[current].listed[listed] == nil {
                ranges[current].listed[listed] = encodedFrames(ranges[current].items, room: room, for: nil, listedIn: Set(listed))
                    .map(OutboundFrame.init)
            }
            for frame in ranges[current].listed[listed]! { frames.add(frame, for: session) }
        }
    }

    /// The encoded frames of these pushes for one session, or (`session` nil) for any session that
    /// sent none of the messages and is among the listed pushes at `listedIn`.
    private func encodedFrames(_ items: ArraySlice<(position: UInt64, push: ChatroomRoom.Push)>, room: ChatroomRoom,
                               for session: ClientSession?, listedIn: Set<UInt64> = []) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var batch: [Im_Message] = []
        var bytes = 0
        func flush() {
            guard !batch.isEmpty else { return }
            var push = Im_ChatroomMessages()
            push.roomID = room.key.roomId
            push.messages = batch
            if let frame = try? FrameCodec.push(op: .chatroomMessages, push) { result.append(frame) }
            batch = []
            bytes = 0
        }
        for (position, push) in items {
            switch push {
            case .message(let message, let origin, _):
                if let session {
                    if origin.sessionId == session.id { continue }
                    if !message.includeSender && message.senderId == session.userId { continue }
                }
                let size = message.wireSize
                if bytes + size > Self.frameBudgetBytes { flush() }
                batch.append(message.wire)
                bytes += size
            case .roomFrame(let frame):
                flush()
                result.append(frame)
            case .frame(let frame, let sessions):
                if let session {
                    guard sessions.contains(session.id) else { continue }
                } else {
                    guard listedIn.contains(position) else { continue }
                }
                flush()
                result.append(frame)
            }
        }
        flush()
        return result
    }
}

/// A set of strings that usually holds a few: looked through while small, which for a handful
/// is cheaper than hashing the string looked for (asked once per session of a sweep step).
private struct FewStrings {
    private static let listedAtMost = 16
    private var list: [String] = []
    private var set: Set<String>?

    mutating func insert(_ string: String) {
        if set != nil {
            set!.insert(string)
        } else if !list.contains(string) {
            list.append(string)
            if list.count > Self.listedAtMost { set = Set(list) }
        }
    }

    func contains(_ string: String) -> Bool {
        if let set { return set.contains(string) }
        return list.contains(string)
    }
}
