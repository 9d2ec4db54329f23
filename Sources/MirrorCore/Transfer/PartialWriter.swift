import CLinux
import MirrorKit
import MirrorState
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
/// it instead (``PartialFile/Attempt/hashesInline``): for 16 KiB the hand-off cost more than the hash.
///
/// libcurl delivers a body in pieces of at most 16 KiB. A piece that continues the file's last
/// queued hash job, while this thread has not taken that job yet, is copied into the same buffer
/// (``hash(_:_:)``), and a transfer thread wakes this one once per turn of its loop or when a buffer
/// is full (``WriterWakes``), not once per piece: one job and one wake per buffer instead of per
/// 16 KiB (docs/performance.md, "One wake per buffer").
final class PartialWriter {
    enum Job {
        case hash(PartialDigest, buffer: UnsafeMutableRawBufferPointer, count: Int)
        /// Bytes already in the file, read back and hashed (``HashFeed``): a later segment's bytes
        /// once the hashed prefix reaches them, or a kept prefix hashed again on resume.
        case hashFile(PartialDigest, from: Int64, to: Int64)
        case checkpoint(PartialDigest, url: String, validator: String?, segments: [SegmentRecord]?)
        /// `sync_file_range(SYNC_FILE_RANGE_WRITE)` of bytes just written (``PartialDigest/startWriteback(from:count:)``).
        case writeback(PartialDigest, from: Int64, count: Int64)
    }

    static let bufferSize = 256 * 1024
    /// 2 MiB of queue a writer: with buffers filled whole (``hash(_:_:)``), more than the 24
    /// buffers held when each took one 16 KiB piece; 24 whole ones added 4 MiB to a one-file run's
    /// peak RSS (30.2 MiB against 26.0) for no gain measured (docs/performance.md, "One wake per buffer").
    static let bufferCount = 8

    private let condition = Condition()
    private var queue: [Job] = []
    private var queueHead = 0
    private var freeBuffers: [UnsafeMutableRawBufferPointer] = []
    private var pendingPerFile: [ObjectIdentifier: Int] = [:]
    /// Per file, the position (``removedJobs`` + index) of its last queued job when that is a hash
    /// job with room left: later pieces of the file may join it until this thread takes it, or
    /// until another job of the file is queued after it (which must see the bytes before it only).
    private var openHash: [ObjectIdentifier: Int] = [:]
    /// Jobs taken and dropped from the front of ``queue`` so far (positions stay valid across that).
    private var removedJobs = 0
    /// Work was queued without waking this thread; paid by ``payOwedWake()`` (``WriterWakes``).
    private var wakeOwed = false
    /// Jobs this thread has taken from the queue (tests: how many pieces became one job).
    private var taken = 0
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

    /// Copies `bytes` into pooled buffers and queues them to be hashed: first into the room left
    /// in the file's open hash job, if this thread has not taken it yet, then into new buffers.
    /// The file's bytes reach the hash in the order they are given, as before: a piece joins only
    /// the file's last queued job, and only while nothing of the file is queued after it.
    func hash(_ file: PartialDigest, _ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        let key = ObjectIdentifier(file)
        var done = 0
        condition.lock()
        if let position = openHash[key] {
            let index = position - removedJobs
            if index >= queueHead, index < queue.count, case .hash(let owner, let buffer, let count) = queue[index], owner === file,
               let target = buffer.baseAddress {
                let n = min(buffer.count - count, bytes.count)
                (target + count).copyMemory(from: source, byteCount: n)
                queue[index] = .hash(owner, buffer: buffer, count: count + n)
                done = n
                if count + n == buffer.count {
                    openHash.removeValue(forKey: key)
                    wake(now: true)
                }
            } else {
                openHash.removeValue(forKey: key)
            }
        }
        condition.unlock()
        while done < bytes.count {
            let buffer = takeBuffer()
            let n = min(buffer.count, bytes.count - done)
            if let target = buffer.baseAddress { target.copyMemory(from: source + done, byteCount: n) }
            condition.lock()
            append(.hash(file, buffer: buffer, count: n), for: key)
            if n < buffer.count { openHash[key] = removedJobs + queue.count - 1 }
            wake(now: n == buffer.count)
            condition.unlock()
            done += n
        }
    }

    func hashFile(_ file: PartialDigest, from: Int64, to: Int64) {
        enqueue(.hashFile(file, from: from, to: to), for: file)
    }

    func checkpoint(_ file: PartialDigest, url: String, validator: String?, segments: [SegmentRecord]?) {
        enqueue(.checkpoint(file, url: url, validator: validator, segments: segments), for: file)
    }

