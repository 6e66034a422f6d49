import Foundation
import HummingbirdWSClient
import IMCore
import IMWire
import Logging
import NIOCore
import SwiftProtobuf

/// One WebSocket connection to imserver: requests with replies matched by id, and pushes handed
/// to the owner in arrival order.
actor WireConnection {
    typealias PushHandler = @Sendable (Im_Frame) async -> Void
    typealias CloseHandler = @Sendable (_ error: (any Error)?) async -> Void

    private let url: String
    private let logger: Logger
    private let onPush: PushHandler
    private let onClose: CloseHandler

    private var writer: WebSocketOutboundWriter?
    private var opening: CheckedContinuation<Void, any Error>?
    private var pending: [UInt32: CheckedContinuation<Im_Frame, any Error>] = [:]
    private var nextId: UInt32 = 0
    private var closed = false
    private var didOpen = false
    private var task: Task<Void, Never>?
    private var openTimer: Task<Void, Never>?

    init(url: String, logger: Logger, onPush: @escaping PushHandler, onClose: @escaping CloseHandler) {
        self.url = url
        self.logger = logger
        self.onPush = onPush
        self.onClose = onClose
    }

    /// Opens the socket; throws 31003 when the server cannot be reached, and 31000 when it has not
    /// accepted the WebSocket within `timeout` (a server that takes the TCP connection but hangs).
    func open(timeout: Duration = .seconds(30)) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            opening = continuation
            openTimer = Task {
                try? await Task.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                self.openTimedOut(after: timeout)
            }
            let url = self.url
            let logger = self.logger
            task = Task {
                var failure: (any Error)?
                do {
                    let configuration = WebSocketClientConfiguration(maxFrameSize: FrameCodec.maxFrameBytes, autoPing: .disabled)
                    try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                        await self.opened(outbound)
                        for try await message in inbound.messages(maxSize: FrameCodec.maxFrameBytes) {
                            guard case .binary(let buffer) = message else { continue }
                            await self.received(buffer)
                        }
                    }
                } catch {
                    failure = error
                }
                await self.ended(failure)
            }
        }
    }

    private func opened(_ outbound: WebSocketOutboundWriter) async {
        openTimer?.cancel()
        // Given up on before it opened: nobody will use it.
        guard !closed else {
            try? await outbound.close(.normalClosure, reason: nil)
            return
        }
        writer = outbound
        didOpen = true
        opening?.resume()
        opening = nil
    }

    /// The open took too long: the caller moves on, and the socket, if it opens after all, is closed.
    private func openTimedOut(after timeout: Duration) {
        guard let opening else { return }
        self.opening = nil
        closed = true
        opening.resume(throwing: IMError(.connectAckTimeout, "the server at \(url) did not accept the WebSocket within \(timeout)"))
        task?.cancel()
    }

    private func received(_ buffer: ByteBuffer) async {
        guard let frame = try? FrameCodec.decode(buffer.readableBytesView) else {
            logger.warning("dropped an undecodable frame from the server")
            return
        }
        if frame.id != 0, let reply = pending.removeValue(forKey: frame.id) {
            reply.resume(returning: frame)
        } else if frame.id == 0 {
            await onPush(frame)
        }
    }

    private func ended(_ error: (any Error)?) async {
        openTimer?.cancel()
        let wasClosed = closed
        closed = true
        writer = nil
        let lost = IMError(.socketDisconnected, "the connection to the server was lost")
        opening?.resume(throwing: IMError(.serverUnavailable, "cannot reach the server at \(url): \(error.map { "\($0)" } ?? "connection closed")"))
        opening = nil
        for reply in pending.values { reply.resume(throwing: lost) }
        pending = [:]
        // Only an open connection that the owner did not close itself is reported as lost.
        if didOpen && !wasClosed { await onClose(error) }
    }

    /// Sends a request and waits for its reply; a failed reply throws its IMError.
    func request<M: SwiftProtobuf.Message>(_ op: Im_Op, _ body: M, timeout: Duration) async throws -> Im_Frame {
        guard let writer, !closed else {
            throw IMError(.connectionUnavailable, "not connected to the server")
        }
        nextId = nextId == UInt32.max ? 1 : nextId + 1
        let id = nextId
        let bytes = try FrameCodec.request(id: id, op: op, body)
        let frame: Im_Frame = try await withCheckedThrowingContinuation { continuation in
            pending[id] = continuation
            Task {
                do {
                    var buffer = ByteBufferAllocator().buffer(capacity: bytes.count)
                    buffer.writeBytes(bytes)
                    try await writer.write(.binary(buffer))
                } catch {
                    self.fail(id, IMError(.socketDisconnected, "could not write to the server: \(error)"))
                }
            }
            Task {
                try? await Task.sleep(for: timeout)
                self.fail(id, IMError(.responseTimeout, "the server did not answer \(op) within \(timeout)"))
            }
        }
        if let error = frame.error { throw error }
        return frame
    }

    private func fail(_ id: UInt32, _ error: IMError) {
        pending.removeValue(forKey: id)?.resume(throwing: error)
    }

    /// Closes the socket without reporting it to the close handler.
    func close() async {
        guard !closed else { return }
        closed = true
        if let writer { try? await writer.close(.normalClosure, reason: nil) }
        task?.cancel()
    }
}
