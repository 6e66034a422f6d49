// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "imserver",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17)],
    products: [
        .executable(name: "imserver", targets: ["imserver"]),
        .library(name: "IMLib", targets: ["IMLib"]),
        .library(name: "IMKit", targets: ["IMKit"]),
        .library(name: "IMCore", targets: ["IMCore"]),
        .library(name: "IMServer", targets: ["IMServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Micro-benchmarks (Benchmarks/): allocations per operation, checked against Thresholds/.
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(name: "IMCore", swiftSettings: strict),
        .target(
            name: "IMWire",
            dependencies: [
                "IMCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["im.proto"],
            swiftSettings: strict
        ),
        .target(name: "IMStore", dependencies: ["IMCore"], swiftSettings: strict),
        .target(
            name: "IMServer",
            dependencies: [
                "IMCore", "IMPush", "IMWire", "IMStore", "IMProcess",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                // PBKDF2 for the console operator's password.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                // The gateway's event loops (Hummingbird's default, NIO's shared group), which
                // DeliveryFirst waits on.
                .product(name: "NIOPosix", package: "swift-nio"),
                // Media files streamed to disk and synced.
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                // The gateway: the WebSocket upgrade and frames as channel handlers.
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "IMStoreSQLite",
            dependencies: [
                "IMCore", "IMStore", "IMPush",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The cluster bus and presence on PostgreSQL (LISTEN/NOTIFY), for nodes on one database.
        .target(
            name: "IMClusterPostgres",
            dependencies: [
                "IMServer", "IMStorePostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The store on PostgreSQL (docs/POSTGRES.md): the same ports, for several server processes on one database.
        .target(
            name: "IMStorePostgres",
            dependencies: [
                "IMCore", "IMStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `imserver migrate`: copies an embedded installation into PostgreSQL, so that neither
        // IMServer nor the stores depend on both databases.
        .target(
            name: "IMStoreMigration",
            dependencies: [
                "IMCore", "IMStore", "IMStoreSQLite", "IMStorePostgres",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The store conformance suite: Swift Testing checks any IMStore runs (see docs/STORE-CONFORMANCE.md).
        .target(name: "IMStoreConformance", dependencies: ["IMCore", "IMStore"], swiftSettings: strict),
        .executableTarget(
            name: "imserver",
            dependencies: [
                "IMServer", "IMStore", "IMStoreSQLite", "IMStorePostgres", "IMStoreMigration", "IMClusterPostgres", "IMPush", "IMPushProviders",
                "IMCallbacksHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "IMLib",
            dependencies: [
                "IMCore", "IMWire",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                // Media uploads and downloads streamed from and to files.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // IMKit: the kit's behaviour above IMLib, without a UI (docs/IMKIT.md).
        .target(
            name: "IMKit",
            dependencies: [
                "IMCore", "IMLib",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // imchat: a full-screen terminal chat app over IMKit.
        .executableTarget(
            name: "imchat",
            dependencies: [
                "IMCore", "IMLib", "IMKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "imlib-demo",
            dependencies: [
                "IMCore", "IMLib",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // Micro-benchmarks of the per-message paths: `swift package benchmark` (scripts/benchmarks.sh).
        .executableTarget(
            name: "IMBenchmarks",
            dependencies: [
                "IMCore", "IMWire", "IMServer", "IMServerTesting", "IMStore",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "Benchmarks/IMBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "imbench",
            dependencies: [
                "IMCore", "IMWire", "IMServer", "IMStore", "IMStoreSQLite", "IMStorePostgres", "IMProcess", "IMPush", "IMPushTesting", "IMLib",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strict
        ),
        // Push providers: APNs, FCM and webhooks (IMServer/Push decides who gets what). IMPush has
        // the types and the credential checks; IMPushProviders the HTTP client that sends, apart so
        // that AsyncHTTPClient's dependencies (swift-algorithms' uniqued() among them) stay out of IMServer.
        .target(
            name: "IMPush",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "IMPushProviders",
            dependencies: [
                "IMPush",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // Callbacks to the apps' servers over async-http-client (IMServer/Callbacks decides what and
        // when), apart from IMServer for the same reason as IMPushProviders.
        .target(
            name: "IMCallbacksHTTP",
            dependencies: [
                "IMServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // Child processes without Foundation's Process (see ChildProcess.swift): the media tools the
        // server runs, the tests and imbench.
        .target(name: "IMProcess", swiftSettings: strict),
        // Local APNs, FCM and webhook servers speaking the providers' protocols (HTTP/2, TLS from a
        // test CA): for the tests (through IMServerTesting) and imbench's push scenario.
        .target(
            name: "IMPushTesting",
            dependencies: [
                "IMProcess", "IMPush", "IMPushProviders",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "IMServerTesting",
            dependencies: [
                "IMCore", "IMWire", "IMServer", "IMStore", "IMStoreSQLite", "IMStorePostgres", "IMLib", "IMProcess", "IMPush", "IMPushProviders",
                "IMPushTesting", "IMCallbacksHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "IMCoreTests", dependencies: ["IMCore", "IMWire", "IMServerTesting"], swiftSettings: strict),
        // IMKit's models against a real server, and imchat driven in tmux.
        .testTarget(
            name: "IMKitTests",
            dependencies: ["IMCore", "IMLib", "IMKit", "IMServerTesting", "IMProcess"],
            swiftSettings: strict
        ),
        // The push providers against local APNs, FCM and webhook servers (IMServerTesting).
        .testTarget(
            name: "PushProviderTests",
            dependencies: [
                "IMPush", "IMPushProviders", "IMServerTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StoreConformanceTests",
            dependencies: [
                "IMCore", "IMStore", "IMStoreSQLite", "IMStorePostgres", "IMStoreConformance", "IMStoreMigration", "IMServerTesting", "IMPush",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "IMCore", "IMWire", "IMServer", "IMStore", "IMStoreSQLite", "IMStorePostgres", "IMLib", "IMServerTesting", "IMClusterPostgres", "IMProcess", "IMPush", "IMPushProviders",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            // Run by the tests from the source tree (the official Python SDK against the server).
            exclude: ["python"],
            swiftSettings: strict
        ),
    ]
)
