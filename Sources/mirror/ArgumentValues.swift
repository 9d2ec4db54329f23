import ArgumentParser
import MirrorCore
import MirrorKit

/// Sizes, durations and rates as argument types: the parser reads each value once, and the
/// commands get a ``ByteCount``, ``TimeSpan`` or ``ByteRate``, never the text, so there is no
/// second parse in `run()` and no fallback for a value that did not parse.
///
/// `ExpressibleByArgument.init?(argument:)` can only answer nil, and the parser then says "the
/// value is invalid" without saying why. So the options pass ``parse(_:)`` as their `transform`:
/// a thrown ``ArgumentValueError`` is printed by the parser after its own "The value 'X' is
/// invalid for '--option <VALUE>'", as a usage error (exit 64), with the form expected.
public protocol ReasonedArgument: ExpressibleByArgument, CustomStringConvertible {
    init(parsing text: String) throws(ArgumentValueError)
}

extension ReasonedArgument {
    public init?(argument: String) {
        try? self.init(parsing: argument)
    }

    /// The default as `--help` shows it: `64M`, `30s`, a form the option reads back.
    public var defaultValueDescription: String { description }

    /// For `@Option(transform:)`.
    @Sendable public static func parse(_ text: String) throws -> Self {
        do {
            return try Self(parsing: text)
        } catch {
            throw ValueWithComment.unless(text, error)
        }
    }
}

/// A value that did not parse and holds a `#`: most likely a comment that a systemd
/// `EnvironmentFile=` kept in the value (`DEADLINE=50m   # keep it below the period` gives
/// `--deadline "50m   # keep it below the period"`: systemd.exec(5) has no trailing comments).
/// Said with the reason, so the conf line can be put right.
struct ValueWithComment: Error, CustomStringConvertible {
    var reason: String

    var description: String {
        reason + "; the value holds a '#': a comment after a value in /etc/mirror/NAME.conf (a systemd "
            + "EnvironmentFile) or a shell variable becomes part of the value, so put comments on lines of their own"
    }

    /// `error`, or the same with the hint when `text` holds a `#`.
    static func unless(_ text: String, _ error: Error) -> Error {
        text.contains("#") ? ValueWithComment(reason: "\(error)") : error
    }
}

extension ByteCount: ReasonedArgument {}
extension TimeSpan: ReasonedArgument {}
extension ByteRate: ReasonedArgument {}
extension DeleteLimit: ReasonedArgument {}

/// `--limit-rate`: one rate or an rclone-style timetable (``RateSchedule``). Not a
/// ``ReasonedArgument``, whose reasons are ``ArgumentValueError``s: a timetable's reason names
/// the entry (``RateScheduleError``).
extension RateSchedule: ExpressibleByArgument {
    public init?(argument: String) {
        try? self.init(parsing: argument)
    }

    public var defaultValueDescription: String { description }

    /// For `@Option(transform:)`: the thrown reason is printed after the parser's own words.
    @Sendable public static func parse(_ text: String) throws -> RateSchedule {
        do {
            return try RateSchedule(parsing: text)
        } catch {
            throw ValueWithComment.unless(text, error)
        }
    }
}
