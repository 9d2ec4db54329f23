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
        try Self(parsing: text)
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
        try RateSchedule(parsing: text)
    }
}
