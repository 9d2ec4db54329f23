import MirrorKit

/// `--limit-rate`: the run's download cap, one rate (`2M`) or a timetable in the form of rclone's
/// `--bwlimit` (https://rclone.org/docs/#bwlimit-bwtimetable): `"08:00,2M 18:00,20M 23:00,off"`,
/// entries separated by spaces or `;`, each `[DAY-]HH:MM,RATE`. Facts in (the local day and time),
/// a rate out, unit-tested without a server (`Tests/MirrorCoreTests/Policy/RateScheduleTests.swift`);
/// the transfer thread's token bucket (``RateLimiter``) asks it as the run goes on, so a run that
/// crosses a boundary changes its cap without restarting a transfer.
///
/// The rate in force is that of the latest entry at or before the time, over the week: an entry
/// without a day stands for the same time on each of the seven days, and before the week's first
/// entry the week's last one still holds (so `"08:00,2M 23:00,off"` is unlimited from 23:00 to
/// 08:00 the next morning). Times are the machine's local time (`localtime_r(3)`, with `TZ`):
/// when a daylight-saving change skips an hour, an entry in it takes effect when the clock passes
/// it; when an hour repeats, its entries apply twice.
public struct RateSchedule: Sendable, Equatable, CustomStringConvertible {
    /// From ``weekMinute`` on, the cap is ``rate`` bytes per second (nil: no cap).
    public struct Slot: Sendable, Equatable {
        /// Minutes since Sunday 00:00, 0 ..< 10080.
        public var weekMinute: Int
        public var rate: Int64?

        public init(weekMinute: Int, rate: Int64?) {
            self.weekMinute = weekMinute
            self.rate = rate
        }
    }

    /// Never empty; sorted by ``Slot/weekMinute``, no two at one minute.
    public let slots: [Slot]
    /// The text as given (trimmed), for ``description``.
    private let text: String

    public static let minutesPerWeek = 7 * 24 * 60

    /// One rate at all times (nil: no cap).
    public init(constant rate: Int64?) {
        slots = [Slot(weekMinute: 0, rate: rate)]
        text = rate.map { ByteRate(bytesPerSecond: $0).description } ?? "off"
    }

    init(slots: [Slot], text: String) {
        self.slots = slots
        self.text = text
    }

    /// The cap at `time`: that of the latest entry at or before it in the week, wrapping to the
    /// week's last entry before the first.
    public func rate(at time: WeekTime) -> Int64? {
        let minute = time.weekMinute
        var current = slots[slots.count - 1]
        for slot in slots {
            guard slot.weekMinute <= minute else { break }
            current = slot
        }
        return current.rate
    }

    /// The same rate at every time of the week: the limiter need never look at the clock.
    public var isConstant: Bool { slots.allSatisfy { $0.rate == slots[0].rate } }

    /// No cap at any time (`--limit-rate off`).
    public var isUnlimited: Bool { slots.allSatisfy { $0.rate == nil } }

    /// The lowest cap it ever sets, nil when it never sets one: what a transfer may be held to,
    /// for the low-speed abort (`CURLOPT_LOW_SPEED_LIMIT`) not to take the cap for a stall.
    public var lowestRate: Int64? { slots.compactMap(\.rate).min() }

    /// The text it was read from, which ``init(parsing:)`` reads back.
    public var description: String { text }
}

/// A moment of the week in local time, as the schedule reads it: the day and the minute.
public struct WeekTime: Sendable, Equatable, CustomStringConvertible {
    /// 0 for Sunday to 6 for Saturday, as `struct tm`'s `tm_wday`.
    public var weekday: Int
    public var hour: Int
    public var minute: Int

    public init(weekday: Int, hour: Int, minute: Int) {
        self.weekday = weekday
        self.hour = hour
        self.minute = minute
    }

    /// Minutes since Sunday 00:00.
    public var weekMinute: Int { (weekday * 24 + hour) * 60 + minute }

    /// `Mon-08:00`: the form of a timetable entry's time.
    public var description: String {
        let two = { (n: Int) in n < 10 ? "0\(n)" : "\(n)" }
        return "\(RateSchedule.dayNames[weekday])-\(two(hour)):\(two(minute))"
    }
}
