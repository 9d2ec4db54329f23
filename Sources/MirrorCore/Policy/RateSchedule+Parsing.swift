import MirrorKit

/// Why a `--limit-rate` value was refused, worded for the person who typed it: which entry of a
/// timetable, and what was expected there. The argument parser prints it after "The value 'X' is
/// invalid for '--limit-rate <RATE>': " and exits 64.
public enum RateScheduleError: Error, Equatable, ExitCoded {
    /// A single value that is not a rate (``ByteRate``'s own reason).
    case rate(ArgumentValueError)
    /// Entry `number` (from 1), `entry` as written, is wrong in this way.
    case entry(number: Int, entry: String, problem: Problem)

    public enum Problem: Sendable, Equatable {
        /// Not `TIME,RATE`.
        case shape
        /// The part before `-` is not a day of the week.
        case day(String)
        /// Not `HH:MM` from 00:00 to 23:59.
        case time(String)
        /// Not a rate, `off`, or rclone's `UPLOAD:DOWNLOAD` pair of them.
        case rate(String, ArgumentValueError)
        /// Another entry (its number) sets the same day and time.
        case sameTimeAs(Int, WeekTime)
    }

    public var exitStatus: Int32 { ExitStatus.usage }

    public var description: String {
        switch self {
        case .rate(let reason):
            return reason.description + "; or a timetable such as \"08:00,2M 18:00,20M 23:00,off\""
        case .entry(let number, let entry, let problem):
            let head = "entry \(number) of the timetable, \"\(entry)\": "
            switch problem {
            case .shape:
                return head + "an entry is [DAY-]HH:MM,RATE, such as 08:00,2M or Mon-18:00,off (entries separated by spaces or ;)"
            case .day(let day):
                return head + "\"\(day)\" is not a day; use Mon, Tue, Wed, Thu, Fri, Sat or Sun (or the whole name), as in Mon-08:00,2M"
            case .time(let time):
                return head + "\"\(time)\" is not a time; use HH:MM from 00:00 to 23:59, local time, such as 08:00 or 23:30"
            case .rate(let rate, .zeroRate):
                return head + "the rate \"\(rate)\" is zero; write off for no limit, or at least 1 byte per second"
            case .rate(let rate, _):
                return head + "\"\(rate)\" is not a rate; use bytes per second with an optional unit K, M or G (500K, 20M), or off"
            case .sameTimeAs(let earlier, let time):
                return head + "entry \(earlier) already sets the rate at \(time); give each day and time once"
            }
        }
    }
}

extension RateSchedule {
    /// Day names as `struct tm` numbers them (0 is Sunday), three letters.
    static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let fullDayNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]

    /// Reads one rate (`2M`, `off`) or a timetable (`"08:00,2M 18:00,20M 23:00,off"`,
    /// `"Mon-08:00,512K Sat-00:00,off"`), the grammar of rclone's `--bwlimit`, but with mirror's
    /// units: a number without a unit is bytes per second here (rclone reads KiB), as in the plain
    /// `--limit-rate`. rclone's `UPLOAD:DOWNLOAD` pair is read as its download side, since mirror
    /// only downloads.
    public init(parsing given: String) throws(RateScheduleError) {
        let text = given.trimmingSpaces
        let entries = text.split(whereSeparator: { $0 == " " || $0 == ";" || $0 == "\t" }).map(String.init)
        guard !entries.isEmpty else { throw .rate(.notARate) }  // "" or " ; ": no entry at all
        if entries.count == 1 && !text.contains(",") {
            do {
                self.init(constant: try Self.rate(text))
            } catch {
                // `08:00` alone is an entry without its rate; anything else, a rate.
                if text.contains(":") && !text.contains(where: \.isLetter) {
                    throw .entry(number: 1, entry: text, problem: .shape)
                }
                throw .rate(error)
            }
            return
        }
        var slots: [Slot] = []
        var firstSetting: [Int: (number: Int, time: WeekTime)] = [:]
        for (index, entry) in entries.enumerated() {
            let number = index + 1
            func fail(_ problem: RateScheduleError.Problem) -> RateScheduleError { .entry(number: number, entry: entry, problem: problem) }
            let parts = entry.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw fail(.shape) }
            let when = String(parts[0]), rateText = String(parts[1])
            var days = Array(0 ..< 7)
            var clock = Substring(when)
            if let dash = when.firstIndex(of: "-") {
                let day = String(when[..<dash])
                guard let number = Self.day(named: day) else { throw fail(.day(day)) }
                days = [number]
                clock = when[when.index(after: dash)...]
            }
            guard let (hour, minute) = Self.clockTime(clock) else { throw fail(.time(String(clock))) }
            let rate: Int64?
            do { rate = try Self.rate(rateText) } catch { throw fail(.rate(rateText, error)) }
            for day in days {
                let time = WeekTime(weekday: day, hour: hour, minute: minute)
                if let earlier = firstSetting[time.weekMinute] { throw fail(.sameTimeAs(earlier.number, earlier.time)) }
                firstSetting[time.weekMinute] = (number, time)
                slots.append(Slot(weekMinute: time.weekMinute, rate: rate))
            }
        }
        self.init(slots: slots.sorted { $0.weekMinute < $1.weekMinute }, text: text)
    }

    /// `off` (no cap), a ``ByteRate``, or `UPLOAD:DOWNLOAD` of those (the download side).
    private static func rate(_ text: String) throws(ArgumentValueError) -> Int64? {
        let pair = text.split(separator: ":", omittingEmptySubsequences: false)
        if pair.count == 2 {
            _ = try rate(String(pair[0]))
            return try rate(String(pair[1]))
        }
        if text.lowercased() == "off" { return nil }
        return try ByteRate(parsing: text).bytesPerSecond
    }

    /// `Mon` or `monday`, any case, as `tm_wday` numbers it.
    static func day(named name: String) -> Int? {
        let lower = name.lowercased()
        return dayNames.firstIndex { $0.lowercased() == lower } ?? fullDayNames.firstIndex(of: lower)
    }

    /// `HH:MM`, two digits each, 00:00 to 23:59.
    static func clockTime(_ text: Substring) -> (Int, Int)? {
        let chars = Array(text.utf8)
        guard chars.count == 5, chars[2] == UInt8(ascii: ":") else { return nil }
        let digits = [chars[0], chars[1], chars[3], chars[4]]
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        let d = digits.map { Int($0 - UInt8(ascii: "0")) }
        let hour = d[0] * 10 + d[1], minute = d[2] * 10 + d[3]
        guard hour < 24, minute < 60 else { return nil }
        return (hour, minute)
    }
}

extension WeekTime {
    /// `Mon-08:00` (``description``'s form), or nil.
    public init?(parsing text: String) {
        let parts = text.trimmingSpaces.split(separator: "-")
        guard parts.count == 2, let day = RateSchedule.day(named: String(parts[0])),
              let (hour, minute) = RateSchedule.clockTime(parts[1]) else { return nil }
        self.init(weekday: day, hour: hour, minute: minute)
    }
}
