#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IMCore

/// Addresses for the tests of servers that are down: a port where nothing listens, and a listener
/// that takes connections but never answers.
public enum TestPorts {
    /// A port of 127.0.0.1 that nothing listens on: bound by a socket that is closed at once, so a
    /// connection to it is refused.
    public static func closed() throws -> Int {
        let listener = try SilentListener()
        defer { listener.close() }
        return listener.port
    }
}

/// A TCP listener on 127.0.0.1 that never accepts: the kernel completes connections into its
/// backlog, so a client connects and then waits for answers that never come, as from a server
/// that hangs.
public final class SilentListener: @unchecked Sendable {
    // @unchecked: the descriptor is used by one test task at a time; `close` is idempotent.
    private var fd: Int32
    public let port: Int

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IMError(.socketDisconnected, "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(fd, address, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, address, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            Glibc.close(fd)
            throw IMError(.socketDisconnected, "could not listen on 127.0.0.1: \(code)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close() }

    /// The base URL of this listener, as a client's server URL.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }
}
