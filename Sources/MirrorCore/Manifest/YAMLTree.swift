/// A parsed YAML document, kept flat: one array of nodes, one array of child indices and one byte
/// arena holding every scalar's text.
///
/// Why flat: a 10^6-entry manifest has ~10^7 nodes; one small struct per node and one shared byte
/// buffer cost a few allocations in total instead of one object (and one String) per node. Strings
/// are only made for the scalars the manifest rules actually read.
///
/// Aliases are not copied: an alias is a node of its own (so it keeps the position where it was
/// used) that points at the anchored node. How far aliases may expand is bounded while parsing
/// (see `YAMLParser.expansionLimit`), which also bounds any walk over the tree.
struct YAMLTree {
    enum Kind: UInt8 { case scalar, sequence, mapping, alias }

    struct Node {
        var kind: Kind
        /// Scalars only: plain style (unquoted, not a block scalar) and no explicit tag, i.e. a
        /// value YAML would resolve as a number or null rather than as a string.
        var isPlain: Bool
        /// 1-based position of the node's first character (libyaml's `start_mark` + 1).
        var line: Int32
        var column: Int32
        /// Scalar: offset in `arena`. Sequence/mapping: offset in `children`. Alias: target node.
        var start: Int
        /// Scalar: byte length. Sequence: item count. Mapping: 2 × pair count (key, value, ...).
        var count: Int
    }

    var nodes: [Node] = []
    var children: [Int] = []
    var arena: [UInt8] = []
    var root: Int = 0

    /// A node as seen from where it is used: `id` is the resolved (non-alias) node, and the position
    /// is the alias's when the node was reached through one, so errors point at the use site.
    struct Ref {
        var id: Int
        var line: Int
        var column: Int
    }

    func ref(_ index: Int) -> Ref {
        let node = nodes[index]
        let target = node.kind == .alias ? node.start : index
        return Ref(id: target, line: Int(node.line), column: Int(node.column))
    }

    func kind(_ r: Ref) -> Kind { nodes[r.id].kind }

    /// Number of items (sequence) or pairs (mapping).
    func count(_ r: Ref) -> Int {
        let n = nodes[r.id]
        return n.kind == .mapping ? n.count / 2 : n.count
    }

    func item(_ r: Ref, _ i: Int) -> Ref { ref(children[nodes[r.id].start + i]) }
    func key(_ r: Ref, _ i: Int) -> Ref { ref(children[nodes[r.id].start + 2 * i]) }
    func value(_ r: Ref, _ i: Int) -> Ref { ref(children[nodes[r.id].start + 2 * i + 1]) }

    /// The scalar's bytes (valid UTF-8: libyaml's reader rejects anything else).
    func bytes(_ r: Ref) -> ArraySlice<UInt8> {
        let n = nodes[r.id]
        return arena[n.start ..< n.start + n.count]
    }

    func string(_ r: Ref) -> String { String(decoding: bytes(r), as: UTF8.self) }

    func isPlain(_ r: Ref) -> Bool { nodes[r.id].isPlain }

    /// YAML 1.1/1.2 null: a plain scalar that is empty, `~` or `null` in one of its spellings.
    func isNull(_ r: Ref) -> Bool {
        let n = nodes[r.id]
        guard n.kind == .scalar, n.isPlain else { return false }
        switch n.count {
        case 0: return true
        case 1: return arena[n.start] == UInt8(ascii: "~")
        case 4: return ["null", "Null", "NULL"].contains(string(r))
        default: return false
        }
    }

    /// How a node's type is named in messages ("got a list").
    func describe(_ r: Ref) -> String {
        switch kind(r) {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .alias, .scalar:
            if isNull(r) { return "null" }
            return isPlain(r) ? quoted(string(r)) : "the string " + quoted(string(r))
        }
    }
}
