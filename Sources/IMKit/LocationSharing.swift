import Foundation
import IMCore
import IMLib

/// The contents of a location-sharing session, which the kit routes to its session.
protocol LocationShareContent {}
extension RealTimeLocationStartMessage: LocationShareContent {}
extension RealTimeLocationEndMessage: LocationShareContent {}
extension RealTimeLocationJoinMessage: LocationShareContent {}
extension RealTimeLocationQuitMessage: LocationShareContent {}
extension RealTimeLocationStatusMessage: LocationShareContent {}

/// Where this user stands in a conversation's location sharing (RongCloud's
/// `RCRealTimeLocationStatus`).
public enum LocationShareStatus: String, Sendable {
    /// Nobody shares.
    case idle
    /// This user shares and the peer does not (yet).
    case outgoing
    /// The peer shares and this user has not joined.
    case incoming
    /// Both share.
    case connected
}

/// One user sharing a location, with the last position the kit knows.
public struct LocationShareParticipant: Sendable, Equatable {
    public var userId: String
    public var latitude: Double?
    public var longitude: Double?
    /// When the last position came (kit clock, ms); nil before the first.
    public var locatedAt: Int64?
    /// When the participant last showed it still shares (start, join or a position).
    public var seenAt: Int64
}

/// What a location-sharing session reports (RongCloud's `RCRealTimeLocationObserver`).
public enum LocationShareEvent: Sendable, Equatable {
    case statusChanged(LocationShareStatus)
    /// A participant's new position (`onReceiveLocation`), this user's own included.
    case location(userId: String, latitude: Double, longitude: Double)
    /// `onParticipantsJoin`: a user joined (this user too).
    case joined(userId: String)
    /// `onParticipantsQuit`: a user left, or was not heard from for the idle timeout.
    case quit(userId: String)
    /// `onRealTimeLocationStartFailed`: the start message was not sent and is marked failed.
    case startFailed(messageId: Int64, code: Int)
    /// `onFailUpdateLocation`.
    case updateFailed(String)
    /// The banner's text changed (a join or quit notice, or the status after it).
    case bannerChanged
}

