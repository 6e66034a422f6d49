import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Logging
import Synchronization
import Testing

/// `/metrics` read by Prometheus's own parser after a scripted run, its counters checked against
/// what the run did; `/ready` and `/health`.
@Suite("Metrics and readiness")
struct MetricsTests {
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    static func scrape(_ server: TestServer) async throws -> (contentType: String, samples: [Sample]) {
        let script = PythonSDKTests.scripts.appendingPathComponent("metrics_parse.py").path
        let (status, text) = try await PythonSDKTests.run([script, server.baseURL])
        try #require(status == 0, "the Prometheus parser refused the document")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let samples = (object["samples"] as? [[String: Any]] ?? []).map {
            Sample(name: $0["name"] as? String ?? "", labels: $0["labels"] as? [String: String] ?? [:], value: ($0["value"] as? NSNumber)?.doubleValue ?? -1)
        }
        return (object["contentType"] as? String ?? "", samples)
    }

    static func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double {
        samples.filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }.map(\.value).reduce(0, +)
    }

    @Test("after a scripted run the counters say what happened: connections by platform, connects and refusals, messages by outcome, commits, sync pages, Server API calls by endpoint and code, kicks")
    func scriptedRun() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let ann = try await server.connectedClient("ann", platform: .iOS)
            let bob = try await server.connectedClient("bob")
            _ = try await server.api.post("/user/blacklist/add.json", form: ["userId": "bob", "blackUserId": "ann"])
            for index in 0..<3 {
                _ = try await bob.sendMessage(.private, targetId: "ann", content: TextMessage(content: "hi \(index)"))
            }
            #expect(await failureCode { _ = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "blocked")) } == 405)
            _ = try await server.api.post("/group/create.json", form: ["userId": "ann,bob", "groupId": "g1", "groupName": "G"])
            _ = try await bob.sendMessage(.group, targetId: "g1", content: TextMessage(content: "to the group"))
            try await ann.joinChatRoom("r1", messageCount: -1)
            try await bob.joinChatRoom("r1", messageCount: -1)
            let annRoom = EventRecorder(ann.receivedMessages())
            _ = try await bob.sendMessage(.chatroom, targetId: "r1", content: TextMessage(content: "to the room"))
            #expect(await annRoom.first { $0.message.conversationType == .chatroom } != nil)
            let (bad, _) = try await server.api.post("/user/info.json", form: ["userId": "nobody"])
            #expect(bad == 400)
            let revoked = try await server.token("dave")
            _ = try await server.api.post("/user/token/expire.json", form: ["userId": "dave", "time": "\(Int64(Date().timeIntervalSince1970 * 1000) + 1000)"])
            #expect(await failureCode { _ = try await server.client().connect(token: revoked) } == 31004)
            let carol = try await server.connectedClient("carol", platform: .android)
            _ = try await server.api.post("/user/block.json", form: ["userId": "carol", "minute": "5"])
            try await waitUntil { !server.core.registry.isOnline(appId: server.app.id, userId: "carol") }

            let (contentType, samples) = try await Self.scrape(server)
            #expect(contentType.hasPrefix("text/plain"))
            #expect(Self.value(samples, "imserver_connections", ["platform": "iOS"]) == 1)
            #expect(Self.value(samples, "imserver_connections", ["platform": "Linux"]) == 1)
            #expect(Self.value(samples, "imserver_connections", ["platform": "Android"]) == 0)
            #expect(Self.value(samples, "imserver_connects_total", ["code": "0"]) == 3)
            #expect(Self.value(samples, "imserver_connects_total", ["code": "31004"]) == 1, "the revoked token")
            #expect(Self.value(samples, "imserver_client_messages_total", ["conversation_type": "1", "outcome": "stored"]) == 3)
            #expect(Self.value(samples, "imserver_client_messages_total", ["conversation_type": "1", "outcome": "405"]) == 1)
            #expect(Self.value(samples, "imserver_messages_stored_total", ["conversation_type": "1"]) == 3)
            #expect(Self.value(samples, "imserver_messages_stored_total", ["conversation_type": "3"]) == 1)
            #expect(Self.value(samples, "imserver_commit_batch_messages_count") >= 1)
            #expect(Self.value(samples, "imserver_commit_batch_messages_sum") == 4)
            #expect(Self.value(samples, "imserver_fanout_writes_total", ["conversation_type": "1"]) == 3, "each private message to ann's one session")
            #expect(Self.value(samples, "imserver_fanout_writes_total", ["conversation_type": "3"]) == 1, "the group message to ann")
            #expect(Self.value(samples, "imserver_fanout_writes_total", ["conversation_type": "4"]) >= 1, "the room's sweep to ann")
            #expect(Self.value(samples, "imserver_delivery_seconds_count") == 4, "every stored message's delivery timed")
            #expect(Self.value(samples, "imserver_commit_seconds_count") == Self.value(samples, "imserver_commit_batch_messages_count"))
            #expect(Self.value(samples, "imserver_send_seconds_count") == 6, "every message a client sent is timed to its answer, the refused one too")
            #expect(Self.value(samples, "imserver_sync_pages_total") >= 3, "each connect syncs")
            #expect(Self.value(samples, "imserver_api_calls_total", ["endpoint": "/user/getToken.json", "code": "200"]) == 4)
            #expect(Self.value(samples, "imserver_api_calls_total", ["endpoint": "/user/info.json", "code": "1002"]) == 1)
            #expect(Self.value(samples, "imserver_sessions_closed_total", ["reason": "kicked_31011"]) == 1, "carol, blocked while online")
            await ann.disconnect(); await bob.disconnect(); await carol.disconnect()
        }
    }

    @Test("/ready answers 200 while the store answers and the server takes work; /health names the sessions")
    func readiness() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (ready, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/ready")!)
            #expect(String(decoding: ready, as: UTF8.self).contains("\"ready\":true"))
            let (_, response) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/health")!)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
    }
}

@Suite("Structured logs")
struct StructuredLogTests {
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
    }

    @Test("logFormat json: one JSON object per line with time, level, label, message, source and the event's ids; a stored message can be followed by its msgUID")
    func jsonLines() async throws {
        let lines = Lines()
        var logger = Logger(label: "imserver", factory: { label in JSONLogHandler(label: label) { line in lines.lines.withLock { $0.append(line) } } })
        logger.logLevel = .debug
        try await withTestServer(try await TestServer.start(store: nil, logger: logger)) { server in
            let ann = try await server.connectedClient("ann")
            let sent = try await ann.sendMessage(.private, targetId: "bob", content: TextMessage(content: "follow me"))
            await ann.disconnect()
            let objects = try lines.all.map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "not a JSON object: \(line)")
            }
            #expect(!objects.isEmpty)
            #expect(objects.allSatisfy { $0["time"]?.hasSuffix("Z") == true && $0["level"] != nil && $0["label"] == "imserver" && $0["message"] != nil })
            let stored = try #require(objects.first { $0["message"] == "message stored" && $0["msgUID"] == sent.messageUId })
            #expect(stored["from"] == "ann" && stored["target"] == "bob" && stored["conversationType"] == "1")
            #expect(objects.contains { $0["message"] == "session opened" && $0["user"] == "ann" })
        }
    }
}
