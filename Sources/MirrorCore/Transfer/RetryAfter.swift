import MirrorKit

/// Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date in the preferred
/// IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`, §5.6.7).
public enum RetryAfter {
    /// Seconds to wait from `now` (seconds since the epoch); nil when unparseable. Never negative.
    public static func seconds(from value: String, now: Double = currentUnixTime()) -> Double? {
        let t = value.trimmingSpaces
        if !t.isEmpty, t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            return Double(String(t.prefix(9)))
        }
        guard let date = parseIMFFixdate(t) else { return nil }
        return max(0, Double(date) - now)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` → seconds since the epoch.
    public static func parseIMFFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int64(parts[1]), parts[1].count == 2,
              let year = Int64(parts[3]), parts[3].count == 4 else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let h = Int64(clock[0]), let m = Int64(clock[1]), let s = Int64(clock[2]),
              (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(s) else { return nil }
        return daysFromCivil(year: year, month: Int64(monthIndex + 1), day: day) * 86400 + h * 3600 + m * 60 + s
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
