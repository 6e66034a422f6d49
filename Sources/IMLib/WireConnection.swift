import Foundation
import HummingbirdWSClient
import IMCore
import IMWire
import Logging
import NIOCore
import SwiftProtobuf

/// One WebSocket connection to imserver: requests with replies matched by id, and pushes handed
/// to the owner in arrival order.
///
/// Requests leave through one writer loop in order; their time limits share one timer that
/// sleeps until the earliest deadline; a request whose task is cancelled ends at once with
/// `CancellationError`. No task is started per request.
actor WireConnection {
    typealias PushHandler = @Sendable (WireConnection, Im_Frame) async -> Void
    typealias CloseHandler = @Sendable (WireConnection, _ error: (any Error)?) async -> Void

    private struct Pending {
        let reply: CheckedContinuation<Im_Frame, any Error>
        let deadline: ContinuousClock.Instant
        let op: Im_Op
        let timeout: Duration
    }

    private let url: String
    private let logger: Logger
    private let onPush: PushHandler
    private let onClose: CloseHandler

    private var writer: WebSocketOutboundWriter?
    private let outbox: AsyncStream<ByteBuffer>
    private let outboxInput: AsyncStream<ByteBuffer>.Continuation
    private var opening: CheckedContinuation<Void, any Error>?
    private var pending: [UInt32: Pending] = [:]
    private var nextId: UInt32 = 0
    private var closed = false
    private var didOpen = false
    private var task: Task<Void, Never>?
    /// The one timer of this connection: it wakes at `timerDeadline` and fails the requests whose
    /// deadlines have passed (and, before the socket opens, the open).
    private var timer: Task<Void, Never>?
    private var timerDeadline: ContinuousClock.Instant?
    private var openDeadline: (instant: ContinuousClock.Instant, timeout: Duration)?

    init(url: String, logger: Logger, onPush: @escaping PushHandler, onClose: @escaping CloseHandler) {
        self.url = url
        self.logger = logger
        self.onPush = onPush
        self.onClose = onClose
        (outbox, outboxInput) = AsyncStream.makeStream(of: ByteBuffer.self)
    }

    /// Opens the socket; throws 31003 when the server cannot be reached, and 31000 when it has not
    /// accepted the WebSocket within `timeout` (a server that takes the TCP connection but hangs).
    func open(timeout: Duration = .seconds(30)) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard !Task.isCancelled else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                opening = continuation
                let deadline = ContinuousClock.now + timeout
                openDeadline = (deadline, timeout)
                arm(deadline)
                let url = self.url
                let logger = self.logger
                let outbox = self.outbox
                task = Task {
                    var failure: (any Error)?
                    do {
                        let configuration = WebSocketClientConfiguration(maxFrameSize: FrameCodec.maxFrameBytes, autoPing: .disabled)
                        try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                            guard await self.opened(outbound) else { return }
                            try await withThrowingTaskGroup(of: Void.self) { group in
                                group.addTask {
                                    for await buffer in outbox { try await outbound.write(.binary(buffer)) }
                                }
                                for try await message in inbound.messages(maxSize: FrameCodec.maxFrameBytes) {
                                    guard case .binary(let buffer) = message else { continue }
                                    await self.received(buffer)
                                }
                                group.cancelAll()
                            }
                        }
                    } catch {
                        failure = error
                    }
                    await self.ended(failure)
                }
            }
        } onCancel: {
            Task { await self.abandonOpen(CancellationError()) }
        }
    }

    /// The socket is open; false when the open was given up on meanwhile (it is closed then).
    private func opened(_ outbound: WebSocketOutboundWriter) async -> Bool {
        openDeadline = nil
        guard !closed else {
            try? await outbound.close(.normalClosure, reason: nil)
            return false
        }
        writer = outbound
        didOpen = true
        opening?.resume()
        opening = nil
        return true
    }

    /// The open took too long or its caller gave up: the caller moves on, and the socket, if it
    /// opens after all, is closed.
    private func abandonOpen(_ error: any Error) {
        guard let opening else { return }
        self.opening = nil
        openDeadline = nil
        closed = true
        outboxInput.finish()
        opening.resume(throwing: error)
        task?.cancel()
    }

    private func received(_ buffer: ByteBuffer) async {
        guard let frame = try? FrameCodec.decode(buffer.readableBytesView) else {
            logger.warning("dropped an undecodable frame from the server")
            return
        }
        if frame.id != 0, let waiting = pending.removeValue(forKey: frame.id) {
            waiting.reply.resume(returning: frame)
        } else if frame.id == 0 {
            await onPush(self, frame)
        }
    }

    private func ended(_ error: (any Error)?) async {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        let wasClosed = closed
        closed = true
        writer = nil
        outboxInput.finish()
        let lost = IMError(.socketDisconnected, "the connection to the server was lost")
        opening?.resume(throwing: IMError(.serverUnavailable, "cannot reach the server at \(url): \(error.map { "\($0)" } ?? "connection closed")"))
        opening = nil
        for waiting in pending.values { waiting.reply.resume(throwing: lost) }
        pending = [:]
        // Only an open connection that the owner did not close itself is reported as lost.
        if didOpen && !wasClosed { await onClose(self, error) }
    }

    /// Sends a request and waits for its reply; a failed reply throws its IMError, no reply within
    /// `timeout` throws 30003, and cancelling the calling task throws `CancellationError`.
    func request<M: SwiftProtobuf.Message>(_ op: Im_Op, _ body: M, timeout: Duration) async throws -> Im_Frame {
        guard writer != nil, !closed else {
            throw IMError(.connectionUnavailable, "not connected to the server")
        }
        nextId = nextId == UInt32.max ? 1 : nextId + 1
        let id = nextId
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        buffer.writeBytes(try FrameCodec.request(id: id, op: op, body))
        let frame: Im_Frame = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard !Task.isCancelled else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let deadline = ContinuousClock.now + timeout
                pending[id] = Pending(reply: continuation, deadline: deadline, op: op, timeout: timeout)
                arm(deadline)
                outboxInput.yield(buffer)
            }
        } onCancel: {
            Task { await self.fail(id, CancellationError()) }
        }
        if let error = frame.error { throw error }
        return frame
    }

    private func fail(_ id: UInt32, _ error: any Error) {
        pending.removeValue(forKey: id)?.reply.resume(throwing: error)
    }

    /// Makes the timer wake by `deadline` (it keeps an earlier wake-up).
    private func arm(_ deadline: ContinuousClock.Instant) {
        if let timerDeadline, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = Task { [weak self] in
            guard (try? await Task.sleep(until: deadline)) != nil else { return }
            await self?.expire()
        }
    }

    /// Fails what is past its deadline and sets the timer for the next one.
    private func expire() {
        timer = nil
        timerDeadline = nil
        let now = ContinuousClock.now
        if let (instant, timeout) = openDeadline, instant <= now {
            abandonOpen(IMError(.connectAckTimeout, "the server at \(url) did not accept the WebSocket within \(timeout)"))
        }
        for (id, waiting) in pending where waiting.deadline <= now {
            fail(id, IMError(.responseTimeout, "the server did not answer \(waiting.op) within \(waiting.timeout)"))
        }
        let next = ([openDeadline?.instant] + pending.values.map(\.deadline)).compactMap { $0 }.min()
        if let next { arm(next) }
    }

    /// Closes the socket without reporting it to the close handler.
    func close() async {
        guard !closed else { return }
        closed = true
        outboxInput.finish()
        timer?.cancel()
        if let writer { try? await writer.close(.normalClosure, reason: nil) }
        task?.cancel()
    }
}
