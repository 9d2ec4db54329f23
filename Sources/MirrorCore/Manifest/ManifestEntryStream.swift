/// The entries of a manifest's `files` list, built one at a time while the YAML is read, so that
/// no tree of the whole document is ever held (``YAMLTreeBuilder`` drops each item's nodes once it
/// is here).
///
/// The result must be what ``ManifestRules`` would give on the whole tree, errors included, and
/// those rules report the first problem in a fixed order: YAML errors anywhere in the file, then
/// the top-level keys, then the entries in order. So nothing here is thrown while reading: the first
/// entry error is kept and reported by ``result(baseURL:)``, which the rules call in the entries'
/// turn. Whether `base_url` exists is known only at the end, so the first entry that needs it is
/// noted and judged then.
struct ManifestEntryStream {
    let file: String
    private(set) var entries: [ManifestEntry] = []
    private var paths = PathIndex()
    /// The first entry that broke a rule; later items are no longer checked.
    private var firstError: ManifestError?
    /// The first entry before that one with a relative `url`: an error if there is no `base_url`.
    private var firstRelative: ManifestError?
    /// The `files` list whose items came here (its node in the tree has no children).
    var filesNode: Int?

    init(file: String) {
        self.file = file
    }

    /// Checks one item of `files` (a node of `tree`) and keeps its entry.
    mutating func take(_ item: YAMLTree.Ref, in tree: YAMLTree) {
        guard firstError == nil else { return }
        var rules = ManifestRules(tree: tree, file: file)
        swap(&rules.paths, &paths)  // moved, not copied: the index stays uniquely referenced
        defer { swap(&rules.paths, &paths) }
        do {
            let (entry, relativeURL) = try rules.entryIgnoringBase(item)
            if let relativeURL, firstRelative == nil {
                firstRelative = rules.missingBaseError(entry, at: relativeURL)
            }
            entries.append(entry)
        } catch let error as ManifestError {
            firstError = error
        } catch {
            firstError = ManifestError(file: file, line: item.line, column: item.column, message: "\(error)")
        }
    }

    /// The entries, or the error the rules would have stopped at among them.
    func result(baseURL: String?) throws -> [ManifestEntry] {
        if baseURL == nil, let firstRelative { throw firstRelative }
        if let firstError { throw firstError }
        return entries
    }
}
