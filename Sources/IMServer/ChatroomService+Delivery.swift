import Foundation
import IMCore
import IMWire

/// A chatroom's delivery: one task per room, sweeping over the room's online sessions.
///
/// What is queued is published in room order (messages kept in history are stored first; their
/// senders hear back only then), each push at a position. The sweep takes the next sessions that
/// are behind (`sweepChunk` at a time), writes to each, as few frames as possible, everything
/// published after its cursor, waits until the event loops have written them, and goes on with the
/// next sessions, round the room again and again until every session has everything. A message
/// published while the sweep is under way goes to the sessions the sweep reaches next, so it has
/// reached every member after one pass over the room, whatever was in progress when it came; and a
/// session gets one write per pass however many messages arrived meanwhile.
extension ChatroomService {
    /// Sessions written per step of the sweep: large enough that a step is mostly socket writes,
    /// small enough that a message arriving during a step waits little for the next one.
    static let sweepChunk = 1_000

    /// One step's work, taken under the lock.
    private struct SweepStep {
        var sessions: [(session: ClientSession, cursor: UInt64)] = []
        var items: [(position: UInt64, push: ChatroomRoom.Push)] = []
    }

    /// The room's delivery task: publishes what is queued and sweeps until every online session
    /// has everything published.
    func deliver(_ room: ChatroomRoom) async {
        while true {
            await publishQueued(room)
            // Decided under the lock: a push queued after this task stops starts a new task.
            let next = state.withLock { _ -> SweepStep?? in
                if let step = Self.nextStep(room) { return .some(step) }
                guard room.pending.isEmpty else { return .some(nil) }
                room.delivering = false
                return nil
            }
            guard let next else { return }
            guard let step = next else { continue }
            var frames = SessionOutbound.Batch()
            write(step, room: room, into: &frames)
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
            for push in pushes {
                if case .message(let message, _, _) = push {
                    guard !failed.contains(message.uid) else { continue }
                    // What a join fetches from now on; a session joining later gets it from there.
                    if message.isInHistory { room.remember(message) }
                    guard !room.distributionStopped else { continue }
                }
                room.head += 1
                room.log.append((room.head, push))
            }
        }
    }

    /// The next sessions behind the head, from where the sweep is, with their cursors moved to the
    /// head; nil when every session has everything (the log is then emptied). Under the lock.
    private static func nextStep(_ room: ChatroomRoom) -> SweepStep? {
        let sessions = room.onlineSessions
        var step = SweepStep()
        var wrapped = false
        if !sessions.isEmpty {
            var index = room.sweepIndex % sessions.count
            var scanned = 0
            while scanned < sessions.count && step.sessions.count < sweepChunk {
                let session = sessions[index]
                if let cursor = room.cursors[session.id], cursor < room.head {
                    step.sessions.append((session, cursor))
                }
                scanned += 1
                index += 1
                if index == sessions.count {
                    index = 0
                    wrapped = true
                }
            }
            room.sweepIndex = index
        }
        guard let oldest = step.sessions.map(\.cursor).min() else {
            room.log = []
            return nil
        }
        let from = room.log.firstIndex { $0.position > oldest } ?? room.log.count
        step.items = Array(room.log[from...])
        for (session, _) in step.sessions { room.cursors[session.id] = room.head }
        // Once per pass over the room, what every session has goes.
        if wrapped { trim(room) }
        return step
    }

    /// Drops the log entries every session has.
    private static func trim(_ room: ChatroomRoom) {
        let oldest = room.cursors.values.min() ?? room.head
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
        struct Range {
            var items: ArraySlice<(position: UInt64, push: ChatroomRoom.Push)>
            /// Sessions that sent one of the messages, and senders left out of their own messages.
            var origins = Set<String>()
            var excludedUsers = Set<String>()
            /// The pushes for listed sessions, by position.
            var targeted: [(position: UInt64, sessions: Set<String>)] = []
            /// Encoded frames by the positions of the listed pushes a session is among.
            var encoded: [[UInt64]: [OutboundFrame]] = [:]
        }
        var ranges: [UInt64: Range] = [:]
        for (session, cursor) in step.sessions {
            if ranges[cursor] == nil {
                var range = Range(items: step.items.drop { $0.position <= cursor })
                for (position, push) in range.items {
                    switch push {
                    case .message(let message, let origin, _):
                        range.origins.insert(origin)
                        if !message.includeSender { range.excludedUsers.insert(message.senderId) }
                    case .frame(_, let sessions):
                        range.targeted.append((position, sessions))
                    case .roomFrame:
                        break
                    }
                }
                ranges[cursor] = range
            }
            if ranges[cursor]!.origins.contains(session.id) || ranges[cursor]!.excludedUsers.contains(session.userId) {
                for frame in encodedFrames(ranges[cursor]!.items, room: room, for: session) { frames.add(OutboundFrame(frame), for: session) }
                continue
            }
            // Sessions among the same listed pushes share one encoding.
            let listed = ranges[cursor]!.targeted.filter { $0.sessions.contains(session.id) }.map(\.position)
            if ranges[cursor]!.encoded[listed] == nil {
                ranges[cursor]!.encoded[listed] = encodedFrames(ranges[cursor]!.items, room: room, for: nil, listedIn: Set(listed))
                    .map(OutboundFrame.init)
            }
            for frame in ranges[cursor]!.encoded[listed]! { frames.add(frame, for: session) }
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
                    if origin == session.id { continue }
                    if !message.includeSender && message.senderId == session.userId { continue }
                }
                let size = message.content.count + MessageLimits.frameOverheadBytes
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