/// Real-time location sharing in one one-to-one conversation (RongCloud's
/// `RCRealTimeLocationProxy`; spec imkit-and-overview.md §3.14.17). The documents give the
/// client's behaviour; the wire and the limits are this kit's:
/// - starting sends `RC:RLStart` (stored and counted: the peer is told, both keep a card); joining
///   `RC:RLJoin`, quitting `RC:RLQuit` and positions `RC:RL` are STATUS messages; the last
///   participant to quit sends `RC:RLEnd` (stored: the "sharing ended" card);
/// - a participant repeats its position every `KitConfig.locationUpdateInterval` seconds (from the
///   app's location provider when it has one) and is dropped after `locationIdleTimeout` seconds
///   without a sign, so a peer whose device died does not share forever;
/// - sharing goes on when the screen is left (the banner shows on return) and ends on `quit()` or
///   when the kit disconnects.
/// Every time rule reads the kit's clock.
public actor LocationShareSession {
    /// The peer: a one-to-one conversation's target.
    public nonisolated let targetId: String
    private weak var kit: IMKit?
    private let client: IMClient
    private let clock: any WallClock
    private let me: String
    private var sharing: [String: LocationShareParticipant] = [:]
    /// This device's last position (typed, or from the app's provider).
    private var position: (latitude: Double, longitude: Double)?
    private var nextRepeat: Int64 = 0
    /// A join or quit notice shown in the banner until this time, then the status again.
    private var notice: (text: String, until: Int64)?
    private var timer: Task<Void, Never>?
    private let signal = Broadcaster<LocationShareEvent>()

    /// How long a join or quit notice stays in the banner before the status returns (0.5 s).
    public static let noticeMilliseconds: Int64 = 500

    init(kit: IMKit, targetId: String, me: String) {
        self.kit = kit
        self.client = kit.client
        self.clock = kit.clock
        self.targetId = targetId
        self.me = me
    }

    deinit { timer?.cancel() }

    /// The session's events as they happen.
    public func events() -> AsyncStream<LocationShareEvent> { signal.stream() }

    public var status: LocationShareStatus {
        let mine = sharing[me] != nil
        let theirs = sharing.keys.contains { $0 != me }
        switch (mine, theirs) {
        case (true, true): return .connected
        case (true, false): return .outgoing
        case (false, true): return .incoming
        case (false, false): return .idle
        }
    }

    /// Who shares now, this user first.
    public var participants: [LocationShareParticipant] {
        sharing.values.sorted { ($0.userId != me ? 1 : 0, $0.userId) < ($1.userId != me ? 1 : 0, $1.userId) }
    }

    private var config: KitConfig { kit?.config ?? KitConfig() }
    private var strings: KitStrings { kit?.strings ?? KitStrings(.english) }

    // MARK: this user

    /// The location action's "share in real time": joins when the peer shares (INCOMING), starts
    /// when nobody does (IDLE), and does nothing while this user already shares.
    /// - Parameter sendStart: sends the start message (a conversation screen passes its own send
    ///   pipeline, so the card and a failure show there); nil sends it through IMLib directly.
    public func startOrJoin(sendStart: (@Sendable (any MessageContent) async throws -> Message?)? = nil) async throws {
        switch status {
        case .incoming: try await join()
        case .idle: try await start(sendStart: sendStart)
        case .outgoing, .connected: return
        }
    }

    /// `startRealTimeLocation`: this user starts sharing (IDLE → OUTGOING). When the start message
    /// cannot be sent it is marked failed, `startFailed` is reported and the status returns to IDLE.
    public func start(sendStart: (@Sendable (any MessageContent) async throws -> Message?)? = nil) async throws {
        guard status == .idle else {
            if status == .incoming { try await join() }
            return
        }
        let now = clock.nowMilliseconds()
        sharing[me] = LocationShareParticipant(userId: me, latitude: position?.latitude, longitude: position?.longitude,
                                               locatedAt: position == nil ? nil : now, seenAt: now)
        signal.yield(.statusChanged(status))
        do {
            let sent: Message?
            if let sendStart {
                sent = try await sendStart(RealTimeLocationStartMessage())
            } else {
                sent = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationStartMessage())
                kit?.localChanges.yield(ConversationIdentifier(.private, targetId: targetId))
            }
            guard sent != nil else {
                // The app's send hook canceled it.
                leaveLocally()
                return
            }
        } catch {
            leaveLocally()
            let messageId = (error as? SendMessageError)?.message.messageId ?? 0
            signal.yield(.startFailed(messageId: messageId, code: Self.code(of: error)))
            throw error
        }
        await refreshPosition()
        await sendPosition()
        reschedule()
    }

    /// `joinRealTimeLocation`: this user joins the peer's sharing (INCOMING → CONNECTED).
    public func join() async throws {
        guard status == .incoming else {
            throw IMError(.invalidParameter, "nobody shares a location here to join (status \(status.rawValue)): start sharing instead")
        }
        let now = clock.nowMilliseconds()
        sharing[me] = LocationShareParticipant(userId: me, latitude: position?.latitude, longitude: position?.longitude,
                                               locatedAt: position == nil ? nil : now, seenAt: now)
        do {
            _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationJoinMessage())
        } catch {
            sharing[me] = nil
            signal.yield(.updateFailed("could not join: \(Self.describe(error))"))
            throw error
        }
        await announce(.joined(userId: me))
        await refreshPosition()
        await sendPosition()
        reschedule()
    }

    /// `quitRealTimeLocation`: this user stops sharing. The last participant to leave ends the
    /// session with `RC:RLEnd` (the "sharing ended" card), through `sendEnd` when given.
    public func quit(sendEnd: (@Sendable (any MessageContent) async throws -> Message?)? = nil) async throws {
        guard sharing[me] != nil else { return }
        leaveLocally()
        await announce(.quit(userId: me))
        if sharing.isEmpty {
            if let sendEnd {
                _ = try await sendEnd(RealTimeLocationEndMessage())
            } else {
                _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationEndMessage())
                kit?.localChanges.yield(ConversationIdentifier(.private, targetId: targetId))
            }
        } else {
            _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationQuitMessage())
        }
    }

    /// A new position of this device (a fake provider's typed coordinate, or the platform's):
    /// sent at once while this user shares, else kept for when sharing starts.
    /// - Throws: `IMError` 33003 for a latitude outside -90...90 or a longitude outside -180...180.
    public func updateLocation(latitude: Double, longitude: Double) async throws {
        guard (-90...90).contains(latitude), (-180...180).contains(longitude) else {
            throw IMError(.invalidParameter, "a position needs latitude -90...90 and longitude -180...180, not \(latitude),\(longitude)")
        }
        position = (latitude, longitude)
        guard sharing[me] != nil else { return }
        let now = clock.nowMilliseconds()
        sharing[me]?.latitude = latitude
        sharing[me]?.longitude = longitude
        sharing[me]?.locatedAt = now
        signal.yield(.location(userId: me, latitude: latitude, longitude: longitude))
        await sendPosition()
        reschedule()
    }

    private func leaveLocally() {
        let before = status
        sharing[me] = nil
        if status != before { signal.yield(.statusChanged(status)) }
        reschedule()
    }

    /// Asks the app's location provider for the device's position.
    private func refreshPosition() async {
        guard let provider = kit?.locationProvider, let fresh = await provider() else { return }
        guard (-90...90).contains(fresh.latitude), (-180...180).contains(fresh.longitude) else { return }
        if position.map({ $0.latitude != fresh.latitude || $0.longitude != fresh.longitude }) ?? true, sharing[me] != nil {
            sharing[me]?.latitude = fresh.latitude
            sharing[me]?.longitude = fresh.longitude
            sharing[me]?.locatedAt = clock.nowMilliseconds()
            signal.yield(.location(userId: me, latitude: fresh.latitude, longitude: fresh.longitude))
        }
        position = fresh
    }

    /// Sends this device's position (or, without one, that it still shares).
    private func sendPosition() async {
        guard sharing[me] != nil else { return }
        nextRepeat = clock.nowMilliseconds() + Int64(config.locationUpdateInterval) * 1000
        do {
            _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationStatusMessage(
                latitude: position?.latitude, longitude: position?.longitude))
        } catch {
            signal.yield(.updateFailed(Self.describe(error)))
        }
    }

    // MARK: the peer

    /// A location-sharing message of this conversation (live or from offline sync).
    func received(_ message: Message, offline: Bool) async {
        let peer = message.senderUserId
        // This user's own messages (from another device) do not make this device share.
        guard peer != me, message.direction == .receive else { return }
        let now = clock.nowMilliseconds()
        let before = status
        switch message.content {
        case is RealTimeLocationStartMessage:
            // A start caught up offline counts only while it could still be going on.
            if offline, now - message.sentTime > Int64(config.locationIdleTimeout) * 1000 { return }
            sharing[peer] = LocationShareParticipant(userId: peer, seenAt: offline ? message.sentTime : now)
        case is RealTimeLocationJoinMessage:
            guard !offline else { return }
            sharing[peer] = sharing[peer] ?? LocationShareParticipant(userId: peer, seenAt: now)
            sharing[peer]?.seenAt = now
            await announce(.joined(userId: peer))
        case is RealTimeLocationQuitMessage, is RealTimeLocationEndMessage:
            guard sharing.removeValue(forKey: peer) != nil else { return }
            if message.content is RealTimeLocationQuitMessage { await announce(.quit(userId: peer)) }
        case let update as RealTimeLocationStatusMessage:
            guard !offline else { return }
            var participant = sharing[peer] ?? LocationShareParticipant(userId: peer, seenAt: now)
            participant.seenAt = now
            if let latitude = update.latitude, let longitude = update.longitude,
               (-90...90).contains(latitude), (-180...180).contains(longitude) {
                participant.latitude = latitude
                participant.longitude = longitude
                participant.locatedAt = now
                sharing[peer] = participant
                signal.yield(.location(userId: peer, latitude: latitude, longitude: longitude))
            } else {
                sharing[peer] = participant
            }
        default:
            return
        }
        if status != before { signal.yield(.statusChanged(status)) }
        reschedule()
    }

    // MARK: banner

    /// The status banner's text (nil: no banner): a join or quit notice for 0.5 s, then the status.
    public func banner() async -> String? {
        if let notice, clock.nowMilliseconds() < notice.until { return notice.text }
        let shown = participants
        var name = shown.first?.userId ?? ""
        if shown.count == 1, let kit { name = await kit.info.displayName(name) }
        return Self.bannerText(status: status, participantCount: shown.count, name: name, strings: strings)
    }

    /// The banner rules of RongCloud's demo: OUTGOING "You are sharing your location"; one
    /// participant "<name> is sharing location"; more "N people are sharing location"; none, no banner.
    public nonisolated static func bannerText(status: LocationShareStatus, participantCount: Int, name: String,
                                              strings: KitStrings) -> String? {
        switch status {
        case .idle: return nil
        case .outgoing: return strings.youAreSharingLocation
        case .incoming, .connected:
            if participantCount < 1 { return nil }
            return participantCount == 1 ? strings.isSharingLocation(name) : strings.peopleSharingLocation(participantCount)
        }
    }

    /// The notice of a join or quit, with the user's name (its id when the provider has none).
    public func noticeText(_ event: LocationShareEvent) async -> String? {
        let strings = self.strings
        switch event {
        case .joined(let userId):
            if userId == me { return strings.youJoinedLocationSharing }
            return strings.joinedLocationSharing(await kit?.info.displayName(userId) ?? userId)
        case .quit(let userId):
            if userId == me { return strings.youQuitLocationSharing }
            return strings.quitLocationSharing(await kit?.info.displayName(userId) ?? userId)
        default:
            return nil
        }
    }

    private func announce(_ event: LocationShareEvent) async {
        signal.yield(event)
        if let text = await noticeText(event) {
            notice = (text, clock.nowMilliseconds() + Self.noticeMilliseconds)
            signal.yield(.bannerChanged)
            reschedule()
        }
    }

    // MARK: time

    /// One timer per session: the next of this user's repeat, a peer's idle timeout and the end of
    /// a banner notice.
    private func reschedule() {
        timer?.cancel()
        timer = nil
        var deadlines: [Int64] = []
        if sharing[me] != nil { deadlines.append(nextRepeat) }
        let idle = Int64(config.locationIdleTimeout) * 1000
        deadlines += sharing.values.filter { $0.userId != me }.map { $0.seenAt + idle }
        if let notice { deadlines.append(notice.until) }
        guard let next = deadlines.min() else { return }
        let clock = self.clock
        timer = Task { [weak self] in
            do { try await clock.sleep(untilMilliseconds: next) } catch { return }
            await self?.tick()
        }
    }

    private func tick() async {
        // This task is no longer the pending timer: a reschedule while it works (a position
        // arriving) starts a new one instead of cancelling the sends below.
        timer = nil
        let now = clock.nowMilliseconds()
        if let notice, now >= notice.until {
            self.notice = nil
            signal.yield(.bannerChanged)
        }
        let idle = Int64(config.locationIdleTimeout) * 1000
        let before = status
        for peer in sharing.values where peer.userId != me && peer.seenAt + idle <= now {
            sharing[peer.userId] = nil
            await announce(.quit(userId: peer.userId))
        }
        if status != before { signal.yield(.statusChanged(status)) }
        if sharing[me] != nil, now >= nextRepeat {
            await refreshPosition()
            await sendPosition()
        }
        reschedule()
    }

    /// Ends this user's sharing when the kit disconnects (the peer is told while it still can be).
    func stopForDisconnect() async {
        guard sharing[me] != nil else { return }
        try? await quit()
    }

    private static func code(of error: any Error) -> Int {
        if let error = error as? SendMessageError { return error.code.rawValue }
        if let error = error as? IMError { return error.code.rawValue }
        return ErrorCode.unknown.rawValue
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? SendMessageError { return "[\(error.code.rawValue)] \(error.error.message)" }
        if let error = error as? IMError { return "[\(error.code.rawValue)] \(error.message)" }
        return "\(error)"
    }
}
