import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// The one thread that hashes partial files and makes them durable.
///
/// The transfer thread must not wait on SHA-256 (the slowest stage on machines without SHA-NI):
/// after writing each piece of a body into the page cache it copies it into a buffer from a
/// bounded pool and queues it here. This thread takes the queue in order: hash update, and at a
/// checkpoint `fdatasync`, then the journal record with the hash state at exactly that length.
/// Hashing thus overlaps the transfer and the writes, follows file order, and never reads the file
/// back (the exceptions, decided by ``HashFeed``: a segmented download's later segments, whose bytes
/// wait in the page cache until the hashed prefix reaches them, and a resumed prefix whose saved
/// hash state is not trusted; both are read back once). Memory is bounded by the pool: when
/// hashing falls behind, the transfer thread waits for a free buffer, which is the back-pressure a
/// slow CPU must exert anyway. A new download of a small file is hashed by the thread that writes
/// it instead (``PartialFile/hashesInline``): for 16 KiB the hand-off cost more than the hash.
final class PartialWriter {
    enum Job {
        case hash(PartialFile, buffer: UnsafeMutableRawBufferPointer, count: Int)
        /// Bytes already in the file, read back and hashed (``HashFeed``): a later segment's bytes
        /// once the hashed prefix reaches them, or a kept prefix hashed again on resume.
        case hashFile(PartialFile, from: Int64, to: Int64)
        case checkpoint(PartialFile, url: String, validator: String?, segments: [SegmentRecord]?)
        /// `sync_file_range(SYNC_FILE_RANGE_WRITE)` of bytes just written (``PartialFile/startWriteback(from:count:)``).
        case writeback(PartialFile, from: Int64, count: Int64)
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
    /// Seconds this thread spent waiting for work.
    private let idle = IdleClock()

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

    /// Copies `bytes` into pooled buffers and queues them to be hashed.
    func hash(_ file: PartialFile, _ bytes: UnsafeRawBufferPointer) {
        var done = 0
        while done < bytes.count {
            let buffer = takeBuffer()
            let n = min(buffer.count, bytes.count - done)
            if let src = bytes.baseAddress, let dst = buffer.baseAddress { dst.copyMemory(from: src + done, byteCount: n) }
            enqueue(.hash(file, buffer: buffer, count: n), for: file)
            done += n
        }
    }

    func hashFile(_ file: PartialFile, from: Int64, to: Int64) {
        enqueue(.hashFile(file, from: from, to: to), for: file)
    }

    func checkpoint(_ file: PartialFile, url: String, validator: String?, segments: [SegmentRecord]?) {
        enqueue(.checkpoint(file, url: url, validator: validator, segments: segments), for: file)
    }

    /// Starting writeback builds the block requests on the calling thread (`ext4_writepages`):
    /// 9 % of the samples of a 1 GiB download to ext4 were there, on the transfer thread, which
    /// is the one every byte waits for. Here it runs beside the hashing, after the jobs queued
    /// before it (for bytes hashed from memory, after their hash). Its time counts as this
    /// thread's work in ``idleSeconds``, which the widening of a segmented download reads.
    func startWriteback(_ file: PartialFile, from: Int64, count: Int64) {
        enqueue(.writeback(file, from: from, count: count), for: file)
    }

    /// Seconds this thread has waited for work since it started (including a wait in progress).
    /// A segmented download widens only while this grows: when the hash waits for bytes, the
    /// connection is the limit and another one helps; when it does not, a second connection would
    /// only compete with it for the cores (and add a read-back of out-of-order bytes).
    var idleSeconds: Double { idle.seconds }

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
                idle.beginWait()
                while queueHead == queue.count && !stopping { condition.wait() }
                idle.endWait()
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
            case .hash(let f, let b, let count):
                file = f
                buffer = b
                f.performHash(UnsafeRawBufferPointer(rebasing: b[0..<count]))
            case .hashFile(let f, let from, let to):
                file = f
                f.performHashFromFile(from: from, to: to)
            case .checkpoint(let f, let url, let validator, let segments):
                file = f
                f.performCheckpoint(url: url, validator: validator, segments: segments)
            case .writeback(let f, let from, let count):
                file = f
                f.startWriteback(from: from, count: count)
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
