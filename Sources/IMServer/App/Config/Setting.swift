import Foundation
import IMCore

/// One setting, declared once where it is stored:
///
///     @Setting(key: "maxGroupMembers", allowed: .atLeast(1),
///              doc: "Members one group may have.")
///     public var maxMembers = GroupLimits.defaultMaxMembers
///
/// The declaration gives the config file key (`maxGroupMembers`), the environment variable
/// (`IMSERVER_MAX_GROUP_MEMBERS`, from the key unless given), the flag (`--max-group-members`,
/// likewise), the default (the initial value), the documentation line and the allowed values.
///
/// The value is chosen when the property is initialised: `ServerConfig()` on its own gives the
/// defaults; `ServerConfig.resolve` (and `load`, `apply`, decoding) build it with the sources in a
/// task-local `SettingsResolver`, and each setting takes the value of the highest source that has
/// it (defaults < config file < environment < flags), after checking every given value.
@propertyWrapper
public struct Setting<Value: SettingValue>: Sendable, Equatable {
    public var wrappedValue: Value
    /// The key, variable, flag, default, documentation and allowed values.
    public let declaration: SettingDeclaration<Value>

    /// - Parameter perApp: each app may have its own value (the admin API's app settings), this
    ///   one being the default of the apps that have none.
    public init(wrappedValue: Value, key: String, allowed: Allowed<Value> = .any,
                environmentVariable: String? = nil, flag: String? = nil, perApp: Bool = false, doc: String) {
        let declaration = SettingDeclaration(
            key: key, environmentVariable: environmentVariable ?? SettingNames.environmentVariable(forKey: key),
            flag: flag ?? SettingNames.flag(forKey: key), doc: doc, defaultValue: wrappedValue, allowed: allowed,
            isPerApp: perApp)
        self.declaration = declaration
        self.wrappedValue = SettingsResolver.current?.value(for: declaration) ?? wrappedValue
    }

    /// The values are compared; the declarations are the same for every instance.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.wrappedValue == rhs.wrappedValue }
}

/// A type a setting can have: read from text (an `IMSERVER_*` variable or a flag) and from the
/// config file's JSON, and written as text for help, documentation and messages.
public protocol SettingValue: Sendable, Equatable {
    /// What help shows after a flag: `<n>`, `<bool>`, `<text>`.
    static var placeholder: String { get }
    /// Every value of the type, as help says it when a setting allows any.
    static var anyValue: String { get }
    init?(settingText text: String)
    init?(settingJSON json: JSONValue)
    /// The value as it is written in a variable or a flag ("" when unset).
    var settingText: String { get }
    /// The value as the config file and the admin API write it.
    var settingJSON: JSONValue { get }
}

extension Int: SettingValue {
    public static var placeholder: String { "n" }
    public static var anyValue: String { "a whole number" }
    public init?(settingText text: String) { self.init(text.trimmingCharacters(in: .whitespaces)) }
    public init?(settingJSON json: JSONValue) {
        guard case .number(let number) = json, let value = Int(exactly: number) else { return nil }
        self = value
    }
    public var settingText: String { String(self) }
    public var settingJSON: JSONValue { .number(Double(self)) }
}

extension Bool: SettingValue {
    public static var placeholder: String { "bool" }
    public static var anyValue: String { "true or false" }
    public init?(settingText text: String) {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "1", "yes", "on": self = true
        case "false", "0", "no", "off": self = false
        default: return nil
        }
    }
    public init?(settingJSON json: JSONValue) {
        guard case .bool(let value) = json else { return nil }
        self = value
    }
    public var settingText: String { self ? "true" : "false" }
    public var settingJSON: JSONValue { .bool(self) }
}

extension String: SettingValue {
    public static var placeholder: String { "text" }
    public static var anyValue: String { "any text" }
    public init?(settingText text: String) { self = text }
    public init?(settingJSON json: JSONValue) {
        guard case .string(let value) = json else { return nil }
        self = value
    }
    public var settingText: String { self }
    public var settingJSON: JSONValue { .string(self) }
}

/// An optional setting is unset by JSON `null` or an empty variable or flag.
extension Optional: SettingValue where Wrapped: SettingValue {
    public static var placeholder: String { Wrapped.placeholder }
    public static var anyValue: String { "\(Wrapped.anyValue), or unset" }
    public init?(settingText text: String) {
        if text.isEmpty {
            self = .none
        } else if let value = Wrapped(settingText: text) {
            self = .some(value)
        } else {
            return nil
        }
    }
    public init?(settingJSON json: JSONValue) {
        if case .null = json {
            self = .none
        } else if let value = Wrapped(settingJSON: json) {
            self = .some(value)
        } else {
            return nil
        }
    }
    public var settingText: String { self?.settingText ?? "" }
    public var settingJSON: JSONValue { self?.settingJSON ?? .null }
}

