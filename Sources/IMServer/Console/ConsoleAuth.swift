import Crypto
import _CryptoExtras
import Foundation
import IMCore
import IMStore
import Synchronization

/// The console's operator (`admin`) and their sessions. The password is kept as a PBKDF2-SHA256
/// hash with its own salt; a session is a random token in an HttpOnly cookie, of which the store
/// keeps only a SHA-256, so a copy of the database signs nobody in. Failed logins are counted per
/// address (an IPv6 /64 as one): past `consoleLoginAttempts` in 15 minutes, the address is refused
/// until the oldest failure ages out. An attempt counts as a failure from the moment it starts
/// (a burst of attempts at once gets no more guesses than attempts one after another), and at most
/// two passwords are hashed at a time, on threads of their own, so logins never hold up the
/// server's other work.
public final class ConsoleAuth: Sendable {
    /// The one operator account.
    public static let operatorName = "admin"
    static let failureWindow: Int64 = 15 * 60_000
    /// OWASP's figure for PBKDF2-HMAC-SHA256 (2023).
    static let rounds = 600_000

    private let store: any ConsoleStore
    private let clock: any WallClock
    private let settings: ServerConfig.ConsoleSettings
    private let failures = Mutex<[String: [Int64]]>([:])
    private let hashing = Mutex(0)
    /// Addresses remembered at most; past it, those whose failures have all aged out are dropped.
    static let rememberedAddresses = 10_000

    init(store: any ConsoleStore, clock: any WallClock, settings: ServerConfig.ConsoleSettings) {
        self.store = store
        self.clock = clock
        self.settings = settings
    }

    /// Sets the password of the configuration, or at the first start makes one; returns a password
    /// made now (to be shown once), nil otherwise.
    public func prepare() async throws -> String? {
        if let password = settings.password {
            if let stored = try await store.operatorPasswordHash(name: Self.operatorName), Self.verify(password, hash: stored) { return nil }
            try await store.setOperatorPassword(name: Self.operatorName, hash: try Self.hash(password), now: clock.nowMilliseconds())
            try await store.deleteConsoleSessions(operatorName: Self.operatorName, expiredBefore: clock.nowMilliseconds())
            return nil
        }
        guard try await store.operatorPasswordHash(name: Self.operatorName) == nil else { return nil }
        let made = AppRegistry.randomCredential(length: 20)
        try await store.setOperatorPassword(name: Self.operatorName, hash: try Self.hash(made), now: clock.nowMilliseconds())
        return made
    }

    /// Signs the operator in: a new session's token, or 1008 after too many failures from this
    /// address, or 1004 for a wrong name or password.
    func login(name: String, password: String, address: String) async throws -> String {
        let now = clock.nowMilliseconds()
        let limit = settings.loginAttempts
        // Checked and counted as a failure in one step; a success clears the address's failures.
        let oldest: Int64? = failures.withLock { table in
            if table.count > Self.rememberedAddresses {
                table = table.filter { $0.value.contains { now - $0 < Self.failureWindow } }
            }
            var kept = (table[address] ?? []).filter { now - $0 < Self.failureWindow }
            if kept.count >= limit { return kept.min() }
            kept.append(now)
            table[address] = kept
            return nil
        }
        if let oldest {
            let wait = (oldest + Self.failureWindow - now + 59_999) / 60_000
            throw IMError(.apiRateLimited, "too many failed logins from this address: try again in \(wait) minute\(wait == 1 ? "" : "s")")
        }
        var verified = false
        if name == Self.operatorName, let stored = try await store.operatorPasswordHash(name: name) {
            verified = try await verifyOffPool(password, hash: stored)
        }
        guard verified else {
            throw IMError(.apiSignatureFailed, "wrong name or password")
        }
        failures.withLock { _ = $0.removeValue(forKey: address) }
        // 43 of 36 characters: over 220 bits.
        let token = AppRegistry.randomCredential(length: 43)
        try await store.deleteConsoleSessions(operatorName: nil, expiredBefore: now)
        try await store.createConsoleSession(tokenHash: Self.digest(token), operatorName: name, createdAt: now,
                                             expiresAt: now + Int64(settings.sessionMinutes) * 60_000)
        return token
    }

    /// The operator of a live session, nil for an unknown or expired token.
    func operatorName(token: String) async throws -> String? {
        guard !token.isEmpty, token.utf8.count <= 128 else { return nil }
        return try await store.consoleSession(tokenHash: Self.digest(token), now: clock.nowMilliseconds())
    }

    func logout(token: String) async throws {
        try await store.deleteConsoleSession(tokenHash: Self.digest(token))
    }

    /// Changes the password (the current one must be given) and ends every session.
    func changePassword(current: String, new: String) async throws {
        guard let stored = try await store.operatorPasswordHash(name: Self.operatorName), Self.verify(current, hash: stored) else {
            throw IMError(.apiSignatureFailed, "the current password is wrong")
        }
        guard (10...256).contains(new.utf8.count) else {
            throw IMError(.apiBadParameter, "the new password must be 10 to 256 bytes")
        }
        try await store.setOperatorPassword(name: Self.operatorName, hash: try Self.hash(new), now: clock.nowMilliseconds())
        try await store.deleteConsoleSessions(operatorName: Self.operatorName, expiredBefore: clock.nowMilliseconds())
    }

    // MARK: hashing

    /// `pbkdf2-sha256$<rounds>$<salt>$<hash>`, salt and hash in base64.
    static func hash(_ password: String, rounds: Int = rounds) throws -> String {
        var salt = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        let key = try derive(password, salt: salt, rounds: rounds)
        return "pbkdf2-sha256$\(rounds)$\(Data(salt).base64EncodedString())$\(Data(key).base64EncodedString())"
    }

    /// `verify` on a thread of its own (the hash takes a few hundred milliseconds of CPU), at most
    /// two at a time: more logins at once are refused with 1008.
    private func verifyOffPool(_ password: String, hash: String) async throws -> Bool {
        let admitted = hashing.withLock { running in
            guard running < 2 else { return false }
            running += 1
            return true
        }
        guard admitted else { throw IMError(.apiRateLimited, "too many logins at once: try again in a moment") }
        defer { hashing.withLock { $0 -= 1 } }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { continuation.resume(returning: Self.verify(password, hash: hash)) }
        }
    }

    static func verify(_ password: String, hash: String) -> Bool {
        let parts = hash.split(separator: "$").map(String.init)
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let rounds = Int(parts[1]), rounds > 0,
              let salt = Data(base64Encoded: parts[2]), let expected = Data(base64Encoded: parts[3]),
              let key = try? derive(password, salt: Array(salt), rounds: rounds) else { return false }
        return constantTimeEqual(Data(key).base64EncodedString(), expected.base64EncodedString())
    }

    private static func derive(_ password: String, salt: [UInt8], rounds: Int) throws -> [UInt8] {
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32,
                                                    unsafeUncheckedRounds: rounds)
        return key.withUnsafeBytes { Array($0) }
    }

    static func digest(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
