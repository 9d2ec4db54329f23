/// Why a command-line value (a size, a duration, a rate) was refused, worded for the person who
/// typed it: each case says what form is expected, with examples. The argument parser prints it
/// after "The value 'X' is invalid for '--option <VALUE>': ", so it does not repeat the value or
/// the option's name.
public enum ArgumentValueError: Error, Equatable, CustomStringConvertible {
    /// Not a number of bytes with an optional binary unit.
    case notASize
    /// A plain number given as a duration: `3` could mean seconds, minutes or hours, and
    /// `--deadline 45` in a cron line was once read as 45 seconds. Carries the number, to suggest
    /// it with units.
    case durationWithoutUnit(String)
    /// Not numbers with units of time.
    case notADuration
    /// A duration below what the option allows (in seconds).
    case durationBelow(minimum: TimeSpan)
    /// Not bytes per second with an optional binary unit.
    case notARate
    /// Zero bytes per second: no transfer could ever finish.
    case zeroRate
    /// Not a count of files or a percentage (`--max-delete`).
    case notADeleteLimit
    /// Not an `http://` or `https://` base URL (`--prefer`).
    case notABaseURL

    public var description: String {
        switch self {
        case .notASize:
            return "a size is a number of bytes with an optional unit K, M, G or T (powers of 1024), such as 64M, 1.5G or 4096"
        case .durationWithoutUnit(let number):
            return "add a unit to the duration, such as \(number)s, \(number)m or \(number)h "
                + "(units: ms, s, m, h, d; combine them as 1h30m)"
        case .notADuration:
            return "a duration is a number with a unit ms, s, m, h or d, such as 90s, 45m, 2h or 1h30m"
        case .durationBelow(let minimum):
            return "the duration must be at least \(minimum)"
        case .notARate:
            return "a rate is bytes per second with an optional unit K, M or G (powers of 1024), such as 500K, 20M or 1G"
        case .zeroRate:
            return "a rate must be at least 1 byte per second (leave the option out for no limit)"
        case .notADeleteLimit:
            return "give a number of files, such as 100, or a percentage of the files mirror knows in DEST, such as 10%"
        case .notABaseURL:
            return "give an http:// or https:// base URL without a query, such as http://cache.lab:8080/set/ (each file is asked at it + its path)"
        }
    }
}
