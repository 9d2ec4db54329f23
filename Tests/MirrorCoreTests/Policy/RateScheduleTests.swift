import Testing
import MirrorCore
import MirrorKit

/// `--limit-rate` timetables without a server (``RateSchedule``): the grammar of rclone's
/// `--bwlimit` (docs/cli.md, "Bandwidth schedule"), the rate at a time of the week, and the
/// reasons a person reads for a wrong entry.
struct RateScheduleTests {
    static func at(_ text: String) throws -> WeekTime { try #require(WeekTime(parsing: text)) }

    @Test func aPlainRateIsOneRateAtEveryTime() throws {
        let schedule = try RateSchedule(parsing: "2M")
        #expect(schedule.isConstant && !schedule.isUnlimited)
        #expect(schedule.rate(at: try Self.at("Wed-13:37")) == 2 << 20)
        #expect(try RateSchedule(parsing: "off").isUnlimited)
        #expect(try RateSchedule(parsing: "10M:512K").rate(at: try Self.at("Sun-00:00")) == 512 << 10, "rclone's UPLOAD:DOWNLOAD: the download side")
    }

    @Test func theLatestEntryAtOrBeforeTheTimeHoldsAndTheDayWrapsAround() throws {
        let schedule = try RateSchedule(parsing: "08:00,2M 18:00,20M 23:00,off")
        #expect(!schedule.isConstant)
        #expect(schedule.rate(at: try Self.at("Mon-07:59")) == nil, "23:00's off holds until 08:00")
        #expect(schedule.rate(at: try Self.at("Mon-08:00")) == 2 << 20)
        #expect(schedule.rate(at: try Self.at("Mon-17:59")) == 2 << 20)
        #expect(schedule.rate(at: try Self.at("Mon-18:00")) == 20 << 20)
        #expect(schedule.rate(at: try Self.at("Mon-23:00")) == nil)
        #expect(schedule.rate(at: try Self.at("Sun-00:00")) == nil, "Saturday 23:00 wraps into Sunday")
        #expect(schedule.lowestRate == 2 << 20)
    }

    @Test func daysNameOneDayAndTheWeekWraps() throws {
        let schedule = try RateSchedule(parsing: "Mon-08:00,512K; Fri-18:00,off;sat-10:00,1M  Sunday-20:00,off")
        #expect(schedule.rate(at: try Self.at("Mon-07:00")) == nil, "Sunday 20:00 holds until Monday 08:00")
        #expect(schedule.rate(at: try Self.at("Mon-08:00")) == 512 << 10)
        #expect(schedule.rate(at: try Self.at("Thu-23:00")) == 512 << 10, "a day's entry holds over the days after it")
        #expect(schedule.rate(at: try Self.at("Fri-18:00")) == nil)
        #expect(schedule.rate(at: try Self.at("Sat-10:00")) == 1 << 20)
        #expect(schedule.rate(at: try Self.at("Sun-19:59")) == 1 << 20)
        #expect(schedule.slots.count == 4)
        // A day's entry and an every-day entry mix: the every-day one stands for each day.
        let mixed = try RateSchedule(parsing: "08:00,1M Sat-09:00,off")
        #expect(mixed.rate(at: try Self.at("Sat-08:30")) == 1 << 20)
        #expect(mixed.rate(at: try Self.at("Sat-09:00")) == nil)
        #expect(mixed.rate(at: try Self.at("Sun-07:00")) == nil, "Saturday's off holds until Sunday 08:00")
        #expect(mixed.rate(at: try Self.at("Sun-08:00")) == 1 << 20)
    }

    @Test func theTextReadsBack() throws {
        for text in ["2M", "off", "08:00,2M 18:00,20M 23:00,off", "Mon-08:00,512K"] {
            #expect(try RateSchedule(parsing: text).description == text)
        }
        #expect(try Self.at("Mon-08:05").description == "Mon-08:05")
    }

    @Test func eachWrongEntryIsNamedWithWhatWasExpected() {
        let cases: [(String, RateScheduleError, String)] = [
            ("08:00,2M 8:00,1M", .entry(number: 2, entry: "8:00,1M", problem: .time("8:00")), "use HH:MM from 00:00 to 23:59"),
            ("08:00,2M 24:00,1M", .entry(number: 2, entry: "24:00,1M", problem: .time("24:00")), "HH:MM"),
            ("Mo-08:00,2M", .entry(number: 1, entry: "Mo-08:00,2M", problem: .day("Mo")), "use Mon, Tue, Wed"),
            ("08:00,fast 09:00,off", .entry(number: 1, entry: "08:00,fast", problem: .rate("fast", .notARate)), "is not a rate"),
            ("08:00,0", .entry(number: 1, entry: "08:00,0", problem: .rate("0", .zeroRate)), "write off for no limit"),
            ("08:00,2M 09:00", .entry(number: 2, entry: "09:00", problem: .shape), "an entry is [DAY-]HH:MM,RATE"),
            ("08:00", .entry(number: 1, entry: "08:00", problem: .shape), "an entry is [DAY-]HH:MM,RATE"),
            ("08:00,1M,2M", .entry(number: 1, entry: "08:00,1M,2M", problem: .shape), "such as 08:00,2M"),
            ("08:00,2M Tue-08:00,off", .entry(number: 2, entry: "Tue-08:00,off",
                                              problem: .sameTimeAs(1, WeekTime(weekday: 2, hour: 8, minute: 0))), "entry 1 already sets the rate at Tue-08:00"),
            ("fast", .rate(.notARate), "such as 500K, 20M or 1G"),
            ("", .rate(.notARate), "or a timetable such as"),
            (" ; ", .rate(.notARate), "or a timetable such as"),
            ("0", .rate(.zeroRate), "leave the option out for no limit"),
        ]
        for (text, error, words) in cases {
            #expect(throws: error, "\(text)") { try RateSchedule(parsing: text) }
            #expect(error.description.contains(words), "\(error.description)")
            #expect(error.exitStatus == 64)
        }
        #expect(RateScheduleError.entry(number: 2, entry: "8:00,1M", problem: .time("8:00")).description
                    .hasPrefix("entry 2 of the timetable, \"8:00,1M\": \"8:00\" is not a time"))
    }
}
