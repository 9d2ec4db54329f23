/// The line the progress block shows while files wait to retry after a stall: without it a
/// server that takes connections and sends nothing looked like a run at `0 B/s` for minutes
/// (docs/cli.md, "Retries"). A pure function of the waiting files, unit-tested.
public enum ProgressNote {
    /// One waiting file: the failure that made it wait and when it is asked again (monotonic seconds).
    public struct Waiting: Sendable, Equatable {
        public var stalled: Bool
        public var notBefore: Double

        public init(stalled: Bool, notBefore: Double) {
            self.stalled = stalled
            self.notBefore = notBefore
        }
    }

    /// `stalled, retrying in 12 s` (`3 files stalled, retrying in 12 s`): the soonest retry of
    /// the files that stalled, whole seconds rounded up; nil when none waits after a stall.
    public static func line(_ waiting: [Waiting], now: Double) -> String? {
        let stalled = waiting.filter(\.stalled)
        guard let next = stalled.map(\.notBefore).min() else { return nil }
        let seconds = Int(max(0, next - now).rounded(.up))
        let who = stalled.count == 1 ? "" : "\(stalled.count) files "
        return "\(who)stalled, retrying in \(seconds) s"
    }
}
