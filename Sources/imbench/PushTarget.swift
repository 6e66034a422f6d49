import Crypto
import Foundation
import IMCore
import IMPush
import IMPushTesting
import IMServer
import IMStore

/// The push scenario's APNs: a local HTTP/2 + TLS server speaking APNs' protocol
/// (`BenchAPNsServer`: JWT checked, 200 for every token, requests counted, not kept), its CA in a
/// PEM file the server trusts, and the seeding of the app's credentials and the offline members'
/// device tokens.
final class PushTarget: Sendable {
    static let bundleId = "com.example.imbench"
    static let teamId = "TEAM123456"
    static let keyId = "KEY1234567"

    let apns: BenchAPNsServer
    let p8: String
    let trustRootsFile: String

    static func start(options: CommonOptions) async throws -> PushTarget {
        guard options.url == nil else {
            throw BenchError("the push scenario seeds device tokens and points the server at a local APNs: it needs a server imbench starts (no --url)")
        }
        let key = P256.Signing.PrivateKey()
        let apns = try await BenchAPNsServer(bundleId: bundleId, teamId: teamId, keys: [keyId: key.publicKey])
        let file = (NSTemporaryDirectory() as NSString).appendingPathComponent("imbench-push-ca-\(UUID().uuidString).pem")
        try TestCertificateAuthority.shared.rootCertificatePEM.write(toFile: file, atomically: true, encoding: .utf8)
        return PushTarget(apns: apns, p8: key.pemRepresentation, trustRootsFile: file)
    }

    private init(apns: BenchAPNsServer, p8: String, trustRootsFile: String) {
        self.apns = apns
        self.p8 = p8
        self.trustRootsFile = trustRootsFile
    }

    var serverArguments: [String] {
        ["--push-apns-url", apns.baseURL, "--push-apns-sandbox-url", apns.baseURL, "--push-trust-roots-file", trustRootsFile]
    }

    /// SEEDING: the app's APNs credentials and an APNs device token for each of `users`.
    func seed(site: SeedSite, users: [String], options: CommonOptions) async throws {
        note("push: SEEDING APNs credentials and \(users.count) device tokens through the store (not a measurement)")
        let opened = try await SeedStore.open(site)
        do {
            let now = SystemClock().nowMilliseconds()
            let app = try await opened.store.upsertApp(appKey: options.appKey, appSecret: options.appSecret, name: "imbench", now: now)
            var settings = PushAppSettings()
            settings.credentials.apns = APNsCredentials(bundleId: Self.bundleId,
                                                        authentication: .token(p8: p8, keyId: Self.keyId, teamId: Self.teamId))
            try await opened.store.setPushSettings(appId: app.id, settings: try JSONEncoder().encode(settings))
            for user in users {
                let token = SHA256.hash(data: Data("imbench-\(user)".utf8)).map { String(format: "%02x", $0) }.joined()
                try await opened.store.setPushDevice(PushDeviceRecord(appId: app.id, userId: user, deviceId: "phone-\(user)", platform: "iOS",
                                                                      kind: .apns, token: token, environment: "production", updatedAt: now))
            }
        } catch {
            await opened.close()
            throw error
        }
        await opened.close()
    }

    func stop() async {
        await apns.stop()
        try? FileManager.default.removeItem(atPath: trustRootsFile)
    }
}
