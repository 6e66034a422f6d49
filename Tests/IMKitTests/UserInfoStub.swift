import Foundation
import Glibc
import Synchronization

/// The "app server" of the user-info flow (S13): a small HTTP server on 127.0.0.1 that answers
/// `GET /users/<id>` with `{"name": ..., "portrait": ...}` from a table the test changes, 404 for
/// ids it does not know, and counts the requests per id.
final class UserInfoStub: Sendable {
    private let state = Mutex<(names: [String: String], hits: [String: Int])>(([:], [:]))
    private let listener: Int32
    let port: Int

    var urlTemplate: String { "http://127.0.0.1:\(port)/users/{id}" }

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(listener, raw, length) == 0, listen(listener, 16) == 0 else { return -1 }
                return getsockname(listener, raw, &length)
            }
        }
        guard bound == 0 else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    func set(_ userId: String, name: String) {
        state.withLock { $0.names[userId] = name }
    }

    func hits(_ userId: String) -> Int {
        state.withLock { $0.hits[userId] ?? 0 }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            answer(connection)
            close(connection)
        }
    }

    private func answer(_ connection: Int32) {
        var request = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { return }
            request += buffer[0..<count]
        }
        let line = String(decoding: request, as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = line.split(separator: " ")
        let path = parts.count > 1 ? String(parts[1]) : ""
        var status = "404 Not Found"
        var body = #"{"error":"unknown user"}"#
        if parts.first == "GET", path.hasPrefix("/users/") {
            let id = String(path.dropFirst("/users/".count)).removingPercentEncoding ?? ""
            let name = state.withLock { state -> String? in
                state.hits[id, default: 0] += 1
                return state.names[id]
            }
            if let name {
                status = "200 OK"
                body = String(decoding: try! JSONSerialization.data(withJSONObject: ["name": name, "portrait": "http://127.0.0.1/\(id).png"]), as: UTF8.self)
            }
        }
        let response = "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        _ = response.withCString { write(connection, $0, strlen($0)) }
    }
}
