import IMStore
/// One authenticated call: the app, its checked parameters, and where the server is reachable.
struct APICall: Sendable {
    let app: AppRecord
    let parameters: APIParameters
    /// `http://host:port` as the caller reached the server (for URLs in responses).
    let baseURL: String

    /// A required string (presence is checked by the dispatcher).
    func required(_ name: String) -> String { parameters.string(name) ?? "" }
    func string(_ name: String) -> String? { parameters.string(name) }
    func list(_ name: String) -> [String] { parameters.list(name) }
    func int(_ name: String) throws -> Int64? { try parameters.int(name) }
    func bool(_ name: String) throws -> Bool? { try parameters.bool(name) }
}
