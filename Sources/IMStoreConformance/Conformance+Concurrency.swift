import Foundation
import IMCore
import IMStore
import Testing

extension StoreConformance {
    /// Concurrent callers: what one transaction per method must guarantee when calls overlap.
    /// Seqs are unique and readers never skip one; dedup holds under racing resends; no limit is
    /// passed by callers that each stay under it alone; state versions stay unique per user.
    public func concurrency() async throws {
        let area = "Concurrency"

        await check(area, "concurrent commits get unique seqs, increasing in each caller's order, and none is lost") { f in
            let writers = 8, commitsPerWriter = 20
            let results = try await concurrently(writers) { writer in
                var seqs: [UInt64] = []
                for index in 0..<commitsPerWriter {
                    let stored = try await f.commit(f.privateMessage(from: "w\(writer)", to: "reader", at: f.now + Int64(index)),
                                                    f.groupMessage(from: "w\(writer)", group: "g\(writer)", at: f.now + Int64(index)))
                    #expect(stored[0].seq < stored[1].seq, "in the order of the call")
                    seqs += stored.map(\.seq)
                }
                return seqs
            }
            for seqs in results {
                #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "each caller's later commits get higher seqs")
            }
            let all = results.flatMap { $0 }
            #expect(Set(all).count == writers * commitsPerWriter * 2, "no seq given twice")
            let synced = try await f.syncAll("reader", limit: 7).messages
            #expect(synced.count == writers * commitsPerWriter, "every message reached its recipient")
            #expect(zip(synced, synced.dropFirst()).allSatisfy { $0.seq < $1.seq })
        }

        await check(area, "a sync reading while commits land never skips a message: what is behind a watermark is committed") { f in
            let writers = 6, commitsPerWriter = 25
            let done = Flag()
            @Sendable func read() async throws -> [StoredMessage] {
                var seen: [StoredMessage] = []
                var watermark: UInt64 = 0
                for _ in 0..<1_000_000 {
                    let finished = await done.isSet
                    let page = try await f.store.syncPage(appId: f.appId, userId: "reader", after: watermark, minSentTime: .min,
                                                          limit: 5, maxBytes: .max)
                    seen += page.messages
                    watermark = max(watermark, page.watermark)
                    if finished && !page.hasMore { return seen }
                    if page.messages.isEmpty { await Task.yield() }
                }
                Issue.record("the sync never caught up with the commits")
                return seen
            }
            async let reading = read()
            let committed = try await concurrently(writers) { writer in
                var uids: [String] = []
                for index in 0..<commitsPerWriter {
                    uids += try await f.commit(f.privateMessage(from: "w\(writer)", to: "reader", at: f.now + Int64(index))).map(\.uid)
                }
                return uids
            }
            await done.set()
            let seen = try await reading
            #expect(seen.count == writers * commitsPerWriter, "each message seen once, none skipped")
            #expect(Set(seen.map(\.uid)) == Set(committed.flatMap { $0 }))
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.seq < $1.seq })
        }

        await check(area, "racing resends of one (sender, client message id) store it once; every caller gets that message") { f in
            let outcomes = try await concurrently(12) { index in
                try await f.store.commit([f.privateMessage(from: "alice", to: "bob", at: f.now + Int64(index), text: "try \(index)",
                                                           clientMessageId: "once")])
            }.flatMap { $0 }
            let stored = outcomes.compactMap { if case .stored(let message) = $0 { message } else { nil } }
            #expect(stored.count == 1)
            #expect(outcomes.allSatisfy { $0.message == stored.first }, "the duplicates are the stored message")
            #expect(try await f.historyUids(privateConversationKey("alice", "bob")).count == 1)
        }

        await check(area, "concurrent joinGroup calls never pass maxMembers together") { f in
            let outcomes = try await concurrently(24) { index in
                try await f.store.joinGroup(appId: f.appId, groupId: "g", name: "G", userIds: ["u\(index)"], maxMembers: 10,
                                            preJoinHistory: 0, now: f.now)
            }
            #expect(outcomes.filter { if case .joined = $0 { true } else { false } }.count == 10)
            #expect(outcomes.filter { $0 == .tooManyMembers(limit: 10) }.count == 14)
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.memberCount == 10)
            let pairs = try await concurrently(10) { index in
                try await f.store.joinGroup(appId: f.appId, groupId: "h", name: "H", userIds: ["a\(index)", "b\(index)"], maxMembers: 9,
                                            preJoinHistory: 0, now: f.now)
            }
            #expect(pairs.filter { if case .joined = $0 { true } else { false } }.count == 4, "all or none: pairs join whole")
            #expect(try await f.store.groupMembers(appId: f.appId, groupId: "h").count == 8)
        }

        await check(area, "concurrent syncGroups calls never pass maxMembers together") { f in
            let results = await concurrentlyTrying(16) { index in
                try await f.store.syncGroups(appId: f.appId, userId: "u\(index)", groups: [("g", "G"), ("solo\(index)", "S")], maxMembers: 5,
                                             preJoinHistory: 0, now: f.now)
            }
            #expect(results.filter { (try? $0.get()) != nil }.count == 5)
            #expect(results.allSatisfy { result in
                if case .failure(let error) = result { return error as? StoreRefusal == .tooManyGroupMembers(limit: 5) }
                return true
            }, "the others are refused")
            #expect(try await f.store.group(appId: f.appId, groupId: "g")?.memberCount == 5)
            var solos = 0
            for index in 0..<16 where try await f.store.group(appId: f.appId, groupId: "solo\(index)") != nil { solos += 1 }
            #expect(solos == 5, "a refused sync created none of its groups")
        }

        await check(area, "concurrent updateExpansion calls never pass maxKeys together") { f in
            var original = f.privateMessage(from: "alice", to: "bob", at: f.now)
            original.canIncludeExpansion = true
            let uid = try await f.commit(original)[0].uid
            let results = await concurrentlyTrying(20) { index in
                try await f.store.updateExpansion(appId: f.appId, uid: uid, set: ["k\(index)": "v"], remove: [], now: f.now + Int64(index), maxKeys: 6)
            }
            let accepted = results.indices.filter { (try? results[$0].get()) != nil }
            #expect(accepted.count == 6)
            #expect(results.allSatisfy { result in
                if case .failure(let error) = result, case .tooManyExpansionKeys(uid, 7, 6)? = error as? StoreRefusal { return true }
                return (try? result.get()) != nil
            }, "the others are refused, each seeing the 6 keys already set")
            #expect(try await Set(f.store.expansion(appId: f.appId, uid: uid)?.keys.map { $0 } ?? []) == Set(accepted.map { "k\($0)" }))
        }

        await check(area, "concurrent addSensitiveWords calls never pass the limit together") { f async throws in
            let results = await concurrentlyTrying(20) { index in
                try await f.store.addSensitiveWords(appId: f.appId, words: [SensitiveWord(word: "w\(index)", replacement: nil)], limit: 7, now: f.now)
            }
            let accepted = results.indices.filter { (try? results[$0].get()) != nil }
            #expect(accepted.count == 7)
            #expect(results.allSatisfy { result in
                if case .failure(let error) = result { return error as? StoreRefusal == .tooManySensitiveWords(limit: 7) }
                return true
            })
            #expect(try await Set(f.store.sensitiveWords(appId: f.appId).map(\.word)) == Set(accepted.map { "w\($0)" }))
        }

        await check(area, "concurrent conversation state edits get unique versions, and addTag never passes its limit") { f in
            let results = await concurrentlyTrying(30) { index -> ConversationStateDeltaRecord in
                if index < 20 {
                    return try await f.store.editConversationState(appId: f.appId, userId: "alice",
                                                                   .setLevel(ConversationIdentifier(.private, targetId: "p\(index)"), .blocked), now: f.now)
                }
                return try await f.store.editConversationState(appId: f.appId, userId: "alice", .addTag(tagId: "t\(index)", name: "T", limit: 4), now: f.now)
            }
            let edits = results.compactMap { try? $0.get() }
            #expect(edits.count == 24, "20 levels and 4 of the 10 tags")
            #expect(results.allSatisfy { result in
                if case .failure(let error) = result, case .tooManyTags(_, 4)? = error as? StoreRefusal { return true }
                return (try? result.get()) != nil
            })
            #expect(edits.allSatisfy { $0.version == $0.previousVersion + 1 }, "each edit stamped one row after the one before it")
            #expect(Set(edits.map(\.version)) == Set(1...24), "versions unique and gapless")
            let state = try await f.store.conversationStateChanges(appId: f.appId, userId: "alice", since: 0, limit: 100)
            #expect(state.version == 24 && state.settings.count == 20 && state.tags.count == 4)
            #expect(Set(state.settings.map(\.version) + state.tags.map(\.version)) == Set(1...24))
        }

        await check(area, "concurrent readers of one message are recorded once each") { f in
            let m = try await f.commit(f.groupMessage(from: "alice", group: "g", at: f.now))
            let recorded = try await concurrently(10) { index in
                try await f.store.recordReads([ReadReceiptRecord(uid: m[0].uid, senderId: "alice", groupId: "g", readerId: "r\(index % 3)",
                                                                 readTime: f.now + Int64(index))], appId: f.appId)
            }.flatMap { $0 }
            #expect(recorded.map(\.readerId).sorted() == ["r0", "r1", "r2"])
            #expect(Set(recorded.map(\.seq)).count == 3)
            #expect(try await f.store.readers(appId: f.appId, uid: m[0].uid, after: 0, limit: 10).total == 3)
        }

        await check(area, "ultra groups: concurrent calls never pass maxGroupsPerUser, maxChannels, maxUserGroups or a user group's maxMembers") { f in
            let created = try await concurrently(9) { index in
                try await f.store.createUltraGroup(appId: f.appId, groupId: "own\(index)", name: "O", ownerId: "alice", now: f.now, maxGroupsPerUser: 4)
            }
            #expect(created.filter { $0 == .joined }.count == 4)
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "alice").count == 4)
            var leftBehind = 0
            for index in 0..<9 where try await f.store.ultraGroupRoster(appId: f.appId, groupId: "own\(index)") != nil { leftBehind += 1 }
            #expect(leftBehind == 4, "a refused owner leaves no group")

            for index in 0..<9 {
                _ = try await f.store.createUltraGroup(appId: f.appId, groupId: "g\(index)", name: "G", ownerId: "owner\(index)", now: f.now,
                                                       maxGroupsPerUser: 100)
            }
            let joined = try await concurrently(9) { index in
                try await f.store.joinUltraGroup(appId: f.appId, groupId: "g\(index)", userIds: ["bob"], now: f.now, maxGroupsPerUser: 3)
            }
            #expect(joined.filter { $0 == .joined }.count == 3 && joined.filter { $0 == .tooManyGroups(userIds: ["bob"]) }.count == 6)
            #expect(try await f.store.ultraGroupIds(appId: f.appId, ofUser: "bob").count == 3)

            let channels = await concurrentlyTrying(10) { index in
                try await f.store.createUltraGroupChannel(appId: f.appId, groupId: "g0", channelId: "c\(index)", type: .publicChannel,
                                                          now: f.now, maxChannels: 5)
            }
            #expect(channels.filter { (try? $0.get()) != nil }.count == 4, "the default channel and 4 more")
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "g0")?.channels.count == 5)

            let userGroups = await concurrentlyTrying(10) { index in
                try await f.store.createUserGroups(appId: f.appId, groupId: "g0", userGroupIds: ["ug\(index)"], now: f.now, maxUserGroups: 3)
            }
            #expect(userGroups.filter { (try? $0.get()) != nil }.count == 3)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "g0")?.userGroups.count == 3)

            let ug = try #require(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "g0")?.userGroups.keys.first)
            let members = await concurrentlyTrying(10) { index in
                try await f.store.setUserGroupMembers(appId: f.appId, groupId: "g0", userGroupId: ug, userIds: ["m\(index)"], add: true, maxMembers: 6)
            }
            #expect(members.filter { (try? $0.get()) == true }.count == 6)
            #expect(try await f.store.ultraGroupRoster(appId: f.appId, groupId: "g0")?.userGroups[ug]?.count == 6)
        }

        await check(area, "push: concurrent upsertPushTemplate calls never pass the limit; one token set by many devices at once ends with one") { f in
            let templates = await concurrentlyTrying(12) { index in
                try await f.store.upsertPushTemplate(appId: f.appId, template: PushTemplateRecord(templateId: "t\(index)", name: "T",
                                                                                                  entries: [:], updatedAt: f.now), maxTemplates: 5)
            }
            let accepted = templates.indices.filter { (try? templates[$0].get()) != nil }
            #expect(accepted.count == 5)
            #expect(templates.allSatisfy { result in
                if case .failure(let error) = result { return error as? StoreRefusal == .tooManyPushTemplates(limit: 5) }
                return true
            })
            #expect(try await Set(f.store.pushTemplates(appId: f.appId).map(\.templateId)) == Set(accepted.map { "t\($0)" }))

            _ = try await concurrently(10) { index in
                try await f.store.setPushDevice(PushDeviceRecord(appId: f.appId, userId: "u\(index)", deviceId: "d\(index)", platform: "ios",
                                                                 kind: .apns, token: "shared", updatedAt: f.now))
            }
            let holders = try await f.store.pushDevices(appId: f.appId, userIds: (0..<10).map { "u\($0)" })
            #expect(holders.count == 1 && holders.first?.token == "shared", "every call succeeds and the token ends with one device")
        }

        await check(area, "push: concurrent decisions setting badges of the same devices all succeed") { f in
            let users = (0..<20).map { "u\($0)" }
            for user in users {
                try await f.store.setPushDevice(PushDeviceRecord(appId: f.appId, userId: user, deviceId: "d", platform: "ios", kind: .apns,
                                                                 token: "tok-\(user)", updatedAt: f.now))
                try await f.store.setPushDevice(PushDeviceRecord(appId: f.appId, userId: user, deviceId: "d", platform: "android", kind: .fcm,
                                                                 token: "fcm-\(user)", updatedAt: f.now))
            }
            _ = try await concurrently(8) { index in
                // Every caller names the same devices, half of them in the other order.
                let order = index.isMultiple(of: 2) ? users : users.reversed()
                try await f.store.recordPushDecisions(order.map { PushRecord(appId: f.appId, messageUid: "m\(index)", userId: $0, deviceId: "d",
                                                                             kind: .apns, token: "tok-\($0)", status: .pending, createdAt: f.now) },
                                                      badges: order.map { PushBadge(appId: f.appId, userId: $0, deviceId: "d", badge: index + 1) },
                                                      node: "conformance-node-\(UUID().uuidString)", cursor: UInt64(index))
            }
            let devices = try await f.store.pushDevices(appId: f.appId, userIds: users)
            #expect(devices.count == 40 && Set(devices.map(\.badge)).count == 1 && (1...8).contains(devices[0].badge),
                    "every device has the badge of the last call")
            #expect(try await f.store.pushRecords(appId: f.appId, messageUid: nil, userId: "u0", limit: 100).count == 8)
        }
    }
}

/// Runs `body` for 0..<count at once and returns the results in index order; the first error is thrown.
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        for index in 0..<count { group.addTask { (index, try await body(index)) } }
        var results = [T?](repeating: nil, count: count)
        for try await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}

/// Runs `body` for 0..<count at once and returns each call's result or error, in index order.
func concurrentlyTrying<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> T) async -> [Result<T, any Error>] {
    await withTaskGroup(of: (Int, Result<T, any Error>).self) { group in
        for index in 0..<count {
            group.addTask {
                do { return (index, .success(try await body(index))) } catch { return (index, .failure(error)) }
            }
        }
        var results = [Result<T, any Error>?](repeating: nil, count: count)
        for await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}

/// A flag one task sets and another reads.
actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}
