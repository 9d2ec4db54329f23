/// The entries of a manifest's `files` list, built one at a time while the YAML is read, so that
/// no tree of the whole document is ever held (``YAMLTreeBuilder`` drops each item's nodes once it
/// is here).
///
/// The result must be what ``ManifestRules`` would give on the whole tree, errors included, and
/// those rules report the first problem in a fixed order: YAML errors anywhere in the file, then
/// the top-level keys, then the entries in order. So nothing here is thrown while reading: the first
/// entry error is kept in ``StreamedEntries`` and reported in the entries' turn. Whether `base_url`
/// exists is known only at the end, so the first entry that needs it is noted and judged then.
struct ManifestEntryStream {
    private(set) var output = StreamedEntries()
    /// The entry rules, shown one item at a time; they also keep the paths seen so far.
    private var rules: ManifestRules

    /// `inputSize`: the manifest's length in bytes, to size the entries and the path index once
    /// instead of doubling them (10^6 entries: the last doubling alone held 55 MB of entries twice).
    /// An entry takes at least ~90 bytes of YAML (a SHA-256 alone is 64), so the entries' room is
    /// an upper bound: reserved memory that is never written is never resident. The path index's
    /// table is written when made, so it is sized for the usual ~100 bytes an entry and grows
    /// past that. Reserved at the first item, when this value is the builder's own copy: reserved
    /// sooner, the arrays would be shared with the caller's copy and copied at the first append.
    init(file: String, inputSize: Int = 0, observer: ManifestLoader.EntryObserver? = nil, sortedPaths: Bool = true) {
        rules = ManifestRules(tree: YAMLTree(), file: file)
        rules.paths = PathIndex(sortedPrelude: sortedPaths)
        self.inputSize = inputSize
        self.observer = observer
    }

    private var inputSize: Int
    /// Told of each entry kept, with its index (``ManifestLoader/load(path:observer:)``).
    private let observer: ManifestLoader.EntryObserver?

    /// Checks one item of `files` (a node of `tree`) and keeps its entry.
    mutating func take(_ item: YAMLTree.Ref, in tree: YAMLTree) {
        guard output.firstError == nil else { return }
        if inputSize > 0 {
            output.entries.reserveCapacity(inputSize / 80)
            rules.paths.reserve(inputSize / 100)
            inputSize = 0
        }
        // Lent for this item only: the builder then drops the item's nodes, which must not copy
        // the tree's arrays because this still holds them.
        rules.tree = tree
        defer { rules.tree = YAMLTree() }
        do {
            let (entry, relativeURL) = try rules.entryIgnoringBase(item, after: output.entries)
            if let relativeURL, output.firstRelative == nil {
                output.firstRelative = rules.missingBaseError(entry, at: relativeURL)
            }
            // Told before the append, which then takes `entry` without a copy.
            observer?(output.entries.count, entry)
            output.entries.append(entry)
        } catch let error as ManifestError {
            output.firstError = error
        } catch {
            output.firstError = ManifestError(file: rules.file, line: item.line, column: item.column, message: "\(error)")
        }
    }

    /// The `files` list whose items came here (its node in the tree has no children).
    var filesNode: Int? {
        get { output.filesNode }
        set { output.filesNode = newValue }
    }
}

/// What ``ManifestEntryStream`` found, for ``ManifestRules/entries(_:)``.
struct StreamedEntries {
    var entries: [ManifestEntry] = []
    /// The first entry that broke a rule; later items are no longer checked.
    var firstError: ManifestError?
    /// The first entry before that one with a relative `url`: an error if there is no `base_url`.
    var firstRelative: ManifestError?
    var filesNode: Int?

    /// The entries, or the error the rules would have stopped at among them.
    func result(baseURL: String?) throws -> [ManifestEntry] {
        if baseURL == nil, let firstRelative { throw firstRelative }
        if let firstError { throw firstError }
        return entries
    }
}
