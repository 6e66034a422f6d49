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
    /// Counts notices, so a name arriving late never replaces a newer notice.
    private var noticeNumber = 0
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
    /// - Throws: `IMError` 33003 when somebody shares already (`startOrJoin` joins then).
    public func start(sendStart: (@Sendable (any MessageContent) async throws -> Message?)? = nil) async throws {
        switch status {
        case .idle: break
        case .incoming: throw IMError(.invalidParameter, "the peer shares a location already: join instead")
        case .outgoing, .connected: throw IMError(.invalidParameter, "you already share your location here")
        }
        enter()
        do {
            guard try await sendCard(RealTimeLocationStartMessage(), via: sendStart) != nil else {
                // The app's send hook canceled it.
                leaveLocally()
                return
            }
        } catch {
            leaveLocally()
            let messageId = (error as? SendMessageError)?.message.messageId ?? 0
            signal.yield(.startFailed(messageId: messageId, code: KitError.code(of: error)))
            throw error
        }
        await refreshPosition()
        await sendPosition()
        reschedule()
    }

    /// `joinRealTimeLocation`: this user joins the peer's sharing (INCOMING → CONNECTED).
    /// - Throws: `IMError` 33003 when nobody shares here, this user already does, or the peer
    ///   stopped while the join was sent.
    public func join() async throws {
        switch status {
        case .incoming: break
        case .idle: throw IMError(.invalidParameter, "nobody shares a location here to join: start sharing instead")
        case .outgoing, .connected: throw IMError(.invalidParameter, "you already share your location here")
        }
        enter()
        do {
            _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationJoinMessage())
        } catch {
            leaveLocally()
            signal.yield(.updateFailed("could not join: \(KitError.describe(error))"))
            throw error
        }
        // The peer may have stopped while the join was on its way: there is nobody to join, and
        // sharing on without a start would leave the peer with no card.
        guard sharing.keys.contains(where: { $0 != me }) else {
            leaveLocally()
            _ = try? await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationQuitMessage())
            throw IMError(.invalidParameter, "the peer stopped sharing before you joined: start sharing instead")
        }
        announce(.joined(userId: me))
        await refreshPosition()
        await sendPosition()
        reschedule()
    }

    /// `quitRealTimeLocation`: this user stops sharing. The last participant to leave ends the
    /// session with `RC:RLEnd` (the "sharing ended" card), through `sendEnd` when given.
    public func quit(sendEnd: (@Sendable (any MessageContent) async throws -> Message?)? = nil) async throws {
        guard sharing[me] != nil else { return }
        leaveLocally()
        announce(.quit(userId: me))
        if sharing.isEmpty {
            _ = try await sendCard(RealTimeLocationEndMessage(), via: sendEnd)
        } else {
            _ = try await client.sendMessage(.private, targetId: targetId, content: RealTimeLocationQuitMessage())
        }
    }

    /// A new position of this device (a fake provider's typed coordinate, or the platform's):
    /// sent at once while this user shares, else kept for when sharing starts.
    /// - Throws: `IMError` 33003 for a latitude outside -90...90 or a longitude outside -180...180.
    public func updateLocation(latitude: Double, longitude: Double) async throws {
        guard Self.isValid(latitude: latitude, longitude: longitude) else {
            throw IMError(.invalidParameter, "a position needs latitude -90...90 and longitude -180...180, not \(latitude),\(longitude)")
        }
        position = (latitude, longitude)
        guard sharing[me] != nil else { return }
        sharing[me]?.latitude = latitude
        sharing[me]?.longitude = longitude
        sharing[me]?.locatedAt = clock.nowMilliseconds()
        signal.yield(.location(userId: me, latitude: latitude, longitude: longitude))
        await sendPosition()
        reschedule()
    }

    /// Whether a coordinate is on the globe (latitude -90...90, longitude -180...180).
    public nonisolated static func isValid(latitude: Double, longitude: Double) -> Bool {
        (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }

    /// This user shares from now, with the last position known.
    private func enter() {
        let before = status
        let now = clock.nowMilliseconds()
        sharing[me] = LocationShareParticipant(userId: me, latitude: position?.latitude, longitude: position?.longitude,
                                               locatedAt: position == nil ? nil : now, seenAt: now)
        if status != before { signal.yield(.statusChanged(status)) }
    }

    private func leaveLocally() {
        let before = status
        sharing[me] = nil
        if status != before { signal.yield(.statusChanged(status)) }
        reschedule()
    }

    /// A start or end card: through the screen's send pipeline when given, else through IMLib (and
    /// the conversation list is told). Nil when the app's send hook canceled it.
    private func sendCard(_ content: any MessageContent,
                          via send: (@Sendable (any MessageContent) async throws -> Message?)?) async throws -> Message? {
        if let send { return try await send(content) }
        let sent = try await client.sendMessage(.private, targetId: targetId, content: content)
        kit?.localChanges.yield(ConversationIdentifier(.private, targetId: targetId))
        return sent
    }

    /// Asks the app's location provider for the device's position.
    private func refreshPosition() async {
        guard let provider = kit?.locationProvider, let fresh = await provider(),
              Self.isValid(latitude: fresh.latitude, longitude: fresh.longitude) else { return }
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
            signal.yield(.updateFailed(KitError.describe(error)))
        }
    }

    // MARK: the peer

    /// A location-sharing message of this conversation (live or from offline sync). The status
    /// change is reported before the join or quit it came with.
    func received(_ message: Message, offline: Bool) {
        let peer = message.senderUserId
        // This user's own messages (from another device) do not make this device share.
        guard peer != me, message.direction == .receive else { return }
        let now = clock.nowMilliseconds()
        let before = status
        var notice: LocationShareEvent?
        switch message.content {
        case is RealTimeLocationStartMessage:
            // A start caught up offline counts only while it could still be going on.
            if offline, now - message.sentTime > Int64(config.locationIdleTimeout) * 1000 { return }
            sharing[peer] = LocationShareParticipant(userId: peer, seenAt: offline ? message.sentTime : now)
        case is RealTimeLocationJoinMessage:
            guard !offline else { return }
            sharing[peer] = sharing[peer] ?? LocationShareParticipant(userId: peer, seenAt: now)
            sharing[peer]?.seenAt = now
            notice = .joined(userId: peer)
        case is RealTimeLocationQuitMessage, is RealTimeLocationEndMessage:
            guard sharing.removeValue(forKey: peer) != nil else { return }
            notice = .quit(userId: peer)
        case let update as RealTimeLocationStatusMessage:
            guard !offline else { return }
            var participant = sharing[peer] ?? LocationShareParticipant(userId: peer, seenAt: now)
            participant.seenAt = now
            if let latitude = update.latitude, let longitude = update.longitude, Self.isValid(latitude: latitude, longitude: longitude) {
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
        if let notice { announce(notice) }
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
        switch event {
        case .joined(let userId), .quit(let userId):
            return noticeText(event, name: userId == me ? userId : await kit?.info.displayName(userId) ?? userId)
        default:
            return nil
        }
    }

    private func noticeText(_ event: LocationShareEvent, name: String) -> String? {
        let strings = self.strings
        switch event {
        case .joined(let userId): return userId == me ? strings.youJoinedLocationSharing : strings.joinedLocationSharing(name)
        case .quit(let userId): return userId == me ? strings.youQuitLocationSharing : strings.quitLocationSharing(name)
        default: return nil
        }
    }

    /// Reports a join or quit and shows its notice in the banner at once, with the user's id; the
    /// name replaces it when the provider answers (unless a newer notice came meanwhile), so a slow
    /// provider delays neither the notice nor the kit's other messages.
    private func announce(_ event: LocationShareEvent) {
        signal.yield(event)
        switch event {
        case .joined(let userId), .quit(let userId): showNotice(event, userId: userId)
        default: break
        }
    }

    private func showNotice(_ event: LocationShareEvent, userId: String) {
        guard let text = noticeText(event, name: userId) else { return }
        noticeNumber += 1
        let number = noticeNumber
        notice = (text, clock.nowMilliseconds() + Self.noticeMilliseconds)
        signal.yield(.bannerChanged)
        reschedule()
        guard userId != me, let kit else { return }
        Task { [weak self] in
            let name = await kit.info.displayName(userId)
            await self?.named(number, event, name: name)
        }
    }

    private func named(_ number: Int, _ event: LocationShareEvent, name: String) {
        guard number == noticeNumber, let until = notice?.until, let text = noticeText(event, name: name), text != notice?.text else { return }
        notice = (text, until)
        signal.yield(.bannerChanged)
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
        // A reschedule between this timer's wake-up and here replaced it: the new one ticks.
        guard !Task.isCancelled else { return }
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
        let gone = sharing.values.filter { $0.userId != me && $0.seenAt + idle <= now }.map(\.userId).sorted()
        for peer in gone { sharing[peer] = nil }
        if status != before { signal.yield(.statusChanged(status)) }
        for peer in gone { announce(.quit(userId: peer)) }
        if sharing[me] != nil, now >= nextRepeat {
            await refreshPosition()
            await sendPosition()
        }
        reschedule()
    }

    /// The kit disconnects: this user's sharing ends (the peer is told while it still can be) and
    /// what the session knew of the peer goes, since nothing more will arrive.
    func stopForDisconnect() async {
        if sharing[me] != nil { try? await quit() }
        let before = status
        sharing = [:]
        notice = nil
        timer?.cancel()
        timer = nil
        if status != before { signal.yield(.statusChanged(status)) }
        signal.yield(.bannerChanged)
    }

    /// The kit signed in as another user: this session is done.
    func discard() {
        timer?.cancel()
        timer = nil
    }
}

/// The RongCloud code and message of an error, for events and screens.
public enum KitError {
    public static func code(of error: any Error) -> Int {
        if let error = error as? SendMessageError { return error.code.rawValue }
        if let error = error as? IMError { return error.code.rawValue }
        return ErrorCode.unknown.rawValue
    }

    /// `[code] message`.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? SendMessageError { return "[error \(error.code.rawValue)] \(error.error.message)" }
        if let error = error as? IMError { return "[error \(error.code.rawValue)] \(error.message)" }
        return "[error] \(error)"
    }
}
