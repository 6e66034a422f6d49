import Foundation
import Testing

/// The rules of the server's layering, read off its sources: a break fails here before it spreads.
@Suite("Layering of the server's sources")
struct LayeringTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// Each Swift file below `folder`, with its lines that are not comments.
    static func code(under folder: String) throws -> [(file: String, lines: [String])] {
        let root = sources.appendingPathComponent(folder)
        let paths = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        return try paths.sorted().map { path in
            let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            return (path, text.split(separator: "\n").map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") })
        }
    }

    @Test("no Server API endpoint touches the store: the services are the only writers")
    func endpointsCallServices() throws {
        let files = try Self.code(under: "IMServer/ServerAPI")
        #expect(files.count > 10, "the Server API sources were not found under \(Self.sources.path)")
        for (file, lines) in files {
            for line in lines where line.contains("core.store") || line.contains("await store.") {
                Issue.record("ServerAPI/\(file) calls the store: \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
    }

    @Test("no origin is an empty string, and IMServer never imports a store's implementation (SQLite, PostgreSQL)")
    func originsAndImports() throws {
        let files = try Self.code(under: "IMServer")
        #expect(files.count > 50)
        for (file, lines) in files {
            for line in lines where line.contains(#"origin: """#) {
                Issue.record("IMServer/\(file) passes an empty origin: \(line.trimmingCharacters(in: .whitespaces))")
            }
            for line in lines where ["import GRDB", "import IMStoreSQLite", "import PostgresNIO", "import IMStorePostgres",
                                     "import IMStoreMigration"].contains(where: line.hasPrefix) {
                Issue.record("IMServer/\(file) imports the store's implementation: \(line)")
            }
        }
    }
}
