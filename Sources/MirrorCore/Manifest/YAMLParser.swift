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

    /// Parses `bytes` as one YAML document. Returns nil when the stream holds no document at all
    /// (empty file, or only comments).
    ///
    /// - Parameter fastPath: try ``FastManifestScanner`` first (tests turn it off to compare).
    static func parse(_ bytes: [UInt8], fastPath: Bool = true) throws -> YAMLTree? {
        guard !bytes.isEmpty else { return nil }
        // The tree stores offsets in 32 bits (``YAMLTree/Node``); no real manifest comes near.
        guard bytes.count < Int(Int32.max) else {
            throw YAMLError(line: nil, column: nil, message: "the manifest is 2 GiB or larger; split it or compress it less")
        }
        if fastPath, let tree = bytes.withUnsafeBufferPointer({ FastManifestScanner.tree(from: $0) }) { return tree }
        return try bytes.withUnsafeBufferPointer { buffer in
            let parser = try YAMLParser(input: buffer)
            return try parser.run()
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

    private func run() throws -> YAMLTree? {
        // The builder is a local struct, not state of this class: its many small mutations then
        // need no dynamic exclusivity checks (swift_beginAccess showed up in profiles otherwise).
        var builder = YAMLTreeBuilder(inputSize: input.count)
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

/// Turns libyaml events into a `YAMLTree`, enforcing the structural limits as it goes.
struct YAMLTreeBuilder {
    struct Frame {
        var node: Int
        var pendingStart: Int
        var size: Int
        var anchor: String?
    }

    private var tree = YAMLTree()
    private var frames: [Frame] = []
    /// Children of the open collections, in document order; moved to `tree.children` when a
    /// collection ends so that each collection's children are contiguous there.
    private var pending: [UInt32] = []
    /// Anchor name → (node, expanded size). Registered when the node is complete, so an alias
    /// inside its own anchor's node is "unknown" and cycles cannot exist.
    private var anchors: [String: (node: Int, size: Int)] = [:]
    private var expanded = 0
    private var documents = 0
    private var hasRoot = false

    init(inputSize: Int) {
        // About one node per 16 bytes of a typical manifest (three short pairs per entry).
        tree.nodes.reserveCapacity(min(inputSize / 16, 1 << 24))
        tree.children.reserveCapacity(min(inputSize / 16, 1 << 24))
        tree.arena.reserveCapacity(inputSize / 2)
    }

    /// The tree, or nil when the stream held no document.
    func finish() -> YAMLTree? {
        documents > 0 && hasRoot ? tree : nil
    }

    mutating func handle(_ event: inout yaml_event_t) throws {
        let line = Int32(clamping: event.start_mark.line + 1)
        let column = Int32(clamping: event.start_mark.column + 1)
        switch event.type {
        case YAML_DOCUMENT_START_EVENT:
            guard documents == 0 else {
                throw YAMLError(line: Int(line), column: Int(column),
                                message: "a manifest is exactly one YAML document, but a second one starts here")
            }
            documents += 1

        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            let tag = try checkTag(s.tag, allowed: "tag:yaml.org,2002:str", line, column)
            let value = UnsafeBufferPointer(start: s.value, count: s.value == nil ? 0 : s.length)
            try scalar(value, isPlain: s.style == YAML_PLAIN_SCALAR_STYLE && tag == nil, line: line, column: column,
                       anchor: s.anchor.map { String(cString: $0) })

        case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
            let isMapping = event.type == YAML_MAPPING_START_EVENT
            let rawTag = isMapping ? event.data.mapping_start.tag : event.data.sequence_start.tag
            let rawAnchor = isMapping ? event.data.mapping_start.anchor : event.data.sequence_start.anchor
            _ = try checkTag(rawTag, allowed: isMapping ? "tag:yaml.org,2002:map" : "tag:yaml.org,2002:seq",
                             line, column)
            try startCollection(isMapping: isMapping, line: line, column: column, anchor: rawAnchor.map { String(cString: $0) })

        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            try endCollection(isMapping: event.type == YAML_MAPPING_END_EVENT)

        case YAML_ALIAS_EVENT:
            let name = event.data.alias.anchor.map { String(cString: $0) } ?? ""
            guard let target = anchors[name] else {
                throw YAMLError(line: Int(line), column: Int(column),
                                message: "unknown anchor \(quoted(name)) (an alias must come after the node its anchor names is complete)")
            }
            let (sum, overflow) = expanded.addingReportingOverflow(target.size)
            expanded = overflow ? Int.max : sum
            let limit = max(YAMLParser.expansionFloor, YAMLParser.expansionFactor * tree.nodes.count)
            guard expanded <= limit else {
                throw YAMLError(line: Int(line), column: Int(column),
                                message: "aliases expand beyond \(limit) nodes (alias bomb?); manifests may reuse nodes with aliases, but not multiply them")
            }
            let node = addNode(YAMLTree.Node(kind: .alias, isPlain: false, line: line, column: column,
                                             start: target.node, count: 0))
            try attach(node, size: target.size)

        default:
            break  // STREAM_START, DOCUMENT_END carry nothing the manifest needs
        }
    }

    // The events, as libyaml reports them and as ``FastManifestScanner`` replays them for the
    // common shape of a manifest: both go through these, so both build the same tree with the
    // same checks.

    mutating func startDocument() { documents += 1 }

    mutating func scalar(_ value: UnsafeBufferPointer<UInt8>, isPlain: Bool, line: Int32, column: Int32,
                         anchor: String? = nil) throws {
        let start = tree.arena.count
        if !value.isEmpty { tree.arena.append(contentsOf: value) }
        let node = addNode(YAMLTree.Node(kind: .scalar, isPlain: isPlain, line: line, column: column,
                                         start: start, count: value.count))
        if let anchor { anchors[anchor] = (node, 1) }
        try attach(node, size: 1)
    }

    mutating func startCollection(isMapping: Bool, line: Int32, column: Int32, anchor: String? = nil) throws {
        guard frames.count < YAMLParser.maxDepth else {
            throw YAMLError(line: Int(line), column: Int(column),
                            message: "lists and mappings nest deeper than \(YAMLParser.maxDepth) levels")
        }
        let node = addNode(YAMLTree.Node(kind: isMapping ? .mapping : .sequence, isPlain: false,
                                         line: line, column: column, start: 0, count: 0))
        frames.append(Frame(node: node, pendingStart: pending.count, size: 1, anchor: anchor))
    }

    mutating func endCollection(isMapping: Bool) throws {
        guard let frame = frames.popLast() else { return }  // libyaml guarantees balance
        let childStart = tree.children.count
        tree.children.append(contentsOf: pending[frame.pendingStart...])
        pending.removeSubrange(frame.pendingStart...)
        tree.nodes[frame.node].start = childStart
        tree.nodes[frame.node].count = tree.children.count - childStart
        if isMapping { try checkKeys(of: frame.node) }
        if let anchor = frame.anchor { anchors[anchor] = (frame.node, frame.size) }
        try attach(frame.node, size: frame.size)
    }

    private mutating func addNode(_ node: YAMLTree.Node) -> Int {
        tree.nodes.append(node)
        if node.kind != .alias { expanded &+= 1 }
        return tree.nodes.count - 1
    }

    /// Hands a complete node to its parent (or makes it the root), adding its expanded size.
    private mutating func attach(_ node: Int, size: Int) throws {
        guard !frames.isEmpty else {
            tree.root = node
            hasRoot = true
            return
        }
        pending.append(UInt32(truncatingIfNeeded: node))
        let (sum, overflow) = frames[frames.count - 1].size.addingReportingOverflow(size)
        frames[frames.count - 1].size = overflow ? Int.max : sum
    }

    /// Only YAML's own core tags are accepted, and only on the matching kind of node: application
    /// tags (`!foo`) would mean something this reader does not know.
    private func checkTag(_ raw: UnsafeMutablePointer<yaml_char_t>?, allowed: String,
                          _ line: Int32, _ column: Int32) throws -> String? {
        guard let raw else { return nil }
        let tag = String(cString: raw)
        guard tag == allowed else {
            throw YAMLError(line: Int(line), column: Int(column),
                            message: "unsupported YAML tag \(quoted(tag)); write plain values without tags")
        }
        return tag
    }

    /// Keys must be scalars and must not repeat (YAML 1.2 §3.2.1.1 requires unique keys; libyaml
    /// does not check it). Small mappings, the common case, are compared pairwise with `memcmp` on
    /// the arena, without allocating; large ones go through a dictionary.
    private func checkKeys(of mapping: Int) throws {
        let m = YAMLTree.Ref(id: mapping, line: 0, column: 0)
        let pairs = tree.count(m)
        for i in 0 ..< pairs {
            let key = tree.key(m, i)
            guard tree.kind(key) == .scalar else {
                throw YAMLError(line: key.line, column: key.column,
                                message: "mapping keys must be plain strings, got \(tree.describe(key))")
            }
        }
        guard pairs > 1 else { return }
        if pairs > 16 {
            var seen: [String: Int] = [:]
            for i in 0 ..< pairs {
                let key = tree.key(m, i)
                let name = tree.string(key)
                if let first = seen[name] { throw duplicate(key, firstLine: first) }
                seen[name] = key.line
            }
            return
        }
        let firstChild = tree.nodes[mapping].start
        let clash: (Int, Int)? = tree.nodes.withUnsafeBufferPointer { nodes in
            tree.children.withUnsafeBufferPointer { children in
                tree.arena.withUnsafeBufferPointer { arena in
                    func scalar(_ i: Int) -> YAMLTree.Node {
                        let n = nodes[Int(children[firstChild + 2 * i])]
                        return n.kind == .alias ? nodes[n.start] : n
                    }
                    for i in 1 ..< pairs {
                        let a = scalar(i)
                        for j in 0 ..< i {
                            let b = scalar(j)
                            guard a.count == b.count else { continue }
                            // An empty arena means every key so far is "", hence equal.
                            guard let base = arena.baseAddress, a.count > 0 else { return (i, j) }
                            if memcmp(base + a.start, base + b.start, a.count) == 0 { return (i, j) }
                        }
                    }
                    return nil
                }
            }
        }
        if let (second, first) = clash {
            throw duplicate(tree.key(m, second), firstLine: tree.key(m, first).line)
        }
    }

    private func duplicate(_ key: YAMLTree.Ref, firstLine: Int) -> YAMLError {
        YAMLError(line: key.line, column: key.column,
                  message: "duplicate key \(quoted(tree.string(key))) (first on line \(firstLine)); each key may appear once in a mapping")
    }
}
