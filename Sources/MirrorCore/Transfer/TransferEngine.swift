import CLinux
import CCurl
import MirrorKit

/// Runs every transfer of a run on one thread, through one libcurl multi handle.
///
/// The transfer thread loops: take newly submitted downloads (`curl_multi_add_handle`), drive them
/// (`curl_multi_perform`), collect the finished ones (`curl_multi_info_read`), then sleep in
/// `curl_multi_poll` until a socket is ready. Other threads never touch the multi handle; they
/// queue work under a lock and interrupt the poll with `curl_multi_wakeup`. Finished downloads are
/// handed back to the sync thread through ``waitForFinished(timeout:)``.
///
/// The multi handle holds as many downloads for one host as ``ConnectionPolicy`` admits: one per
/// connection, or, once a response from that host came over HTTP/2, this thread's whole share of
/// the requests, as streams. More may be submitted (the sync thread starts up to twice `--jobs`
/// entries, ``Scheduler/readAhead``) and wait here, in order, until one ends: the transfer thread
/// then adds the next in the same turn. Without that queue each new request waited for the sync
/// thread to notice the end, verify the file and start the next one, a round trip between threads
/// per file in which a connection sat idle (5000 × 16 KiB: ~12 % of the wall time). The waiting is
/// kept here rather than left to libcurl's queue of transfers waiting for a connection, which
/// counts that wait against each transfer's connect timeout.
public final class TransferEngine {
    private let multi: CurlMulti
    private let condition = Condition()
    // Guarded by `condition`:
    private var submitted: [Download] = []
    /// A wake-up for ``submitted`` was sent and the transfer thread has not yet taken the queue.
    private var wakePending = false
    private var cancelRequested = false
    private var cancelOne: [Download] = []
    /// Whole-file offers the sync thread accepted (``acceptWholeFile(_:)``).
    private var accepted: [Download] = []
    private var stopRequested = false
    private var threadExited = false
    /// Seconds the transfer thread spent asleep in `curl_multi_poll`.
    private let idle = IdleClock()
    /// Wakes of hashing threads owed by this thread's current turn (``WriterWakes``).
    private let wakes = WriterWakes()
    /// Downloads in the multi handle, keyed by easy handle. Transfer thread only.
    private var active: [UnsafeMutableRawPointer: Download] = [:]
    /// Submitted downloads waiting for a place (``ConnectionPolicy``), oldest first. Transfer thread only.
    private var backlog: [Download] = []
    /// How many downloads the multi handle holds, per host and in all.
    private let policy: ConnectionPolicy
    /// Downloads in the multi handle per ``Download/host``. Transfer thread only.
    private var runningPerHost: [String: Int] = [:]
    /// Hosts a response came from over HTTP/2: their requests share connections. Transfer thread only.
    private var multiplexing: Set<String> = []
    /// Something ended, arrived or was learnt since the backlog was last looked at. Transfer thread only.
    private var backlogMayMove = false
    /// Transfers that paused on a whole-file offer this turn (``Download/WholeFile``), handed to
    /// the sync thread at its end. Transfer thread only.
    private var offers: [Download] = []

    /// `--limit-rate`: the run's token bucket (``RateLimiter``); transfer thread only.
    private let limiter: RateLimiter?

    /// Where finished downloads go: this engine's own queue, or one shared by several engines
    /// (``TransferPool``), so the sync thread waits on one queue for all.
    let finished: FinishedDownloads

    /// - Parameter policy: the limits of this thread (``ConnectionPolicy``, with one thread: the
    ///   run's own).
    public convenience init(policy: ConnectionPolicy = ConnectionPolicy(filesInFlight: ConnectionPolicy.defaultFilesInFlight,
                                                                         connectionsPerHost: ConnectionPolicy.defaultConnections,
                                                                         segments: 1, threadsWanted: 1),
                            limitRate: RateSchedule? = nil) throws {
        try self.init(policy: policy, limitRate: limitRate, finished: FinishedDownloads())
    }

    init(policy: ConnectionPolicy, limitRate: RateSchedule?, finished: FinishedDownloads,
         name: String = "mirror-transfer") throws {
        self.finished = finished
        self.policy = policy
        limiter = limitRate.map { RateLimiter(schedule: $0) }
        multi = try CurlMulti()
        multi.limit(connectionsPerHost: policy.connectionsPerThread, streams: policy.streamsPerConnection)
        SystemThread.start(name: name) { [unowned self] in self.run() }
    }

    deinit { shutdown() }

