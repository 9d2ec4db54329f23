/// Byte counts and durations as people read them in cron mail.
public enum Formatting {
    /// `734003200` → `700.0 MiB`.
    public static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(n) B" }
        let tenths = (value * 10).rounded() / 10
        return "\(tenths) \(units[unit])"
    }

    /// `3.2` → `3.2 s`, `125` → `2m 5s`.
    public static func duration(_ seconds: Double) -> String {
        if seconds < 60 { return "\((seconds * 10).rounded() / 10) s" }
        let s = Int(seconds.rounded())
        if s < 3600 { return "\(s / 60)m \(s % 60)s" }
        return "\(s / 3600)h \(s % 3600 / 60)m"
    }
}
