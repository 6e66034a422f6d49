import Foundation
import IMCore

extension ServerConfig {
    /// How long messages wait for their recipients, how they are synced and recalled.
    public struct MessagingSettings: SettingsArea {
        public static let title = "Messages"
        public static let summary = "How long offline messages wait, how they are synced, and how long a message may be recalled."

        @Setting(key: "offlineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 perApp: true, doc: "Days an offline private or group message waits for its recipient.")
        public var offlineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "systemOfflineRetentionDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 perApp: true, doc: "Days an offline system message (Server API system publish, `/push.json`, broadcasts) waits for its recipient, set apart from private and group messages as RongCloud does.")
        public var systemOfflineRetentionDays = MessageLimits.defaultOfflineRetentionDays

        @Setting(key: "compensationDays", allowed: .range(MessageLimits.offlineRetentionDayRange),
                 perApp: true, doc: "Offline message compensation: the natural days of messages a device that never synced (a new install, a wiped database) receives. 1 (RongCloud's default) is today since 00:00; at most 7. Never more than the offline retention.")
        public var compensationDays = MessageLimits.defaultCompensationDays

        @Setting(key: "dayTimeZone", allowed: .timeZone,
                 perApp: true, doc: "The time zone whose midnight starts a natural day (the compensation window's \"today\"): an IANA name such as `Asia/Shanghai` or `UTC`; unset, the machine's time zone.")
        public var dayTimeZone: String? = nil

        @Setting(key: "cloudHistoryEnabled",
                 perApp: true, doc: "Whether private, group and system messages are served as cloud history (remote history, /v3 queries); off, those calls fail with 25102. Offline sync is not affected.")
        public var cloudHistoryEnabled = true

        @Setting(key: "cloudHistoryRetentionDays", allowed: .range(1...36_500),
                 perApp: true, doc: "Days of cloud history served (RongCloud's default is 6 months); older messages are left out of remote history and /v3 queries.")
        public var cloudHistoryRetentionDays = MessageLimits.defaultCloudHistoryRetentionDays

        @Setting(key: "retentionSweepMinutes", allowed: .range(0...1440, note: "0 = off"),
                 doc: "Minutes between retention sweeps, which delete the messages past every window they serve (offline retention, compensation and, when on, cloud history; ultra group history past ultraGroupHistoryRetentionDays) in batches of 500.")
        public var retentionSweepMinutes = 10

        @Setting(key: "multiDeviceSyncEnabled", perApp: true,
                 doc: "Multi-device message sync (RongCloud's 多设备消息同步): what a user sends on one device reaches their other devices, live and at their next sync, and several Web sessions (browser tabs) may be online at once. Off: one session per kind (mobile, desktop, Web), and a message stays on the device that sent it. A new device gets the compensation window either way.")
        public var multiDeviceSyncEnabled = true

        @Setting(key: "syncPageSize", allowed: .range(1...1000),
                 doc: "Offline messages per sync page.")
        public var syncPageSize = 200

        @Setting(key: "recallWindowSeconds", allowed: .range(0...31_536_000, note: "0 = no limit; at most a year"),
                 perApp: true, doc: "Seconds after sending during which a client may recall its message (RongCloud's default is 2 minutes).")
        public var recallWindowSeconds = RecallLimits.defaultWindowSeconds

        public init() {}

        /// The oldest sent time cloud history serves at `now`, or 25102 when it is off.
        public func cloudHistoryFloor(now: Int64) throws -> Int64 {
            guard cloudHistoryEnabled else {
                throw IMError(.cloudHistoryDisabled, "cloud history is off for this app (cloudHistoryEnabled): read the messages this device holds, or ask the server's operator to turn it on")
            }
            return now - Int64(cloudHistoryRetentionDays) * 86_400_000
        }

        /// The calendar whose days are the natural days (`dayTimeZone`).
        var dayCalendar: Calendar {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = dayTimeZone.flatMap(TimeZone.init(identifier:)) ?? .current
            return calendar
        }

        /// The natural day of a time (ms), `YYYY-MM-DD`.
        public func day(of time: Int64) -> String {
            let parts = dayCalendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(time) / 1000))
            return String(format: "%04d-%02d-%02d", parts.year ?? 1970, parts.month ?? 1, parts.day ?? 1)
        }

        /// 00:00 of the first natural day of the compensation window that contains `now` (ms).
        public func compensationStart(now: Int64) -> Int64 {
            let calendar = dayCalendar
            let today = calendar.startOfDay(for: Date(timeIntervalSince1970: Double(now) / 1000))
            let first = calendar.date(byAdding: .day, value: -(compensationDays - 1), to: today) ?? today
            return Int64((first.timeIntervalSince1970 * 1000).rounded())
        }
    }
}
