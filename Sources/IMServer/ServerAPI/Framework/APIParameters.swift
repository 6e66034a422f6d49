import Foundation
import Hummingbird
import IMCore
import IMStore
import IMWire

/// A Server API call's parameters, from a form body (repeated keys, comma lists, bracket keys) or a
/// JSON body, read leniently the way the official SDKs send them (spec/server-api.md §3).
public struct APIParameters: Sendable {
    /// Every value of every key, in body order.
    public private(set) var values: [String: [String]] = [:]
    /// Every key and value in body order (bracket keys such as `group[g1]=name` need the order).
    public private(set) var pairs: [(key: String, value: String)] = []
    /// The body of a JSON call, kept for endpoints that read nested values (templates).
    public private(set) var json: Data?
    /// Keys whose JSON value was an array: their elements are never split at commas.
    private var jsonArrays: Set<String> = []

    public init(form body: String) {
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = Self.decode(String(parts[0]))
            let value = parts.count > 1 ? Self.decode(String(parts[1])) : ""
            values[key, default: []].append(value)
            pairs.append((key, value))
        }
    }

    public init(json object: [String: Any], body: Data) {
        json = body
        for (key, value) in object {
            switch value {
            case let list as [Any]:
                values[key] = list.map(Self.text)
                jsonArrays.insert(key)
            default: values[key] = [Self.text(value)]
            }
            for text in values[key] ?? [] { pairs.append((key, text)) }
        }
    }

    /// Bracket keys `prefix[id]=value` (e.g. `group[g1]=Group 1`), in body order.
    public func bracketed(_ prefix: String) -> [(id: String, value: String)] {
        pairs.compactMap { pair in
            guard pair.key.hasPrefix(prefix + "["), pair.key.hasSuffix("]") else { return nil }
            let id = pair.key.dropFirst(prefix.count + 1).dropLast()
            return id.isEmpty ? nil : (String(id), pair.value)
        }
    }

    /// The largest magnitude a whole number is read with: the last millisecond of the year 9999.
    /// Larger values are read as this bound (a caller's "far future" end time such as
    /// `Long.MAX_VALUE / 2` keeps its meaning; counts and pages that large are refused by their
    /// own ranges), so the sum or difference of any two numbers a handler reads cannot overflow
    /// and no handler's arithmetic can trap on what a caller sent.
    public static let maxIntegerMagnitude: Int64 = 253_402_300_799_999

    /// A whole number (within ±`maxIntegerMagnitude`), or nil when absent; 1002 when it is not a
    /// whole number.
    public func int(_ key: String) throws -> Int64? {
        guard let text = string(key) else { return nil }
        guard let value = Int64(text.trimmingCharacters(in: .whitespaces)) else {
            throw APIError.badParameter("\(key) must be a whole number, got \(TextLength.quoted(text))")
        }
        return min(max(value, -Self.maxIntegerMagnitude), Self.maxIntegerMagnitude)
    }

    /// A boolean sent as true/false, True/False or 1/0; nil when absent; 1002 otherwise.
    public func bool(_ key: String) throws -> Bool? {
        guard let text = string(key) else { return nil }
        switch text.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: throw APIError.badParameter("\(key) must be true/false or 1/0, got '\(text)'")
        }
    }

    /// The first value of a key; nil when absent or empty (the SDKs send empty for "not set").
    public func string(_ key: String) -> String? {
        guard let value = values[key]?.first, !value.isEmpty else { return nil }
        return value
    }

    /// A list parameter: repeated keys and comma-joined values alike; a JSON array's elements as
    /// they are.
    public func list(_ key: String) -> [String] {
        if jsonArrays.contains(key) { return (values[key] ?? []).filter { !$0.isEmpty } }
        return (values[key] ?? []).flatMap { $0.split(separator: ",").map(String.init) }.filter { !$0.isEmpty }
    }

    /// `+` is a space; a malformed percent escape is kept literally instead of failing the call.
    static func decode(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        let input = Array(text.utf8)
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while index < input.count {
            let byte = input[index]
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), index + 2 < input.count,
                      let high = hex(input[index + 1]), let low = hex(input[index + 2]) {
                bytes.append(high << 4 | low)
                index += 2
            } else {
                bytes.append(byte)
            }
            index += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func text(_ value: Any) -> String {
        switch value {
        case let string as String: return string
        case let number as NSNumber: return number.stringValue
        case is NSNull: return ""
        default:
            if let data = try? JSONSerialization.data(withJSONObject: value), let text = String(data: data, encoding: .utf8) {
                return text
            }
            return "\(value)"
        }
    }
}