    /// Queues a download; it starts at the transfer thread's next turn.
    ///
    /// One `curl_multi_wakeup` (a `send` on libcurl's socket pair, and a `recv` to drain it on the
    /// transfer thread) per turn rather than per download: the first submit after the thread took
    /// the queue wakes it, and later ones find that wake-up still pending, so the thread's next
    /// turn takes them all. For thousands of small files that is thousands of system calls less.
    public func submit(_ download: Download) {
        condition.lock()
        submitted.append(download)
        let wake = !wakePending
        wakePending = true
        condition.unlock()
        if wake { multi.wakeup() }
    }

    /// Stops every transfer in progress; each comes back through ``waitForFinished(timeout:)``
    /// with outcome `.failed(.cancelled)` unless it finished first.
    public func cancelAll() {
        condition.lock()
        cancelRequested = true
        condition.unlock()
        multi.wakeup()
    }

    /// Stops these transfers (the other segments of a file whose segment failed); each comes back
    /// with outcome `.failed(.cancelled)` unless it finished first. Unlike setting
    /// ``Download/cancelled``, this also stops a transfer that receives nothing (a stalled one).
    public func cancel(_ downloads: [Download]) {
        guard !downloads.isEmpty else { return }
        condition.lock()
        cancelOne += downloads
        condition.unlock()
        multi.wakeup()
    }

    /// Goes on with a transfer paused on a whole-file offer (``Download/WholeFile``), now that the
    /// sync thread has cut its file: the body is written from byte 0. Ignored for a download this
    /// engine does not run (any more).
    public func acceptWholeFile(_ download: Download) {
        condition.lock()
        accepted.append(download)
        condition.unlock()
        multi.wakeup()
    }

    /// Waits up to `timeout` seconds for downloads to finish and returns them (possibly none).
    /// Returns early, with none, after ``interruptWait()``.
    public func waitForFinished(timeout: Double) -> [Download] { finished.wait(timeout: timeout) }

    /// Seconds the transfer thread has slept waiting for its sockets (including a sleep in
    /// progress): when it hardly sleeps, the thread, not the network, limits its files, and one
    /// more connection on it cannot help (``SegmentPolicy/widen(waited:transferWaited:running:width:runRequests:)``).
    public var idleSeconds: Double { idle.seconds }

    /// Ends the current (or the next) ``waitForFinished(timeout:)`` at once, from any thread: the
    /// commit thread calls it when a commit is done, so the sync thread reports it and starts the
    /// next one without waiting out its timeout.
    func interruptWait() { finished.interruption.interrupt() }

    /// Ends the transfer thread (cancelling what runs) and waits for it.
    public func shutdown() {
        condition.lock()
        if threadExited {
            condition.unlock()
            return
        }
        stopRequested = true
        cancelRequested = true
        condition.unlock()
        multi.wakeup()
        condition.lock()
        while !threadExited { condition.wait() }
        condition.unlock()
    }

    // MARK: - Transfer thread

    private func run() {
        while true {
            condition.lock()
            let incoming = submitted
            submitted.removeAll()
            wakePending = false
            let cancel = cancelRequested
            cancelRequested = false
            let stop = stopRequested
            let cancelSome = cancelOne
            cancelOne.removeAll()
            let accept = accepted
            accepted.removeAll()
            condition.unlock()

            backlog += incoming
            if !incoming.isEmpty || !cancelSome.isEmpty { backlogMayMove = true }
            for download in cancelSome {
                if active[download.easy.handle] === download {
                    removeActive(download)
                } else if let index = backlog.firstIndex(where: { $0 === download }) {
                    backlog.remove(at: index)
                } else {
                    continue
                }
                download.cancelled = true
                download.finish(code: CURLE_ABORTED_BY_CALLBACK)
                deliver(download)
            }
            if cancel || stop {
                for (_, download) in active { multi.remove(download.easy) }
                for download in Array(active.values) + backlog {
                    download.cancelled = true
                    download.finish(code: CURLE_ABORTED_BY_CALLBACK)
                    deliver(download)
                }
                active.removeAll()
                runningPerHost.removeAll()
                backlog.removeAll()
            }
            if stop { break }
            for download in accept where active[download.easy.handle] === download && download.wholeFile == .offered {
                download.takeWholeFile()
                curl_easy_pause(download.easy.handle, CURLPAUSE_CONT)
            }
            activateWaiting()

            if let limiter {
                for download in limiter.takeResumable() where active[download.easy.handle] === download {
                    curl_easy_pause(download.easy.handle, CURLPAUSE_CONT)
                }
            }
            // The pieces of a body that this turn writes wake their hashing threads once, at its end.
            _ = wakes.deferring { multi.perform() }
            var done: [Download] = []
            for (handle, code) in multi.finished() {
                guard let download = active[handle] else { continue }
                if download.easy.multiplexed { multiplexing.insert(download.host) }
                removeActive(download)
                download.finish(code: code)
                done.append(download)
            }
            if !done.isEmpty { backlogMayMove = true }
            deliver(done + offers)
            offers.removeAll()
            // Places freed: the waiting downloads start now, not after the poll's timeout.
            if !done.isEmpty && !backlog.isEmpty { continue }
            var timeout: Int32 = active.isEmpty ? 1000 : 200
            if let limiter, limiter.hasPaused { timeout = min(timeout, Int32(max(1, (limiter.wait() * 1000).rounded(.up)))) }
            idle.beginWait()
            multi.poll(timeoutMilliseconds: timeout)
            idle.endWait()
        }
        condition.lock()
        threadExited = true
        condition.broadcast()
        condition.unlock()
    }

