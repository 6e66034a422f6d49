import AsyncHTTPClient
import Crypto
import Foundation
import IMServerTesting
import NIOCore
import NIOSSL
import Testing

/// The local HTTP/2 server the providers' tests run against reads requests from the connection's
/// frames and gives flow-control windows back itself: a large request must get through whole.
@Suite("Local HTTP/2 test server")
struct TestHTTPServerTests {
    @Test("requests larger than a stream's window, and together larger than the connection's, arrive whole over one HTTP/2 connection")
    func largeBodies() async throws {
        let authority = TestCertificateAuthority.shared
        let server = try await TestHTTPServer(tls: authority.serverTLSConfiguration(protocols: ["h2"])) { request in
            let digest = SHA256.hash(data: request.body).map { String(format: "%02x", $0) }.joined()
            return .respond(status: 200, headers: [("x-version", request.httpVersion)], body: Data(digest.utf8))
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(authority.rootCertificatePEM.utf8)))
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            // 3 MiB each: three times a stream's 1 MiB window; six of them, 18 MiB, more than the
            // connection's 16 MiB. Without windows given back the sixth (or the first) never ends.
            for n in 0..<6 {
                let body = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) })
                var request = HTTPClientRequest(url: server.baseURL + "/upload/\(n)")
                request.method = .POST
                request.body = .bytes(ByteBuffer(bytes: body))
                let response = try await client.execute(request, timeout: .seconds(30))
                #expect(response.status.code == 200)
                #expect(response.headers.first(name: "x-version") == "HTTP/2")
                let answer = String(buffer: try await response.body.collect(upTo: 1 << 10))
                #expect(answer == SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined(), "request \(n)")
            }
            #expect(server.connectionsAccepted == 1)
        } catch {
            Issue.record("a large request did not get through: \(error)")
        }
        try await client.shutdown()
        await server.stop()
    }
}
