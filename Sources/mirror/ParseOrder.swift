import ArgumentParser

/// Reports a mistake in the words of a command line before a check of what they mean.
///
/// swift-argument-parser calls a command's `validate()` as soon as it has decoded the command,
/// and looks for unknown options only afterwards (a subcommand might still have taken them). So
/// `mirror sync URL --dets DEST` said "a manifest URL needs --dest DIR", a consequence of the
/// typo, while `--dets` went unnamed (docs/cli.md, "Commands"). When parsing fails, the arguments are
/// parsed once more with the `validate()` checks off: an error of that pass (an unknown option
/// with the parser's "did you mean", a malformed value, a missing argument) is the first mistake
/// and is reported instead. A command line that parses costs no second pass.
enum ParseOrder {
    /// Off only during the second pass; each `validate()` returns at once when it is off.
    @TaskLocal static var checksMeaning = true

    /// The error to report for `arguments`, whose parse failed with `failure`.
    static func firstError(of arguments: [String], after failure: Error) -> Error {
        if let unknown = CommandSuggestion.unknownCommand(in: arguments, root: Mirror.self) { return unknown }
        if let dest = destWithoutOption(in: arguments) { return dest }
        do {
            _ = try $checksMeaning.withValue(false) { try Mirror.parseAsRoot(arguments) }
        } catch let wordsAlone {
            return wordsAlone
        }
        return failure
    }

    /// `mirror sync MANIFEST DEST`, rsync's habit, which the parser calls an unexpected argument:
    /// when the words parse with `--dest` put before one of them (the last first), that is the
    /// mistake to name. Decided by the parser, not by its message.
    static func destWithoutOption(in arguments: [String]) -> ValidationError? {
        guard let command = arguments.first, ["sync", "status", "verify"].contains(command),
              !arguments.contains(where: { $0 == "--dest" || $0.hasPrefix("--dest=") }) else { return nil }
        for i in arguments.indices.dropFirst(2).reversed() where !arguments[i].hasPrefix("-") {
            var fixed = arguments
            fixed.insert("--dest", at: i)
            if (try? $checksMeaning.withValue(false) { try Mirror.parseAsRoot(fixed) }) != nil {
                return ValidationError("Unexpected argument '\(arguments[i])': the destination goes after --dest "
                                       + "(mirror \(command) MANIFEST --dest \(arguments[i]))")
            }
        }
        return nil
    }
}
