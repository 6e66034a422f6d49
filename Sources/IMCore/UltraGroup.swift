/// Ultra groups: Discord-like groups with channels (spec/system-push-ultra.md §3, seed 000).
///
/// A conversation of an ultra group is the pair (group id, channel id); a message with no channel id
/// belongs to the default channel `RCDefault`, which every group has and which stays public.
public enum UltraGroupLimits {
    /// 「最多加入 100 个群」: ultra groups one user may belong to.
    public static let maxGroupsPerUser = 100
    /// 「每个群中可加入 50 个频道」: channels of one ultra group, `RCDefault` included.
    public static let maxChannelsPerGroup = 50
    /// User groups of one ultra group (spec §3.3).
    public static let maxUserGroupsPerGroup = 50
    /// Members of one user group (spec §3.3).
    public static let maxMembersPerUserGroup = 100
    /// Channel ids: at most 20 letters and digits ("busChannel (≤20 alphanumeric)", spec/server-api.md §6.5).
    public static let maxChannelIdLength = 20
    /// The channel of a message sent without one (apps enabled after 2022-10-13, seed 000).
    public static let defaultChannelId = "RCDefault"
    /// Cloud history of ultra groups: 7 days by default (spec §3.1).
    public static let defaultHistoryRetentionDays = 7
    /// Messages per second one ultra group takes through the Server API (spec §0).
    public static let serverMessagesPerSecond = 100
    /// Groups one `/message/ultragroup/publish.json` call may name (spec/server-api.md §3.2).
    public static let groupsPerPublish = 3
    /// Users per join, quit, private-channel or user-group call: RongCloud names none for joins; a
    /// user group holds 100, so that is the batch size everywhere.
    public static let usersPerCall = 100
    /// Messages per remote history page of a channel (as private and group history).
    public static let maxHistoryCount = 100

    /// Whether `id` can name a channel: 1 to 20 ASCII letters and digits.
    public static func isValidChannelId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= maxChannelIdLength && id.utf8.allSatisfy {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
        }
    }

    /// The channel a message to `channelId` goes to: the default channel when none is given.
    public static func effectiveChannel(_ channelId: String) -> String {
        channelId.isEmpty ? defaultChannelId : channelId
    }
}

/// Who may see an ultra group channel: every member, or only its listed members and the members of
/// the user groups bound to it.
public enum UltraGroupChannelType: Int, Sendable, Codable, CaseIterable {
    case publicChannel = 0
    case privateChannel = 1
}
