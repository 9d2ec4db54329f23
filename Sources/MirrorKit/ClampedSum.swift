/// Sums of byte counts that never trap. A manifest's sizes are bounded so that their sums stay
/// far inside `Int64` (`ManifestEntry.largestSize`, `Manifest.largestTotal`); this keeps every
/// sum of sizes, blocks and bytes received from trapping even so (a trap ends the run with no
/// metrics and no journal of what it did): a sum past `Int64.max` stays at `Int64.max`.
extension Int64 {
    /// `self + other`, or `Int64.max` (`Int64.min`) where it would overflow.
    @inlinable public func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}

extension Sequence {
    /// The clamped sum (``Swift/Int64/addingClamped(_:)``) of `value` over the elements.
    @inlinable public func clampedSum(_ value: (Element) -> Int64) -> Int64 {
        reduce(Int64(0)) { $0.addingClamped(value($1)) }
    }
}
