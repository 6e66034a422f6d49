import Foundation
import IMCore

/// Every setting of `ServerConfig`, by area, in declaration order, read off the `@Setting`
/// declarations: what the flags, the checks of the sources, `imserver --help` and the table in
/// docs/CONFIGURATION.md come from.
public struct SettingsTable: Sendable {
    public struct Area: Sendable {
        /// The `ServerConfig` property: `network`, `groups`.
        public let name: String
        public let title: String
        public let summary: String
        public let settings: [any AnySettingDeclaration]
    }

    public let areas: [Area]

    /// Every setting, area after area.
    public var settings: [any AnySettingDeclaration] { areas.flatMap(\.settings) }

    init(_ config: ServerConfig) {
        areas = Mirror(reflecting: config).children.compactMap { child in
            guard let name = child.label, let area = child.value as? any SettingsArea else { return nil }
            let settings = Mirror(reflecting: area).children.compactMap { ($0.value as? any SettingStorage)?.anyDeclaration }
            return Area(name: name, title: type(of: area).title, summary: type(of: area).summary, settings: settings)
        }
    }

    /// The settings each app may have its own value of.
    public var perAppSettings: [any AnySettingDeclaration] { settings.filter(\.isPerApp) }

    public func setting(key: String) -> (any AnySettingDeclaration)? { settings.first { $0.key == key } }
    public func setting(flag: String) -> (any AnySettingDeclaration)? { settings.first { $0.flag == flag } }

    // MARK: Checking the sources

    /// Obsolete and unknown keys in a config file.
    func problems(fileKeys: some Collection<String>, path: String?) -> [String] {
        let file = "config file" + (path.map { " \($0)" } ?? "")
        return fileKeys.sorted().compactMap { key in
            if let replacement = ServerConfig.obsoleteKeys[key] {
                return "\(key) in \(file) is no longer a setting: use \(replacement)"
            }
            guard setting(key: key) == nil else { return nil }
            return "\(key) in \(file) is not a setting" + suggestion(for: key, among: settings.map(\.key))
                + "; docs/CONFIGURATION.md lists the keys"
        }
    }

    /// Obsolete settings given as `IMSERVER_*` variables (other unknown ones are left alone: the
    /// environment is shared with other programs).
    func problems(environment: [String: String]) -> [String] {
        ServerConfig.obsoleteKeys.sorted { $0.key < $1.key }.compactMap { key, replacement in
            let name = SettingNames.environmentVariable(forKey: key)
            guard environment[name] != nil else { return nil }
            return "environment variable \(name) is no longer a setting: use \(SettingNames.environmentVariable(forKey: replacement))"
        }
    }

