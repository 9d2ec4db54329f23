import MirrorKit

/// Hashing by a pool: several ``PartialWriter`` threads, so that the files in flight are hashed
/// on as many cores as there are files (one writer served every file before, and one core's
/// SHA-256, about 1 GB/s with SHA-NI, bounded the whole run).
///
/// A file keeps one writer for its whole life: its hash updates must run in file order, and its
/// checkpoints after them, which one thread's queue guarantees. New files take the writers in
/// turn; a writer is made when its turn first comes, up to ``limit`` (at most one per core, and
/// one per file the run may have in flight). So a run of one large file has one writer, as
/// before, and memory (``PartialWriter/bufferCount`` buffers of ``PartialWriter/bufferSize``: 2 MiB
/// a writer) grows only with the files a run hashes at once.
final class PartialWriterPool {
    let limit: Int
    private let lock = Lock()
    private var writers: [PartialWriter] = []
    private var next = 0

    init(limit: Int) { self.limit = max(1, limit) }

    /// The writer for a new file.
    func writer() -> PartialWriter {
        lock.lock()
        defer { lock.unlock() }
        defer { next = (next + 1) % limit }
        if next < writers.count { return writers[next] }
        let writer = PartialWriter()
        writers.append(writer)
        return writer
    }

    /// Writers made so far.
    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return writers.count
    }

    func drainAll() { for writer in snapshot() { writer.drainAll() } }

    func shutdown() { for writer in snapshot() { writer.shutdown() } }

    private func snapshot() -> [PartialWriter] {
        lock.lock()
        defer { lock.unlock() }
        return writers
    }
}
