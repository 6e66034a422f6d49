#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

#if canImport(Glibc)
private let posixWrite = Glibc.write
#elseif canImport(Darwin)
private let posixWrite = Darwin.write
#endif

/// A key or terminal event read from standard input.
enum Key: Equatable, Sendable {
    case character(Character)
    case enter, backspace, tab, escape, up, down, left, right, pageUp, pageDown, home, end, delete
    case control(Character)
    case focusIn, focusOut
}

/// The terminal in raw mode on the alternate screen, with focus reporting: restored on exit.
final class Terminal: Sendable {
    private let original: Mutex<termios?> = Mutex(nil)

    func enterRawMode() {
        var attributes = termios()
        guard tcgetattr(STDIN_FILENO, &attributes) == 0 else { return }
        original.withLock { $0 = attributes }
        var raw = attributes
        cfmakeraw(&raw)
        // Output post-processing stays on so "\n" still returns the carriage.
        raw.c_oflag |= tcflag_t(OPOST)
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[?1004h")
    }

    func restore() {
        write("\u{1B}[?1004l\u{1B}[?25h\u{1B}[?1049l")
        if var attributes = original.withLock({ $0 }) {
            tcsetattr(STDIN_FILENO, TCSANOW, &attributes)
        }
    }

    /// Columns and rows (80×24 when standard output is not a terminal).
    var size: (columns: Int, rows: Int) {
        var window = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 {
            return (Int(window.ws_col), Int(window.ws_row))
        }
        return (80, 24)
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                posixWrite(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written <= 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }

    /// Keys from standard input, read on a thread of their own, each with the time it was read.
    func keys() -> AsyncStream<(key: Key, readAt: ContinuousClock.Instant)> {
        AsyncStream { continuation in
            let thread = Thread {
                var decoder = KeyDecoder()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(STDIN_FILENO, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    let now = ContinuousClock.now
                    for key in decoder.feed(buffer[0..<count]) { continuation.yield((key, now)) }
                    // A lone ESC with nothing after it in this read is the Escape key.
                    if let pending = decoder.flushLoneEscape() { continuation.yield((pending, now)) }
                }
                continuation.finish()
            }
            thread.start()
        }
    }

    /// SIGWINCH as a stream of events.
    func resizes() -> AsyncStream<Void> {
        signal(SIGWINCH, SIG_IGN)
        let box = SignalSource(DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global()))
        return AsyncStream { continuation in
            box.source.setEventHandler { continuation.yield(()) }
            box.source.resume()
            continuation.onTermination = { _ in box.source.cancel() }
        }
    }
}

/// A dispatch signal source handed to the stream's termination handler (Dispatch's sources are
/// thread-safe but not marked Sendable).
private final class SignalSource: @unchecked Sendable {
    let source: any DispatchSourceSignal
    init(_ source: any DispatchSourceSignal) { self.source = source }
}

/// Turns raw bytes into keys: UTF-8 characters, control keys and the CSI sequences of arrows,
/// paging and focus.
struct KeyDecoder {
    private var pending: [UInt8] = []

    mutating func feed(_ bytes: ArraySlice<UInt8>) -> [Key] {
        pending.append(contentsOf: bytes)
        var keys: [Key] = []
        while !pending.isEmpty {
            guard let (key, used) = Self.decode(pending) else { break }
            pending.removeFirst(used)
            if let key { keys.append(key) }
        }
        return keys
    }

    mutating func flushLoneEscape() -> Key? {
        if pending == [0x1B] {
            pending = []
            return .escape
        }
        return nil
    }

    /// The key at the start of `bytes` and how many bytes it used; nil when more bytes are needed.
    static func decode(_ bytes: [UInt8]) -> (Key?, Int)? {
        let first = bytes[0]
        switch first {
        case 0x1B:
            guard bytes.count >= 2 else { return nil }
            if bytes[1] == 0x5B || bytes[1] == 0x4F {
                guard bytes.count >= 3 else { return nil }
                var end = 2
                while end < bytes.count, !(0x40...0x7E).contains(bytes[end]) { end += 1 }
                guard end < bytes.count else { return bytes.count > 16 ? (nil, bytes.count) : nil }
                let body = String(decoding: bytes[2..<end], as: UTF8.self)
                let final = bytes[end]
                let key: Key?
                switch (final, body) {
                case (0x41, _): key = .up
                case (0x42, _): key = .down
                case (0x43, _): key = .right
                case (0x44, _): key = .left
                case (0x48, _): key = .home
                case (0x46, _): key = .end
                case (0x49, ""): key = .focusIn
                case (0x4F, ""): key = .focusOut
                case (0x5A, ""): key = .tab
                case (0x7E, "5"): key = .pageUp
                case (0x7E, "6"): key = .pageDown
                case (0x7E, "3"): key = .delete
                case (0x7E, "1"), (0x7E, "7"): key = .home
                case (0x7E, "4"), (0x7E, "8"): key = .end
                default: key = nil
                }
                return (key, end + 1)
            }
            return (.escape, 1)
        case 0x0D, 0x0A: return (.enter, 1)
        case 0x7F, 0x08: return (.backspace, 1)
        case 0x09: return (.tab, 1)
        case 0x01...0x1A: return (.control(Character(UnicodeScalar(first + 0x60))), 1)
        case 0x00..<0x20: return (nil, 1)
        default:
            let length: Int
            switch first {
            case 0xC0...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF7: length = 4
            case 0x80...0xBF, 0xF8...0xFF: return (nil, 1)
            default: length = 1
            }
            guard bytes.count >= length else { return nil }
            let text = String(decoding: bytes[0..<length], as: UTF8.self)
            return (text.first.map { .character($0) }, length)
        }
    }
}
