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
struct YAMLTree: Equatable {
    enum Kind: UInt8 { case scalar, sequence, mapping, alias }

    /// 16 bytes: a 10^6-entry manifest has millions of nodes, so their size is most of the
    /// tree's memory. Offsets and counts fit in 32 bits because ``YAMLParser`` refuses input of
    /// 2 GiB or more; a column past 2^29 (a line that long) is reported as 2^29 − 1.
    struct Node: Equatable {
        private var startBits: UInt32
        private var countBits: UInt32
        private var lineBits: UInt32
        /// Column in the low 29 bits; kind in bits 29–30; `isPlain` in bit 31.
        private var columnAndFlags: UInt32

        init(kind: Kind, isPlain: Bool, line: Int32, column: Int32, start: Int, count: Int) {
            startBits = UInt32(truncatingIfNeeded: start)
            countBits = UInt32(truncatingIfNeeded: count)
            lineBits = UInt32(clamping: line)
            columnAndFlags = UInt32(clamping: min(Int(column), Node.maxColumn)) | UInt32(kind.rawValue) << 29
                | (isPlain ? 1 << 31 : 0)
        }

        static let maxColumn = (1 << 29) - 1

        var kind: Kind { Kind(rawValue: UInt8(truncatingIfNeeded: (columnAndFlags >> 29) & 3)) ?? .scalar }
        /// Scalars only: plain style (unquoted, not a block scalar) and no explicit tag, i.e. a
        /// value YAML would resolve as a number or null rather than as a string.
        var isPlain: Bool { columnAndFlags >> 31 == 1 }
        /// 1-based position of the node's first character (libyaml's `start_mark` + 1).
        var line: Int32 { Int32(clamping: lineBits) }
        var column: Int32 { Int32(columnAndFlags & UInt32(Node.maxColumn)) }
        /// Scalar: offset in `arena`. Sequence/mapping: offset in `children`. Alias: target node.
        var start: Int {
            get { Int(startBits) }
            set { startBits = UInt32(truncatingIfNeeded: newValue) }
        }
        /// Scalar: byte length. Sequence: item count. Mapping: 2 × pair count (key, value, ...).
        var count: Int {
            get { Int(countBits) }
            set { countBits = UInt32(truncatingIfNeeded: newValue) }
        }
    }

    var nodes: [Node] = []
    /// Node indices (32 bits each, see ``Node``).
    var children: [UInt32] = []
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

    func item(_ r: Ref, _ i: Int) -> Ref { ref(Int(children[nodes[r.id].start + i])) }
    func key(_ r: Ref, _ i: Int) -> Ref { ref(Int(children[nodes[r.id].start + 2 * i])) }
    func value(_ r: Ref, _ i: Int) -> Ref { ref(Int(children[nodes[r.id].start + 2 * i + 1])) }

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
