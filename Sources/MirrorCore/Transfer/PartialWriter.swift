import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// The thread that writes partial files, hashes them and makes them durable.
///
/// The transfer thread must wait neither on SHA-256 (the slowest stage on machines without
/// SHA-NI) nor on the page cache: it copies each piece of a body into a buffer from a bounded pool
/// and queues it here. This thread takes the queue in order: `pwrite` into the page cache (and
/// writeback started every MiB), hash update, and at a checkpoint `fdatasync`, then the journal
/// record with the hash state at exactly that length. Writing and hashing thus overlap the
/// transfer, follow file order, and never read the file back (the exceptions, decided by ``HashFeed``: a segmented download's later segments, whose bytes
/// wait in the page cache until the hashed prefix reaches them, and a resumed prefix whose saved
/// hash state is not trusted; both are read back once). Memory is bounded by the pool: when
/// hashing falls behind, the transfer thread waits for a free buffer, which is the back-pressure a
/// slow CPU must exert anyway. A new download of a small file is hashed by the thread that writes
/// it instead (``PartialFile/hashesInline``): for 16 KiB the hand-off cost more than the hash.
final class PartialWriter {
    enum Job {
        /// Bytes from the network: written at `offset`, then hashed when `hash` (``HashFeed``).
        case write(PartialFile, buffer: UnsafeMutableRawBufferPointer, count: Int, offset: Int64, hash: Bool)
        /// Bytes already in the file, read back and hashed (``HashFeed``): a later segment's bytes
        /// once the hashed prefix reaches them, or a kept prefix hashed again on resume.
        case hashFile(PartialFile, from: Int64, to: Int64)
        case checkpoint(PartialFile, url: String, validator: String?, segments: [SegmentRecord]?)
    }

    static let bufferSize = 256 * 1024
    static let bufferCount = 24

    private let condition = Condition()
    private var queue: [Job] = []
    private var queueHead = 0
    private var freeBuffers: [UnsafeMutableRawBufferPointer] = []
    private var pendingPerFile: [ObjectIdentifier: Int] = [:]
    private var stopping = false
    private var exited = false
    /// Seconds this thread spent waiting for work, and since when it waits (0: busy).
    private var idleTotal = 0.0
    private var idleSince = 0.0

    init() {
        for _ in 0..<PartialWriter.bufferCount {
            freeBuffers.append(.allocate(byteCount: PartialWriter.bufferSize, alignment: 4096))
        }
        SystemThread.start(name: "mirror-writer") { [unowned self] in self.run() }
    }

    deinit {
        shutdown()
        for buffer in freeBuffers { buffer.deallocate() }
    }

    /// Copies `bytes` into pooled buffers and queues them to be written at `offset` (and hashed,
    /// with `hash`). Any later job for the file comes after these writes.
    func write(_ file: PartialFile, _ bytes: UnsafeRawBufferPointer, at offset: Int64, hash: Bool) {
        var done = 0
        while done < bytes.count {
            let buffer = takeBuffer()
            let n = min(buffer.count, bytes.count - done)
            if let src = bytes.baseAddress, let dst = buffer.baseAddress { dst.copyMemory(from: src + done, byteCount: n) }
            enqueue(.write(file, buffer: buffer, count: n, offset: offset + Int64(done), hash: hash), for: file)
            done += n
        }
    }

    func hashFile(_ file: PartialFile, from: Int64, to: Int64) {
        enqueue(.hashFile(file, from: from, to: to), for: file)
    }

    func checkpoint(_ file: PartialFile, url: String, validator: String?, segments: [SegmentRecord]?) {
        enqueue(.checkpoint(file, url: url, validator: validator, segments: segments), for: file)
    }

    /// Seconds this thread has waited for work since it started (including a wait in progress).
    /// A segmented download widens only while this grows: when the hash waits for bytes, the
    /// connection is the limit and another one helps; when it does not, a second connection would
    /// only compete with it for the cores (and add a read-back of out-of-order bytes).
    var idleSeconds: Double {
        condition.lock()
        defer { condition.unlock() }
        return idleTotal + (idleSince > 0 ? monotonicSeconds() - idleSince : 0)
    }

    /// Waits until every job queued for `file` is done.
    func drain(_ file: PartialFile) {
        let key = ObjectIdentifier(file)
        condition.lock()
        while (pendingPerFile[key] ?? 0) > 0 { condition.wait() }
        condition.unlock()
    }

    /// Waits until every queued job is done.
    func drainAll() {
        condition.lock()
        while queueHead < queue.count || !pendingPerFile.isEmpty { condition.wait() }
        condition.unlock()
    }

    /// Finishes the queue, then ends the thread.
    func shutdown() {
        condition.lock()
        guard !exited else { condition.unlock(); return }
        stopping = true
        condition.broadcast()
        while !exited { condition.wait() }
        condition.unlock()
    }

    private func takeBuffer() -> UnsafeMutableRawBufferPointer {
        condition.lock()
        while freeBuffers.isEmpty { condition.wait() }
        let buffer = freeBuffers.removeLast()
        condition.unlock()
        return buffer
    }

    private func enqueue(_ job: Job, for file: PartialFile) {
        condition.lock()
        queue.append(job)
        pendingPerFile[ObjectIdentifier(file), default: 0] += 1
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            if queueHead == queue.count && !stopping {
                idleSince = monotonicSeconds()
                while queueHead == queue.count && !stopping { condition.wait() }
                idleTotal += monotonicSeconds() - idleSince
                idleSince = 0
            }
            if queueHead == queue.count && stopping {
                exited = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let job = queue[queueHead]
            queueHead += 1
            if queueHead > 1024 && queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            condition.unlock()

            let file: PartialFile
            var buffer: UnsafeMutableRawBufferPointer?
            switch job {
            case .write(let f, let b, let count, let offset, let hash):
                file = f
                buffer = b
                f.performWrite(UnsafeRawBufferPointer(rebasing: b[0..<count]), at: offset, hash: hash)
            case .hashFile(let f, let from, let to):
                file = f
                f.performHashFromFile(from: from, to: to)
            case .checkpoint(let f, let url, let validator, let segments):
                file = f
                f.performCheckpoint(url: url, validator: validator, segments: segments)
            }

            condition.lock()
            if let buffer { freeBuffers.append(buffer) }
            let key = ObjectIdentifier(file)
            let left = (pendingPerFile[key] ?? 1) - 1
            if left == 0 { pendingPerFile.removeValue(forKey: key) } else { pendingPerFile[key] = left }
            condition.broadcast()
            condition.unlock()
        }
    }
}
