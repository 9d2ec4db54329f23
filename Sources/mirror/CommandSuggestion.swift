import ArgumentParser

/// "Did you mean" for a mistyped command name: `mirror synk`.
///
/// swift-argument-parser (1.8) suggests the nearest name for an unknown option only; for a word
/// that names no subcommand it says "Unexpected argument 'synk'". This finds the subcommand the
/// word was meant to be, by edit distance, as the parser does for options.
enum CommandSuggestion {
    /// A usage error naming the closest subcommand, when the first word that is not a subcommand
    /// (where a subcommand was expected) is within two edits of one; nil otherwise, and then the
    /// parser's own message stands.
    static func unknownCommand(in arguments: [String], root: ParsableCommand.Type) -> ValidationError? {
        var command = root
        var path = [root._commandName]
        for word in arguments {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty, !word.hasPrefix("-"), word != "help" else { return nil }
            if let next = subcommands.first(where: { names(of: $0).contains(word) }) {
                command = next
                path.append(next._commandName)
                continue
            }
            let nearest = subcommands
                .map { ($0._commandName, distance(word, $0._commandName)) }
                .filter { $0.1 <= 2 }
                .min { $0.1 < $1.1 }
            guard let (name, _) = nearest else { return nil }
            let prefix = path.joined(separator: " ")
            return ValidationError("Unknown command '\(prefix) \(word)'. Did you mean '\(prefix) \(name)'?")
        }
        return nil
    }

    private static func names(of command: ParsableCommand.Type) -> [String] {
        [command._commandName] + command.configuration.aliases
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
    /// neighbouring characters each count 1 (`synk` → `sync` is 1, `stauts` → `status` is 1).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
