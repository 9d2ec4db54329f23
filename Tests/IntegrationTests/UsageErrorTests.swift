import Foundation
import Testing
import MirrorTestSupport

/// Usage errors as an admin meets them at a shell or in cron mail (docs/cli.md,
/// exit codes): exit 64, the parser's message naming the mistake and the form expected, and
/// nothing done. Each runs the binary with no server: a usage error must not need one.
@Suite struct UsageErrorTests {
    /// Runs `mirror ARGS` in a fresh folder (relative paths land there) and returns the result.
    private func mirror(_ arguments: [String]) throws -> (result: ProcessResult, dir: TemporaryDirectory) {
        let dir = try TemporaryDirectory()
        let result = try Mirror.run(arguments, cwd: dir.path(""), timeout: 30)
        return (result, dir)
    }

    /// A mistyped option is named (with "did you mean"), not the missing --dest it caused.
    @Test func anUnknownOptionIsReportedBeforeTheMissingDestItCaused() throws {
        let (result, dir) = try mirror(["sync", "https://127.0.0.1:9/m.yaml", "--dets", "DEST"])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("Unknown option '--dets'. Did you mean '--dest'?"), "\(result.stderr)")
        #expect(!result.stderr.contains("needs --dest"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("DEST")))
    }

    /// An unknown option is reported before any validate() check: first, whatever else is wrong.
    @Test func anUnknownOptionComesBeforeEveryCheckOfTheOthers() throws {
        let (result, _) = try mirror(["sync", "m.yaml", "--jobs", "0", "--quite"])
        #expect(result.exitCode == 64, "\(result)")
        #expect(result.stderr.contains("Unknown option '--quite'. Did you mean '--quiet'?"), "\(result.stderr)")
        #expect(!result.stderr.contains("--jobs must be"), "\(result.stderr)")
    }

    /// A mistyped command gets the nearest one.
    @Test func aMistypedCommandGetsTheNearestOne() throws {
        for (typed, meant) in [(["synk"], "mirror sync"), (["stauts", "m.yaml"], "mirror status"),
                               (["manifest", "craete", "dir"], "mirror manifest create")] {
            let (result, _) = try mirror(typed)
            #expect(result.exitCode == 64, "\(typed): \(result)")
            #expect(result.stderr.contains("Did you mean '\(meant)'?"), "\(typed): \(result.stderr)")
        }
    }

    /// DEST as a second argument, rsync's habit: the parser's "unexpected argument" with the
    /// `--dest` it was meant to be.
    @Test func aDestinationGivenAsASecondArgumentIsShownWithDest() throws {
        for command in ["sync", "status", "verify"] {
            let (result, dir) = try mirror([command, "m.yaml", "--jobs", "4", "/srv/lab"].filter { command == "sync" || !["--jobs", "4"].contains($0) })
            #expect(result.exitCode == 64, "\(command): \(result)")
            #expect(result.stderr.contains("Unexpected argument '/srv/lab': the destination goes after --dest (mirror \(command) MANIFEST --dest /srv/lab)"),
                    "\(command): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir.path("m.yaml")))
        }
        // Another stray word is left to the parser's own words.
        let (other, _) = try mirror(["sync", "m.yaml", "--dest", "DEST", "extra"])
        #expect(other.exitCode == 64 && other.stderr.contains("Unexpected argument 'extra'") && !other.stderr.contains("goes after --dest"),
                "\(other.stderr)")
    }

    /// A value with a comment after it, as a systemd EnvironmentFile keeps it (`DEADLINE=50m  # …`):
    /// the reason, and where the `#` came from.
    @Test func aCommentKeptInAConfValueIsNamed() throws {
        for (option, value) in [("--deadline", "50m   # keep it below the timer's period"), ("--limit-rate", "20M # by day")] {
            let (result, _) = try mirror(["sync", "m.yaml", "--dest", "DEST", option, value])
            #expect(result.exitCode == 64, "\(option): \(result)")
            #expect(result.stderr.contains("the value holds a '#': a comment after a value in /etc/mirror/NAME.conf"), "\(result.stderr)")
        }
        // The example conf the package ships puts every comment on a line of its own.
        let conf = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../contrib/systemd/mirror.conf")
        for line in try String(contentsOf: conf, encoding: .utf8).split(separator: "\n") {
            let setting = line.hasPrefix("#") ? line.dropFirst() : line[...]
            guard let equals = setting.firstIndex(of: "="), setting[..<equals].allSatisfy({ $0.isUppercase || $0 == "_" }),
                  !setting[..<equals].isEmpty else { continue }
            #expect(!setting[equals...].contains("#"), "a value with a comment after it: \(line)")
        }
    }

    /// `--filter-from` names a file of rules: a device (`/dev/zero` once allocated 2 GB before it
    /// failed) or a FIFO with no writer (the run waited for ever) is refused at once.
    @Test func aFilterFromThatIsNoRegularFileIsRefusedAtOnce() throws {
        let dir = try TemporaryDirectory()
        let fifo = dir.path("rules.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        for (path, what) in [("/dev/zero", "not a regular file"), (fifo, "a FIFO"), (dir.path(""), "a folder")] {
            let result = try Mirror.run(["sync", "m.yaml", "--dest", dir.path("DEST"), "--filter-from", path], timeout: 30)
            #expect(result.exitCode == 64, "\(path): \(result)")
            #expect(result.stderr.contains("--filter-from \(path): \(what); give a file of rules"), "\(result.stderr)")
        }
    }

    /// A duration needs its unit: `--deadline 45`, meant as minutes, once stopped the run after 45 s.
    @Test func aDurationWithoutAUnitIsRefusedWithTheUnitsToAdd() throws {
        for option in ["--deadline", "--stall-timeout", "--jitter"] {
            let (result, _) = try mirror(["sync", "m.yaml", "--dest", "DEST", option, "45"])
            #expect(result.exitCode == 64, "\(option): \(result)")
            #expect(result.stderr.contains("The value '45' is invalid for '\(option) <DURATION>'"), "\(result.stderr)")
            #expect(result.stderr.contains("add a unit to the duration, such as 45s, 45m or 45h"), "\(result.stderr)")
        }
    }

    /// A bad size, duration or rate is the parser's usage error and says what
    /// form is expected.
    @Test func aBadValueSaysWhatFormIsExpected() throws {
        let cases: [(String, String, String)] = [
            ("--segments-above", "lots", "such as 64M, 1.5G or 4096"),
            ("--deadline", "soon", "such as 90s, 45m, 2h or 1h30m"),
            ("--jitter", "-5s", "such as 90s, 45m, 2h or 1h30m"),
            ("--stall-timeout", "500ms", "the duration must be at least 1s"),
            ("--limit-rate", "fast", "such as 500K, 20M or 1G"),
            ("--limit-rate", "0", "leave the option out for no limit"),
            ("--prefer", "file:///srv/set/", "give an http:// or https:// base URL without a query"),
            ("--prefer", "http://cache/set/?x=1", "give an http:// or https:// base URL without a query"),
        ]
        for (option, value, expected) in cases {
            // With `=`, as a negative value needs: alone, `-5s` would read as an option.
            let (result, _) = try mirror(["sync", "m.yaml", "--dest", "DEST", "\(option)=\(value)"])
            #expect(result.exitCode == 64, "\(option) \(value): \(result)")
            #expect(result.stderr.contains("The value '\(value)' is invalid for '\(option) <"), "\(result.stderr)")
            #expect(result.stderr.contains(expected), "\(option) \(value): \(result.stderr)")
            #expect(result.stderr.contains("Usage: mirror sync"), "\(result.stderr)")
        }
    }

    /// The help states each form and default, from the same definitions as the man page.
    @Test func theHelpStatesTheFormsAndDefaults() throws {
        let (result, _) = try mirror(["sync", "--help"])
        #expect(result.exitCode == 0, "\(result)")
        let help = result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.contains("a number without a unit is refused"), "\(help)")
        #expect(help.contains("(default: 64M)"), "\(help)")
        #expect(help.contains("(default: 30s)"), "\(help)")
    }
}
