import Foundation
import IMCore
import IMLib

/// The connection as a kit screen shows it (RongCloud §3.5): the status, the wait before the next
/// reconnect, and for the states the SDK does not leave by itself, the reason and what to do.
public enum KitConnectionState: Sendable, Equatable {
    case connecting
    case connected
    /// Waiting `seconds` before the next reconnect round.
    case reconnecting(seconds: Int)
    /// The connection dropped; the client reconnects by itself.
    case suspended
    case networkUnavailable
    /// The user must sign in again: kicked by another device (31010/31023), banned (31009/31011),
    /// the app banned (31008), a token refused again after one new token (31004), deactivated.
    case signedOut(LogoutReason)
    /// `timeLimit` passed (34006): the app offers to try again.
    case timedOut
    /// Disconnected by the app.
    case disconnected

    public enum LogoutReason: Sendable, Equatable {
        case otherDevice, banned, appBanned, tokenIncorrect, deactivated, signedOut
    }

    /// The banner text for a list screen (nil while connected).
    public func banner(_ strings: KitStrings) -> String? {
        switch self {
        case .connected: return nil
        case .connecting: return strings.connecting
        case .reconnecting(let seconds): return strings.reconnecting(inSeconds: seconds)
        case .suspended: return strings.suspended
        case .networkUnavailable: return strings.networkUnavailable
        case .timedOut: return strings.timedOut
        case .disconnected: return strings.signedOut
        case .signedOut(let reason):
            switch reason {
            case .otherDevice: return strings.kickedByOtherDevice
            case .banned: return strings.banned
            case .appBanned: return strings.appBanned
            case .tokenIncorrect: return strings.tokenIncorrect
            case .deactivated: return strings.deactivated
            case .signedOut: return strings.signedOut
            }
        }
    }

    static func from(_ status: ConnectionStatus, lastKick: ErrorCode?) -> KitConnectionState {
        switch status {
        case .connected: return .connected
        case .connecting: return .connecting
        case .suspend: return .suspended
        case .networkUnavailable, .airplaneMode: return .networkUnavailable
        case .kickedOfflineByOtherClient: return .signedOut(.otherDevice)
        case .tokenIncorrect, .validateInvalid: return .signedOut(.tokenIncorrect)
        case .disconnectException:
            return lastKick == .appBlockedOrDeleted ? .signedOut(.appBanned) : .signedOut(.banned)
        case .userAbandon: return .signedOut(.deactivated)
        case .timeout: return .timedOut
        case .signOut: return .signedOut(.signedOut)
        default: return .disconnected
        }
    }
}
