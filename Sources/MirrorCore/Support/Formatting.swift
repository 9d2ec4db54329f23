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

    /// Parses `45m`, `2h`, `30s`, `1h30m`, `500ms`, or a plain number of seconds.
    public static func parseDuration(_ text: String) -> Double? {
        let t = text.trimmingSpaces.lowercased()
        if let plain = Double(t), plain >= 0 { return plain }
        var total = 0.0
        var number = ""
        var index = t.startIndex
        var sawUnit = false
        while index < t.endIndex {
            let c = t[index]
            if c.isNumber || c == "." {
                number.append(c)
                index = t.index(after: index)
                continue
            }
            var unit = String(c)
            let next = t.index(after: index)
            if c == "m", next < t.endIndex, t[next] == "s" { unit = "ms" }
            guard let value = Double(number) else { return nil }
            switch unit {
            case "ms": total += value / 1000
            case "s": total += value
            case "m": total += value * 60
            case "h": total += value * 3600
            case "d": total += value * 86400
            default: return nil
            }
            number = ""
            sawUnit = true
            index = t.index(index, offsetBy: unit.count)
        }
        guard number.isEmpty, sawUnit else { return nil }
        return total
    }
}
