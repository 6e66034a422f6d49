import Foundation
import IMStore

/// Times in Server API responses: `yyyy-MM-dd HH:mm:ss`, UTC.
enum APITime {
    static func text(_ milliseconds: Int64) -> String {
        guard milliseconds < Int64.max / 2 else { return "9999-12-31 23:59:59" }
        let seconds = time_t(milliseconds / 1000)
        var parts = tm()
        var value = seconds
        gmtime_r(&value, &parts)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    /// Parses `YYYYMMDDHH` (UTC) into the hour's start, ms.
    static func hourStart(_ text: String) -> Int64? {
        guard text.utf8.count == 10, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        let digits = Array(text)
        func number(_ range: Range<Int>) -> Int32 { Int32(String(digits[range]))! }
        var parts = tm()
        parts.tm_year = number(0..<4) - 1900
        parts.tm_mon = number(4..<6) - 1
        parts.tm_mday = number(6..<8)
        parts.tm_hour = number(8..<10)
        guard (0...11).contains(parts.tm_mon), (1...31).contains(parts.tm_mday), (0...23).contains(parts.tm_hour) else { return nil }
        var normalized = parts
        let seconds = timegm(&normalized)
        // timegm normalises 31 February to 3 March; such a date is refused.
        guard normalized.tm_mday == parts.tm_mday, normalized.tm_mon == parts.tm_mon else { return nil }
        return Int64(seconds) * 1000
    }
}
