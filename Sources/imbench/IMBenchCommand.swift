import ArgumentParser
import Foundation

@main
struct IMBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imbench",
        abstract: "Load generator for imserver: real WebSocket clients on SwiftNIO, results as JSON.",
        discussion: """
            Each scenario starts an imserver (the binary beside imbench, on 127.0.0.1 and a free port, in a \
            temporary data directory) or drives the one at --url, creates its users through the Server API, \
            opens its connections in worker processes and prints and writes what it measured. \
            `imbench --quick` runs every scenario small, as a smoke check. See BENCHMARKS.md.
            """,
        subcommands: [Connections.self, Private.self, ConnectStorm.self, History.self, Group.self, Push.self, UltraGroup.self, Chatroom.self, BusProbe.self, Media.self, IMChatCommand.self, Seed.self, Quick.self, WorkerCommandLine.self])

    @Flag(help: "Run every scenario small (a smoke check for CI; under a minute, no timing checks). Same as `imbench quick`.")
    var quick = false

    @OptionGroup var options: CommonOptions

    func run() async throws {
        guard quick else { throw CleanExit.helpRequest(self) }
        try await Quick.run(options: options)
    }
}

/// Prints the result, writes its JSON, and fails the command when the run had problems.
private func report(_ result: ScenarioResult, options: CommonOptions) throws {
    result.printSummary()
    let file = try writeResults(result, to: options.output, name: result.scenario)
    print("  results                        \(file)")
    if result.status == "failed" { throw ExitCode(1) }
}

struct Connections: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hold N authenticated idle connections with heartbeats: server memory per connection and heartbeat CPU.")

    @Option(help: "Connections to hold.") var connections = 19_000
    @Option(help: "Seconds after the connections are up before measuring.") var warmup = 5.0
    @Option(help: "Seconds the connections are held while measuring (the server's heartbeat interval is 30 s).") var duration = 60.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.connections(
            .init(connections: connections, warmup: warmup, duration: duration), options: options)
        try report(result, options: options)
    }
}

struct Private: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pairs chatting one-to-one at a target rate: ack and delivery latency, persisted messages per second.")

    @Option(help: "Pairs of users; each user has one connection and sends to its partner.") var pairs = 5_000
    @Option(help: "Messages per second, all senders together.") var rate = 10_000.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @Flag(help: "Full message routing of every message to a local receiver imbench runs; checks that each one arrives.") var routing = false
    @Flag(help: "The message callback for every message, answered \"pass\" at once by imbench's receiver (the latency it adds).") var messageCallback = false
    @Option(help: "With --routing or --message-callback: the receiver answers each callback this many milliseconds late (a slow app server).") var receiverDelayMs = 0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.privateChat(
            .init(pairs: pairs, rate: rate, warmup: warmup, duration: duration, routing: routing, messageCallback: messageCallback,
                  receiverDelayMilliseconds: receiverDelayMs),
            options: options)
        try report(result, options: options)
    }
}

struct ConnectStorm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect-storm",
        abstract: "N clients connect, authenticate and sync their offline messages as fast as possible: connects per second.")

    @Option(help: "Clients that connect.") var clients = 10_000
    @Option(help: "Offline messages stored for each client before the storm (sent by one mailer connection).") var pending = 5
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.connectStorm(.init(clients: clients, pending: pending), options: options)
        try report(result, options: options)
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Paged remote-history queries over a seeded store while messages are being written.",
        discussion: "Seeding 10M messages takes minutes; pass --data-dir to keep the seeded store for later runs (it is reused when it holds the same seed).")

    @Option(help: "Messages to seed before the server starts (SEEDING through the store, not measured). 0 = use the store as it is.") var seedMessages = 10_000_000
    @Option(help: "Conversations the seed spreads over (users h0…h(2n-1)).") var seedConversations = 10_000
    @Option(help: "Reader connections, each paging through a seeded conversation of its own.") var readers = 200
    @Option(help: "History pages per second, all readers together.") var rate = 2_000.0
    @Option(help: "Messages per page (1-100).") var count = 50
    @Option(help: "Pairs writing messages meanwhile.") var writerPairs = 2_500
    @Option(help: "Messages per second written, all writers together.") var writeRate = 5_000.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.history(
            .init(seedMessages: options.url == nil ? seedMessages : 0, seedConversations: seedConversations,
                  readers: readers, rate: rate, count: count, writerPairs: writerPairs, writeRate: writeRate,
                  warmup: warmup, duration: duration), options: options)
        try report(result, options: options)
    }
}

struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One large group, a fraction of its members online, senders at a target rate: ack latency, deliveries per second and delivery latency.")

    @Option(help: "Members of the group (more than 3000 raises the started server's IMSERVER_MAX_GROUP_MEMBERS).") var members = 3_000
    @Option(help: "Share of the members that are online, one connection each; the others are members only.") var onlineFraction = 0.1
    @Option(help: "Online members that send, sharing the rate (default: every online member).") var senders: Int?
    @Option(help: "Group messages per second, all senders together (each is delivered to every other online member).") var rate = 200.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.group(
            .init(members: members, onlineFraction: onlineFraction, senders: senders, rate: rate,
                  warmup: warmup, duration: duration), options: options)
        try report(result, options: options)
    }
}

struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The group scenario with push: the offline members have APNs tokens (SEEDED) and every message is pushed to them through a local APNs server: pushes per second, the server's CPU per push, and the online members' delivery latency beside it.")

    @Option(help: "Members of the group.") var members = 3_000
    @Option(help: "Share of the members that are online; the others are offline with an APNs token each.") var onlineFraction = 0.1
    @Option(help: "Online members that send, sharing the rate (default: every online member).") var senders: Int?
    @Option(help: "Group messages per second, all senders together.") var rate = 20.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.group(
            .init(members: members, onlineFraction: onlineFraction, senders: senders, rate: rate,
                  warmup: warmup, duration: duration, push: true), options: options)
        try report(result, options: options)
    }
}

struct UltraGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ultragroup",
        abstract: "One ultra group (SEEDED membership), a share of its members online, senders at a target rate into its default channel: ack latency, deliveries per second and delivery latency.")

    @Option(help: "Members of the ultra group, written into the store before the server starts.") var members = 100_000
    @Option(help: "Share of the members that are online, one connection each.") var onlineFraction = 0.05
    @Option(help: "Online members that send, sharing the rate (default: every online member).") var senders: Int?
    @Option(help: "Messages per second, all senders together (each is delivered to every other online member).") var rate = 20.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.group(
            .init(members: members, onlineFraction: onlineFraction, senders: senders, rate: rate,
                  warmup: warmup, duration: duration, ultra: true), options: options)
        try report(result, options: options)
    }
}

struct Chatroom: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One chatroom, every member online and joined, publishers at a target rate: publications delivered in full per second, delivery and publish-to-last-recipient latency.",
        discussion: "The publishers run in a worker process of their own; --workers sets how many workers share the other members (default: 2, or one per 15,000).")

    @Option(help: "Members of the room, each one connection (spread over the workers).") var members = 10_000
    @Option(help: "Members that publish, sharing the rate (each stays under the server's 5 messages/s per client).") var publishers = 100
    @Option(help: "Chatroom messages per second, all publishers together (each goes to every other member).") var rate = 40.0
    @Option(help: "Seconds of load before measuring.") var warmup = 5.0
    @Option(help: "Seconds measured.") var duration = 30.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.chatroom(
            .init(members: members, publishers: publishers, rate: rate, warmup: warmup, duration: duration), options: options)
        try report(result, options: options)
    }
}

struct BusProbe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bus-probe",
        abstract: "Where the cluster bus (PostgreSQL NOTIFY) saturates: cross-node one-to-one pairs on a cluster of --nodes (default 2), the rate raised step by step until delivery p99 passes the limit or errors appear.",
        discussion: "Needs --database. One setup, then each rate is a measured step of its own: rate achieved, latencies, each node's CPU, PostgreSQL's CPU, notifications per second (counted by a LISTEN of imbench's own on the bus channel).")

    @Option(help: "Pairs of users; the two users of each pair are on different nodes.") var pairs = 5_000
    @Option(help: "Aggregate rates to try, in order (messages/s, comma-separated).") var rates = "1000,2000,4000,8000,16000"
    @Option(help: "Seconds of load before each step's measurement.") var warmup = 3.0
    @Option(help: "Seconds measured per step.") var duration = 15.0
    @Option(help: "A step whose delivery p99 passes this many ms ends the probe.") var p99LimitMs = 100.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let steps = rates.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard !steps.isEmpty, steps.allSatisfy({ $0 > 0 }) else { throw ValidationError("--rates must list positive numbers, e.g. 1000,2000,4000") }
        let result = try await Scenarios.busProbe(
            .init(pairs: pairs, rates: steps, warmup: warmup, duration: duration, p99LimitMs: p99LimitMs), options: options)
        try report(result, options: options)
    }
}

struct Media: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Media files: a large file uploaded and downloaded over loopback (MB/s), many uploads at once with the server's RSS sampled, and 12-megapixel JPEGs reduced and thumbnailed by the server (p50/p99). Needs scripts/media-tools.sh.")

    @Option(help: "Size of the large file, MB.") var largeMB = 100
    @Option(help: "Times each large transfer runs.") var repeats = 3
    @Option(help: "Uploads at once.") var concurrentUploads = 100
    @Option(help: "Size of each of them, MB.") var concurrentMB = 10
    @Option(help: "Photos uploaded one after the other.") var photos = 30
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.media(
            .init(largeMB: largeMB, repeats: repeats, concurrentUploads: concurrentUploads, concurrentMB: concurrentMB, photos: photos),
            options: options)
        try report(result, options: options)
    }
}

