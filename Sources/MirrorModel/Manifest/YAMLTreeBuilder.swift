import CYAML
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns libyaml events into a `YAMLTree`, enforcing the structural limits as it goes.
///
/// With a ``ManifestEntryStream`` it keeps no whole-document tree: each item of the root mapping's
/// `files` list is handed to the stream as soon as it is complete, and its nodes are dropped
/// (unless it defines an anchor, which a later alias may use). Every structural check still runs on
/// every node, so the errors are the same as with the whole tree.
struct YAMLTreeBuilder {
    /// What the reader produced: the tree (without the streamed `files` items) and the stream.
    struct Parsed {
        var tree: YAMLTree
        var entries: ManifestEntryStream?
    }

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
    /// Every node made so far, dropped ones included: the alias budget is relative to it.
    private var nodesParsed = 0
    /// Anchors registered so far (a name given twice counts twice).
    private var anchorsDefined = 0

    /// Where the `files` items go; nil keeps them in the tree.
    private var entries: ManifestEntryStream?
    /// True while `frames[1]` is the root mapping's `files` list and its items are streamed.
    private var streamingFiles = false
    /// The tree's sizes (and `anchorsDefined`) where the next `files` item begins.
    private var itemMark = (nodes: 0, children: 0, arena: 0, anchors: 0)

    init(inputSize: Int, entries: ManifestEntryStream? = nil) {
        self.entries = entries
        // About one node per 16 bytes of a typical manifest (three short pairs per entry); when
        // the entries are streamed the tree holds only the top-level keys and the anchored nodes.
        let nodes = entries == nil ? min(inputSize / 16, 1 << 24) : 1024
        tree.nodes.reserveCapacity(nodes)
        tree.children.reserveCapacity(nodes)
        tree.arena.reserveCapacity(entries == nil ? inputSize / 2 : 16 * 1024)
    }

    /// The tree and the streamed entries, or nil when the stream held no document.
    func finish() -> Parsed? {
        documents > 0 && hasRoot ? Parsed(tree: tree, entries: entries) : nil
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
            let limit = max(YAMLParser.expansionFloor, YAMLParser.expansionFactor * nodesParsed)
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
        if let anchor { register(anchor, node: node, size: 1) }
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
        if !isMapping && anchor == nil && frames.count == 2 && entries != nil && isFilesValue() {
            streamingFiles = true
            itemMark = (tree.nodes.count, tree.children.count, tree.arena.count, anchorsDefined)
        }
    }

    /// Whether the list just opened is the value of the root mapping's `files` key (the key
    /// resolved as ``ManifestRules`` resolves it: through an alias, by its text). An anchored list
    /// is kept whole: an alias elsewhere may show it to the rules a second time.
    private func isFilesValue() -> Bool {
        let root = frames[0]
        guard tree.nodes[root.node].kind == .mapping, (pending.count - root.pendingStart) % 2 == 1,
              let last = pending.last else { return false }
        let key = tree.ref(Int(last))
        return tree.kind(key) == .scalar && tree.bytes(key).elementsEqual("files".utf8)
    }

    private mutating func register(_ anchor: String, node: Int, size: Int) {
        anchors[anchor] = (node, size)
        anchorsDefined += 1
    }

    mutating func endCollection(isMapping: Bool) throws {
        guard let frame = frames.popLast() else { return }  // libyaml guarantees balance
        if streamingFiles && frames.count == 1 {
            streamingFiles = false
            entries?.filesNode = frame.node
        }
        let childStart = tree.children.count
        tree.children.append(contentsOf: pending[frame.pendingStart...])
        pending.removeSubrange(frame.pendingStart...)
        tree.nodes[frame.node].start = childStart
        tree.nodes[frame.node].count = tree.children.count - childStart
        if isMapping { try checkKeys(of: frame.node) }
        if let anchor = frame.anchor { register(anchor, node: frame.node, size: frame.size) }
        try attach(frame.node, size: frame.size)
    }

    private mutating func addNode(_ node: YAMLTree.Node) -> Int {
        tree.nodes.append(node)
        nodesParsed += 1
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
        let (sum, overflow) = frames[frames.count - 1].size.addingReportingOverflow(size)
        frames[frames.count - 1].size = overflow ? Int.max : sum
        guard streamingFiles && frames.count == 2 else {
            pending.append(UInt32(truncatingIfNeeded: node))
            return
        }
        entries?.take(tree.ref(node), in: tree)
        // The item's nodes are the last ones made; without an anchor nothing can refer to them.
        if anchorsDefined == itemMark.anchors {
            tree.nodes.removeSubrange(itemMark.nodes...)
            tree.children.removeSubrange(itemMark.children...)
            tree.arena.removeSubrange(itemMark.arena...)
        }
        itemMark = (tree.nodes.count, tree.children.count, tree.arena.count, anchorsDefined)
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
