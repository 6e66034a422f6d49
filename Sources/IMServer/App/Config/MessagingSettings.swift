import Foundation
import IMCore

extension ServerConfig {
    /// How long messages wait for their recipients, how they are synced and recalled.
    public struct MessagingSettings: SettingsArea {
        public static let title = "Messages"
        public static let summary = "How long offline messages wait, how they are synced, and how long a message may be recalled."

        @Setting(key: "offlineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 doc: "Days an offline private or group message waits for its recipient.")
        public var offlineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "systemOfflineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 doc: "Days an offline system message (Server API system publish, `/push.json`, broadcasts) waits for its recipient, set apart from private and group messages as RongCloud does.")
        public var systemOfflineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "compensationDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 doc: "Offline message compensation: the natural days of messages a device that never synced (a new install, a wiped database) receives. 1 (RongCloud's default) is today since 00:00; at most 7. Never more than the offline retention.")
        public var compensationDays = MessageLimits.defaultCompensationDays

        @Setting(key: "dayTimeZone", allowed: .timeZone,
                 doc: "The time zone whose midnight starts a natural day (the compensation window's \"today\"): an IANA name such as `Asia/Shanghai` or `UTC`; unset, the machine's time zone.")
        public var dayTimeZone: String? = nil

        @Setting(key: "cloudHistoryEnabled",
                 doc: "Whether private, group and system messages are served as cloud history (remote history, /v3 queries); off, those calls fail with 25102. Offline sync is not affected.")
        public var cloudHistoryEnabled = true

        @Setting(key: "cloudHistoryRetentionDays", allowed: .range(1...36_500),
                 doc: "Days of cloud history served (RongCloud's default is 6 months); older messages are left out of remote history and /v3 queries.")
        public var cloudHistoryRetentionDays = MessageLimits.defaultCloudHistoryRetentionDays

        @Setting(key: "retentionSweepMinutes", allowed: .range(0...1440, note: "0 = off"),
                 doc: "Minutes between retention sweeps, which delete the messages past every window they serve (offline retention, compensation and, when on, cloud history; ultra group history past ultraGroupHistoryRetentionDays) in batches of 500.")
        public var retentionSweepMinutes = 10

        @Setting(key: "syncPageSize", allowed: .range(1...1000),
                 doc: "Offline messages per sync page.")
        public var syncPageSize = 200

        @Setting(key: "recallWindowSeconds", allowed: .range(0...31_536_000, note: "0 = no limit; at most a year"),
                 doc: "Seconds after sending during which a client may recall its message (RongCloud's default is 2 minutes).")
        public var recallWindowSeconds = RecallLimits.defaultWindowSeconds

        public init() {}

        /// The oldest sent time cloud history serves at `now`, or 25102 when it is off.
        public func cloudHistoryFloor(now: Int64) throws -> Int64 {
            guard cloudHistoryEnabled else {
                throw IMError(.cloudHistoryDisabled, "this server does not serve cloud history (cloudHistoryEnabled is off): read the messages this device holds")
            }
            return now - Int64(cloudHistoryRetentionDays) * 86_400_000
        }

        /// 00:00 of the first natural day of the compensation window that contains `now` (ms).
        public func compensationStart(now: Int64) -> Int64 {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = dayTimeZone.flatMap(TimeZone.init(identifier:)) ?? .current
            let today = calendar.startOfDay(for: Date(timeIntervalSince1970: Double(now) / 1000))
            let first = calendar.date(byAdding: .day, value: -(compensationDays - 1), to: today) ?? today
            return Int64((first.timeIntervalSince1970 * 1000).rounded())
        }
    }
}