struct IMChatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "imchat",
        abstract: "imchat in tmux: start to the conversation list drawn from a local database of --conversations and --messages (before the connection), then key-to-screen while --message-rate messages/s arrive in the open conversation. Needs imchat built and tmux (scripts/tmux.sh).")

    @Option(help: "Conversations in the local database.") var conversations = 1_000
    @Option(help: "Messages in the local database.") var messages = 100_000
    @Option(help: "imchat starts measured.") var starts = 5
    @Option(help: "Messages per second into the open conversation.") var messageRate = 50.0
    @Option(help: "Keys typed per second.") var keyRate = 10.0
    @Option(help: "Seconds of typing while messages arrive.") var duration = 20.0
    @OptionGroup var options: CommonOptions

    func run() async throws {
        let result = try await Scenarios.imchat(
            .init(conversations: conversations, messages: messages, starts: starts, messageRate: messageRate, keyRate: keyRate,
                  duration: duration), options: options)
        try report(result, options: options)
    }
}

struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "SEEDING: fill a stopped server's data directory with history (for `history --url`).")

    @Option(help: "The server's data directory (the server must not be running).") var dataDir: String
    @Option(help: "Messages to write.") var messages = 10_000_000
    @Option(help: "Conversations to spread them over.") var conversations = 10_000
    @Option(help: "App key the messages belong to (created if missing).") var appKey = "imbench"
    @Option(help: "App secret of a new app.") var appSecret = "imbench-secret"
    @Option(help: "Bytes of each message's content.") var payloadBytes = 100

    func run() async throws {
        try await Seeder.seed(dataDir: dataDir, plan: SeedPlan(messages: messages, conversations: conversations,
                                                               appKey: appKey, payloadBytes: payloadBytes),
                              appSecret: appSecret)
    }
}

struct Quick: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Every scenario, small: a smoke check that each one still runs end to end (no timing checks).")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        try await Self.run(options: options)
    }

    static func run(options: CommonOptions) async throws {
        let started = ContinuousClock.now
        var results: [ScenarioResult] = []
        var two = options
        two.workers = 2   // exercise the multi-process path
        results.append(try await Scenarios.connections(.init(connections: 200, warmup: 1, duration: 2.5, quick: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.privateChat(.init(pairs: 50, rate: 400, warmup: 1, duration: 3, quick: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.privateChat(
            .init(pairs: 50, rate: 200, warmup: 1, duration: 3, quick: true, routing: true, messageCallback: true), options: options))
        results.last?.printSummary()
        results.append(try await Scenarios.connectStorm(.init(clients: 300, pending: 2, quick: true), options: options))
        results.last?.printSummary()
        results.append(try await Scenarios.history(
            .init(seedMessages: 20_000, seedConversations: 100, readers: 20, rate: 200, count: 50,
                  writerPairs: 20, writeRate: 100, warmup: 1, duration: 3, quick: true), options: options))
        results.last?.printSummary()
        results.append(try await Scenarios.group(
            .init(members: 300, onlineFraction: 0.1, rate: 30, warmup: 1, duration: 3, quick: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.group(
            .init(members: 300, onlineFraction: 0.1, rate: 3, warmup: 1, duration: 3, quick: true, push: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.chatroom(
            .init(members: 200, publishers: 20, rate: 10, warmup: 1, duration: 3, quick: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.group(
            .init(members: 2_000, onlineFraction: 0.05, rate: 20, warmup: 1, duration: 3, quick: true, ultra: true), options: two))
        results.last?.printSummary()
        results.append(try await Scenarios.media(
            .init(largeMB: 8, repeats: 1, concurrentUploads: 10, concurrentMB: 1, photos: 3, photoWidth: 1600, photoHeight: 1200, quick: true),
            options: options))
        results.last?.printSummary()
        results.append(try await Scenarios.imchat(
            .init(conversations: 100, messages: 2_000, starts: 2, messageRate: 20, keyRate: 10, duration: 3, quick: true), options: options))
        results.last?.printSummary()
        // With a PostgreSQL server for the tests (scripts/test.sh sets it): two nodes on a fresh
        // database, the users of each pair on different nodes, so every message crosses the bus.
        if let url = ProcessInfo.processInfo.environment["IMSERVER_TEST_POSTGRES_URL"], !url.isEmpty {
            var cluster = two
            cluster.database = url
            cluster.nodes = 2
            results.append(try await Scenarios.privateChat(.init(pairs: 50, rate: 200, warmup: 1, duration: 3, quick: true), options: cluster))
            results.last?.printSummary()
        }
        let file = try writeResults(results, to: options.output, name: "quick")
        let failed = results.filter { $0.status == "failed" }.map(\.scenario)
        print("\nimbench --quick: \(results.count) scenarios ran, "
              + (failed.isEmpty ? "no problems" : "PROBLEMS in \(failed.joined(separator: ", "))")
              + " (\(fmt((ContinuousClock.now - started).seconds, 1)) s); results in \(file)")
        if !failed.isEmpty { throw ExitCode(1) }
    }
}

struct WorkerCommandLine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker", abstract: "Internal: a worker process started by imbench.", shouldDisplay: false)

    func run() async throws {
        await Worker.main()
    }
}