    /// Starting writeback builds the block requests on the calling thread (`ext4_writepages`):
    /// 9 % of the samples of a 1 GiB download to ext4 were there, on the transfer thread, which
    /// is the one every byte waits for. Here it runs beside the hashing, after the jobs queued
    /// before it (for bytes hashed from memory, after their hash). Its time counts as this
    /// thread's work in ``idleSeconds``, which the widening of a segmented download reads.
    func startWriteback(_ file: PartialDigest, from: Int64, count: Int64) {
        enqueue(.writeback(file, from: from, count: count), for: file)
    }

    /// Seconds this thread has waited for work since it started (including a wait in progress).
    /// A segmented download widens only while this grows: when the hash waits for bytes, the
    /// connection is the limit and another one helps; when it does not, a second connection would
    /// only compete with it for the cores (and add a read-back of out-of-order bytes).
    var idleSeconds: Double { idle.seconds }

    /// Waits until every job queued for `file` is done.
    func drain(_ file: PartialDigest) {
        let key = ObjectIdentifier(file)
        condition.lock()
        while (pendingPerFile[key] ?? 0) > 0 { waitForWriter() }
        condition.unlock()
    }

    /// Waits until every queued job is done.
    func drainAll() {
        condition.lock()
        while queueHead < queue.count || !pendingPerFile.isEmpty { waitForWriter() }
        condition.unlock()
    }

    /// Jobs taken so far.
    var jobsTaken: Int {
        condition.lock()
        defer { condition.unlock() }
        return taken
    }

    /// Wakes this thread if work was queued without waking it (``WriterWakes``).
    func payOwedWake() {
        condition.lock()
        if wakeOwed { wake(now: true) }
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
        // The buffers are all queued; some of them perhaps without a wake yet.
        while freeBuffers.isEmpty { waitForWriter() }
        let buffer = freeBuffers.removeLast()
        condition.unlock()
        return buffer
    }

    private func enqueue(_ job: Job, for file: PartialDigest) {
        let key = ObjectIdentifier(file)
        condition.lock()
        append(job, for: key)
        // Nothing of the file joins a hash job queued before this one.
        openHash.removeValue(forKey: key)
        wake(now: false)
        condition.unlock()
    }

    /// Waits once on `condition` for this thread's progress, first paying a wake owed to it: work
    /// queued without one would otherwise wait for a turn's end that may come only after this
    /// wait (``WriterWakes``). Called with `condition` held, by any thread but this one.
    private func waitForWriter() {
        if wakeOwed { wake(now: true) }
        condition.wait()
    }

    /// Queues `job`. Called with `condition` held.
    private func append(_ job: Job, for key: ObjectIdentifier) {
        queue.append(job)
        pendingPerFile[key, default: 0] += 1
    }

    /// Wakes this thread (and any thread waiting on `condition`), or, when `now` is false and the
    /// calling thread is in a transfer turn (``WriterWakes/current``), leaves it to the end of the
    /// turn. Called with `condition` held.
    private func wake(now: Bool) {
        if !now, let turn = WriterWakes.current {
            // Every turn that defers a wake owes it, not only the first: another transfer
            // thread's turn that owes it too may end later (or wait on another writer first).
            wakeOwed = true
            turn.owe(self)
            return
        }
        wakeOwed = false
        condition.broadcast()
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
            taken += 1
            if queueHead > 1024 && queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                removedJobs += queueHead
                queueHead = 0
            }
            condition.unlock()

            let file: PartialDigest
            var buffer: UnsafeMutableRawBufferPointer?
            switch job {
            case .hash(let f, let b, let count):
                file = f
                buffer = b
                f.hash(UnsafeRawBufferPointer(rebasing: b[0..<count]))
            case .hashFile(let f, let from, let to):
                file = f
                f.hashFromFile(from: from, to: to)
            case .checkpoint(let f, let url, let validator, let segments):
                file = f
                f.checkpoint(url: url, validator: validator, segments: segments)
            case .writeback(let f, let from, let count):
                file = f
                f.startWriteback(from: from, count: count)
            }

            condition.lock()
            if let buffer { freeBuffers.append(buffer) }
            let key = ObjectIdentifier(file)
            let left = (pendingPerFile[key] ?? 1) - 1
            if left == 0 {
                pendingPerFile.removeValue(forKey: key)
                openHash.removeValue(forKey: key)
            } else {
                pendingPerFile[key] = left
            }
            condition.broadcast()
            condition.unlock()
        }
    }
}