    /// Reads flags: `--name value`, `--name=value`, and a true-or-false setting's flag alone for
    /// true. Returns the text given for each setting (by key; a repeated flag's last) and what was
    /// wrong: unknown and obsolete flags, missing values, arguments that are no flag.
    func parse(arguments: [String]) -> (values: [String: String], problems: [String]) {
        var values: [String: String] = [:]
        var problems: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                problems.append("unexpected argument '\(argument)': settings are given as flags, e.g. --port 8080 (imserver --help lists them)")
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let inline = parts.count > 1 ? String(parts[1]) : nil
            guard let setting = setting(flag: name) else {
                if let obsolete = ServerConfig.obsoleteKeys.first(where: { SettingNames.flag(forKey: $0.key) == name }) {
                    problems.append("flag \(name) is no longer a setting: use \(SettingNames.flag(forKey: obsolete.value))")
                } else {
                    problems.append("unknown flag \(name)" + suggestion(for: name, among: settings.map(\.flag))
                                    + "; imserver --help lists every setting's flag")
                }
                if inline == nil, index < arguments.count, !arguments[index].hasPrefix("--") { index += 1 }
                continue
            }
            if let inline {
                values[setting.key] = inline
            } else if setting.isSwitch {
                if index < arguments.count, Bool(settingText: arguments[index]) != nil {
                    values[setting.key] = arguments[index]
                    index += 1
                } else {
                    values[setting.key] = "true"
                }
            } else if index < arguments.count, !arguments[index].hasPrefix("--") {
                values[setting.key] = arguments[index]
                index += 1
            } else {
                problems.append("flag \(name) needs a value: \(setting.allowedText)")
            }
        }
        return (values, problems)
    }

    /// "; did you mean --x?" for a name a letter or two from a known one.
    private func suggestion(for name: String, among names: [String]) -> String {
        let close = names.map { ($0, Self.distance(name.lowercased(), $0.lowercased())) }
            .filter { $0.1 <= 2 }.min { $0.1 < $1.1 }
        return close.map { "; did you mean \($0.0)?" } ?? ""
    }

    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var diagonal = row[0]
            row[0] = i
            for j in 0..<b.count {
                let above = row[j + 1]
                row[j + 1] = min(above + 1, row[j] + 1, diagonal + (a[i - 1] == b[j] ? 0 : 1))
                diagonal = above
            }
        }
        return row[b.count]
    }

    // MARK: Help and documentation

    /// Every setting for `imserver --help`: flag, documentation, default, allowed values,
    /// variable and file key, by area.
    public func help(width: Int = 78) -> String {
        var lines = Self.wrap("SETTINGS, later wins: defaults, --config FILE (a JSON object of the file keys below), IMSERVER_* environment variables, flags.", width: width, indent: "")
        for area in areas {
            lines.append("")
            lines += Self.wrap("\(area.title.uppercased()): \(area.summary)", width: width, indent: "")
            for setting in area.settings {
                let value = setting.isSwitch ? " [<\(setting.placeholder)>]" : " <\(setting.placeholder)>"
                let shown = setting.defaultText.isEmpty ? "unset" : setting.defaultText
                lines.append("  \(setting.flag)\(value)")
                lines += Self.wrap((setting.isPerApp ? "Per app. " : "") + setting.doc, width: width, indent: "        ")
                lines += Self.wrap("default \(shown); allowed \(setting.allowedText)", width: width, indent: "        ")
                lines += Self.wrap("env \(setting.environmentVariable); file key \(setting.key)", width: width, indent: "        ")
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func wrap(_ text: String, width: Int, indent: String) -> [String] {
        var lines: [String] = []
        var line = indent
        for word in text.split(separator: " ") {
            if line.count > indent.count, line.count + 1 + word.count > width {
                lines.append(line)
                line = indent
            }
            line += (line.count > indent.count ? " " : "") + word
        }
        if line.count > indent.count { lines.append(line) }
        return lines
    }

    /// The first and last lines of the generated part of docs/CONFIGURATION.md.
    public static let markdownBegin = "<!-- BEGIN settings table: generated from the @Setting declarations by `swift run imserver config-doc --update docs/CONFIGURATION.md`; do not edit by hand -->"
    public static let markdownEnd = "<!-- END settings table -->"

    /// The settings as markdown, a table per area, between `markdownBegin` and `markdownEnd`.
    public func markdown() -> String {
        var lines = [Self.markdownBegin]
        for area in areas {
            lines += ["", "### \(area.title)", "", "\(area.summary) In code: `ServerConfig.\(area.name)`.", "",
                      "| file key | flag | environment variable | default | allowed | what it sets |",
                      "|---|---|---|---|---|---|"]
            for setting in area.settings {
                let shown = setting.defaultText.isEmpty ? "unset" : "`\(setting.defaultText)`"
                let cells = ["`\(setting.key)`", "`\(setting.flag)`", "`\(setting.environmentVariable)`", shown,
                             setting.allowedText, (setting.isPerApp ? "*Per app.* " : "") + setting.doc]
                lines.append("| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
            }
        }
        lines += ["", Self.markdownEnd]
        return lines.joined(separator: "\n")
    }

    /// `document` with its generated part (from `markdownBegin` to `markdownEnd`) made anew.
    public func updating(document: String) throws -> String {
        guard let begin = document.range(of: Self.markdownBegin),
              let end = document.range(of: Self.markdownEnd, range: begin.upperBound..<document.endIndex) else {
            throw IMError(.invalidParameter, "the document has no generated settings table: put the lines \(Self.markdownBegin) and \(Self.markdownEnd) where it goes")
        }
        return document.replacingCharacters(in: begin.lowerBound..<end.upperBound, with: markdown())
    }
}
