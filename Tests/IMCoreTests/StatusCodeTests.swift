import IMCore
import Testing

/// The seed's status-code table (seed 003 状态码, spec/system-push-ultra.md §7.1), row by row.
/// Every code in it is declared: the connection statuses (-1, 0-12) as `ConnectionStatus`, the
/// others as `ErrorCode` with a meaning in `ErrorCode.catalogue`.
@Suite("Status codes")
struct StatusCodeTests {
    static let seedTable: [(code: Int, meaning: String)] = [
        (-1000, "Invalid parameter passed by the developer to an API"),
        (-1, "Unknown status (file a ticket)"),
        (0, "Connected successfully"),
        (1, "Device network unavailable"),
        (2, "Device switched to airplane mode"),
        (3, "Device switched to 2G (GPRS/EDGE) low-speed network"),
        (4, "Device switched to 3G/4G high-speed network"),
        (5, "Device switched to Wi-Fi"),
        (6, "User logged in on another device; this device kicked offline"),
        (7, "User logged in on Web"),
        (8, "Server error"),
        (9, "Connection authentication error"),
        (10, "Connecting"),
        (11, "Connection failed or not connected"),
        (12, "User has signed out (注销)"),
        (405, "Blacklisted by the recipient; send failed (IMKit shows \"您的消息已发出，但被对方拒绝\")"),
        (407, "Not in the recipient's whitelist; send failed"),
        (5004, "Timeout"),
        (20106, "User is muted for private chat; cannot send private messages"),
        (20604, "Send rate too high: at most **5 messages per second**"),
        (20605, "Signalling banned (信令被封禁)"),
        (20607, "Call rate limit exceeded; retry later"),
        (22406, "Current user is not in the group"),
        (22408, "Current user is muted in the group"),
        (23406, "Current user is not in the chatroom"),
        (23408, "Current user is muted in the chatroom"),
        (23409, "Kicked out and banned from joining the chatroom (duration set by the server kick API)"),
        (23410, "Chatroom does not exist"),
        (23411, "Chatroom member limit exceeded"),
        (23412, "Invalid chatroom API parameter"),
        (23414, "Chatroom cloud storage not enabled"),
        (23423, "Chatroom attribute count exceeded (default 100 per chatroom)"),
        (23424, "No permission to modify an existing chatroom attribute"),
        (23425, "Chatroom attribute set rate exceeded (100/s per chatroom)"),
        (23426, "Chatroom custom attributes not enabled"),
        (23427, "Chatroom attribute does not exist"),
        (23431, "Attribute set failed because several clients operated on the same attribute"),
        (25101, "Invalid recall parameter"),
        (25102, "History cloud storage not enabled (private/group or chatroom)"),
        (25103, "Clear history: timestamp later than the current system time"),
        (25105, "Internal error while clearing history"),
        (26001, "Invalid push parameter"),
        (26002, "Problem syncing to the server, possibly operations too frequent; retry later"),
        (26101, "Short-video service not enabled in the console"),
        (30001, "Connection already released"),
        (30002, "Current connection unavailable (listed twice in the doc, with two wordings)"),
        (30003, "Server response to a send-message request timed out"),
        (30004, "Navigation HTTP send failed"),
        (30007, "Navigation HTTP request failed"),
        (30008, "Navigation HTTP response format error"),
        (30010, "Socket creation failed"),
        (30011, "Socket disconnected"),
        (30012, "PING failed"),
        (30013, "PING timeout"),
        (30014, "Signalling send failed"),
        (30015, "Connecting too frequently"),
        (30016, "Message size over the limit (max **128 KB**)"),
        (31000, "Connection ACK timeout"),
        (31002, "Wrong AppKey at init"),
        (31003, "Server currently unavailable (also returned when the mini-program/desktop service is not enabled)"),
        (31004, "Token invalid"),
        (31005, "App verification failed (app verification enabled but not passed)"),
        (31007, "BundleID incorrect"),
        (31008, "AppKey banned or deleted"),
        (31009, "Connection failed, usually because the user is banned"),
        (31010, "User logged in on another mobile device; this device kicked"),
        (31011, "User banned while online; disconnected"),
        (31020, "Token expired (console token TTL); get a new token from the app server"),
        (31023, "User logged in on another device during reconnect"),
        (32061, "Connection refused; the SDK reconnects automatically"),
        (33001, "`init` not called"),
        (33002, "Database error"),
        (33003, "Invalid API parameter"),
        (33007, "History cloud storage service not enabled"),
        (34001, "Connection already exists; no need to reconnect"),
        (34002, "Short video too long (default max 2 minutes)"),
        (34003, "GIF file too large (default max 2 MB)"),
        (34004, "Chatroom state not yet synced (attributes read right after join)"),
        (34005, "Wrong connection environment"),
        (34006, "Connection timeout (`connectWithToken:timeLimit:…` with a valid timeLimit)"),
        (34007, "Requested public-service info does not exist"),
        (34008, "Message cannot be extended (`canIncludeExpansion` was not YES at send)"),
        (34009, "Message extension failed (usually network)"),
        (34010, "Message extension too large: key ≤ 32, value ≤ 64, ≤ 20 per call, ≤ 300 total"),
        (34011, "Media file HTTP upload failed"),
        (34012, "Conversation type does not support tags (only private, group and system conversations do)"),
        (34013, "Too many conversations in a batch tag operation (max 1000)"),
        (34015, "Video compression failed"),
        (34016, "User-level settings not enabled"),
        (34017, "Message processing failed (usually a nil message)"),
        (34018, "Media upload error: file missing or size 0"),
        (34019, "Media file format not supported"),
        (34020, "File expired or cleaned (180 days for 旗舰版/尊享版; short video 7 days; legacy 商用版 7 days)"),
        (34021, "Message type not registered (register custom types before sending or inserting)"),
        (40006, "RTC room operation parameter error"),
    ]

    /// The statuses of RongCloud's connection status table (RCConnectionStatus): -1 and 0 to 12.
    static let connectionStatuses: Set<Int> = Set([-1] + Array(0...12))

    @Test("every code of the seed's status-code table is declared, with a meaning", arguments: seedTable.map(\.code))
    func declared(code: Int) {
        if Self.connectionStatuses.contains(code) {
            #expect(ConnectionStatus(rawValue: code) != nil, "connection status \(code) is not a ConnectionStatus")
        }
        if !Self.connectionStatuses.contains(code) || code == -1 {
            let meaning = ErrorCode(code).meaning
            #expect(meaning != nil, "status code \(code) is not in ErrorCode.catalogue")
            #expect(meaning?.isEmpty == false)
        }
    }

    @Test("the table has the rows the seed lists, and the catalogue names each code once")
    func tableShape() {
        #expect(Self.seedTable.count == 95)
        #expect(Set(Self.seedTable.map(\.code)).count == Self.seedTable.count)
        // Codes the project declares beyond the seed's table (the Server API's, the ultra group
        // family, 20109, 20116, 21501, 34022) are in the catalogue too.
        for code in [200, 1002, 1009, 20109, 20116, 21501, 24406, 34022] {
            #expect(ErrorCode(code).meaning != nil, "\(code) has no meaning")
        }
    }
}
