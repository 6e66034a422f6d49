import Foundation
import IMCore
import IMStore
import IMWire
import Logging
import NIOCore
import SwiftProtobuf
import Synchronization

/// The client gateway's work for a connection: CONNECT's checks and the requests of an open
/// session. The connection itself (frames, timers, closes) is `GatewayConnectionHandler`, channel-
/// handler state on its event loop, which calls these.
struct Gateway: Sendable {
    let core: ServerCore

    /// Drops the TCP connection after `delay` unless it has closed by then.
    static func closeSoon(_ channel: any Channel, after delay: TimeAmount) {
        guard delay > .zero else {
            channel.close(promise: nil)
            return
        }
        channel.eventLoop.scheduleTask(in: delay) { channel.close(promise: nil) }
    }

    /// Authenticates CONNECT and registers the session under the login rules.
    func connect(_ frame: Im_Frame, channel: any Channel) async throws -> ClientSession {
        guard frame.op == .connect, let request = try? frame.body(Im_ConnectRequest.self) else {
            throw IMError(.invalidParameter, "the first frame of a connection must be CONNECT")
        }
        guard !core.shutdown.isStopping else { throw ServerShutdown.refusal }
        guard !request.token.isEmpty else { throw IMError(.invalidParameter, "token is empty: pass the token your app server got from /user/getToken.json") }
        guard request.token.utf8.count <= ConnectLimits.maxTokenBytes else {
            throw IMError(.tokenIncorrect, "the token is longer than any token this server issues (\(ConnectLimits.maxTokenBytes) bytes): pass the token your app server got from /user/getToken.json")
        }
        guard request.appKey.utf8.count <= ConnectLimits.maxAppKeyBytes else {
            throw IMError(.wrongAppKey, "the app key is longer than \(ConnectLimits.maxAppKeyBytes) bytes: check the app key the client was initialised with")
        }
        guard ConnectLimits.isValidDeviceId(request.deviceID) else {
            throw IMError(.invalidParameter, "the device id is not valid: use \(ConnectLimits.deviceIdRule)")
        }
        guard let platform = Platform(wire: request.platform) else {
            throw IMError(.invalidParameter, "platform is missing or unknown")
        }
        guard let app = await core.apps.find(key: request.appKey) else {
            throw IMError(.wrongAppKey, "app key '\(request.appKey)' does not exist on this server: check the app key the client was initialised with")
        }
        guard !app.banned else {
            throw IMError(.appBlockedOrDeleted, "app \(app.appKey) is banned by the server's operator: no client of it can connect")
        }
        let claims = try core.tokens.verify(request.token, app: app)
        let access = try await core.directory.checkConnect(appId: app.id, userId: claims.userId, tokenIssuedAt: claims.issuedAt,
                                                           now: core.clock.nowMilliseconds())
        let session = ClientSession(
            id: UUID().uuidString, appId: app.id, userId: claims.userId, platform: platform,
            deviceId: request.deviceID, now: core.clock.nowMilliseconds(),
            outbound: try await SessionOutbound.attach(to: channel, maxQueuedBytes: core.config.network.maxQueuedBytesPerConnection),
            maxHeldBytes: ConnectionLimits.heldBytes(forQueue: core.config.network.maxQueuedBytesPerConnection),
            clientAddress: channel.remoteAddress.map { "\($0.ipAddress ?? ""):\($0.port ?? 0)" } ?? "",
            historyAfterSeq: access.historyAfterSeq,
            severalPerClass: platform.loginClass == .web && core.apps.settings(appId: app.id).messaging.multiDeviceSyncEnabled)
        let displaced = try await core.sessionStarted(session, refuseIfClassTaken: request.reconnectKickRefuse)
        // A block or a deactivation committed while this connect was being checked must not leave
        // the user online.
        let refusal: IMError?
        do {
            refusal = try await core.directory.accessRefusal(appId: app.id, userId: claims.userId, now: core.clock.nowMilliseconds())
        } catch {
            core.sessionEnded(session)
            throw error
        }
        // Likewise a ban (or deletion) of the app.
        if refusal == nil, core.apps.app(key: app.appKey)?.banned ?? true {
            core.sessionEnded(session)
            throw IMError(.appBlockedOrDeleted, "app \(app.appKey) is banned or deleted by the server's operator")
        }
        if let refusal {
            core.sessionEnded(session)
            for old in displaced {
                old.kick(code: refusal.code == .userBlocked ? .bannedWhileOnline : refusal.code, reason: refusal.message)
            }
            throw refusal
        }
        // A shutdown that began meanwhile may have closed the sessions it found before this one
        // was registered: refused, and what it displaced is closed as the shutdown would have.
        if core.shutdown.isStopping {
            core.sessionEnded(session)
            for old in displaced { old.closeForShutdown() }
            throw ServerShutdown.refusal
        }
        for old in displaced {
            old.kick(code: .kickedByOtherClient, reason: "user \(claims.userId) logged in on another \(platform.loginClass.rawValue) device")
        }
        // The app's server hears of the device coming online before the device does.
        do {
            try await core.callbacks?.sessionOnline(session)
        } catch {
            core.sessionEnded(session)
            core.logger.error("the online status callback could not be taken on", metadata: ["error": "\(error)"])
            throw IMError(.serverUnavailable, "the server could not record the connection: reconnect in a moment")
        }
        // Counted once the connect has passed every check.
        core.statistics.active(appId: app.id, userId: claims.userId)
        var reply = Im_ConnectReply()
        reply.userID = claims.userId
        reply.serverTime = core.clock.nowMilliseconds()
        reply.sessionID = session.id
        reply.heartbeatIntervalMs = Int32(core.config.session.heartbeatIntervalSeconds * 1000)
        session.send(try FrameCodec.reply(to: frame, reply))
        return session
    }

    /// Handles one request of an open session through the op table and queues its reply.
    func handle(_ frame: Im_Frame, session: ClientSession) async {
        if let reply = await core.answer(frame, from: session) { session.send(reply) }
    }
}
