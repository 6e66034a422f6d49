import IMCore

extension ServerConfig {
    /// A node of a cluster: several imserver processes on one PostgreSQL database.
    public struct ClusterSettings: SettingsArea {
        public static let title = "Cluster"
        public static let summary = "Every server on PostgreSQL (`database`) is a node of the cluster of the servers on that database; these settings name the node and say when a silent node is taken for dead."

        @Setting(key: "nodeId", allowed: .bytes(1...64),
                 doc: "This node's id, unique among the nodes on the database. Unset: a new random id at every start.")
        public var nodeId: String? = nil

        @Setting(key: "clusterNodeTimeoutSeconds", allowed: .range(3...300),
                 doc: "A node whose heartbeat (every 2 s) is this overdue is taken for dead: its sessions leave the cluster's presence and its users may log in elsewhere.")
        public var nodeTimeoutSeconds = 10

        public init() {}
    }
}
