import MirrorKit

/// Verified files waiting to be made durable and renamed into place together: group commit.
///
/// Thousands of small files must not pay three serial fsyncs each (file, folder, journal). A batch
/// keeps docs/journal.md's order for all its files at once: one `syncfs` makes every file's data durable,
/// the `partial` records that name each file's inode are made durable (``InstallCommit/commit(_:)``),
/// then each is renamed into place, a second `syncfs` makes the new names durable, and only then
/// are their journal records appended and the journal synced once. A crash at any point leaves each
/// file either in `.mirror/partial/` or complete at its path without a `verified` record, which
/// the next run hashes and records as installed (``InstalledFile``). A batch of one file uses `fsync`s instead, so a lone large file does not
/// flush the rest of the filesystem.
final class InstallBatch {
    struct Item {
        let task: EntryTask
        let partial: PartialFile
    }

    /// Flush when this many files wait... Each holds its partial file open until its commit, and
    /// the next batch fills while one commits (``CommitThread``): two batches stay well inside the
    /// usual limit of 1024 descriptors. (512 gave no measurable gain over 256 for 5000 × 16 KiB.)
    static let maxFiles = 256
    /// ...or when the oldest has waited this long (seconds).
    static let maxDelay = 0.25

    private(set) var items: [Item] = []
    private var oldest: Double?

    var isEmpty: Bool { items.isEmpty }

    func add(_ task: EntryTask, _ partial: PartialFile) {
        if items.isEmpty { oldest = monotonicSeconds() }
        items.append(Item(task: task, partial: partial))
    }

    func isDue(now: Double) -> Bool {
        guard let oldest else { return false }
        return items.count >= InstallBatch.maxFiles || now - oldest >= InstallBatch.maxDelay
    }

    /// Seconds until the batch is due (for the sync loop's wait).
    func timeUntilDue(now: Double) -> Double? {
        oldest.map { max(0, InstallBatch.maxDelay - (now - $0)) }
    }

    func take() -> [Item] {
        defer { items.removeAll(); oldest = nil }
        return items
    }
}
