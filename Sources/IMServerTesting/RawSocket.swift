#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import IMCore
import IMProcess
import IMWire

/// A plain TCP connection to the test server, for the tests that play a misbehaving peer: one that
/// sends half a request, never answers a close, or never reads. Blocking reads, each bounded by a
/// timeout, wait on a thread of their own (`BlockingWait`): on the cooperative pool they would
/// starve the in-process server that runs on it, and on Dispatch's threads they queued behind the
/// databases of every server and client of the run and timed out before they started.
public final class RawSocket: @unchecked Sendable {
    // @unchecked: the descriptor is used by one test task at a time; `close` is idempotent.
    private var fd: Int32

    /// Connects to `port` on 127.0.0.1; `receiveBuffer` shrinks the socket's receive buffer (a peer
    /// that never reads then fills up quickly).
    public init(port: Int, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IMError(.socketDisconnected, "socket() failed") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw IMError(.socketDisconnected, "connect() failed: \(errno)")
        }
    }

    deinit { close() }

    public func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let result = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard result > 0 else { throw IMError(.socketDisconnected, "send() failed: \(errno)") }
            sent += result
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// What the peer sent within `timeout`: bytes, or nil once the server has closed the connection.
    /// Returns an empty array when nothing arrived in time.
    public func receive(timeout: Duration) async -> [UInt8]? {
        let fd = self.fd
        return await BlockingWait.run {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let millis = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&poller, 1, max(millis, 1)) > 0 else { return [] }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            return count > 0 ? Array(buffer[..<count]) : nil
        }
    }

    /// Reads until the server closes the connection; returns everything it sent, or nil if the
    /// connection was still open after `timeout`.
    public func readUntilClosed(timeout: Duration) async -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        var all: [UInt8] = []
        while ContinuousClock.now < deadline {
            guard let bytes = await receive(timeout: deadline - .now) else { return all }
            all += bytes
        }
        return nil
    }

    /// Reads until `marker` has arrived (or the time is up); returns what was read.
    public func read(until marker: String, timeout: Duration) async -> String {
        let deadline = ContinuousClock.now + timeout
        var all: [UInt8] = []
        while ContinuousClock.now < deadline, !String(decoding: all, as: UTF8.self).contains(marker) {
            guard let bytes = await receive(timeout: deadline - .now) else { break }
            all += bytes
        }
        return String(decoding: all, as: UTF8.self)
    }

    // MARK: WebSocket

    /// Upgrades to a WebSocket on /ws; returns the server's answer head.
    @discardableResult
    public func upgradeToWebSocket() async throws -> String {
        try send("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let head = await read(until: "\r\n\r\n", timeout: .seconds(10))
        guard head.hasPrefix("HTTP/1.1 101") else { throw IMError(.socketDisconnected, "no WebSocket upgrade: \(head.prefix(200))") }
        return head
    }

    /// Sends one masked binary WebSocket message (RFC 6455 §5.2) carrying `payload`.
    public func sendFrame(_ payload: [UInt8]) throws {
        try send(Self.maskedFrame(first: 0x82, payload))
    }

    /// Sends CONNECT for `token` (the reply is left unread).
    public func sendConnect(appKey: String, token: String) throws {
        var connect = Im_ConnectRequest()
        connect.appKey = appKey
        connect.token = token
        connect.platform = .linux
        try sendFrame(try FrameCodec.request(id: 1, op: .connect, connect))
    }

    /// A raw WebSocket session of the user whose token this is, returned once its CONNECT has
    /// been answered successfully.
    public static func connected(port: Int, appKey: String, token: String) async throws -> RawSocket {
        let socket = try RawSocket(port: port)
        try await socket.upgradeToWebSocket()
        try socket.sendConnect(appKey: appKey, token: token)
        let deadline = ContinuousClock.now + .seconds(30)
        var bytes: [UInt8] = []
        while ContinuousClock.now < deadline, frames(in: bytes).isEmpty {
            guard let chunk = await socket.receive(timeout: deadline - .now) else { break }
            bytes += chunk
        }
        guard let reply = frames(in: bytes).first else { throw IMError(.responseTimeout, "no CONNECT reply") }
        guard reply.opcode == 0x2 else {
            throw IMError(.socketDisconnected, "not a CONNECT reply: opcode \(reply.opcode), \(String(decoding: reply.payload, as: UTF8.self))")
        }
        let frame = try FrameCodec.decode(reply.payload)
        guard frame.code == 0 else { throw IMError(ErrorCode(Int(frame.code)), "CONNECT failed: \(frame.errorMessage)") }
        return socket
    }

    /// Reads the connection (whose earlier frames were read) until the server's close frame and
    /// answers it; returns the close code and reason, or nil if none came within `timeout`.
    public func readClose(timeout: Duration) async -> (code: UInt16, reason: String)? {
        let deadline = ContinuousClock.now + timeout
        var bytes: [UInt8] = []
        while ContinuousClock.now < deadline {
            guard let chunk = await receive(timeout: deadline - .now) else { break }
            bytes += chunk
            if let close = Self.frames(in: bytes).first(where: { $0.opcode == 0x8 }) {
                // Answered, as a client does: the server need not wait out its close timeout.
                let payload = Array(close.payload.prefix(2))
                try? send(Self.maskedFrame(first: 0x88, payload))
                guard payload.count == 2 else { return (1005, "") }
                return (UInt16(payload[0]) << 8 | UInt16(payload[1]), String(decoding: close.payload.dropFirst(2), as: UTF8.self))
            }
        }
        return nil
    }

    /// The whole frames at the start of a server's (unmasked) WebSocket bytes.
    public static func frames(in bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        var result: [(opcode: UInt8, payload: [UInt8])] = []
        var index = 0
        while index + 2 <= bytes.count {
            var length = Int(bytes[index + 1] & 0x7F)
            var header = 2
            if length == 126 {
                guard index + 4 <= bytes.count else { break }
                length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                header = 4
            } else if length == 127 {
                guard index + 10 <= bytes.count else { break }
                length = bytes[(index + 2)..<(index + 10)].reduce(0) { $0 << 8 | Int($1) }
                header = 10
            }
            // (A length past what arrived, however large, waits for more bytes.)
            guard length >= 0, length <= bytes.count - index - header else { break }
            result.append((bytes[index] & 0x0F, Array(bytes[(index + header)..<(index + header + length)])))
            index += header + length
        }
        return result
    }

    /// One masked WebSocket frame with its first byte given (FIN, reserved bits and opcode).
    public static func maskedFrame(first: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [first]
        switch payload.count {
        case ..<126: frame.append(0x80 | UInt8(payload.count))
        case ..<65_536: frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((UInt64(payload.count) >> UInt64(shift)) & 0xFF)) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return frame + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }
}