/// The values a setting allows, with the words help, documentation and errors use for them.
public struct Allowed<Value: SettingValue>: Sendable {
    /// "1...7", "1 or more", "one of trace, debug, info".
    public let summary: String
    private let admits: @Sendable (Value) -> Bool

    public init(_ summary: String, admits: @escaping @Sendable (Value) -> Bool) {
        self.summary = summary
        self.admits = admits
    }

    public func contains(_ value: Value) -> Bool { admits(value) }

    /// Every value of the type.
    public static var any: Allowed { Allowed(Value.anyValue) { _ in true } }
}

extension Allowed where Value == Int {
    /// A closed range; `note` says what a value in it means ("0 = no limit").
    public static func range(_ range: ClosedRange<Int>, note: String? = nil) -> Allowed {
        Allowed("\(range.lowerBound)...\(range.upperBound)" + (note.map { " (\($0))" } ?? "")) { range.contains($0) }
    }

    /// `minimum` and up; `note` says what a value means ("0 = no limit").
    public static func atLeast(_ minimum: Int, note: String? = nil) -> Allowed {
        Allowed("\(minimum) or more" + (note.map { " (\($0))" } ?? "")) { $0 >= minimum }
    }
}

extension Allowed where Value == String {
    public static func oneOf(_ values: [String]) -> Allowed {
        Allowed("one of " + values.joined(separator: ", ")) { values.contains($0) }
    }

    public static var nonEmpty: Allowed { Allowed("text, not empty") { !$0.isEmpty } }
}

extension Allowed where Value == String? {
    /// Unset, or text of so many UTF-8 bytes.
    public static func bytes(_ range: ClosedRange<Int>) -> Allowed {
        Allowed("\(range.lowerBound) to \(range.upperBound) bytes, or unset") { $0.map { range.contains($0.utf8.count) } ?? true }
    }

    /// Unset, or a time zone the system knows by its IANA name.
    public static var timeZone: Allowed {
        Allowed("an IANA time zone name such as Asia/Shanghai or UTC, or unset") { value in
            value.map { TimeZone(identifier: $0) != nil } ?? true
        }
    }

    /// Unset, or an absolute http or https URL.
    public static var httpURL: Allowed {
        Allowed("an http:// or https:// URL with a host, or unset") { value in
            guard let value else { return true }
            guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
                  let host = url.host, !host.isEmpty else { return false }
            return true
        }
    }
}

/// Everything one declaration says about a setting, without its type: what the settings table,
/// help, documentation and the sources work from.
public protocol AnySettingDeclaration: Sendable {
    /// The config file key, e.g. `maxGroupMembers`.
    var key: String { get }
    /// e.g. `IMSERVER_MAX_GROUP_MEMBERS`.
    var environmentVariable: String { get }
    /// e.g. `--max-group-members`.
    var flag: String { get }
    var doc: String { get }
    /// The default as it is written in a variable or flag ("" when unset).
    var defaultText: String { get }
    /// The allowed values, as help and errors say them.
    var allowedText: String { get }
    /// What help shows after the flag: `n`, `bool`, `text`.
    var placeholder: String { get }
    /// A flag for it may stand alone (meaning true).
    var isSwitch: Bool { get }
    /// Each app may have its own value (`ServerConfig.forApp`).
    var isPerApp: Bool { get }
    /// The default as JSON.
    var defaultJSON: JSONValue { get }
    /// Reads and checks one given value, or says what is wrong with it.
    func check(_ raw: RawSetting, from source: SettingSource) -> String?
}

/// A setting's declaration: made by `@Setting`, the same for every instance.
public final class SettingDeclaration<Value: SettingValue>: AnySettingDeclaration {
    public let key: String
    public let environmentVariable: String
    public let flag: String
    public let doc: String
    public let defaultValue: Value
    public let allowed: Allowed<Value>
    public let isPerApp: Bool

    init(key: String, environmentVariable: String, flag: String, doc: String, defaultValue: Value, allowed: Allowed<Value>,
         isPerApp: Bool) {
        self.isPerApp = isPerApp
        self.key = key
        self.environmentVariable = environmentVariable
        self.flag = flag
        self.doc = doc
        self.defaultValue = defaultValue
        self.allowed = allowed
    }

    public var defaultText: String { defaultValue.settingText }
    public var allowedText: String { allowed.summary }
    public var placeholder: String { Value.placeholder }
    public var isSwitch: Bool { Value.self == Bool.self }
    public var defaultJSON: JSONValue { defaultValue.settingJSON }

