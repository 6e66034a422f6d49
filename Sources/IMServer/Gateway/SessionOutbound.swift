import NIOCore
import Synchronization
import IMStore

/// A session's way out: the frames queued for one WebSocket connection, written to its socket on
/// the channel's event loop.
///
/// Queuing never blocks. The first frame queued while no write is pending schedules one task on the
/// event loop; that task writes every frame queued by then and flushes once, so a connection that
/// gets a burst costs one event-loop task and one `write` instead of one of each per frame. Frames
/// are written through `SessionWriteHandler`, first in the channel's pipeline, as ready WebSocket
/// bytes: they skip the WebSocket encoder and the handlers of Hummingbird's async channel, whose
/// own frames (close, pong) still go through them and pass this handler unchanged.
///
/// While the socket does not take more (the channel is not writable) frames wait here; a
/// connection whose waiting frames would pass `maxQueuedBytes` is a slow reader: its queue is
/// dropped at once (the memory goes back) and it is closed. A frame counts its whole size even when
/// it is shared with other sessions (a chatroom push), so the bound holds for each connection on
/// its own. After `finish`, the frames already queued are written regardless (a kick's last frame
/// still arrives), and then `whenFinished` runs, for the gateway to close the connection.
///
/// A session connected to another node of a cluster, which a chatroom's owner node stands in for
/// (`ChatroomRouting`), has no socket here: its frames are relayed to its node at once
/// (`relayed(to:)`), which writes them to the real session's queue.
package final class SessionOutbound: Sendable {
    /// Where the frames go.
    private enum Sink: Sendable {
        /// A connection of this node: its channel's event loop (kept to group sessions by loop,
        /// `Batch`) and its write handler.
        case socket(eventLoop: any EventLoop, loopId: ObjectIdentifier, writer: NIOLoopBound<SessionWriteHandler>)
        /// A session of another node, through the chatroom relay.
        case relay(RemoteSessionLink)
    }

    private let sink: Sink
    private let maxQueuedBytes: Int
    private let state = Mutex(State())

    /// What a queued frame costs besides its bytes (the buffer's entry in the queue).
    static let frameOverheadBytes = 32

    private struct State {
        /// Frames waiting for the next write (or for the socket to take more).
        var pending: [ByteBuffer] = []
        /// Their bytes, with `frameOverheadBytes` each.
        var pendingBytes = 0
        /// The connection was closed as a slow reader.
        var slowReader = false
        /// An empty array with room, the last write's, for `pending` to take next: a connection
        /// written once per chatroom sweep does not allocate its queue every time.
        var spare: [ByteBuffer] = []
        var writeScheduled = false
        /// No frame is accepted any more.
        var finishing = false
        /// The last frames have been handed to the channel.
        var done = false
        /// Run on the event loop once the last frames are handed to the channel.
        var onDone: (@Sendable () -> Void)?
    }

    /// What `enqueue` did with a frame.
    enum Outcome {
        case queued
        /// The connection is closing: the frame was dropped.
        case closed
        /// The queue was full: the frame was dropped and the connection is closing as a slow reader.
        case slowReader
    }

    /// Puts the session's write handler first in the channel's pipeline.
    static func attach(to channel: any Channel, maxQueuedBytes: Int) async throws -> SessionOutbound {
        try await channel.eventLoop.submit { try attached(to: channel, maxQueuedBytes: maxQueuedBytes) }.get()
    }

    /// `attach`, on the channel's event loop.
    package static func attached(to channel: any Channel, maxQueuedBytes: Int) throws -> SessionOutbound {
        channel.eventLoop.preconditionInEventLoop()
        let handler = SessionWriteHandler()
        let outbound = SessionOutbound(writer: NIOLoopBound(handler, eventLoop: channel.eventLoop), maxQueuedBytes: maxQueuedBytes)
        handler.outbound = outbound
        try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        return outbound
    }

    private init(writer: NIOLoopBound<SessionWriteHandler>, maxQueuedBytes: Int) {
        self.sink = .socket(eventLoop: writer.eventLoop, loopId: ObjectIdentifier(writer.eventLoop), writer: writer)
        self.maxQueuedBytes = maxQueuedBytes
    }

    private init(link: RemoteSessionLink) {
        self.sink = .relay(link)
        self.maxQueuedBytes = .max
    }

    /// The way out of a session of another node that this node stands in for: each frame goes to
    /// that node through the relay (which bounds nothing here: the real session's queue does).
    static func relayed(to link: RemoteSessionLink) -> SessionOutbound {
        SessionOutbound(link: link)
    }

    /// The relay to the session's node, for a session of another node.
    var relayLink: RemoteSessionLink? {
        if case .relay(let link) = sink { return link }
        return nil
    }

    var isFinishing: Bool { state.withLock { $0.finishing } }

    /// Whether the connection was closed because its frames piled up (nothing more is written).
    var wasSlowReader: Bool { state.withLock { $0.slowReader } }

    /// The bytes waiting to be written.
    var queuedBytes: Int { state.withLock { $0.pendingBytes } }

    /// Queues a frame for the connection.
    func enqueue(_ frame: OutboundFrame) -> Outcome {
        switch sink {
        case .socket(let eventLoop, _, _):
            let (outcome, schedule) = queue(frame)
            if schedule { eventLoop.execute { self.writePending() } }
            return outcome
        case .relay(let link):
            guard !isFinishing else { return .closed }
            link.send(frame)
            return .queued
        }
    }

    /// Queues a frame; returns whether the caller must have `writePending` run on the event loop.
    private func queue(_ frame: OutboundFrame) -> (Outcome, Bool) {
        state.withLock { state -> (Outcome, Bool) in
            guard !state.finishing else { return (.closed, false) }
            let size = frame.bytes.readableBytes + Self.frameOverheadBytes
            if state.pendingBytes + size > maxQueuedBytes {
                // A slow reader: what waits is dropped (it would never be read in time) and the
                // connection ends; the client reconnects and syncs what it missed.
                state.finishing = true
                state.slowReader = true
                state.pending = []
                state.spare = []
                state.pendingBytes = 0
                return (.slowReader, scheduleWrite(&state))
            }
            state.pending.append(frame.bytes)
            state.pendingBytes += size
            return (.queued, scheduleWrite(&state))
        }
    }

    /// Accepts no more frames; those already queued are still written.
    func finish() {
        guard case .socket(let eventLoop, _, _) = sink else {
            // Nothing is queued here for a relayed session.
            state.withLock { state in
                state.finishing = true
                state.done = true
            }
            return
        }
        let schedule = state.withLock { state -> Bool in
            guard !state.finishing else { return false }
            state.finishing = true
            return scheduleWrite(&state)
        }
        if schedule { eventLoop.execute { self.writePending() } }
    }

    /// Runs `body` on the channel's event loop once `finish` was called and every frame queued
    /// before it has been handed to the channel (at once when that has happened already). Call it
    /// on the event loop.
    func whenFinished(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.done { return true }
            state.onDone = body
            return false
        }
        if now { body() }
    }

    /// The largest emptied queue kept for reuse (a burst's larger queue is let go).
    private static let spareCapacity = 64

    private func scheduleWrite(_ state: inout State) -> Bool {
        guard !state.writeScheduled else { return false }
        state.writeScheduled = true
        return true
    }

    /// On the event loop: writes what is queued and flushes once; while the socket takes no more,
    /// the frames stay queued (the handler calls again when it does), unless the session is ending.
    func writePending() {
        guard case .socket(_, _, let writer) = sink else { return }
        let handler = writer.value
        let writable = handler.isWritable
        var (frames, done) = state.withLock { state -> ([ByteBuffer], (@Sendable () -> Void)?) in
            state.writeScheduled = false
            guard writable || state.finishing else { return ([], nil) }
            let frames = state.pending
            state.pending = state.spare
            state.spare = []
            state.pendingBytes = 0
            guard state.finishing, !state.done else { return (frames, nil) }
            state.done = true
            defer { state.onDone = nil }
            return (frames, state.onDone)
        }
        guard !frames.isEmpty else {
            done?()
            return
        }
        handler.write(frames)
        done?()
        frames.removeAll(keepingCapacity: true)
        state.withLock { state in
            if state.spare.capacity < frames.capacity && frames.capacity <= Self.spareCapacity { state.spare = frames }
        }
    }

    /// Frames for many sessions at once (a chatroom round): the writes are grouped by event loop, one
    /// task per loop instead of one per connection, and `write()` returns when every loop has run
    /// its task, i.e. when the batch's frames have been handed to their sockets (or are waiting for
    /// a socket that takes no more).
    struct Batch {
        private var loops: [(id: ObjectIdentifier, loop: any EventLoop, outbounds: [SessionOutbound])] = []

        init() {}

        /// Queues a frame for a session (the session's rules apply: a closed session drops it, a
        /// full queue closes it as a slow reader).
        mutating func add(_ frame: OutboundFrame, for session: ClientSession) {
            let outbound = session.outbound
            guard case .socket(let eventLoop, let loopId, _) = outbound.sink else {
                _ = outbound.enqueue(frame)
                return
            }
            let (_, schedule) = outbound.queue(frame)
            let index = loops.firstIndex { $0.id == loopId } ?? {
                loops.append((loopId, eventLoop, []))
                return loops.count - 1
            }()
            // Without `schedule` a write is pending already (it also ends a slow reader's queue).
            if schedule { loops[index].outbounds.append(outbound) }
        }

        /// Writes the batch: one task per event loop (a loop whose sessions all had a write pending
        /// already still gets one, so that returning means their frames are written too).
        func write() async {
            let tasks = loops.map { entry in
                entry.loop.submit { for outbound in entry.outbounds { outbound.writePending() } }
            }
            for task in tasks { try? await task.get() }
        }
    }
}
