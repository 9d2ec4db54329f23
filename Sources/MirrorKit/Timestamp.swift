#if canImport(Glibc)
import Glibc
#endif

extension Formatting {
    /// Seconds since the epoch as an RFC 3339 UTC timestamp, `2026-11-22T03:10:00Z` (`gmtime_r`),
    /// so a report reads the same on every machine of a fleet, whatever its time zone.
    public static func utcTimestamp(_ seconds: Int64) -> String {
        var t = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&t, &parts) != nil else { return String(seconds) }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// `2026-11-22T03:04:05Z` (RFC 3339, UTC, whole seconds): ``utcTimestamp(_:)`` of the second.
    public static func rfc3339(_ unixTime: Double) -> String {
        utcTimestamp(Int64(unixTime.rounded(.down)))
    }
}

extension Formatting {
    /// How long ago, for `status`: `12 s ago`, `5m 3s ago`, `3h 0m ago`, `2 d 4 h ago`; a moment in
    /// the future (a clock set back) is `in the future`, never a negative age.
    public static func ago(_ seconds: Double) -> String {
        guard seconds >= 0 else { return "in the future" }
        if seconds >= 86_400 {
            let s = Int(seconds)
            return "\(s / 86_400) d \(s % 86_400 / 3600) h ago"
        }
        return (seconds < 60 ? "\(Int(seconds)) s" : duration(seconds.rounded())) + " ago"
    }
}
