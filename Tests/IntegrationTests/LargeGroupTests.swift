import Foundation
import IMCore
import IMLib
import IMServer
import IMStore
import IMServerTesting
import Testing

@Suite("A 3,000-member group with 300 members online")
struct LargeGroupTests {
    @Test("every online member gets each message once and in order, offline members catch up, receipts stay paged")
    func threeThousandMembers() async throws {
        try await withTestServer(try await TestServer.start { config in
            config.serverAPI.callsPerSecond = 0
            config.session.clientSendsPerSecond = 1000
        }) { server in
            let members = (0..<3000).map { "m\($0)" }
            for start in stride(from: 0, to: members.count, by: GroupLimits.usersPerCall) {
                try await GroupChatTests.createGroup(server, "big", Array(members[start..<start + GroupLimits.usersPerCall]))
            }
            let (_, overBody) = try await server.api.post("/group/join.json", form: ["userId": "one-too-many", "groupId": "big"])
            #expect(overBody["code"] as? Int == 1002, "the 3001st member is refused")
            #expect(try await server.core.store.groupRoster(appId: server.app.id, groupId: "big")?.members.count == 3000)

            // 300 members online, connected 50 at a time.
            let online = Array(members.prefix(300))
            var clients: [IMClient] = []
            for start in stride(from: 0, to: online.count, by: 50) {
                clients += try await withThrowingTaskGroup(of: (Int, IMClient).self) { group in
                    for index in start..<start + 50 {
                        group.addTask { (index, try await server.connectedClient(online[index])) }
                    }
                    var batch: [(Int, IMClient)] = []
                    for try await item in group { batch.append(item) }
                    return batch.sorted { $0.0 < $1.0 }.map(\.1)
                }
            }
            let inboxes = clients.map { EventRecorder($0.receivedMessages()) }

            var sent: [String] = []
            for index in 0..<5 {
                sent.append(try await clients[0].sendMessage(.group, targetId: "big", content: TextMessage(content: "to all \(index)")).messageUId)
            }
            for (index, inbox) in inboxes.enumerated().dropFirst() {
                let received = await inbox.wait(for: 5).map(\.message.messageUId)
                #expect(received == sent, "member \(online[index]) got every message once, in order")
            }
            #expect(inboxes[0].items.isEmpty, "the sender's own session hears nothing of its sends")

            // Offline members, including the last to join, catch up on connect.
            for userId in ["m300", "m1500", "m2999"] {
                let (client, inbox) = try await server.syncedDevice(userId)
                // The inbox's recorder runs apart from the sync event's: wait for it to have them all.
                #expect(await inbox.wait(for: sent.count).map(\.message.messageUId) == sent, "\(userId) caught up")
                #expect(inbox.items.allSatisfy { $0.offline })
                await client.disconnect()
            }

            // Read receipts from 299 members come back as reads, and the reader list in pages of 100.
            let first = try #require(try await clients[0].getHistoryMessages(.group, targetId: "big", count: 20).last)
            let receipts = EventRecorder(clients[0].readReceiptEvents())
            try await clients[0].sendReadReceiptRequest(first)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, client) in clients.enumerated().dropFirst() {
                    let message = inboxes[index].items[0].message
                    group.addTask { try await client.sendReadReceiptResponse(.group, targetId: "big", messages: [message]) }
                }
                try await group.waitForAll()
            }
            var readers = Set<String>()
            var seen = 0
            while readers.count < 299 {
                let events = await receipts.wait(for: seen + 1, timeout: .seconds(30))
                guard events.count > seen else { break }
                for case .response(_, _, let uid, let users) in events[seen...] where uid == first.messageUId {
                    readers.formUnion(users.keys)
                }
                seen = events.count
            }
            #expect(readers == Set(online.dropFirst()))
            var pages: [Int] = []
            var token: String?
            repeat {
                let page = try await clients[0].getMessageReadUsers(messageUId: first.messageUId, count: 100, pageToken: token)
                #expect(page.total == 299)
                pages.append(page.users.count)
                token = page.nextPageToken
            } while token != nil
            #expect(pages == [100, 100, 99])

            await withTaskGroup(of: Void.self) { group in
                for client in clients { group.addTask { await client.disconnect() } }
            }
        }
    }
}
