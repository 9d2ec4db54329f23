import ArgumentParser
import MirrorCore
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// `--include`, `--exclude` and `--filter-from`, shared by `sync`, `status` and `verify`: which of
/// the manifest's entries this machine syncs (``PathFilter``; docs/cli.md, "Choosing what a
/// machine syncs"). `status` and `verify` take the same options so they count the same set.
struct SelectionOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Sync the entries whose path matches PATTERN (rsync-style: *, **, ?, [..]; a leading / anchors it at DEST's top). Repeatable; the last --include/--exclude that matches a path decides.", valueName: "PATTERN"))
    var include: [String] = []

    @Option(name: .long, help: ArgumentHelp("Leave out the entries whose path matches PATTERN: neither fetched nor deleted. Repeatable.", valueName: "PATTERN"))
    var exclude: [String] = []

    @Option(name: .long, help: ArgumentHelp("Read rules from FILE, one a line: \"+ PATTERN\" includes, \"- PATTERN\" excludes; # starts a comment.", valueName: "FILE"))
    var filterFrom: [String] = []

    var isEmpty: Bool { include.isEmpty && exclude.isEmpty && filterFrom.isEmpty }

    func validate() throws {
        guard ParseOrder.checksMeaning else { return }
        for (option, patterns) in [("--include", include), ("--exclude", exclude)] {
            for pattern in patterns {
                do { _ = try GlobPattern(pattern) } catch { throw ValidationError("\(option) '\(pattern)': \(error.reason)") }
            }
        }
    }

    /// The rules in the order the command line gives them, or nil without any. The parser keeps
    /// each option's values in order, but not how the three options interleave, which decides
    /// (the last matching rule wins), so the order is read again from the process's arguments.
    /// Exits 64 for a `--filter-from` file that cannot be read or holds a line that is no rule.
    func filter(arguments: [String] = Array(CommandLine.arguments.dropFirst())) throws -> PathFilter? {
        guard !isEmpty else { return nil }
        var rules: [PathFilter.Rule] = []
        for (option, value) in try ordered(arguments) {
            switch option {
            case "--include": rules.append(PathFilter.Rule(.include, try GlobPattern(value), origin: option))
            case "--exclude": rules.append(PathFilter.Rule(.exclude, try GlobPattern(value), origin: option))
            default: rules += try readRules(value)
            }
        }
        return PathFilter(rules: rules)
    }

    /// ``filter(arguments:)``, or the message on standard error and exit 64 (docs/cli.md, "Exit codes").
    func filterOrExit() throws -> PathFilter? {
        do {
            return try filter()
        } catch let error as ValidationError {
            ConsoleReport(mode: .text).fatal(error.message)
            throw ExitCode(ExitStatus.usage)
        }
    }

    /// `(option, value)` for each of the three options, in argument order, checked against what
    /// the parser decoded for each.
    private func ordered(_ arguments: [String]) throws -> [(String, String)] {
        let names = ["--include", "--exclude", "--filter-from"]
        var found: [(String, String)] = []
        var i = 0
        while i < arguments.count, arguments[i] != "--" {
            let argument = arguments[i]
            if names.contains(argument), i + 1 < arguments.count {
                found.append((argument, arguments[i + 1]))
                i += 2
                continue
            }
            if let name = names.first(where: { argument.hasPrefix($0 + "=") }) {
                found.append((name, String(argument.dropFirst(name.count + 1))))
            }
            i += 1
        }
        let decoded = [("--include", include), ("--exclude", exclude), ("--filter-from", filterFrom)]
        guard decoded.allSatisfy({ name, values in found.filter { $0.0 == name }.map(\.1) == values }) else {
            throw ValidationError("cannot tell in which order --include, --exclude and --filter-from were given; "
                                  + "write each as --include=PATTERN, --exclude=PATTERN, --filter-from=FILE")
        }
        return found
    }

    /// The most a rules file may hold: rules are lines of patterns, and `/dev/zero` once had the
    /// run allocate 2 GB before it failed.
    static let largestRulesFile = 16 << 20

    private func readRules(_ path: String) throws -> [PathFilter.Rule] {
        // A FIFO without a writer would block the open for ever (a cron job that never ends), and a
        // device has no end: only a regular file is read.
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            let what = info.st_mode & S_IFMT == S_IFIFO ? "a FIFO" : info.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file"
            throw ValidationError("--filter-from \(path): \(what); give a file of rules (one pattern a line)")
        }
        let bytes: [UInt8]
        do {
            bytes = try WholeFile.read(path, limit: Self.largestRulesFile)
        } catch let failure as WholeFile.Failure where failure.errno == EFBIG {
            throw ValidationError("--filter-from \(path): larger than \(Self.largestRulesFile >> 20) MiB; a file of rules has a pattern a line")
        } catch let failure as WholeFile.Failure {
            throw ValidationError("--filter-from \(path): cannot read it: \(String(cString: strerror(failure.errno)))")
        }
        do {
            return try PathFilter.rules(fromFile: bytes, name: path)
        } catch {
            throw ValidationError("--filter-from \(error.description)")
        }
    }
}
