import Foundation
import IMCore

/// All of the server's settings, by area. Each setting is declared once, with `@Setting`, in its
/// area's struct; `ServerConfig.table` lists them. Sources, later wins: the defaults, a JSON config
/// file (flat, keyed by the settings' keys), `IMSERVER_*` environment variables, flags.
public struct ServerConfig: Sendable, Equatable, Decodable {
    public var network = NetworkSettings()
    public var session = SessionSettings()
    public var messaging = MessagingSettings()
    public var groups = GroupSettings()
    public var chatrooms = ChatroomSettings()
    public var ultraGroups = UltraGroupSettings()
    public var serverAPI = ServerAPISettings()
    public var moderation = ModerationSettings()
    public var developmentApp = DevelopmentAppSettings()
    public var storage = StorageSettings()
    public var cluster = ClusterSettings()
    public var push = PushSettings()
    public var callbacks = CallbackSettings()
    public var logging = LoggingSettings()
    public var console = ConsoleSettings()
    public var media = MediaSettings()

    /// Every setting at its default.
    public init() {}

    /// Keys of earlier versions that no longer mean anything, with what replaced them. Given in the
    /// file, as a variable or as a flag, they are an error.
    public static let obsoleteKeys: [String: String] = [
        "maxQueuedFramesPerConnection": "maxQueuedBytesPerConnection (a slow reader is now measured in bytes)",
    ]

    /// The settings from all the sources: the defaults, then the config file at `file`, then
    /// `environment`'s `IMSERVER_*` variables, then `arguments` (flags, `--name value` or
    /// `--name=value`; a true-or-false setting's flag may stand alone for true). Every given value
    /// is checked; an unknown flag or file key, an obsolete one, or a value that is not allowed is
    /// an error naming where it was given and what is allowed.
    public static func resolve(file: String? = nil, environment: [String: String] = [:], arguments: [String] = []) throws -> ServerConfig {
        var problems: [String] = []
        var layers: [SettingLayer] = []
        if let file {
            let object = try readFile(file)
            problems += table.problems(fileKeys: object.keys, path: file)
            layers.append(SettingLayer(source: .file(file)) { object[$0.key].map(RawSetting.json) })
        }
        problems += table.problems(environment: environment)
        layers.append(SettingLayer(source: .environment) { environment[$0.environmentVariable].map(RawSetting.text) })
        let (flags, flagProblems) = table.parse(arguments: arguments)
        problems += flagProblems
        layers.append(SettingLayer(source: .flag) { flags[$0.key].map(RawSetting.text) })
        return try build(layers, problems: problems)
    }

    /// Reads a JSON config file: one object whose keys are the settings' keys (docs/CONFIGURATION.md).
    public static func load(file path: String) throws -> ServerConfig {
        try resolve(file: path)
    }

    /// A config file's settings as JSON; keys are the settings' keys.
    public init(from decoder: any Decoder) throws {
        guard case .object(let object) = try JSONValue(from: decoder) else {
            throw IMError(.invalidParameter, "a config file must hold one JSON object of settings, e.g. {\"port\": 8080}")
        }
        let problems = Self.table.problems(fileKeys: object.keys, path: nil)
        self = try Self.build([SettingLayer(source: .file(nil)) { object[$0.key].map(RawSetting.json) }], problems: problems)
    }

    /// Applies `IMSERVER_*` environment variables (e.g. IMSERVER_PORT, IMSERVER_APP_KEY) over these values.
    public mutating func apply(environment: [String: String]) throws {
        let current = values
        let problems = Self.table.problems(environment: environment)
        self = try Self.build([
            SettingLayer(source: .program) { current[$0.key].map(RawSetting.value) },
            SettingLayer(source: .environment) { environment[$0.environmentVariable].map(RawSetting.text) },
        ], problems: problems)
    }

    /// Checks every value and says which one is wrong and what is allowed.
    public func validate() throws {
        let current = values
        let problems = Self.table.settings.compactMap { setting in
            current[setting.key].flatMap { setting.check(.value($0), from: .program) }
        }
        if !problems.isEmpty { throw IMError(.invalidParameter, problems.joined(separator: "\n")) }
    }

    /// One app's settings: these, with the app's own values (`overrides`, by key, as JSON) over the
    /// per-app ones. What cannot be applied is left out and said in `problems`: a key that is no
    /// setting or a server-wide one, a value the setting does not allow.
    public func forApp(_ overrides: [String: JSONValue], appKey: String) -> (config: ServerConfig, problems: [String]) {
        guard !overrides.isEmpty else { return (self, []) }
        var problems: [String] = []
        for key in overrides.keys.sorted() {
            guard let setting = Self.table.setting(key: key) else {
                problems.append("\(key) is not a setting; an app's settings are: " + Self.table.perAppSettings.map(\.key).joined(separator: ", "))
                continue
            }
            if !setting.isPerApp {
                problems.append("\(key) is a server-wide setting: an app cannot have its own value (docs/CONFIGURATION.md marks the per-app ones)")
            }
        }
        let current = values
        let resolver = SettingsResolver(layers: [
            SettingLayer(source: .program) { current[$0.key].map(RawSetting.value) },
            SettingLayer(source: .app(appKey)) { $0.isPerApp ? overrides[$0.key].map(RawSetting.json) : nil },
        ])
        let config = SettingsResolver.$current.withValue(resolver) { ServerConfig() }
        return (config, problems + resolver.problems)
    }

    /// Every setting's value, by key.
    public var values: [String: any SettingValue] {
        var values: [String: any SettingValue] = [:]
        for area in Mirror(reflecting: self).children {
            for child in Mirror(reflecting: area.value).children {
                if let setting = child.value as? any SettingStorage {
                    values[setting.anyDeclaration.key] = setting.anyValue
                }
            }
        }
        return values
    }

    /// Every setting, by area, in declaration order.
    public static let table = SettingsResolver.$current.withValue(nil) { SettingsTable(ServerConfig()) }

    private static func build(_ layers: [SettingLayer], problems earlier: [String]) throws -> ServerConfig {
        let resolver = SettingsResolver(layers: layers)
        let config = SettingsResolver.$current.withValue(resolver) { ServerConfig() }
        let problems = earlier + resolver.problems
        if !problems.isEmpty { throw IMError(.invalidParameter, problems.joined(separator: "\n")) }
        return config
    }

    private static func readFile(_ path: String) throws -> [String: JSONValue] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw IMError(.invalidParameter, "cannot read config file \(path): \(error.localizedDescription)")
        }
        let json: JSONValue
        do {
            json = try JSONValue(data: data)
        } catch {
            throw IMError(.invalidParameter, "config file \(path) is not valid JSON: \(error)")
        }
        guard case .object(let object) = json else {
            throw IMError(.invalidParameter, "config file \(path) must hold one JSON object of settings, e.g. {\"port\": 8080}")
        }
        return object
    }
}

/// One area of settings: a struct of `@Setting` properties, one property of `ServerConfig`.
public protocol SettingsArea: Sendable, Equatable {
    /// The area's heading in help and documentation.
    static var title: String { get }
    /// One line on what its settings are about.
    static var summary: String { get }
    /// Every setting at its default (or, while a `ServerConfig` is resolved, from the sources).
    init()
}

/// `Setting`, seen without its value's type.
protocol SettingStorage {
    var anyDeclaration: any AnySettingDeclaration { get }
    var anyValue: any SettingValue { get }
}

extension Setting: SettingStorage {
    var anyDeclaration: any AnySettingDeclaration { declaration }
    var anyValue: any SettingValue { wrappedValue }
}
