import Foundation
import Logging
import Synchronization

/// A log handler that writes one JSON object per line (`logFormat` json), for log collectors:
/// `time` (ISO 8601, UTC, milliseconds), `level`, `label`, `message`, `source`, and every
/// metadata value as a string field (`user`, `session`, `msgUID`, `requestId` ...), so that one
/// message or one Server API call can be followed through the lines that name it.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let write: @Sendable (String) -> Void

    /// Lines go to `write` (standard output unless given).
    public init(label: String, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardOutput) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [String: String] = [:]
        for (key, value) in metadata { fields[key] = Self.text(value) }
        for (key, value) in event.metadata ?? [:] { fields[key] = Self.text(value) }
        fields["time"] = Self.timestamp(Date())
        fields["level"] = event.level.rawValue
        fields["label"] = label
        fields["message"] = event.message.description
        fields["source"] = event.source
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        write(String(decoding: data, as: UTF8.self))
    }

    private static func text(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): string
        case .stringConvertible(let convertible): convertible.description
        case .array, .dictionary: value.description
        }
    }

    private static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().timeZone(separator: .omitted).time(includingFractionalSeconds: true)
            .timeSeparator(.colon).dateSeparator(.dash).dateTimeSeparator(.standard))
    }

    private static let output = Mutex<Void>(())

    /// Writes a line to standard output, whole (lines of concurrent events never interleave).
    public static let standardOutput: @Sendable (String) -> Void = { line in
        output.withLock { _ in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
