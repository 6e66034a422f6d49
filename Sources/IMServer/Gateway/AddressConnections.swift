import NIOCore
import Synchronization
import IMStore

/// The connections each source address holds open, against `maxConnectionsPerAddress`.
final class AddressConnections: Sendable {
    private let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection from `address`; false (and nothing counted) when the address
    /// already holds `limit` connections.
    func open(_ address: String) -> Bool {
        guard limit > 0 else { return true }
        return counts.withLock { counts in
            let current = counts[address, default: 0]
            guard current < limit else { return false }
            counts[address] = current + 1
            return true
        }
    }

    func close(_ address: String) {
        guard limit > 0 else { return }
        counts.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    /// Connections open from `address` (for tests and the console).
    func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }

    /// What connections are counted under: the IPv4 address, or the /64 network of an IPv6 one
    /// (one IPv6 host commonly holds a whole /64, so its single addresses would be no limit).
    static func key(of address: SocketAddress?) -> String {
        guard let address else { return "unknown" }
        if case .v6(let v6) = address {
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // An IPv4-mapped address (::ffff:a.b.c.d) is its IPv4 address.
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            return bytes[0..<8].map { String(format: "%02x", $0) }.joined() + "::/64"
        }
        return address.ipAddress ?? "unknown"
    }
}
