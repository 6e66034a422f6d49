import Crypto
import Foundation
import IMProcess
import NIOSSL
import SwiftASN1
import X509

/// A certificate authority made in the test process: a root, a server certificate for
/// 127.0.0.1 and localhost that the local provider servers present, and client certificates
/// (PEM or PKCS#12) for APNs certificate authentication. Clients trust it through
/// `PushEndpoints.extraTrustRootsPEM = rootCertificatePEM`.
public final class TestCertificateAuthority: Sendable {
    /// One authority for the whole test process.
    public static let shared: TestCertificateAuthority = {
        do { return try TestCertificateAuthority() } catch { fatalError("test CA: \(error)") }
    }()

    /// The root certificate, PEM: what clients add to their trust roots.
    public let rootCertificatePEM: String
    private let rootName: DistinguishedName
    /// The root's P-256 key, raw (the key type itself is not Sendable).
    private let rootKeyBytes: Data
    private var rootKey: P256.Signing.PrivateKey {
        // The bytes came from a key: they always make one again.
        try! P256.Signing.PrivateKey(rawRepresentation: rootKeyBytes)
    }
    private let root: NIOSSLCertificate
    private let serverCertificate: NIOSSLCertificate
    private let serverKey: NIOSSLPrivateKey

    /// The object identifier of a subject's UID, where Apple's push certificates carry the bundle id.
    static let userIdOID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    public init(commonName: String = "imserver test CA") throws {
        let rootKey = P256.Signing.PrivateKey()
        rootKeyBytes = rootKey.rawRepresentation
        rootName = try DistinguishedName { CommonName(commonName) }
        let now = Date()
        let rootCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        rootCertificatePEM = try rootCertificate.serializeAsPEM().pemString
        root = try NIOSSLCertificate(bytes: Array(rootCertificatePEM.utf8), format: .pem)

        let server = try Self.issue(subject: try DistinguishedName { CommonName("localhost") }, issuer: rootName, issuerKey: rootKey,
                                    notValidAfter: now.addingTimeInterval(365 * 86400), serverNames: ["localhost", "127.0.0.1"])
        serverCertificate = try NIOSSLCertificate(bytes: Array(server.certificatePEM.utf8), format: .pem)
        serverKey = try NIOSSLPrivateKey(bytes: Array(server.privateKeyPEM.utf8), format: .pem)
    }

    /// A client certificate signed by this authority, for TLS client authentication. `bundleId`
    /// goes into the subject's UID as in Apple's push certificates.
    public func issueClientCertificate(commonName: String, bundleId: String? = nil,
                                       notValidAfter: Date = Date().addingTimeInterval(365 * 86400)) throws -> (certificatePEM: String, privateKeyPEM: String) {
        var attributes = [RelativeDistinguishedName(RelativeDistinguishedName.Attribute(type: .RDNAttributeType.commonName, utf8String: commonName))]
        if let bundleId {
            attributes.append(RelativeDistinguishedName(RelativeDistinguishedName.Attribute(type: Self.userIdOID, utf8String: bundleId)))
        }
        return try Self.issue(subject: DistinguishedName(attributes), issuer: rootName, issuerKey: rootKey,
                              notValidAfter: notValidAfter, serverNames: nil)
    }

    /// The same as `issueClientCertificate`, packed with its key as PKCS#12 under `password` (by
    /// `openssl pkcs12 -export`, with the SHA-1/3DES encryption Keychain Access uses).
    public func issueClientP12(commonName: String, bundleId: String? = nil, password: String,
                               notValidAfter: Date = Date().addingTimeInterval(365 * 86400)) async throws -> Data {
        let issued = try issueClientCertificate(commonName: commonName, bundleId: bundleId, notValidAfter: notValidAfter)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("imserver-p12-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("cert.pem")
        let key = directory.appendingPathComponent("key.pem")
        let output = directory.appendingPathComponent("out.p12")
        let errors = directory.appendingPathComponent("errors.txt")
        try issued.certificatePEM.write(to: certificate, atomically: true, encoding: .utf8)
        try issued.privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["IMSERVER_P12_PASSWORD"] = password
        let openssl = try ChildProcess("/usr/bin/openssl", [
            "pkcs12", "-export", "-in", certificate.path, "-inkey", key.path, "-name", commonName,
            "-certpbe", "PBE-SHA1-3DES", "-keypbe", "PBE-SHA1-3DES", "-macalg", "sha1",
            "-passout", "env:IMSERVER_P12_PASSWORD", "-out", output.path,
        ], environment: environment, standardOutput: .null, standardError: .file(errors.path))
        let termination = await openssl.exit()
        guard termination == .exited(0) else {
            let message = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw TestCertificateError("openssl pkcs12 -export: \(termination): \(message)")
        }
        return try Data(contentsOf: output)
    }

    /// TLS for a local server: the 127.0.0.1/localhost certificate, ALPN `protocols`, and, when
    /// `clientCertificates`, a request for a client certificate that, if given, must chain to this root.
    public func serverTLSConfiguration(protocols: [String] = ["h2", "http/1.1"], clientCertificates: Bool = false) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(serverCertificate)],
                                                                     privateKey: .privateKey(serverKey))
        configuration.applicationProtocols = protocols
        if clientCertificates {
            configuration.certificateVerification = .optionalVerification
            configuration.trustRoots = .certificates([root])
        }
        return configuration
    }

    private static func issue(subject: DistinguishedName, issuer: DistinguishedName, issuerKey: P256.Signing.PrivateKey,
                              notValidAfter: Date, serverNames: [String]?) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let key = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: notValidAfter,
            issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                if let serverNames {
                    try ExtendedKeyUsage([.serverAuth])
                    SubjectAlternativeNames(serverNames.map { name -> GeneralName in
                        let octets = name.split(separator: ".").compactMap { UInt8($0) }
                        return octets.count == 4 ? .ipAddress(ASN1OctetString(contentBytes: ArraySlice(octets))) : .dnsName(name)
                    })
                } else {
                    try ExtendedKeyUsage([.clientAuth])
                }
            },
            issuerPrivateKey: .init(issuerKey))
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }
}

/// A failure of the test servers' own set-up.
public struct TestCertificateError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
