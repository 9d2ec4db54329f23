import MirrorFS

/// RFC 3339 §5.6 `date-time` parsing into a `FileTime` (UTC seconds since the Unix epoch + ns).
///
/// Written out rather than using Foundation's date formatters: they accept more than the grammar
/// (lenient fields, locale effects), differ across platforms, and drop digits of the fraction; here
/// every rule is explicit and all 9 fractional digits survive, as `struct timespec` can hold them.
public enum RFC3339 {
    /// Why a text is not a timestamp, phrased to follow `mtime "…" `.
    public struct Failure: Error, Equatable { public var reason: String }

    /// `full-date "T" full-time`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`. `T` and `Z` may be lower
    /// case (§5.6 NOTE). The fraction may have 1 to 9 digits. Second 60 (a leap second, §5.7) is
    /// accepted and counts as the first second of the next minute, which is what POSIX time does.
    public static func parse(_ text: String) -> Result<FileTime, Failure> {
        parse(bytes: Array(text.utf8)[...])
    }

    /// The same, on UTF-8 bytes (the manifest loader passes a slice of its scalar arena).
    static func parse(bytes: ArraySlice<UInt8>) -> Result<FileTime, Failure> {
        let b = bytes
        let end = b.endIndex
        let shape = "is not an RFC 3339 timestamp like \"2026-11-01T12:00:00Z\""
        var i = b.startIndex
        func digits(_ n: Int) -> Int? {
            guard i + n <= end else { return nil }
            var v = 0
            for k in i ..< i + n {
                guard URLReference.isDigit(b[k]) else { return nil }
                v = v * 10 + Int(b[k] - UInt8(ascii: "0"))
            }
            i += n
            return v
        }
        func expect(_ c: Unicode.Scalar, or other: Unicode.Scalar? = nil) -> Bool {
            guard i < end, b[i] == UInt8(ascii: c) || (other.map { b[i] == UInt8(ascii: $0) } ?? false) else {
                return false
            }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              expect("T", or: "t"), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
              let second = digits(2) else { return .failure(Failure(reason: shape)) }
        var nanos = 0
        if i < end, b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < end, URLReference.isDigit(b[i]) { i += 1 }
            let count = i - start
            guard count >= 1 else { return .failure(Failure(reason: shape)) }
            guard count <= 9 else {
                return .failure(Failure(reason: "has \(count) fractional digits; at most 9 (nanoseconds) are allowed"))
            }
            for k in start ..< i { nanos = nanos * 10 + Int(b[k] - UInt8(ascii: "0")) }
            for _ in count ..< 9 { nanos *= 10 }
        }
        var offset = 0
        if expect("Z", or: "z") {
        } else if i < end, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(":"), let om = digits(2) else { return .failure(Failure(reason: shape)) }
            guard oh <= 23, om <= 59 else {
                return .failure(Failure(reason: "has an invalid time zone offset; expected -23:59 to +23:59"))
            }
            offset = sign * (oh * 3600 + om * 60)
        } else {
            return .failure(Failure(reason: shape + " (it needs a time zone: Z or ±HH:MM)"))
        }
        guard i == end else { return .failure(Failure(reason: shape)) }

        guard (1...12).contains(month) else { return .failure(Failure(reason: "has month \(month); expected 01 to 12")) }
        let monthLength = daysIn(month: month, year: year)
        guard (1...monthLength).contains(day) else {
            return .failure(Failure(reason: "has day \(day), but month \(month) of \(year) has \(monthLength) days"))
        }
        guard hour <= 23 else { return .failure(Failure(reason: "has hour \(hour); expected 00 to 23")) }
        guard minute <= 59 else { return .failure(Failure(reason: "has minute \(minute); expected 00 to 59")) }
        guard second <= 60 else { return .failure(Failure(reason: "has second \(second); expected 00 to 60")) }

        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
        return .success(FileTime(seconds: seconds, nanoseconds: Int64(nanos)))
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar: Howard Hinnant's
    /// `days_from_civil` ("chrono-Compatible Low-Level Date Algorithms"), exact for every year.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400                                        // [0, 399]
        let mp = (month + 9) % 12                                      // March = 0
        let doy = (153 * mp + 2) / 5 + day - 1                         // [0, 365]
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy                // [0, 146096]
        return era * 146_097 + doe - 719_468
    }

    /// `time` as ``parse(_:)`` reads it back exactly, in UTC: `2026-11-01T12:00:00Z`, with the
    /// nanoseconds as a fraction when there are any (`…:00.5Z`, trailing zeros dropped), so the
    /// same time is always the same text. Nil for a year outside 0000–9999, which the
    /// four-digit `date-fullyear` of RFC 3339 §5.6 cannot hold.
    public static func format(_ time: FileTime) -> String? {
        let days = Int(time.seconds >= 0 ? time.seconds / 86_400 : (time.seconds - 86_399) / 86_400)
        let second = Int(time.seconds - Int64(days) * 86_400)
        let (year, month, day) = civilFromDays(days)
        guard (0...9999).contains(year), (0 ..< 1_000_000_000).contains(time.nanoseconds) else { return nil }
        func pad(_ n: Int, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        var text = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(second / 3600, 2)):\(pad(second / 60 % 60, 2)):\(pad(second % 60, 2))"
        if time.nanoseconds > 0 {
            var fraction = pad(Int(time.nanoseconds), 9)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    /// The date of a day counted from 1970-01-01: Howard Hinnant's `civil_from_days`, the
    /// inverse of ``daysFromCivil(year:month:day:)``.
    static func civilFromDays(_ z: Int) -> (year: Int, month: Int, day: Int) {
        let z = z + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097                                    // [0, 146096]
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365  // [0, 399]
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)              // [0, 365]
        let mp = (5 * doy + 2) / 153                                   // [0, 11]
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