    /// The value a source gives, checked against the allowed values.
    func read(_ raw: RawSetting, from source: SettingSource) -> Result<Value, SettingProblem> {
        let value: Value?
        switch raw {
        case .text(let text): value = Value(settingText: text)
        case .json(let json): value = Value(settingJSON: json)
        case .value(let given): value = given as? Value
        }
        guard let value, allowed.contains(value) else {
            return .failure(SettingProblem(
                "\(source.name(of: self)) must be \(allowed.summary), got \(raw.shown)"))
        }
        return .success(value)
    }

    public func check(_ raw: RawSetting, from source: SettingSource) -> String? {
        if case .failure(let problem) = read(raw, from: source) { return problem.message }
        return nil
    }
}

/// A value as a source gives it, before it is read as the setting's type.
public enum RawSetting: Sendable {
    /// From an environment variable or a flag.
    case text(String)
    /// From the config file.
    case json(JSONValue)
    /// Set in code (`ServerConfig`'s properties).
    case value(any SettingValue)

    /// The value as an error message quotes it.
    var shown: String {
        switch self {
        case .text(let text): return "'\(text)'"
        case .json(let json): return (try? json.data()).flatMap { String(data: $0, encoding: .utf8) } ?? "\(json)"
        case .value(let value): return value.settingText.isEmpty ? "nothing" : value.settingText
        }
    }
}

/// Where a value came from, named as the person who set it wrote it.
public enum SettingSource: Sendable, Equatable {
    /// The config file (its path, when read from one).
    case file(String?)
    case environment
    case flag
    /// A property set in code.
    case program
    /// An app's own settings (the admin API), by the app's key.
    case app(String)

    /// The setting as this source names it: `maxGroupMembers in config file a.json`,
    /// `environment variable IMSERVER_MAX_GROUP_MEMBERS`, `flag --max-group-members`,
    /// `maxGroupMembers`.
    public func name(of setting: any AnySettingDeclaration) -> String {
        switch self {
        case .file(let path): return "\(setting.key) in config file" + (path.map { " \($0)" } ?? "")
        case .environment: return "environment variable \(setting.environmentVariable)"
        case .flag: return "flag \(setting.flag)"
        case .program: return setting.key
        case .app(let appKey): return "\(setting.key) of app \(appKey)"
        }
    }
}

struct SettingProblem: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// How a setting's variable and flag follow from its key.
public enum SettingNames {
    /// `maxGroupMembers` → `IMSERVER_MAX_GROUP_MEMBERS`; `publicURL` → `IMSERVER_PUBLIC_URL`.
    public static func environmentVariable(forKey key: String) -> String {
        "IMSERVER_" + words(key).joined(separator: "_").uppercased()
    }

    /// `maxGroupMembers` → `--max-group-members`.
    public static func flag(forKey key: String) -> String {
        "--" + words(key).joined(separator: "-").lowercased()
    }

    /// The words of a camelCase key; a run of capitals is one word (`publicURL` → public, URL).
    static func words(_ key: String) -> [String] {
        var words: [String] = []
        var current = ""
        let characters = Array(key)
        for (index, character) in characters.enumerated() {
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            let previous = index > 0 ? characters[index - 1] : nil
            let startsWord = character.isUppercase && !current.isEmpty
                && (previous?.isUppercase == false || next?.isLowercase == true)
            if startsWord {
                words.append(current)
                current = ""
            }
            current.append(character)
        }
        if !current.isEmpty { words.append(current) }
        return words
    }
}

/// One source of values, looked up by declaration.
struct SettingLayer {
    let source: SettingSource
    let lookup: (any AnySettingDeclaration) -> RawSetting?
}

/// The sources of one `ServerConfig` being built; `@Setting` reads it while the properties are
/// initialised, and collects what is wrong with any given value.
final class SettingsResolver: @unchecked Sendable {
    @TaskLocal static var current: SettingsResolver?

    /// Lowest first.
    private let layers: [SettingLayer]
    private let lock = NSLock()
    private var collected: [String] = []

    init(layers: [SettingLayer]) { self.layers = layers }

    var problems: [String] { lock.withLock { collected } }

    func add(problem: String) { lock.withLock { collected.append(problem) } }

    /// The value of the highest source that has one; every given value is checked, except values
    /// set in code (checked by `ServerConfig.validate()`).
    func value<Value>(for declaration: SettingDeclaration<Value>) -> Value? {
        var result: Value?
        for layer in layers {
            guard let raw = layer.lookup(declaration) else { continue }
            if case .value(let given) = raw, let value = given as? Value {
                result = value
                continue
            }
            switch declaration.read(raw, from: layer.source) {
            case .success(let value): result = value
            case .failure(let problem): add(problem: problem.message)
            }
        }
        return result
    }
}
