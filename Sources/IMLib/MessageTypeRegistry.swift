import Foundation
import IMCore
import Synchronization

/// Maps object names to content types: the built-in ones and those the app registers.
final class MessageTypeRegistry: Sendable {
    private let types = Mutex<[String: any MessageContent.Type]>(
        Dictionary(uniqueKeysWithValues: (BuiltInContentTypes.all + BuiltInContentTypes.commands + BuiltInContentTypes.realTimeLocation).map { ($0.objectName, $0) }))

    func register(_ type: any MessageContent.Type) throws {
        let name = type.objectName
        guard MessageFieldLimits.isValidObjectName(name) else {
            throw IMError(.invalidParameter, "object name '\(name)' must be 1 to \(MessageLimits.maxObjectNameLength) characters")
        }
        let builtIn = types.withLock { $0[name] }
        if name.hasPrefix("RC:") && builtIn.map({ ObjectIdentifier($0) != ObjectIdentifier(type) }) ?? true {
            throw IMError(.invalidParameter, "object names starting with 'RC:' are reserved for built-in types: rename '\(name)'")
        }
        types.withLock { $0[name] = type }
    }

    func isRegistered(_ objectName: String) -> Bool {
        types.withLock { $0[objectName] != nil }
    }

    /// Decodes a body, or nil when the type is unknown or the body does not decode.
    func decode(objectName: String, data: Data) -> (any MessageContent)? {
        guard let type = types.withLock({ $0[objectName] }) else { return nil }
        return try? type.init(data: data)
    }
}
