extension Sequence where Element: Hashable {
    /// The elements once each, in their first order.
    public func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
