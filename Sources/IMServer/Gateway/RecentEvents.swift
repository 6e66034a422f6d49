import IMStore
/// The times of the latest events of one kind, for a limit per second (a sliding window).
struct RecentEvents {
    private var times: [Int64] = []

    mutating func admit(now: Int64, perSecond: Int) -> Bool {
        times.removeAll { now - $0 >= 1000 || $0 > now }
        guard times.count < perSecond else { return false }
        times.append(now)
        return true
    }
}
