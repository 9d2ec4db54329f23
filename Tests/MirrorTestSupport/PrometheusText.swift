/// A strict reader of the Prometheus text exposition format (version 0.0.4) as node_exporter's
/// textfile collector reads it, for tests of `--metrics-file`: every line must be a `# HELP`, a
/// `# TYPE` or a sample `name{label="value",...} number` of a metric declared before it.
public enum PrometheusText {
    nonisolated(unsafe) static let sampleLine = try? Regex(#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:\\.|[^"\\\n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:\\.|[^"\\\n])*")*\})? (-?[0-9]+(?:\.[0-9]+)?)$"#)
    nonisolated(unsafe) static let commentLine = try? Regex(#"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$"#)

    /// The samples, keyed by `name{labels}` exactly as written. Throws on the first line that is
    /// not valid, a sample without a preceding `# TYPE`, a duplicate, or a missing final newline.
    public static func parse(_ text: String) throws -> [String: Double] {
        guard let sampleLine, let commentLine else { throw HarnessError("PrometheusText: bad pattern") }
        guard text.hasSuffix("\n") else { throw HarnessError("metrics text does not end with a newline") }
        var typed: Set<String> = []
        var samples: [String: Double] = [:]
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let line = String(raw)
            if let m = line.wholeMatch(of: commentLine) {
                if m.output[1].substring == "TYPE" { typed.insert(String(m.output[2].substring ?? "")) }
                continue
            }
            guard let m = line.wholeMatch(of: sampleLine) else {
                throw HarnessError("line \(number + 1) is not a valid sample: \(line)")
            }
            let name = String(m.output[1].substring ?? "")
            guard typed.contains(name) else { throw HarnessError("line \(number + 1): \(name) has no # TYPE before it") }
            let key = name + String(m.output[2].substring ?? "")
            guard samples[key] == nil else { throw HarnessError("line \(number + 1): duplicate sample \(key)") }
            guard let value = Double(m.output[3].substring ?? "") else { throw HarnessError("line \(number + 1): bad value") }
            samples[key] = value
        }
        return samples
    }

    /// The one sample of `name` whose labels include every `label="value"` in `having`.
    public static func value(_ samples: [String: Double], _ name: String, having: [String] = []) -> Double? {
        let matching = samples.filter { key, _ in
            (key == name || key.hasPrefix(name + "{")) && having.allSatisfy { key.contains($0) }
        }
        return matching.count == 1 ? matching.first?.value : nil
    }
}
