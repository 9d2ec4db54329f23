import MirrorKit

/// The two forms of `mirror status` (docs/cli.md, "mirror status"), written a line or a batch at
/// a time rather than built whole: on a fresh DEST every entry of the manifest is listed, and
/// 10^6 lines held as one `String` (after an array of them) cost more than the manifest itself
/// (docs/performance.md, "Reports that stream").
extension DestinationStatus {
    /// The report for people: a summary, the last run, then one line per entry that is not done;
    /// each line through ``Formatting/forPeople(_:)``, then `out` with its newline.
    public func writeText(to out: (String) throws -> Void) rethrows {
        var head = "destination: \(destination)"
        if !destinationExists { head += " (does not exist yet)" }
        if let runningPid { head += " (a sync is running, pid \(runningPid))" }
        // The journal's text and the manifest's paths may hold anything: escape it for the terminal.
        func line(_ text: String) throws { try out(Formatting.forPeople(text) + "\n") }
        try line(head)
        if excluded > 0 {
            try line("files: \(totalFiles) selected of \(totalFiles + excluded) in the manifest (\(excluded) left out by the filter), "
                     + Formatting.bytes(totalBytes))
        } else {
            try line("files: \(totalFiles) in the manifest, \(Formatting.bytes(totalBytes))")
        }
        for state in [EntryStatus.State.done, .partial, .failed, .unverified, .blocked, .missing] {
            let n = count(state)
            guard n > 0 || state == .done else { continue }
            let name = state.rawValue.rightPadded(to: 11)
            var text = "  \(name)\(String(n).leftPadded(to: 7))  \(Formatting.bytes(bytes(state)))"
            if state == .partial {
                let held = entries.filter { $0.state == .partial }.reduce(Int64(0)) { $0 + ($1.partialBytes ?? 0) }
                text += " (\(Formatting.bytes(held)) downloaded)"
            }
            try line(text)
        }
        for text in runLines(now: currentUnixTime()) { try line(text) }
        if let generations {
            let kept = generations.kept.reversed().map { $0 == generations.current ? "g\($0) (current)" : "g\($0)" }
            // Without a running sync, `building/` is what a stopped run left: the next sync of
            // the same manifest goes on with it, another manifest's clears what it does not list.
            let building = !generations.building ? ""
                : runningPid != nil ? "; the next one is being built"
                : "; a next one was partly built by a run that did not finish, and the next sync goes on with it"
            try line("generations: " + kept.joined(separator: ", ") + building)
            if let hold = generations.hold {
                try line("held at generation \(hold.generation) by a rollback from generation \(hold.from): a sync of its manifest "
                         + "changes nothing until another manifest or `\(HoldPolicy.releaseAdvice(destination))` releases it")
            }
        }
        for entry in entries {
            switch entry.state {
            case .partial:
                try line("partial     \(entry.path): \(entry.percent ?? 0)% (\(Formatting.bytes(entry.partialBytes ?? 0)) of \(Formatting.bytes(entry.size)))")
            case .failed:
                let at = entry.failedAt.map { " (\(Formatting.utcTimestamp($0)))" } ?? ""
                let held = entry.percent.map { "; \($0)% downloaded" } ?? ""
                try line("failed      \(entry.path): \(entry.error ?? "")\(at)\(held)")
            case .unverified:
                try line("unverified  \(entry.path): present, but no sync has verified this copy (run `mirror verify` to check it)")
            case .blocked:
                try line("blocked     \(entry.path): \(entry.error ?? "")")
            case .missing:
                try line("missing     \(entry.path)")
            case .done:
                break
            }
        }
    }

    /// ``writeText(to:)`` as one string, without the last newline (for tests and small reports).
    public var text: String { DestinationStatus.collected { writeText(to: $0) } }

    /// One JSON object (``StatusDocument``) and its newline; `entries` lists every entry that is
    /// not done, in manifest order, encoded ``JSONOutput/streamingBatch`` entries at a time.
    public func writeJSON(to out: (String) throws -> Void) rethrows {
        try JSONOutput.write(StatusDocument(self, entries: []), array: StatusDocument.CodingKeys.entries.stringValue,
                             count: entries.count, element: { StatusDocument.Entry(entries[$0]) }, to: out)
        try out("\n")
    }

    /// ``writeJSON(to:)`` as one string, without the newline.
    public var json: String { DestinationStatus.collected { writeJSON(to: $0) } }

    /// What `write` writes, as one string without its last newline.
    private static func collected(_ write: ((String) -> Void) -> Void) -> String {
        var pieces: [String] = []
        write { pieces.append($0) }
        var whole = pieces.joined()
        if whole.hasSuffix("\n") { whole.removeLast() }
        return whole
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }

    func rightPadded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
