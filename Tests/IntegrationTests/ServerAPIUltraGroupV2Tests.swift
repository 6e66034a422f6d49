import Foundation
import IMCore
import IMLib
import IMServer
import IMServerTesting
import Testing

@Suite("Server API: the Go SDK's /v2 ultra group family")
struct ServerAPIUltraGroupV2Tests {
    @Test("groups, members, channels, mutes, whitelists and messages through /v2, answered {code:10000, data} with snake_case keys")
    func family() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let api = server.api
            func ok(_ method: String, _ path: String, _ json: [String: Any]? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Any] {
                let (status, body) = try await api.send(method, path, json: json)
                #expect(status == 200 && body["code"] as? Int == 10000, "\(method) \(path): \(body)", sourceLocation: sourceLocation)
                return body["data"] as? [String: Any] ?? [:]
            }
            _ = try await ok("POST", "/v2/ultragroups", ["user_id": "ann", "group_id": "ug1", "group_name": "Guild"])
            _ = try await ok("POST", "/v2/ultragroups/ug1/users/bob")
            _ = try await ok("POST", "/v2/ultragroups/ug1/users/cat")
            _ = try await ok("PUT", "/v2/ultragroups/ug1", ["group_name": "Guild 2"])
            let groups = try await ok("GET", "/v2/ultragroups/users/bob/groups?page=1&size=10")
            #expect((groups["groups"] as? [[String: Any]]).map { $0.map { "\($0["group_id"] ?? "")/\($0["group_name"] ?? "")" } } == ["ug1/Guild 2"])
            let members = try await ok("GET", "/v2/ultragroups/ug1/users?page=1&size=2")
            #expect((members["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["ann", "bob"])
            _ = try await ok("DELETE", "/v2/ultragroups/ug1/users/cat")

            _ = try await ok("POST", "/v2/ultragroups/channels", ["group_id": "ug1", "channel_id": "news"])
            let channels = try await ok("GET", "/v2/ultragroups/ug1/channels?page=1&limit=10")
            #expect(Set((channels["channel_list"] as? [[String: Any]])?.compactMap { $0["channel_id"] as? String } ?? []) == ["RCDefault", "news"])
            #expect((channels["channel_list"] as? [[String: Any]])?.allSatisfy { $0["create_time"] is String } == true)

            let bob = try await server.connectedClient("bob")
            let inbox = EventRecorder(bob.receivedMessages())
            let sent = try await ok("POST", "/v2/message/ultragroup/send", [
                "from_user_id": "ann", "to_group_ids": ["ug1"], "object_name": "RC:TxtMsg", "content": ["content": "hi from v2"],
                "bus_channel": "news", "include_sender_enable": false])
            let uids = try #require(sent["message_uids"] as? [[String: Any]], "\(sent)")
            #expect(uids.first?["group_id"] as? String == "ug1")
            let received = try #require(await inbox.wait(for: 1).first?.message)
            #expect(received.messageUId == uids.first?["message_uid"] as? String)
            #expect(received.conversationType == .ultraGroup && received.channelId == "news"
                    && received.content(as: TextMessage.self)?.content == "hi from v2")

            _ = try await ok("POST", "/v2/ultragroups/ug1/muted-users", ["user_ids": ["bob"]])
            #expect((try await ok("GET", "/v2/ultragroups/ug1/muted-users")["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bob"])
            await #expect { _ = try await bob.sendMessage(.ultraGroup, targetId: "ug1", content: TextMessage(content: "muted?")) } throws: {
                ($0 as? SendMessageError)?.code == .mutedInUltraGroup
            }
            _ = try await ok("DELETE", "/v2/ultragroups/ug1/muted-users", ["user_ids": ["bob"]])
            _ = try await ok("PUT", "/v2/ultragroups/ug1/muted-status", ["status": true])
            #expect(try await ok("GET", "/v2/ultragroups/ug1/muted-status")["status"] as? Bool == true)
            _ = try await ok("POST", "/v2/ultragroups/ug1/allowed-users", ["user_ids": ["ann"]])
            #expect((try await ok("GET", "/v2/ultragroups/ug1/allowed-users")["users"] as? [[String: Any]])?.map { $0["id"] as? String } == ["ann"])
            _ = try await ok("DELETE", "/v2/ultragroups/ug1/allowed-users", ["user_ids": ["ann"]])
            _ = try await ok("DELETE", "/v2/ultragroups/ug1/channels/news")
            _ = try await ok("DELETE", "/v2/ultragroups/ug1")
            await bob.disconnect()
        }
    }

    @Test("/v2 errors are {code, msg} with the .json endpoint's code; an unsigned call is refused")
    func errors() async throws {
        try await withTestServer(try await TestServer.start()) { server in
            let (missing, missingBody) = try await server.api.send("DELETE", "/v2/ultragroups/nope")
            #expect(missing == 400 && missingBody["code"] as? Int == 24410 && !((missingBody["msg"] as? String) ?? "").isEmpty)
            let (bad, badBody) = try await server.api.send("POST", "/v2/ultragroups", json: ["user_id": "ann"])
            #expect(bad == 400 && badBody["code"] as? Int == 1002)
            let (unsigned, unsignedBody) = try await server.api.send("GET", "/v2/ultragroups/ug1/users", body: Data(), contentType: "application/json",
                                                                       signatureSecret: "wrong")
            #expect(unsigned == 401 && unsignedBody["code"] as? Int == 1004)
        }
    }
}
