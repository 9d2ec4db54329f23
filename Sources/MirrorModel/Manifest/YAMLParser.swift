import CYAML
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A problem found while turning bytes into a `YAMLTree`: libyaml's syntax errors, plus the
/// structural limits enforced here (one document, known anchors, bounded aliases, scalar keys, no
/// duplicate keys). Positions are 1-based.
struct YAMLError: Error, Equatable {
    var line: Int?
    var column: Int?
    var message: String
}

/// Builds a `YAMLTree` from libyaml's event API (`yaml_parser_parse`).
///
/// The event API rather than libyaml's document API (`yaml_parser_load`) because that one builds the
/// whole document before anything can be checked, and keeps no position for the place where an
/// alias is used. With events, every limit (one document, nesting depth, alias expansion, duplicate
/// keys) is checked as the text is read, and an alias is one small node, with its own position,
/// pointing at its target.
///
/// The class owns its `yaml_parser_t` (allocated once, at a stable address) and releases it with
/// `yaml_parser_delete` in `deinit`. libyaml reads the caller's buffer in place, so a parser never
/// outlives the `withUnsafeBufferPointer` call that created it (see `parse(_:)`).
final class YAMLParser {
    /// Maximum nesting of sequences and mappings. A manifest needs 3; the bound keeps a file of
    /// nothing but `[[[[...` from growing libyaml's and our stacks without limit.
    static let maxDepth = 256

    /// Alias budget. Expanding every alias (what a naive consumer does, and what any walk over the
    /// tree effectively does) must not visit more than
    /// `max(expansionFloor, expansionFactor × nodes parsed so far)` nodes. Legitimate reuse (a shared
    /// checksum, mtime or mirror list) expands about 1:1, and the floor lets small files use aliases
    /// freely; "billion laughs" (9 levels × 9 aliases, 10^9 nodes from ~100 parsed) crosses the floor
    /// at its 6th level and is rejected after a few hundred events. Because the bound is checked
    /// against the nodes parsed *so far* it can be enforced at the offending alias, with no second
    /// pass.
    static let expansionFloor = 100_000
    static let expansionFactor = 10

    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let input: UnsafeBufferPointer<UInt8>

    /// Parses `bytes` as one YAML document into a whole tree. Returns nil when the stream holds no
    /// document at all (empty file, or only comments).
    ///
    /// - Parameter fastPath: try ``FastManifestScanner`` first (tests turn it off to compare).
    static func parse(_ bytes: [UInt8], fastPath: Bool = true) throws -> YAMLTree? {
        try parse(bytes, fastPath: fastPath, entries: nil)?.tree
    }

    /// Parses `bytes` as one YAML document; with `entries`, the items of the root mapping's `files`
    /// list go there as they are read instead of into the tree (``YAMLTreeBuilder``).
    ///
    /// With a `releaseStep` (for a caller that owns the only copy of `bytes` and can read them
    /// again), the scanner gives back the pages it has read; when it then gives up, this throws
    /// ``FastManifestScanner/InputReleased`` instead of handing libyaml zeros.
    static func parse(_ bytes: [UInt8], fastPath: Bool, entries: ManifestEntryStream?, releaseStep: Int? = nil) throws -> YAMLTreeBuilder.Parsed? {
        guard !bytes.isEmpty else { return nil }
        // The tree stores offsets in 32 bits (``YAMLTree/Node``); no real manifest comes near.
        guard bytes.count < Int(Int32.max) else {
            throw YAMLError(line: nil, column: nil, message: "the manifest is 2 GiB or larger; split it or compress it less")
        }
        if fastPath, let parsed = try bytes.withUnsafeBufferPointer({ try FastManifestScanner.read($0, entries: entries, releaseStep: releaseStep) }) {
            return parsed
        }
        return try bytes.withUnsafeBufferPointer { buffer in
            let parser = try YAMLParser(input: buffer)
            return try parser.run(entries: entries)
        }
    }

    private init(input: UnsafeBufferPointer<UInt8>) throws {
        self.input = input
        parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        // yaml_parser_initialize zero-fills the struct and returns 0 only when malloc fails.
        guard yaml_parser_initialize(parser) == 1 else {
            parser.deallocate()
            throw YAMLError(line: nil, column: nil, message: "cannot parse YAML: out of memory")
        }
        // `parse` never passes an empty buffer, so there is a base address.
        yaml_parser_set_input_string(parser, input.baseAddress, input.count)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    private func run(entries: ManifestEntryStream?) throws -> YAMLTreeBuilder.Parsed? {
        // The builder is a local struct, not state of this class: its many small mutations then
        // need no dynamic exclusivity checks (swift_beginAccess showed up in profiles otherwise).
        var builder = YAMLTreeBuilder(inputSize: input.count, entries: entries)
        var event = yaml_event_t()
        while true {
            guard yaml_parser_parse(parser, &event) == 1 else { throw syntaxError() }
            defer { yaml_event_delete(&event) }
            if event.type == YAML_STREAM_END_EVENT { break }
            try builder.handle(&event)
        }
        return builder.finish()
    }

    /// libyaml's error (`parser.problem`, `parser.context`). Reader errors (bad UTF-8) have only a
    /// byte offset (`problem_offset`), turned into a line and column here; scanner and parser
    /// errors have `problem_mark`.
    private func syntaxError() -> YAMLError {
        let p = parser.pointee
        if p.error == YAML_MEMORY_ERROR {
            return YAMLError(line: nil, column: nil, message: "cannot parse YAML: out of memory")
        }
        var message = "YAML syntax error: " + (p.problem.map { String(cString: $0) } ?? "unknown problem")
        var line = Int(p.problem_mark.line) + 1
        var column = Int(p.problem_mark.column) + 1
        if p.error == YAML_READER_ERROR {
            (line, column) = position(ofByte: p.problem_offset)
            if p.problem_value != -1 { message += " (byte 0x" + String(p.problem_value, radix: 16) + ")" }
        } else if let context = p.context {
            message += " (\(String(cString: context)) at line \(p.context_mark.line + 1), column \(p.context_mark.column + 1))"
        }
        return YAMLError(line: line, column: column, message: message)
    }

    private func position(ofByte offset: Int) -> (Int, Int) {
        var line = 1, lineStart = 0
        let end = min(offset, input.count)
        for i in 0 ..< end where input[i] == UInt8(ascii: "\n") {
            line += 1
            lineStart = i + 1
        }
        return (line, end - lineStart + 1)
    }
}