    /// Takes `download` out of the multi handle and its host's count.
    private func removeActive(_ download: Download) {
        active.removeValue(forKey: download.easy.handle)
        multi.remove(download.easy)
        let left = (runningPerHost[download.host] ?? 1) - 1
        if left <= 0 { runningPerHost.removeValue(forKey: download.host) } else { runningPerHost[download.host] = left }
    }

    /// Moves waiting downloads into the multi handle, in order, while their host has room
    /// (``ConnectionPolicy/admits(runningForHost:multiplexed:)``) and this thread's share of the
    /// requests is not all running; one whose host is full keeps its place for a later turn.
    private func activateWaiting() {
        guard backlogMayMove else { return }
        backlogMayMove = false
        var held: [Download] = []
        var fullHosts: Set<String> = []
        var taken = 0
        while active.count < policy.requestsPerThread && taken < backlog.count {
            let download = backlog[taken]
            taken += 1
            let running = runningPerHost[download.host] ?? 0
            guard !fullHosts.contains(download.host),
                  policy.admits(runningForHost: running, multiplexed: multiplexing.contains(download.host)) else {
                fullHosts.insert(download.host)
                held.append(download)
                continue
            }
            do {
                download.limiter = limiter
                download.engineNotice = { [unowned self] in self.offers.append($0) }
                try multi.add(download.easy)
                active[download.easy.handle] = download
                runningPerHost[download.host] = running + 1
            } catch {
                download.finish(code: CURLE_FAILED_INIT)
                deliver(download)
            }
        }
        // The downloads looked at leave the array now, the held ones back at its head in their
        // order: a slot left behind would keep its download (easy handle, buffers, partial file)
        // alive after it ended. What is left is at most this thread's share of the read-ahead,
        // so the move is short.
        backlog.replaceSubrange(0 ..< taken, with: held)
    }

    private func deliver(_ download: Download) { deliver([download]) }

    /// Hands finished downloads to the sync thread: one lock and one wake-up (a `futex`) for all
    /// that finished in one turn, not one per download.
    private func deliver(_ downloads: [Download]) { finished.deliver(downloads) }
}

/// Downloads that ended, handed from the transfer threads to the sync thread.
final class FinishedDownloads {
    private let condition = Condition()
    private var list: [Download] = []
    /// Ends a wait early, from any thread.
    let interruption: WaitInterrupt

    init() { interruption = WaitInterrupt(condition) }

    func deliver(_ downloads: [Download]) {
        guard !downloads.isEmpty else { return }
        condition.lock()
        list += downloads
        condition.broadcast()
        condition.unlock()
    }

    /// What has finished, waiting up to `timeout` seconds for something when nothing has (or
    /// until ``WaitInterrupt/interrupt()``).
    func wait(timeout: Double) -> [Download] {
        condition.lock()
        defer { condition.unlock() }
        if list.isEmpty && !interruption.isPending && timeout > 0 {
            condition.wait(seconds: timeout)
        }
        interruption.clear()
        let out = list
        list.removeAll()
        return out
    }
}

/// What ends the sync thread's wait for finished downloads early (``FinishedDownloads/wait(timeout:)``),
/// from any thread: the one part of that queue the commit thread touches (``CommitThread``), so it
/// is `Sendable` on its own. The flag has a lock of its own; the wait tests it with the
/// condition's lock held, and ``interrupt()`` broadcasts with that lock held, so an interrupt
/// between the test and the wait is not lost.
final class WaitInterrupt: Sendable {
    private let condition: Condition
    private let pending = Locked(false)

    init(_ condition: Condition) { self.condition = condition }

    /// Ends the current (or the next) wait at once.
    func interrupt() {
        pending.withLock { $0 = true }
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Set and not yet cleared by a wait.
    var isPending: Bool { pending.withLock { $0 } }

    func clear() { pending.withLock { $0 = false } }
}
