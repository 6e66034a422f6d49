extension Sequence where Element: Hashable {
    /// The elements once each, in their first order. Inlinable: the push paths call it with
    /// thousands of ids, where the unspecialized generic form cost more than the work around it.
    @inlinable
    public func uniqued() -> [Element] {
        var seen = Set<Element>(minimumCapacity: underestimatedCount)
        var result: [Element] = []
        result.reserveCapacity(underestimatedCount)
        for element in self where seen.insert(element).inserted { result.append(element) }
        return result
    }
}
